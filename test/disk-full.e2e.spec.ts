import { randomBytes, randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KurrentDBClient, jsonEvent } from '@kurrent/kurrentdb-client';
import { ADMIN, EVENTS_JSON, eventually, sleep } from './support/node.js';
import { killAndRemove, runMain, spawnNode, type NodeProcess } from './support/process.js';
import { mountSmallFs, type SmallFs } from './support/small-fs.js';
import { call, STREAMS, streamId } from './support/grpc.js';

// The node on a disk that fills up: what it says and what it keeps. The data directory is on a
// small tmpfs the test mounts (as root; skipped with the reason where it cannot): 40 MiB to start
// on a full disk; 160 MiB for writes that fail and come back, since RocksDB writes again only once
// 64 MiB (its memtable size) is free (src/store/out-of-space.ts).

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
    // Killed, not stopped: a clean stop writes the memtable to a table file, and the next open has
    // no write-ahead log to replay (the last test); a crash leaves it to the next open.
    proc.child.kill('SIGKILL');
    await proc.exited;
  }, 60_000);

  afterAll(async () => {
    await killAndRemove(proc, []);
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

  it('starts on a full disk after a clean stop: there is no write-ahead log to replay; it serves its reads and refuses writes with 507', async () => {
    // ~10 MB in the memtable (the start before wrote what it replayed to a table file).
    for (let i = 0; i < 20; i++) expect((await appendBig(proc!.url, `big-${i % 3}`, 500_000)).status).toBe(201);
    const before = await fetch(`${proc!.url}/streams/big-1/head/backward/20`, { headers: { accept: 'application/json', authorization: ADMIN } });
    const expected = (await before.text()).replaceAll(proc!.url, '');
    proc!.child.kill('SIGTERM');
    expect(await proc!.exited).toBe(0);
    small.fill(32 * 1024);
    try {
      proc = await spawnNode(['--db', data(), '--insecure']);
      const res = await fetch(`${proc.url}/streams/big-1/head/backward/20`, { headers: { accept: 'application/json', authorization: ADMIN } });
      expect(res.status).toBe(200);
      expect((await res.text()).replaceAll(proc.url, '')).toBe(expected); // the same page, the node's address aside
      expect((await appendBig(proc.url, 'big-1', 500_000)).status).toBe(507);
    } finally {
      small.free();
    }
  }, 60_000);
});

const roomy = skip ? undefined : mountSmallFs(160);

// The file's, not a block's: a block whose tests a filter (-t) leaves out runs no hooks, and its
// file system would stay mounted.
afterAll(() => {
  for (const mounted of [fs, roomy]) if (typeof mounted === 'object') mounted.unmount();
});

/** GET (admin) as JSON; throws unless 200. */
async function getJson(url: string, path: string, headers: Record<string, string> = {}): Promise<any> {
  const res = await fetch(`${url}${path}`, { headers: { accept: 'application/json', authorization: ADMIN, ...headers } });
  if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${await res.text()}`);
  return res.json();
}

async function post(url: string, path: string, body = ''): Promise<Response> {
  return fetch(`${url}${path}`, { method: 'POST', headers: { authorization: ADMIN }, body });
}

/** Every event of a stream, oldest first, links not resolved: [eventType, data text]. */
async function readStream(url: string, stream: string): Promise<[string, string][]> {
  const out: [string, string][] = [];
  for (let from = 0; ;) {
    const res = await fetch(`${url}/streams/${encodeURIComponent(stream)}/${from}/forward/4096?embed=tryharder`, {
      headers: { accept: 'application/vnd.eventstore.atom+json', authorization: ADMIN, 'SVC-ResolveLinkTos': 'False' },
    });
    if (res.status === 404) return out;
    expect(res.status, `GET ${stream}`).toBe(200);
    const entries = ((await res.json()).entries as { eventNumber: number; eventType: string; data: unknown }[])
      .sort((a, b) => a.eventNumber - b.eventNumber);
    for (const e of entries) out.push([e.eventType, typeof e.data === 'string' ? e.data : JSON.stringify(e.data)]);
    if (entries.length < 4096) return out;
    from = entries[entries.length - 1].eventNumber + 1;
  }
}

// The user projection: a count of Order events, and one Copied event emitted per Order (exactly
// once each is what a fault, a resume and a restart must keep).
const COPIES = `fromAll().when({
  $init: function () { return { count: 0 }; },
  Order: function (s, e) { s.count++; emit('copies-' + e.streamId, 'Copied', { i: e.body.i }); return s; }
})`;
/** A projection whose own code faults it: that fault stays, full disk or not, restart or not. */
const BROKEN = `fromAll().when({ Order: function () { throw new Error('broken by its own code'); } })`;
const ORDER_STREAMS = ['order-a', 'order-b', 'order-c'];
/** The projections the full disk faults. */
const WATCHED = ['copies', '$by_category'];
/** The other standard projections: running too, they may be writing when the disk fills. */
const SYSTEM = ['$streams', '$stream_by_category', '$by_event_type'];
/**
 * The room the node runs with, and what "freeing space" gives back: above the 64 MiB RocksDB
 * waits for before it writes again, and below the 70.4 MiB it preallocates a write-ahead log file
 * with (1.1 x the memtable; it tries when it creates the file). With more, the log file in use
 * holds 70 MiB in reserve and the node writes into it long after the disk is otherwise full.
 */
const ROOM = 66 * 1024 * 1024;

describe.skipIf(skip !== undefined)('writes on a disk that fills up and is freed again', () => {
  const small = roomy as SmallFs;
  const data = () => join(small.dir, 'data');
  const args = () => ['--db', data(), '--insecure', '--start-standard-projections', 'true'];
  let proc: NodeProcess;
  /** The `i` of every Order event acknowledged, per stream, in the order acknowledged. */
  const acknowledged = new Map<string, number[]>(ORDER_STREAMS.map((s) => [s, []]));
  let nextOrder = 0;

  /** Appends `count` Order events, 100 per request, round the order streams; all must be acknowledged. */
  async function appendOrders(count: number): Promise<void> {
    for (let sent = 0; sent < count; sent += 100) {
      const stream = ORDER_STREAMS[(sent / 100) % ORDER_STREAMS.length];
      const batch = Array.from({ length: Math.min(100, count - sent) }, () => ({ eventId: randomUUID(), eventType: 'Order', data: { i: nextOrder++ } }));
      const res = await fetch(`${proc.url}/streams/${stream}`, {
        method: 'POST', headers: { 'content-type': EVENTS_JSON, authorization: ADMIN }, body: JSON.stringify(batch),
      });
      expect(res.status, await res.clone().text()).toBe(201);
      acknowledged.get(stream)!.push(...batch.map((e) => e.data.i));
    }
  }

  async function statusOf(name: string): Promise<{ status: string; stateReason: string; progress: number }> {
    return getJson(proc.url, `/projection/${encodeURIComponent(name)}`);
  }

  async function command(name: string, which: 'enable' | 'disable'): Promise<void> {
    expect((await post(proc.url, `/projection/${encodeURIComponent(name)}/command/${which}`)).status).toBe(200);
  }

  /**
   * Fills the disk while `copies` and `$by_category` are stopped and behind by `count` Orders,
   * then enables them: their catch-up writes far more than the 64 KiB left, and both fault.
   */
  async function faultByFullDisk(count: number): Promise<void> {
    for (const name of WATCHED) await command(name, 'disable');
    await appendOrders(count);
    small.fill(64 * 1024);
    await Promise.all(WATCHED.map((name) => command(name, 'enable')));
    for (const name of WATCHED) {
      await eventually(async () => {
        const p = await statusOf(name);
        expect(p.status).toMatch(/^Faulted/);
        expect(p.stateReason).toMatch(/could not write: No space left on device \(.+\); it resumes from its last checkpoint once writes succeed again$/);
      }, 15_000);
    }
  }

  /**
   * Both projections run, caught up, and hold exactly what the acknowledged Orders make: each once.
   * Emitted events and links are written with a checkpoint, after the state a read shows live from
   * the sandbox: they are waited for too.
   */
  async function expectProjectionsRight(): Promise<void> {
    const total = [...acknowledged.values()].reduce((n, is) => n + is.length, 0);
    await eventually(async () => {
      for (const name of WATCHED) expect(await statusOf(name)).toMatchObject({ status: 'Running', progress: 100 });
      expect(await getJson(proc.url, '/projection/copies/state')).toEqual({ count: total });
      for (const [stream, is] of acknowledged) {
        const copies = (await readStream(proc.url, `copies-${stream}`)).map(([type, d]) => [type, JSON.parse(d).i]);
        expect(copies, `copies-${stream}`).toEqual(is.map((i) => ['Copied', i]));
      }
      const links = (await readStream(proc.url, '$ce-order')).map(([, d]) => d);
      const expected = [...acknowledged].flatMap(([stream, is]) => is.map((_, n) => `${n}@${stream}`));
      expect(links).toHaveLength(expected.length);
      expect(new Set(links)).toEqual(new Set(expected));
    }, 30_000);
  }

  async function expectBrokenStaysFaulted(): Promise<void> {
    await eventually(async () => {
      const broken = await statusOf('broken');
      expect(broken.status).toMatch(/^Faulted/);
      expect(broken.stateReason).toMatch(/broken by its own code/);
    });
  }

  /** Every acknowledged Order is in its stream, in order, and nothing refused is. */
  async function expectAcknowledgedOrders(): Promise<void> {
    for (const [stream, is] of acknowledged) {
      expect((await readStream(proc.url, stream)).map(([, d]) => JSON.parse(d).i), stream).toEqual(is);
    }
  }

  beforeAll(async () => {
    small.fill(ROOM);
    proc = await spawnNode(args());
    expect((await post(proc.url, '/projections/continuous?name=copies&emit=yes&enabled=yes', COPIES)).status).toBe(201);
    expect((await post(proc.url, '/projections/continuous?name=broken&enabled=yes', BROKEN)).status).toBe(201);
    await appendOrders(300);
    await expectProjectionsRight();
    await expectBrokenStaysFaulted();
  }, 60_000);

  afterAll(async () => {
    await killAndRemove(proc, []);
  });

  it('refuses writes with 507 and the reason, says so once, shows it in /stats, and takes writes and resumes its projections once space is freed', async () => {
    await faultByFullDisk(3000);
    const logFrom = proc.output().length;
    // Over HTTP: 507 with the reason, as often as asked, and nothing written.
    for (let i = 0; i < 5; i++) {
      const res = await fetch(`${proc.url}/streams/order-refused`, {
        method: 'POST', headers: { 'content-type': EVENTS_JSON, authorization: ADMIN },
        body: JSON.stringify([{ eventId: randomUUID(), eventType: 'Order', data: { refused: i } }]),
      });
      expect(res.status).toBe(507);
      expect(res.statusText).toBe('Insufficient Storage');
      expect(await res.text()).toMatch(/^No space left on device: .+\. The write was refused; writes resume by themselves once the data directory's file system has 64 MiB free/);
    }
    // Over gRPC: RESOURCE_EXHAUSTED with the same message, for Append and for the clients' BatchAppend.
    const unary = await call(proc.url, STREAMS, 'Append', [
      { options: { stream_identifier: streamId('order-refused'), any: {} } },
      { proposed_message: { id: { string: randomUUID() }, metadata: { type: 'Order', 'content-type': 'application/json' }, data: Buffer.from('{}'), custom_metadata: Buffer.alloc(0) } },
    ]);
    expect([unary.status, unary.message]).toEqual([8, expect.stringMatching(/^No space left on device: /)]);
    const client = KurrentDBClient.connectionString(`kurrentdb://127.0.0.1:${new URL(proc.url).port}?tls=false`);
    try {
      await expect(client.appendToStream('order-refused', jsonEvent({ type: 'Order', data: {} }))).rejects.toThrow(/No space left on device: /);
    } finally {
      await client.dispose();
    }
    // /stats: the data drive's free bytes, and since when writes are refused.
    await eventually(async () => {
      const stats = await getJson(proc.url, '/stats');
      expect(stats.sys.drive[data()].availableBytes).toBeLessThan(1024 * 1024);
      expect(stats.svc.writer.outOfSpaceSince).toMatch(/^\d{4}-\d\d-\d\dT/);
      expect(stats.svc.writer.outOfSpaceRefusedWrites).toBeGreaterThanOrEqual(7);
    }, 5000);

    small.fill(ROOM);
    const freedAt = Date.now();
    // RocksDB writes again within its 5 s check once 64 MiB is free, and the node's writer finds out
    // within a second without a client's write; the refused appends were not written.
    await eventually(async () => {
      const stats = await getJson(proc.url, '/stats');
      expect(stats.svc.writer.outOfSpaceSince).toBeNull();
      expect(stats.sys.drive[data()].availableBytes).toBeGreaterThan(32 * 1024 * 1024);
    }, 15_000);
    expect(Date.now() - freedAt).toBeLessThan(12_000);
    expect(await readStream(proc.url, 'order-refused')).toEqual([]);
    await appendOrders(100);
    await expectProjectionsRight();
    await expectAcknowledgedOrders();
    await expectBrokenStaysFaulted();

    // The log: one line when writes began to fail, one when they succeeded again; none per request.
    const lines = logLines(proc);
    const episode = lines.filter((l) => /^writes (refused: no space left on device|succeed again)/.test(l.msg));
    expect(episode.map((l) => [l.level, l.msg.split(':')[0].split(' after')[0]])).toEqual([
      [50, 'writes refused'], [30, 'writes succeed again'],
    ]);
    expect(episode[1].refusedWrites).toBeGreaterThanOrEqual(7);
    expect(proc.output().slice(logFrom)).not.toMatch(/request failed|gRPC call failed/);
    // Each projection the full disk faulted resumes once: the two made to, and any other standard
    // projection still writing when the disk filled ($by_event_type may be, on a busy machine);
    // never the one its own code faulted.
    const named = (prefix: string) => lines.filter((l) => l.msg.startsWith(prefix)).map((l) => String(l.projection)).sort();
    const resumed = named('projection resumes');
    expect(resumed).toEqual(named('projection faulted by the full disk'));
    expect(new Set(resumed).size, resumed.join(', ')).toBe(resumed.length);
    for (const name of WATCHED) expect(resumed).toContain(name);
    for (const name of resumed) expect([...WATCHED, ...SYSTEM], name).toContain(name);
  }, 90_000);

  it('runs a projection the full disk faulted again after a restart, and it ends right; every acknowledged event is there', async () => {
    await faultByFullDisk(3000);
    // A shutdown on the full disk: the projections' faults are not recorded, and the node exits,
    // saying that RocksDB could not write its last buffers.
    proc.child.kill('SIGTERM');
    expect(await proc.exited).toBe(1);
    expect(proc.output()).toMatch(/closed on a full disk: RocksDB could not write its last buffers .*nothing acknowledged is lost/);
    small.fill(ROOM);
    proc = await spawnNode(args());
    for (const name of WATCHED) expect((await statusOf(name)).status).not.toMatch(/^Faulted/);
    await expectProjectionsRight();
    await expectAcknowledgedOrders();
    await expectBrokenStaysFaulted();
  }, 60_000);
});

interface LogLine { level: number; msg: string; refusedWrites?: number; projection?: string }

function logLines(proc: NodeProcess): LogLine[] {
  return proc.output().split('\n').flatMap((l) => {
    try {
      return [JSON.parse(l) as LogLine];
    } catch {
      return [];
    }
  });
}
