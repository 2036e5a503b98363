import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

// `npm start` runs what `npm install` (or `npm run build`) compiled into dist/, without compiling
// at every start. A build older than the sources would run code that is not the code on disk:
// this finds the first source file newer than its compiled file, so the start can refuse with a
// clear message. A few dozen stats: milliseconds.

/** The first source file (relative path) newer than its compiled counterpart, or undefined when the build is current. */
export function staleSource(distSrc = fileURLToPath(new URL('.', import.meta.url))): string | undefined {
  const src = join(distSrc, '..', '..', 'src');
  if (!existsSync(src)) return undefined; // an installed build without its sources: nothing to compare
  return walk(src, distSrc, '');
}

function walk(srcDir: string, distDir: string, relative: string): string | undefined {
  for (const entry of readdirSync(srcDir, { withFileTypes: true })) {
    const path = join(relative, entry.name);
    if (entry.isDirectory()) {
      const stale = walk(join(srcDir, entry.name), join(distDir, entry.name), path);
      if (stale) return stale;
      continue;
    }
    if (!/\.(ts|js)$/.test(entry.name) || entry.name.endsWith('.d.ts')) continue;
    const compiled = join(distDir, entry.name.replace(/\.ts$/, '.js'));
    if (!existsSync(compiled) || statSync(join(srcDir, entry.name)).mtimeMs > statSync(compiled).mtimeMs) return path;
  }
  return undefined;
}

/**
 * The same for the Admin UI: the first file under web/ newer than the console's build
 * (dist/web/index.html, written last by vite), relative to the project, or undefined when current.
 */
export function staleConsole(distSrc = fileURLToPath(new URL('.', import.meta.url))): string | undefined {
  const root = join(distSrc, '..', '..');
  const web = join(root, 'web');
  if (!existsSync(web)) return undefined;
  const built = join(root, 'dist', 'web', 'index.html');
  if (!existsSync(built)) return 'web';
  return newerThan(web, statSync(built).mtimeMs, 'web');
}

function newerThan(dir: string, mtimeMs: number, relative: string): string | undefined {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(relative, entry.name);
    if (entry.isDirectory()) {
      if (entry.name === 'node_modules') continue;
      const stale = newerThan(join(dir, entry.name), mtimeMs, path);
      if (stale) return stale;
    } else if (statSync(join(dir, entry.name)).mtimeMs > mtimeMs) {
      return path;
    }
  }
  return undefined;
}
