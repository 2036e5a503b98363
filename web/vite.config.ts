import { defineConfig } from 'vite';
import { fileURLToPath } from 'node:url';

// The Admin UI: built into dist/web, served by the node at /web (src/api/web.ts). Preact's JSX
// through Vite's own transformer (no babel); everything bundled, nothing fetched at run time.
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/web/',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: fileURLToPath(new URL('../dist/web', import.meta.url)),
    emptyOutDir: true,
    assetsInlineLimit: 0,
    chunkSizeWarningLimit: 200,
  },
  // `npm run dev:web`: the console with hot reload at http://localhost:5173/web/, its API calls sent
  // to a node started with `npm start`.
  server: {
    proxy: Object.fromEntries(['/streams', '/projection', '/projections', '/subscriptions', '/users', '/admin', '/stats',
      '/info', '/gossip', '/ping', '/auto-scavenge'].map((path) => [path, process.env.SVC_NODE_URL ?? 'http://127.0.0.1:2113'])),
  },
  logLevel: 'warn',
});
