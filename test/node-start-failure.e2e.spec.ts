import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig, type Config } from '../src/config/index.js';
import { startNode } from '../src/node.js';
import { freePort } from '../bench/processes.js';
import { ADMIN } from './support/node.js';

// A start that fails half way leaves nothing running (src/service-list.ts stops what started):
// the port it listened on is free again and the data directory's lock is released, so a second
// start in the same directory succeeds. One failure comes before the node listens (its own port is
// taken), one after (a cluster node whose replication port is taken fails to join, with the HTTP
// port already bound, the store open and the cluster holding the store's writer).

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'svc-startfail-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function occupyPort(): Promise<number> {
  const server: Server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return (server.address() as { port: number }).port;
}

/** Whether this process can listen on the port (nothing else holds it). */
async function canListen(port: number): Promise<boolean> {
  const server = createServer();
  const listening = await new Promise<boolean>((resolve) => {
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => resolve(true));
  });
  if (listening) await new Promise<void>((resolve) => server.close(() => resolve()));
  return listening;
}

function configFor(dir: string, overrides: Partial<Config>): Config {
  return { ...loadConfig([]).config, db: dir, httpIp: '127.0.0.1', httpPort: 0, logLevel: 'silent', startStandardProjections: false, ...overrides };
}

/** A node starts in `dir` (its lock is free) and answers on its port; then it stops. */
async function startsAgainIn(dir: string): Promise<void> {
  const node = await startNode(configFor(dir, {}));
  try {
    const res = await fetch(`${node.url}/streams/%24users`, { headers: { Authorization: ADMIN, Accept: 'application/json' } });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
  } finally {
    await node.close();
  }
}

describe('a start that fails half way', () => {
  it('its own port taken: rejects with the listen error and releases the data directory', async () => {
    const dir = tempDir();
    const taken = await occupyPort();
    await expect(startNode(configFor(dir, { httpPort: taken }))).rejects.toMatchObject({ code: 'EADDRINUSE' });
    await startsAgainIn(dir);
  });

  it('a cluster node that fails to join after it listens: frees its HTTP port and releases the data directory', async () => {
    const dir = tempDir();
    const replicationPort = await occupyPort();
    const httpPort = await freePort();
    const config = configFor(dir, { httpPort, clusterSize: 3, insecure: true, intIp: '127.0.0.1', intPort: replicationPort });
    await expect(startNode(config)).rejects.toMatchObject({ code: 'EADDRINUSE', port: replicationPort });
    expect(await canListen(httpPort)).toBe(true);
    await startsAgainIn(dir);
  });
});
