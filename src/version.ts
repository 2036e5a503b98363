import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The package's folder: the nearest one above this module (src/ or dist/src/) holding package.json. */
export function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`no package.json above ${fileURLToPath(import.meta.url)}`);
    dir = parent;
  }
}

function readVersion(): string {
  try {
    return (JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return '0.0.0';
  }
}

export const VERSION = readVersion();

/**
 * The established server's version line whose client protocol this node serves, as gRPC's
 * ServerFeatures reports it: the clients gate features on it (three decimal parts, nothing after).
 */
export const VERSION_LINE = '24.10.0';
