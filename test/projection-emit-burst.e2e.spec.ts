import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ADMIN, EVENTS_JSON, eventually, newEvent, sleep, startTestNode, uniq, type TestNode } from './support/node.js';
import { killAndRemove, spawnNode, type NodeProcess } from './support/process.js';

// One event whose handler emits a burst of 100,000 events: its checkpoint writes them with the
// checkpoint as one atomic set of writes, built and written in slices of the event loop's time
// (emit-writer.ts, client-writes.ts, commit-pipeline.ts, write-thread.ts). The node answers /ping
// throughout (each ping within 1 s; measured 62 ms at a machine load of ~2, 515 ms at ~13;
// before, the slowest ping waited 1.7 s and 8.4 s), every emitted event is there once, a kill -9
// while the burst commits leaves all of it or none and the projection completes it exactly once
// after the restart, and an event over --max-projection-emits-per-event faults its projection.

const BURST = 100_000;

interface Target { url: string }

function call(n: Target, path: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  headers.set('Authorization', ADMIN);
  return fetch(n.url + path, { ...init, headers });
}

const p = (name: string) => `/projection/${encodeURIComponent(name)}`;

async function ok(res: Promise<Response>, status = 200): Promise<Response> {
  const r = await res;
  expect(r.status, await r.clone().text()).toBe(status);
  return r;
}

async function stats(n: Target, name: string): Promise<any> {
  return (await ok(call(n, p(name)))).json();
}

/** A continuous projection with emit that handles `Burst` events of `source` by emitting `count` events to `out`. */
async function createBurstProjection(n: Target, name: string, source: string, out: string, count: number, handler?: string): Promise<void> {
  const body = handler ?? `for (var i = 0; i < ${count}; i++) emit('${out}', 'Item', { i: i });`;
  const query = `fromStream('${source}').when({ Burst: function (s, e) { ${body} return s; } })`;
  await ok(call(n, `/projections/continuous?name=${encodeURIComponent(name)}&emit=yes&enabled=no`, {
    method: 'POST', headers: { 'Content-Type': 'application/x-www-form-urlencoded' }, body: query,
  }), 201);
  // The handler and the sandbox's copy of 100,000 events out take seconds of CPU on a busy machine.
  const config = await (await ok(call(n, `${p(name)}/config`))).json();
  await ok(call(n, `${p(name)}/config`, {
    method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ ...config, projectionExecutionTimeout: 300_000 }),
  }));
  await ok(call(n, `${p(name)}/command/enable`, { method: 'POST' }));
}

async function appendBurst(n: Target, source: string): Promise<string> {
  const e = newEvent('Burst');
  await ok(call(n, `/streams/${encodeURIComponent(source)}`, { method: 'POST', headers: { 'Content-Type': EVENTS_JSON }, body: JSON.stringify([e]) }), 201);
  return e.eventId;
}

/** Events in a stream (last event number + 1), 0 when it does not exist yet. */
async function streamLength(n: Target, stream: string): Promise<number> {
  const res = await call(n, `/streams/${encodeURIComponent(stream)}/head/backward/1?embed=rich`, { headers: { Accept: 'application/json' } });
  if (res.status === 404) return 0;
  expect(res.status).toBe(200);
  const doc = await res.json();
  return doc.entries.length === 0 ? 0 : doc.entries[0].eventNumber + 1;
}

/** Every event of a stream, oldest first: [event number, body, metadata]. */
async function readAll(n: Target, stream: string): Promise<[number, any, any][]> {
  const out: [number, any, any][] = [];
  for (let from = 0; ;) {
    const res = await ok(call(n, `/streams/${encodeURIComponent(stream)}/${from}/forward/4096?embed=tryharder`, { headers: { Accept: 'application/json' } }));
    const entries = [...(await res.json()).entries].reverse();
    for (const e of entries) out.push([e.eventNumber, e.data === undefined ? undefined : JSON.parse(e.data), JSON.parse(e.metaData)]);
    if (entries.length < 4096) return out;
    from = out[out.length - 1][0] + 1;
  }
}

/** Asks /ping one after another until stopped; the answers' latencies in ms. */
function pinging(n: Target): { stop(): Promise<number[]> } {
  const latencies: number[] = [];
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const started = performance.now();
      const res = await fetch(`${n.url}/ping`);
      await res.arrayBuffer();
      latencies.push(performance.now() - started);
      await sleep(20);
    }
  })();
  return { async stop() { stopped = true; await loop; return latencies; } };
}

/** The burst's events, each once, in order, each caused by the Burst event. */
function expectWholeBurst(events: [number, any, any][], causedBy: string): void {
  expect(events.length).toBe(BURST);
  const misplaced = events.findIndex(([number, body], i) => number !== i || body.i !== i);
  expect(misplaced, `event ${misplaced} is not the burst's ${misplaced}th`).toBe(-1);
  expect(events.every(([, , metadata]) => metadata.$causedBy === causedBy)).toBe(true);
}

describe('an event that emits a burst of 100,000 events', () => {
  const dirs: string[] = [];
  const procs: NodeProcess[] = [];
  afterAll(async () => {
    for (const running of procs) await killAndRemove(running, []);
    await killAndRemove(undefined, dirs);
  });
  /** A node on `dir`, killed after the tests if it still runs. */
  async function start(dir: string): Promise<NodeProcess> {
    const started = await spawnNode(['--db', dir]);
    procs.push(started);
    return started;
  }

  it('is committed while the node keeps answering /ping, each emitted event once', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-burst-'));
    dirs.push(dir);
    const proc = await start(dir);
    const node = { url: proc.url };
    const [name, source, out] = [uniq('burst'), uniq('burst-src'), uniq('burst-out')];
    await createBurstProjection(node, name, source, out, BURST);
    await eventually(async () => expect((await stats(node, name)).status).toBe('Running'));

    const pings = pinging(node);
    const causedBy = await appendBurst(node, source);
    await eventually(async () => expect(await streamLength(node, out)).toBe(BURST), 180_000);
    const latencies = await pings.stop();
    const slowest = Math.max(...latencies);
    expect(latencies.length).toBeGreaterThan(20);
    expect(slowest, `the slowest of ${latencies.length} pings during the burst took ${Math.round(slowest)} ms`).toBeLessThan(1000);

    expectWholeBurst(await readAll(node, out), causedBy);
    const s = await stats(node, name);
    expect(s.status).toBe('Running');
    expect(s.writePendingEventsAfterCheckpoint).toBe(0);
    await killAndRemove(proc, []);
  }, 300_000);

  it('a kill -9 while it commits leaves all of it or none; after the restart the projection completes it exactly once', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-burst-kill-'));
    dirs.push(dir);
    let proc = await start(dir);
    let node: Target = { url: proc.url };
    const [name, source, out] = [uniq('burst-k'), uniq('burst-k-src'), uniq('burst-k-out')];
    await createBurstProjection(node, name, source, out, BURST);
    await eventually(async () => expect((await stats(node, name)).status).toBe('Running'));
    const causedBy = await appendBurst(node, source);

    // The checkpoint with the burst is under way (handed to the store): kill the node now.
    await eventually(async () => expect((await stats(node, name)).writePendingEventsBeforeCheckpoint).toBeGreaterThanOrEqual(BURST), 180_000);
    proc.child.kill('SIGKILL');
    await proc.exited;

    proc = await start(dir);
    node = { url: proc.url };
    // From the start, while the projection redoes the event: the stream holds none of the burst or all of it.
    const seen = new Set<number>();
    await eventually(async () => {
      const length = await streamLength(node, out);
      seen.add(length);
      expect(length).toBe(BURST);
    }, 180_000);
    expect([...seen].filter((length) => length !== 0 && length !== BURST)).toEqual([]);
    expectWholeBurst(await readAll(node, out), causedBy);
    // and nothing more comes: the checkpoint moved past the event
    await eventually(async () => expect((await stats(node, name)).writePendingEventsAfterCheckpoint).toBe(0));
    await sleep(500);
    expect(await streamLength(node, out)).toBe(BURST);
    expect((await stats(node, name)).status).toBe('Running');
  }, 400_000);
});

describe('--max-projection-emits-per-event', () => {
  let t: TestNode;
  afterAll(() => t?.dispose());

  it('an event that emits more faults its projection with the limit in the reason, even if its handler catches the error; the limit itself is fine', async () => {
    t = await startTestNode({ maxProjectionEmitsPerEvent: 1000 });
    const source = uniq('limit-src');
    const [over, caught, within] = [uniq('over'), uniq('caught'), uniq('within')];
    await createBurstProjection(t, over, source, `${over}-out`, 1001);
    await createBurstProjection(t, caught, source, `${caught}-out`, 0,
      `for (var i = 0; i < 1001; i++) { try { emit('${caught}-out', 'Item', { i: i }); } catch (err) {} }`);
    await createBurstProjection(t, within, source, `${within}-out`, 1000);
    await appendBurst(t, source);
    for (const name of [over, caught]) {
      const s = await eventually(async () => {
        const now = await stats(t, name);
        expect(now.status).toMatch(/^Faulted/);
        return now;
      }, 30_000);
      expect(s.stateReason).toContain('The projection emitted more than 1000 events for one event, which exceeds the configured MaxProjectionEmitsPerEvent of 1000.');
      expect(await streamLength(t, `${name}-out`)).toBe(0);
    }
    await eventually(async () => expect(await streamLength(t, `${within}-out`)).toBe(1000), 30_000);
    expect((await stats(t, within)).status).toBe('Running');
  }, 60_000);
});
