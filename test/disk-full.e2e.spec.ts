import { randomBytes, randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN, EVENTS_JSON } from './support/node.js';
import { killAndRemove, runMain, spawnNode, type NodeProcess } from './support/process.js';
import { mountSmallFs, type SmallFs } from './support/small-fs.js';

// The node on a disk that fills up: what it says and what it keeps. The data directory is on a
// 40 MiB tmpfs the test mounts (as root; skipped with the reason where it cannot).

const fs = mountSmallFs(40);
const skip = typeof fs === 'string' ? fs : undefined;
if (skip) console.warn(`disk-full tests skipped: ${skip}`);

/** An event of ~`bytes` of random (incompressible) data. */
function bigEvent(bytes: number) {
  return { eventId: randomUUID(), eventType: 'Big', data: { pad: randomBytes(Math.floor(bytes * 0.75)).toString('base64') } };
}

async function appendBig(url: string, stream: string, bytes: number): Promise<Response> {
  return fetch(`${url}/streams/${stream}`, {
    method: 'POST', headers: { 'content-type': EVENTS_JSON, authorization: ADMIN }, body: JSON.stringify([bigEvent(bytes)]),
  });
}

describe.skipIf(skip !== undefined)('a node whose disk is full', () => {
  const small = fs as SmallFs;
  const data = () => join(small.dir, 'data');
  let proc: NodeProcess | undefined;

  beforeAll(async () => {
    proc = await spawnNode(['--db', data(), '--insecure']);
    for (let i = 0; i < 20; i++) expect((await appendBig(proc.url, `big-${i % 3}`, 500_000)).status).toBe(201);
    proc.child.kill('SIGTERM');
    await proc.exited;
  }, 60_000);

  afterAll(async () => {
    await killAndRemove(proc, []);
    small.unmount();
  });

  it('will not start with no room, and says why and how much it needs; it starts once there is room', async () => {
    small.fill(32 * 1024);
    const failed = await runMain(['--db', data(), '--insecure', '--http-port', '0']);
    expect(failed.code).toBe(1);
    expect(failed.stderr).toMatch(/^Failed to start: cannot open the database in .*: IO error: No space left on device/m);
    expect(failed.stderr).toMatch(/Free space there: \d+\.\d MiB; opening writes the write-ahead log \(\d+\.\d MiB\) into a table file first: free at least \d+\.\d MiB more/);
    small.free();
    proc = await spawnNode(['--db', data(), '--insecure']);
    const res = await fetch(`${proc.url}/streams/big-1/head/backward/20`, { headers: { accept: 'application/json', authorization: ADMIN } });
    expect(res.status).toBe(200);
  }, 60_000);
});
