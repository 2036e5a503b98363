import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance } from 'fastify';
import { ApiError } from './errors.js';

// The Admin UI: the files `npm run build` put in dist/web (web/ is their source), served at /web/
// to anyone (they hold no data; every request the console makes carries the user's credentials
// and is checked like any other). `/` and `/web` lead there. Hashed assets are cached for good,
// the page itself revalidated; the page may fetch nothing but this node.

const CONTENT_SECURITY_POLICY = [
  "default-src 'self'", "connect-src 'self'", "img-src 'self' data:", "style-src 'self'", "script-src 'self'",
  "frame-ancestors 'none'", "base-uri 'none'", "form-action 'self'",
].join('; ');

/** dist/web of the project this module belongs to (from dist/src/api or from src/api under the tests). */
export function webRoot(from = fileURLToPath(new URL('.', import.meta.url))): string {
  let dir = from;
  while (!existsSync(join(dir, 'package.json'))) {
    const parent = dirname(dir);
    if (parent === dir) return join(from, 'web');
    dir = parent;
  }
  return join(dir, 'dist', 'web');
}

export function registerWeb(app: FastifyInstance, root = webRoot()): void {
  app.get('/', async (_req, reply) => reply.redirect('/web/', 302));
  app.get('/web', async (_req, reply) => reply.redirect('/web/', 302));
  // Browsers ask every site for /favicon.ico: the console's icon (web/public), not a 404.
  const iconFile = join(root, 'favicon.ico');
  const icon = existsSync(iconFile) ? readFileSync(iconFile) : undefined;
  app.get('/favicon.ico', async (_req, reply) => {
    if (!icon) throw new ApiError('NOT_FOUND');
    return reply.type('image/x-icon').header('Cache-Control', 'public, max-age=86400').send(icon);
  });

  if (!existsSync(join(root, 'index.html'))) {
    // A node started from sources that were compiled without the console: say so, do not 404.
    app.get('/web/*', async () => {
      throw new ApiError('SERVICE_UNAVAILABLE', 'The Admin UI is not built: run `npm run build` (it builds web/ into dist/web).');
    });
    return;
  }
  void app.register(fastifyStatic, {
    root,
    prefix: '/web/',
    index: ['index.html'],
    wildcard: true,
    decorateReply: false,
    cacheControl: false, // set below, per file
    setHeaders(res, path) {
      if (path.includes(`${join(root, 'assets')}`)) res.setHeader('Cache-Control', 'public, max-age=31536000, immutable');
      else res.setHeader('Cache-Control', 'no-cache');
      if (path.endsWith('.html')) {
        res.setHeader('Content-Security-Policy', CONTENT_SECURITY_POLICY);
        res.setHeader('X-Content-Type-Options', 'nosniff');
      }
    },
  });
}
