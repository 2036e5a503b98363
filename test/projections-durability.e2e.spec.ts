import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN, EVENTS_JSON, newEvent, startTestNode, type TestNode, uniq, eventually, sleep } from './support/node.js';
import { killAndRemove, MAIN, spawnNode, type NodeProcess } from './support/process.js';

// Projections that must survive: restarts (definitions, enabled flags, config, partition states
// and results come back from the log), reset (a rebuild from the beginning in a new epoch, with
// emitted and result streams showing each event once), kill -9 while emitting (no duplicate and
// no gap in the emitted streams once caught up again), and hostile projections (infinite loop,
// memory bomb, constructor escape, huge state, runaway recursion, forbidden language features)
// that fault alone while the node and every other projection keep running; a fixed query or a
// reset brings a faulted projection back.

// ---------------------------------------------------------------------------------------------
// helpers (over a base URL, so they work for in-process and spawned nodes alike)

interface Target { url: string }




function call(n: Target, path: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  headers.set('Authorization', ADMIN);
  return fetch(n.url + path, { ...init, headers, redirect: 'manual' });
}

const p = (name: string) => `/projection/${encodeURIComponent(name)}`;

async function create(n: Target, mode: 'continuous' | 'onetime' | 'transient', name: string, query: string,
  params: Record<string, string> = {}): Promise<Response> {
  const qs = new URLSearchParams({ name, ...params }).toString();
  return call(n, `/projections/${mode}?${qs}`, { method: 'POST', headers: { 'Content-Type': 'application/x-www-form-urlencoded' }, body: query });
}

async function createOk(n: Target, mode: 'continuous' | 'onetime' | 'transient', name: string, query: string,
  params: Record<string, string> = {}): Promise<void> {
  const res = await create(n, mode, name, query, params);
  expect(res.status, await res.clone().text()).toBe(201);
}

async function stats(n: Target, name: string): Promise<any> {
  const res = await call(n, p(name));
  expect(res.status, `GET ${p(name)}`).toBe(200);
  return res.json();
}

async function text(n: Target, path: string): Promise<string> {
  const res = await call(n, path);
  expect(res.status, `GET ${path}`).toBe(200);
  return res.text();
}

async function stateOf(n: Target, name: string, partition?: string, which: 'state' | 'result' = 'state'): Promise<unknown> {
  const q = partition === undefined ? '' : `?partition=${encodeURIComponent(partition)}`;
  const body = await text(n, `${p(name)}/${which}${q}`);
  return body === '' ? undefined : JSON.parse(body);
}

async function waitState(n: Target, name: string, expected: unknown, partition?: string, timeoutMs = 5000): Promise<void> {
  await eventually(async () => expect(await stateOf(n, name, partition)).toEqual(expected), timeoutMs);
}

async function waitStatus(n: Target, name: string, status: string | RegExp, timeoutMs = 5000): Promise<any> {
  return eventually(async () => {
    const s = await stats(n, name);
    if (typeof status === 'string') expect(s.status).toBe(status);
    else expect(s.status).toMatch(status);
    return s;
  }, timeoutMs);
}

async function commandOk(n: Target, name: string, cmd: 'enable' | 'disable' | 'reset' | 'abort'): Promise<void> {
  const res = await call(n, `${p(name)}/command/${cmd}`, { method: 'POST' });
  expect(res.status, await res.clone().text()).toBe(200);
}

async function putConfig(n: Target, name: string, changes: Record<string, unknown>): Promise<void> {
  const current = await (await call(n, `${p(name)}/config`)).json();
  const res = await call(n, `${p(name)}/config`, { method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ ...current, ...changes }) });
  expect(res.status, await res.clone().text()).toBe(200);
}

async function appendOk(n: Target, stream: string, events: unknown[]): Promise<void> {
  const res = await call(n, `/streams/${encodeURIComponent(stream)}`, { method: 'POST', headers: { 'Content-Type': EVENTS_JSON }, body: JSON.stringify(events) });
  expect(res.status).toBe(201);
}

interface StoredEvent { eventNumber: number; eventType: string; eventId: string; data: string | null; body: any; metadata: any }

function tryJson(s: string | null | undefined): any {
  if (s === null || s === undefined || s === '') return undefined;
  try {
    return JSON.parse(s);
  } catch {
    return undefined;
  }
}

/** Every visible event of a stream, oldest first, links not resolved; or the HTTP status. */
async function readStream(n: Target, stream: string): Promise<StoredEvent[] | number> {
  const out: StoredEvent[] = [];
  for (let from = 0; ;) {
    const res = await call(n, `/streams/${encodeURIComponent(stream)}/${from}/forward/4096?embed=tryharder`, {
      headers: { Accept: 'application/json', 'ES-ResolveLinkTos': 'false' },
    });
    if (res.status !== 200) return res.status;
    const entries = [...(await res.json()).entries].reverse();
    for (const e of entries) {
      out.push({ eventNumber: e.eventNumber, eventType: e.eventType, eventId: e.eventId, data: e.data ?? null, body: tryJson(e.data), metadata: tryJson(e.metaData) });
    }
    if (entries.length < 4096) return out;
    from = out[out.length - 1].eventNumber + 1;
  }
}

async function events(n: Target, stream: string): Promise<StoredEvent[]> {
  const r = await readStream(n, stream);
  if (typeof r === 'number') throw new Error(`reading ${stream} answered ${r}`);
  return r;
}

/** Number of events in a stream (last event number + 1), 0 when it does not exist yet. */
async function streamLength(n: Target, stream: string): Promise<number> {
  const res = await call(n, `/streams/${encodeURIComponent(stream)}/head/backward/1?embed=rich`, { headers: { Accept: 'application/json' } });
  if (res.status === 404) return 0;
  expect(res.status).toBe(200);
  const doc = await res.json();
  return doc.entries.length === 0 ? 0 : doc.entries[0].eventNumber + 1;
}

function counter(stream: string, type = 'Tick'): string {
  return `fromStream('${stream}').when({ $init: function () { return { n: 0 }; }, '${type}': function (s, e) { s.n += 1; } })`;
}

// ---------------------------------------------------------------------------------------------

describe('restart and reset (in-process node)', () => {
  let t: TestNode;
  beforeAll(async () => { t = await startTestNode(); });
  afterAll(async () => { await t?.dispose(); });

  it('checkpoint streams keep only their latest two checkpoints ($maxCount 2 written with the first one)', async () => {
    const type = uniq('Cp');
    const stream = uniq('cp');
    const name = uniq('cp-proj');
    await appendOk(t, stream, [newEvent(type, { v: 1 })]);
    await createOk(t, 'continuous', name, `fromAll().foreachStream().when({ '${type}': (s) => { s.n = (s.n || 0) + 1; } })`);
    for (const checkpoints of [`$projections-${name}-checkpoint`, `$projections-${name}-${stream}-checkpoint`]) {
      const meta = await eventually(async () => {
        const res = await call(t, `/streams/${encodeURIComponent(checkpoints)}/metadata`, { headers: { Accept: 'application/json' } });
        expect(res.status).toBe(200);
        return res.json();
      });
      expect(meta).toEqual({ $maxCount: 2 });
    }
  });

  it('a catch-up over many partitions checkpoints on the way (at most 2,000 changed partitions each), and resumes with every state', async () => {
    const type = uniq('Many');
    const prefix = uniq('many');
    const streams = Array.from({ length: 2200 }, (_, i) => `${prefix}-${i}`);
    // Round by round, so every 2,000 records of the log touch 2,000 partitions: 4,400 events are
    // three read batches.
    for (let round = 1; round <= 2; round++) {
      for (let i = 0; i < streams.length; i += 100) {
        await Promise.all(streams.slice(i, i + 100).map((s) => appendOk(t, s, [newEvent(type, { v: round })])));
      }
    }
    const name = uniq('many-proj');
    // Created stopped, with a handled-events threshold it never reaches: its checkpoints are the
    // partition limit's and, once idle, the last.
    await createOk(t, 'continuous', name, `fromAll().foreachStream().when({ '${type}': function (s, e) { s.sum = (s.sum || 0) + e.body.v; } })`, { enabled: 'no' });
    const config = await (await call(t, `${p(name)}/config`)).json();
    const put = await call(t, `${p(name)}/config`, {
      method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ ...config, checkpointHandledThreshold: 1_000_000 }),
    });
    expect(put.status).toBe(200);
    expect((await call(t, `${p(name)}/command/enable`, { method: 'POST' })).status).toBe(200);
    await waitState(t, name, { sum: 3 }, streams[streams.length - 1], 15_000);
    // 2,200 partitions changed by 4,400 events in batches of 2,000 records: one or two checkpoints
    // at 2,000 changed partitions (where the batches fall depends on what the log held before),
    // then the idle one. Without the limit: the idle one alone.
    await eventually(async () => expect(await streamLength(t, `$projections-${name}-checkpoint`)).toBeGreaterThanOrEqual(2), 10_000);
    await sleep(1500);
    expect(await streamLength(t, `$projections-${name}-checkpoint`)).toBeLessThanOrEqual(3);
    await t.restart();
    for (const s of [streams[0], streams[1100], streams[2199]]) await waitState(t, name, { sum: 3 }, s);
  });

  it('after a restart: definitions, enabled flags, config, versions, partition states and results are intact; processing continues exactly', async () => {
    const type = uniq('Dep');
    const a = uniq('acct');
    const b = uniq('acct');
    const ticks = uniq('ticks');
    const perStream = uniq('r-per');
    const root = uniq('r-root');
    const off = uniq('r-off');
    const gone = uniq('r-gone');
    const transient = uniq('r-tr');
    const tuned = uniq('r-cfg');

    await appendOk(t, a, [newEvent(type, { v: 1 }), newEvent(type, { v: 2 })]);
    await appendOk(t, b, [newEvent(type, { v: 10 })]);
    await appendOk(t, ticks, [newEvent('Tick'), newEvent('Tick')]);

    const perStreamQuery = `fromAll().foreachStream().when({
      $init: function () { return { sum: 0, n: 0 }; },
      '${type}': function (s, e) { s.sum += e.body.v; s.n++; }
    }).transformBy(function (s) { return { mean: s.sum / s.n }; })`;
    await createOk(t, 'continuous', perStream, perStreamQuery);
    await createOk(t, 'continuous', root, `${counter(ticks)}.outputState()`);
    await createOk(t, 'continuous', off, counter(ticks), { enabled: 'no' });
    await createOk(t, 'continuous', gone, counter(ticks));
    await createOk(t, 'transient', transient, counter(ticks));
    await createOk(t, 'continuous', tuned, counter(ticks), { enabled: 'no' });
    await putConfig(t, tuned, { checkpointHandledThreshold: 7, checkpointAfterMs: 0, projectionExecutionTimeout: 1234 });
    await commandOk(t, tuned, 'enable');

    await waitState(t, perStream, { sum: 3, n: 2 }, a);
    await waitState(t, perStream, { sum: 10, n: 1 }, b);
    await waitState(t, root, { n: 2 });
    await waitState(t, gone, { n: 2 });
    await waitState(t, tuned, { n: 2 });
    await waitState(t, transient, { n: 2 });
    // a new version of the root projection's query (counts by 10 from now on)
    const rootV1 = `fromStream('${ticks}').when({ $init: function () { return { n: 0 }; }, Tick: function (s, e) { s.n += 10; } }).outputState()`;
    const put = await call(t, `${p(root)}/query`, { method: 'PUT', headers: { 'Content-Type': 'text/plain' }, body: rootV1 });
    expect(put.status).toBe(200);
    await waitStatus(t, root, 'Running');
    await commandOk(t, gone, 'disable');
    expect((await call(t, p(gone), { method: 'DELETE' })).status).toBe(204);

    const before = {
      perStream: await stats(t, perStream), root: await stats(t, root), tuned: await stats(t, tuned),
      tunedConfig: await (await call(t, `${p(tuned)}/config`)).json(),
      perStreamQuery: await (await call(t, `${p(perStream)}/query?config=yes`)).json(),
    };
    expect(before.root.version).toBe(1);

    await t.restart();

    // straight after the restart, with no new event: everything is back
    expect(await stateOf(t, perStream, a)).toEqual({ sum: 3, n: 2 });
    expect(await stateOf(t, perStream, b)).toEqual({ sum: 10, n: 1 });
    expect(await stateOf(t, perStream, a, 'result')).toEqual({ mean: 1.5 });
    expect(await stateOf(t, perStream, b, 'result')).toEqual({ mean: 10 });
    expect(await stateOf(t, root)).toEqual({ n: 2 });
    expect(await stateOf(t, root, undefined, 'result')).toEqual({ n: 2 });
    expect(await stateOf(t, tuned)).toEqual({ n: 2 });
    expect(await text(t, `${p(off)}/state`)).toBe('');
    expect((await stats(t, off)).status).toBe('Stopped');
    expect((await call(t, p(gone))).status).toBe(404);
    expect((await call(t, p(transient))).status).toBe(404);
    expect(await text(t, `${p(root)}/query`)).toBe(rootV1);
    expect(await (await call(t, `${p(perStream)}/query?config=yes`)).json()).toEqual(before.perStreamQuery);
    expect(await (await call(t, `${p(tuned)}/config`)).json()).toEqual(before.tunedConfig);
    expect(before.tunedConfig).toMatchObject({ checkpointHandledThreshold: 7, checkpointAfterMs: 0, projectionExecutionTimeout: 1234 });
    for (const [name, s] of [[perStream, before.perStream], [root, before.root], [tuned, before.tuned]] as const) {
      const now = await stats(t, name);
      expect(now.status, name).toBe('Running');
      expect(now.mode).toBe('Continuous');
      expect([now.version, now.epoch], name).toEqual([s.version, s.epoch]);
    }
    const listed = (await (await call(t, '/projections/all-non-transient')).json()).projections.map((x: any) => x.name);
    expect(listed).toEqual(expect.arrayContaining([perStream, root, off, tuned]));
    expect(listed).not.toContain(gone);
    const anyListed = (await (await call(t, '/projections/any')).json()).projections.map((x: any) => x.name);
    expect(anyListed).not.toContain(transient);

    // processing continues from the checkpoints: nothing counted twice, nothing missed
    await appendOk(t, a, [newEvent(type, { v: 6 })]);
    await appendOk(t, ticks, [newEvent('Tick')]);
    await waitState(t, perStream, { sum: 9, n: 3 }, a);
    expect(await stateOf(t, perStream, a, 'result')).toEqual({ mean: 3 });
    expect(await stateOf(t, perStream, b)).toEqual({ sum: 10, n: 1 });
    await waitState(t, root, { n: 12 }); // the new code (version 1) counts by 10
    await waitState(t, tuned, { n: 3 });
    expect(await text(t, `${p(off)}/state`)).toBe('');
    await commandOk(t, off, 'enable');
    await waitState(t, off, { n: 3 });

    // a deleted name stays free across the restart
    await createOk(t, 'continuous', gone, counter(ticks));
    await waitState(t, gone, { n: 3 });
  });

  it('reset rebuilds from the beginning with the current code; emitted and result streams show each event once; survives a restart', async () => {
    const type = uniq('Add');
    const a = uniq('ra');
    const b = uniq('rb');
    const out = uniq('r-out');
    const name = uniq('rst');
    const query = (factor: number) => `fromAll().foreachStream().when({
      $init: function () { return { sum: 0, count: 0 }; },
      '${type}': function (s, e) {
        s.sum += e.body.v * ${factor}; s.count++;
        emit('${out}', 'Added', { stream: e.streamId, v: e.body.v * ${factor} });
      }
    }).outputState()`;
    await appendOk(t, a, [newEvent(type, { v: 1 }), newEvent(type, { v: 2 })]);
    await appendOk(t, b, [newEvent(type, { v: 3 })]);
    await createOk(t, 'continuous', name, query(1), { emit: 'yes', trackemittedstreams: 'yes' });
    await waitState(t, name, { sum: 3, count: 2 }, a);
    await waitState(t, name, { sum: 3, count: 1 }, b);
    await eventually(async () => expect((await events(t, out)).map((e) => e.body.v)).toEqual([1, 2, 3]));
    const s0 = await stats(t, name);

    // new code: applies to new events only (same epoch, from the checkpoint)
    const put = await call(t, `${p(name)}/query`, { method: 'PUT', headers: { 'Content-Type': 'text/plain' }, body: query(10) });
    expect(put.status).toBe(200);
    await appendOk(t, a, [newEvent(type, { v: 4 })]);
    await waitState(t, name, { sum: 43, count: 3 }, a);
    await eventually(async () => expect((await events(t, out)).map((e) => e.body.v)).toEqual([1, 2, 3, 40]));
    const s1 = await stats(t, name);
    expect([s1.version, s1.epoch]).toEqual([s0.version + 1, s0.epoch]);

    // reset: everything again, with the current code
    await commandOk(t, name, 'reset');
    await waitState(t, name, { sum: 70, count: 3 }, a);
    await waitState(t, name, { sum: 30, count: 1 }, b);
    const s2 = await waitStatus(t, name, 'Running');
    expect(s2.version).toBe(s1.version + 1);
    expect(s2.epoch).toBe(s2.version);
    const newTag = new RegExp(`^\\d+:${s2.epoch}:${s2.version}:4$`);
    const emitted = await eventually(async () => {
      const list = await events(t, out);
      expect(list.map((e) => e.body.v)).toEqual([10, 20, 30, 40]);
      return list;
    });
    expect(emitted.map((e) => e.eventNumber)).toEqual([4, 5, 6, 7]); // old epoch hidden, numbering goes on
    for (const e of emitted) expect(e.metadata.$v).toMatch(newTag);
    const aResults = await eventually(async () => {
      const list = await events(t, `$projections-${name}-${a}-result`);
      expect(list.at(-1)?.body).toEqual({ sum: 70, count: 3 });
      return list;
    });
    for (const e of aResults) expect(e.metadata.$v, 'only results of the new epoch are visible').toMatch(newTag);
    const tracked = await events(t, `$projections-${name}-emittedstreams`);
    expect(tracked.map((e) => e.data)).toEqual([out]);

    await t.restart();
    expect(await stateOf(t, name, a)).toEqual({ sum: 70, count: 3 });
    expect(await stateOf(t, name, b)).toEqual({ sum: 30, count: 1 });
    await appendOk(t, b, [newEvent(type, { v: 5 })]);
    await waitState(t, name, { sum: 80, count: 2 }, b);
    expect(await stateOf(t, name, a)).toEqual({ sum: 70, count: 3 });
    await eventually(async () => expect((await events(t, out)).map((e) => e.body.v)).toEqual([10, 20, 30, 40, 50]));
    expect((await events(t, `$projections-${name}-emittedstreams`)).map((e) => e.data)).toEqual([out]);
  });

  it('reset of an unpartitioned counter rebuilds it, not doubles it', async () => {
    const ticks = uniq('rt');
    const name = uniq('rst-root');
    await appendOk(t, ticks, Array.from({ length: 5 }, () => newEvent('Tick')));
    await createOk(t, 'continuous', name, `${counter(ticks)}.outputState()`);
    await waitState(t, name, { n: 5 });
    await commandOk(t, name, 'reset');
    await waitState(t, name, { n: 5 });
    await appendOk(t, ticks, [newEvent('Tick')]);
    await waitState(t, name, { n: 6 });
    const s = await stats(t, name);
    expect(s.epoch).toBe(s.version);
    expect(s.eventsProcessedAfterRestart).toBe(6);
    await eventually(async () => {
      const results = await events(t, `$projections-${name}-result`);
      expect(results.at(-1)?.body).toEqual({ n: 6 });
      for (const e of results) expect(e.metadata.$v).toMatch(new RegExp(`:${s.epoch}:${s.version}:4$`));
    });
  });
});

// ---------------------------------------------------------------------------------------------

describe('kill -9 in the middle of emitting', () => {
  const dirs: string[] = [];
  let proc: NodeProcess | undefined;
  afterAll(() => killAndRemove(proc, dirs));

  it('the emitted streams hold every expected event exactly once, numbered without gaps, after restarts', async () => {
    expect(existsSync(MAIN), 'build first: npx tsc -p tsconfig.json').toBe(true);
    const dir = mkdtempSync(join(tmpdir(), 'svc-proj-kill-'));
    dirs.push(dir);
    const src = uniq('k-src');
    const out = uniq('k-out');
    const links = uniq('k-links');
    const name = uniq('k-emit');
    const query = `fromStream('${src}').when({
      $init: function () { return { count: 0 }; },
      Src: function (s, e) {
        s.count++;
        emit('${out}', 'Copied', { n: e.body.n });
        linkTo('${links}', e);
      }
    }).outputState()`;

    let next = 0;
    const acknowledged = new Set<number>();
    /** Appends batches of 20 until the node stops answering (or `until` says stop). */
    const writer = async (n: Target, until: () => boolean) => {
      while (!until()) {
        const batch = Array.from({ length: 20 }, () => next++);
        try {
          const res = await fetch(`${n.url}/streams/${src}`, {
            method: 'POST', headers: { Authorization: ADMIN, 'Content-Type': EVENTS_JSON },
            body: JSON.stringify(batch.map((i) => newEvent('Src', { n: i }))),
          });
          if (res.status !== 201) return;
          for (const i of batch) acknowledged.add(i);
        } catch {
          return; // connection refused / reset: the node is gone
        }
      }
    };

    /** Runs a node, keeps appending, and SIGKILLs it once `emittedAtLeast` events are visible in the emitted stream. */
    const roundWithKill = async (emittedAtLeast: number, setup?: (n: Target) => Promise<void>) => {
      proc = await spawnNode(['--db', dir]);
      const node = { url: proc.url };
      if (setup) await setup(node);
      let stop = false;
      const writing = writer(node, () => stop);
      let emittedBeforeKill = 0;
      await eventually(async () => {
        emittedBeforeKill = await streamLength(node, out);
        expect(emittedBeforeKill).toBeGreaterThanOrEqual(emittedAtLeast);
        // Kill while source events wait to be emitted: a projection that has caught up with the
        // writer (it reads recent events from memory) would be killed between two events.
        expect(await streamLength(node, src)).toBeGreaterThan(emittedBeforeKill);
      }, 15_000);
      expect((await stats(node, name)).status).toBe('Running');
      proc.child.kill('SIGKILL');
      await proc.exited;
      stop = true;
      await writing;
      return emittedBeforeKill;
    };

    const killedAt = [
      await roundWithKill(150, (n) => createOk(n, 'continuous', name, query, { emit: 'yes', trackemittedstreams: 'yes' })),
      await roundWithKill(400),
    ];

    // last round: no more writes; let it catch up, then check
    proc = await spawnNode(['--db', dir]);
    const node = { url: proc.url };
    const source = await events(node, src);
    expect(source.length).toBeGreaterThanOrEqual(400);
    // the kills came while source events were still waiting to be emitted (the writer never paused)
    expect(source.length).toBeGreaterThan(Math.max(...killedAt));
    for (const i of acknowledged) expect(source.some((e) => e.body.n === i)).toBe(true);
    await eventually(async () => expect(await stateOf(node, name)).toEqual({ count: source.length }), 15_000);
    const emitted = await eventually(async () => {
      const list = await events(node, out);
      expect(list.length).toBe(source.length);
      return list;
    }, 5000);
    expect(emitted.map((e) => e.eventNumber)).toEqual(source.map((_, i) => i));
    expect(emitted.map((e) => e.body.n)).toEqual(source.map((e) => e.body.n));
    expect(emitted.map((e) => e.metadata.$causedBy)).toEqual(source.map((e) => e.eventId));
    const linked = await eventually(async () => {
      const list = await events(node, links);
      expect(list.length).toBe(source.length);
      return list;
    });
    expect(linked.map((e) => e.eventNumber)).toEqual(source.map((_, i) => i));
    expect(linked.map((e) => e.data)).toEqual(source.map((e) => `${e.eventNumber}@${src}`));
    const tracked = await events(node, `$projections-${name}-emittedstreams`);
    expect(tracked.map((e) => e.data).sort()).toEqual([links, out].sort());
    // results too: written with their checkpoints, so they only ever go up, and end at the total
    const results = await eventually(async () => {
      const list = await events(node, `$projections-${name}-result`);
      expect(list.at(-1)?.body).toEqual({ count: source.length });
      return list;
    });
    const counts = results.map((e) => e.body.count as number);
    for (let i = 1; i < counts.length; i++) expect(counts[i], `result ${i}`).toBeGreaterThan(counts[i - 1]);
    expect((await stats(node, name)).status).toBe('Running');
    proc.child.kill('SIGTERM');
    expect(await proc.exited).toBe(0);
  }, 60_000);
});

// ---------------------------------------------------------------------------------------------

describe('hostile projections fault alone', () => {
  let t: TestNode;
  beforeAll(async () => { t = await startTestNode({ projectionExecutionTimeout: 500, projectionMemoryLimit: 32 }); });
  afterAll(async () => { await t?.dispose(); });

  const hostiles: { label: string; handler: string; reason: RegExp }[] = [
    { label: 'infinite loop', handler: 'while (true) {}', reason: /took too long/ },
    { label: 'memory bomb', handler: 'var a = []; while (true) a.push(new Array(1e6).fill(1));', reason: /memory/i },
    { label: 'constructor escape', handler: "s.p = this.constructor.constructor('return process')(); s.env = s.p.env; s.pid = s.p.pid;", reason: /./ },
    { label: 'huge state', handler: "s.big = 'x'.repeat(24 * 1024 * 1024) + e.sequenceNumber;", reason: /memory|state size/i },
    { label: 'runaway recursion', handler: 'function f(x) { return f(x + 1) + 1; } s.r = f(0);', reason: /call stack/i },
    { label: 'throw', handler: "throw new Error('kaboom ' + e.body.k);", reason: /kaboom 7/ },
  ];

  it('infinite loop, memory bomb, constructor escape, huge state, recursion, throw: each Faulted with reason and position; the others keep counting', async () => {
    const ticks = uniq('h-ticks');
    const healthy = uniq('h-healthy');
    await appendOk(t, ticks, [newEvent('Tick'), newEvent('Tick'), newEvent('Tick')]);
    await createOk(t, 'continuous', healthy, counter(ticks));
    const bystander = uniq('h-by');
    const byType = uniq('By');
    await createOk(t, 'continuous', bystander, `fromAll().foreachStream().when({ $init: function () { return { n: 0 }; }, '${byType}': function (s, e) { s.n++; } })`);
    await waitState(t, healthy, { n: 3 });

    const made = hostiles.map((h) => ({ ...h, name: uniq('hostile'), stream: uniq('h-trigger') }));
    for (const h of made) {
      await createOk(t, 'continuous', h.name, `fromStream('${h.stream}').when({
        $init: function () { return { seen: 0 }; },
        Trigger: function (s, e) { ${h.handler} }
      })`);
    }
    const byStreams = made.map(() => uniq('h-by-s'));
    // trigger them all, with ticks in between
    for (const h of made) {
      await appendOk(t, h.stream, [newEvent('Trigger', { k: 7 })]);
      await appendOk(t, ticks, [newEvent('Tick')]);
      await appendOk(t, byStreams[made.indexOf(h)], [newEvent(byType)]);
    }
    const reasons: Record<string, string> = {};
    for (const h of made) reasons[h.label] = (await waitStatus(t, h.name, /^Faulted/, 10_000)).stateReason;
    const escaped = await text(t, `${p(made[2].name)}/state`);
    expect(escaped).not.toMatch(/env|pid|PATH/);

    // the node and every other projection are fine
    await appendOk(t, ticks, [newEvent('Tick'), newEvent('Tick')]);
    await waitState(t, healthy, { n: 3 + made.length + 2 });
    expect((await stats(t, healthy)).status).toBe('Running');
    expect((await stats(t, bystander)).status).toBe('Running');
    for (const h of made) await waitState(t, bystander, { n: 1 }, byStreams[made.indexOf(h)]);
    await eventually(async () => expect((await stats(t, bystander)).partitionsCached).toBe(made.length), 3000);
    const info = await call(t, '/info');
    expect(info.status).toBe(200);
    const listed = (await (await call(t, '/projections/any')).json()).projections;
    expect(listed.filter((x: any) => made.some((h) => h.name === x.name)).every((x: any) => /^Faulted/.test(x.status))).toBe(true);

    // a restart brings the hostile ones back (enabled): they fault again, the node comes up, the healthy one goes on
    await t.restart();
    expect(await stateOf(t, healthy)).toEqual({ n: 3 + made.length + 2 });
    for (const h of made) await waitStatus(t, h.name, /^Faulted/, 10_000);
    await appendOk(t, ticks, [newEvent('Tick')]);
    await waitState(t, healthy, { n: 3 + made.length + 3 });
    expect((await stats(t, healthy)).status).toBe('Running');

    // each reason says what happened, to which projection, and where (checked last, so the isolation checks above always run)
    for (const h of made) {
      expect.soft(reasons[h.label], h.label).toMatch(h.reason);
      expect.soft(reasons[h.label], h.label).toContain(`The ${h.name} projection failed to process an event.`);
      expect.soft(reasons[h.label], h.label).toMatch(/Event Position: C:\d+\/P:\d+/);
    }
  }, 30_000);

  it('while one projection spins until its CPU limit, the node answers and other projections keep processing', async () => {
    const ticks = uniq('s-ticks');
    const healthy = uniq('s-healthy');
    const spinner = uniq('s-spin');
    const trigger = uniq('s-trigger');
    await createOk(t, 'continuous', healthy, counter(ticks));
    await createOk(t, 'continuous', spinner, `fromStream('${trigger}').when({ Trigger: function (s, e) { while (true) {} } })`, { enabled: 'no' });
    await putConfig(t, spinner, { projectionExecutionTimeout: 3000 });
    await commandOk(t, spinner, 'enable');
    const started = Date.now();
    await appendOk(t, trigger, [newEvent('Trigger')]);
    await eventually(async () => expect((await stats(t, spinner)).bufferedEvents).toBe(1), 2000);
    // it is spinning now; the rest of the node is not held up
    const before = Date.now();
    await appendOk(t, ticks, [newEvent('Tick'), newEvent('Tick')]);
    await waitState(t, healthy, { n: 2 }, undefined, 1500);
    expect(Date.now() - before).toBeLessThan(1500);
    expect((await stats(t, spinner)).status).toBe('Running'); // still spinning: the healthy one did not wait for it
    const s = await waitStatus(t, spinner, /^Faulted/, 6000);
    expect(s.stateReason).toMatch(/took too long/);
    expect(Date.now() - started).toBeGreaterThanOrEqual(2500); // its own, larger limit applied
  }, 15_000);

  it('hostile definitions (top-level infinite loop, constructor escape) answer quickly and fault the projection', async () => {
    const loop = uniq('d-loop');
    const started = Date.now();
    const res = await create(t, 'continuous', loop, 'while (true) {}');
    expect(Date.now() - started).toBeLessThan(3000);
    expect(res.status).toBe(201); // it parses: only a syntax error is a 400
    expect((await waitStatus(t, loop, /^Faulted/)).stateReason).toMatch(/took too long/);
    const escape = uniq('d-escape');
    const r2 = await create(t, 'continuous', escape, "var p = this.constructor.constructor('return process')(); p.exit(1); fromAll().when({})");
    expect(r2.status).toBe(201);
    expect((await waitStatus(t, escape, /^Faulted/)).stateReason).not.toBe('');
    expect((await call(t, '/info')).status).toBe(200);
  });

  const rules: { label: string; handler: string }[] = [
    { label: 'eval', handler: "s.x = eval('1 + 1');" },
    { label: 'Function(...)', handler: "s.x = Function('return 1')();" },
    { label: 'new Function(...)', handler: "s.x = new Function('return 1')();" },
    { label: 'async function constructor', handler: "s.x = String((async function () {}).constructor('return 1'));" },
    { label: 'generator function constructor', handler: "s.x = (function* () {}).constructor('yield 1')().next().value;" },
    { label: 'require', handler: "s.x = require('fs');" },
    { label: 'setTimeout', handler: 's.x = setTimeout(function () {}, 1);' },
    { label: 'fromAll inside a handler', handler: 'fromAll();' },
    { label: 'options inside a handler', handler: 'options({});' },
    { label: 'NaN in the state', handler: 's.x = 0 / 0;' },
    { label: 'Infinity in the state', handler: 's.x = 1 / 0;' },
    { label: 'a cycle in the state', handler: 's.self = s;' },
    { label: 'a function in the state', handler: 's.f = function () {};' },
  ];
  for (const rule of rules) {
    it(`a language rule broken in a handler faults the projection: ${rule.label}`, async () => {
      const name = uniq('rule');
      const stream = uniq('rule-src');
      await appendOk(t, stream, [newEvent('Trigger')]);
      await createOk(t, 'continuous', name, `fromStream('${stream}').when({ Trigger: function (s, e) { ${rule.handler} } })`);
      // wait for the fault, or for the event to be processed and checkpointed without one
      const s = await eventually(async () => {
        const now = await stats(t, name);
        if (!/^Faulted/.test(now.status)) {
          expect(now.eventsProcessedAfterRestart).toBeGreaterThan(0);
          expect(now.lastCheckpoint).not.toBe('C:-1/P:-1');
        }
        return now;
      });
      expect(s.status, `state: ${await text(t, `${p(name)}/state`)}`).toMatch(/^Faulted/);
      expect(s.stateReason).toMatch(/Event Position: C:\d+\/P:\d+/);
    });
  }

  const poisoned = (stream: string) => `fromStream('${stream}').when({
      $init: function () { return { n: 0 }; },
      Tick: function (s, e) { if (e.body.poison) throw new Error('poisoned at ' + e.sequenceNumber); s.n++; }
    })`;
  const poisonedEvents = () => [newEvent('Tick'), newEvent('Tick'), newEvent('Tick', { poison: true }), newEvent('Tick'), newEvent('Tick')];

  it('a fixed query brings a faulted projection back', async () => {
    const name = uniq('fix');
    const stream = uniq('fix-src');
    await appendOk(t, stream, poisonedEvents());
    const broken = poisoned(stream);
    await createOk(t, 'continuous', name, broken);
    const s = await waitStatus(t, name, /^Faulted/);
    expect(s.status).toBe('Faulted (Enabled)');
    expect(s.stateReason).toContain('poisoned at 2');
    expect(s.stateReason).toMatch(/Event Position: C:\d+\/P:\d+/);

    const fixed = broken.replace("if (e.body.poison) throw new Error('poisoned at ' + e.sequenceNumber); ", '');
    expect(fixed).not.toBe(broken);
    const put = await call(t, `${p(name)}/query`, { method: 'PUT', headers: { 'Content-Type': 'text/plain' }, body: fixed });
    expect(put.status).toBe(200);
    await waitState(t, name, { n: 5 });
    const after = await waitStatus(t, name, 'Running');
    expect(after.stateReason).toBe('');
    await appendOk(t, stream, [newEvent('Tick', { poison: true })]);
    await waitState(t, name, { n: 6 });
  });

  it('the state of a faulted projection shows the events before the failing one, and nothing after it', async () => {
    const name = uniq('faultstate');
    const stream = uniq('fs-src');
    await appendOk(t, stream, poisonedEvents());
    await createOk(t, 'continuous', name, poisoned(stream));
    await waitStatus(t, name, /^Faulted/);
    expect(await stateOf(t, name)).toEqual({ n: 2 });
    expect(await stateOf(t, name, undefined, 'result')).toEqual({ n: 2 });
  });

  it('reset brings a faulted projection back (after its CPU limit was raised), rebuilding from the beginning', async () => {
    const name = uniq('slow');
    const stream = uniq('slow-src');
    await appendOk(t, stream, [newEvent('Slow'), newEvent('Slow'), newEvent('Slow')]);
    const query = `fromStream('${stream}').when({
      $init: function () { return { n: 0 }; },
      Slow: function (s, e) { var until = Date.now() + 60; while (Date.now() < until) {} s.n++; }
    })`;
    await createOk(t, 'continuous', name, query, { enabled: 'no' });
    await putConfig(t, name, { projectionExecutionTimeout: 30 });
    await commandOk(t, name, 'enable');
    const faulted = await waitStatus(t, name, /^Faulted/);
    expect(faulted.stateReason).toMatch(/took too long/);
    await putConfig(t, name, { projectionExecutionTimeout: 3000 });
    await commandOk(t, name, 'reset');
    await waitState(t, name, { n: 3 });
    const s = await waitStatus(t, name, 'Running');
    expect(s.stateReason).toBe('');
    expect(s.epoch).toBe(s.version);
  });
});
