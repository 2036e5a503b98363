import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Store } from '../../src/store/index.js';

// Stores on temporary directories for the tests that run a subsystem in process (a persistent
// subscription group, a catch-up subscription), and a wait for a condition the subsystem reaches
// in the background.

export interface TempStores {
  open(): Promise<Store>;
  /** Closes every store opened and removes its directory (an afterEach). */
  closeAll(): Promise<void>;
}

export function tempStores(prefix: string): TempStores {
  const opened: { store: Store; dir: string }[] = [];
  return {
    async open() {
      const dir = mkdtempSync(join(tmpdir(), `svc-${prefix}-`));
      const store = await Store.open({ dir, inMemory: false, chunkSize: 256 * 1024 * 1024, logCacheBytes: 8 * 1024 * 1024 });
      opened.push({ store, dir });
      return store;
    },
    async closeAll() {
      for (const { store, dir } of opened.splice(0)) {
        await store.close().catch(() => {});
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Polls `check` until it holds; fails naming `what` after `timeoutMs`. */
export async function until(check: () => boolean, what: string, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
    await sleep(5);
  }
}
