import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVENTS_JSON, eventually, http, newEvent, sleep, startTestNode, uniq, type TestNode } from './support/node.js';

// Every projection setting has the effect projections.md §13 gives it, seen from outside: the
// checkpoint stream's event numbers (each checkpoint is one more event there), the statistics, and
// what the emitted streams hold (issue 21). And every statistic moves off its idle value.

let t: TestNode;
beforeAll(async () => { t = await startTestNode(); });
afterAll(async () => { await t?.dispose(); });

const p = (name: string) => `/projection/${encodeURIComponent(name)}`;

async function appendOk(stream: string, events: unknown[]): Promise<void> {
  const res = await http(t, `/streams/${encodeURIComponent(stream)}`, {
    method: 'POST', headers: { 'Content-Type': EVENTS_JSON }, body: JSON.stringify(events),
  });
  expect(res.status, await res.clone().text()).toBe(201);
}

async function appendMany(stream: string, count: number, make: (i: number) => unknown, perRequest = 500): Promise<void> {
  for (let i = 0; i < count; i += perRequest) {
    await appendOk(stream, Array.from({ length: Math.min(perRequest, count - i) }, (_, j) => make(i + j)));
  }
}

/** Creates a continuous projection stopped, sets its config, then enables it. */
async function createWithConfig(name: string, query: string, config: Record<string, unknown>, emit = false): Promise<void> {
  const created = await http(t, `/projections/continuous?name=${name}&enabled=no&emit=${emit ? 'yes' : 'no'}`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: query,
  });
  expect(created.status, await created.clone().text()).toBe(201);
  const current = await (await http(t, `${p(name)}/config`)).json();
  const put = await http(t, `${p(name)}/config`, {
    method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ ...current, ...config }),
  });
  expect(put.status, await put.clone().text()).toBe(200);
  expect((await http(t, `${p(name)}/command/enable`, { method: 'POST' })).status).toBe(200);
}

async function stats(name: string): Promise<any> {
  const res = await http(t, p(name));
  expect(res.status).toBe(200);
  return res.json();
}

async function state(name: string): Promise<any> {
  const text = await (await http(t, `${p(name)}/state`)).text();
  return text === '' ? undefined : JSON.parse(text);
}

/** Number of checkpoints written so far: the checkpoint stream keeps two, but its numbering counts all. */
async function checkpoints(name: string): Promise<number> {
  const res = await http(t, `/streams/${encodeURIComponent(`$projections-${name}-checkpoint`)}/head`, {
    headers: { Accept: 'application/vnd.eventstore.event+json' },
  });
  if (res.status === 404) return 0;
  expect(res.status).toBe(200);
  return (await res.json()).eventNumber + 1;
}

async function streamLength(stream: string): Promise<number> {
  const res = await http(t, `/streams/${encodeURIComponent(stream)}/head`, { headers: { Accept: 'application/vnd.eventstore.event+json' } });
  if (res.status === 404) return 0;
  return (await res.json()).eventNumber + 1;
}

const counter = (stream: string, type = 'E') => `fromStream('${stream}').when({ $init: () => ({ n: 0 }), ${type}: (s) => { s.n++; } })`;

describe('projection settings', () => {
  it('checkpointHandledThreshold 100 with checkpointAfterMs 0: 5,000 handled events write a checkpoint per 100', async () => {
    const src = uniq('handled');
    await appendMany(src, 5000, () => newEvent('E'));
    const name = uniq('handled-p');
    await createWithConfig(name, counter(src), { checkpointHandledThreshold: 100, checkpointAfterMs: 0 });
    await eventually(async () => expect(await state(name)).toEqual({ n: 5000 }), 20_000);
    await eventually(async () => expect(await checkpoints(name)).toBeGreaterThanOrEqual(50), 5000);
    // With the default threshold (4,000) the same work writes a handful.
    const other = uniq('handled-default');
    await createWithConfig(other, counter(src), { checkpointAfterMs: 0 });
    await eventually(async () => expect(await state(other)).toEqual({ n: 5000 }), 20_000);
    await sleep(1500); // the idle checkpoint
    expect(await checkpoints(other)).toBeLessThanOrEqual(4);
  }, 60_000);

  it('checkpointUnhandledBytesThreshold 1 MB: 12 MB of events the query does not handle write a checkpoint per MB', async () => {
    const src = uniq('unhandled');
    await appendOk(src, [newEvent('A')]);
    const name = uniq('unhandled-p');
    await createWithConfig(name, `fromAll().when({ $init: () => ({ n: 0 }), A: (s) => { s.n++; } })`, {
      checkpointHandledThreshold: 1, checkpointUnhandledBytesThreshold: 1_000_000, checkpointAfterMs: 0,
    });
    await eventually(async () => expect(await state(name)).toEqual({ n: 1 }), 10_000);
    const before = await checkpoints(name);
    const blob = 'x'.repeat(100_000);
    await appendMany(uniq('noise'), 120, () => newEvent('B', { blob }), 10);
    await eventually(async () => expect((await stats(name)).progress).toBe(100), 20_000);
    await eventually(async () => expect(await checkpoints(name) - before).toBeGreaterThanOrEqual(10), 10_000);
  }, 60_000);

  it('pendingEventsThreshold 200: no more than 200 events are ever buffered (5,000 by default shows thousands)', async () => {
    const src = uniq('pending');
    await appendMany(src, 8000, (i) => newEvent('E', { i }), 1000);
    // A handler slow enough (~50 µs) for the statistics to be sampled while it catches up.
    const slow = `fromStream('${src}').when({ $init: () => ({ n: 0, x: 0 }), E: (s) => { for (let k = 0; k < 50000; k++) s.x = (s.x + k) % 7; s.n++; } })`;
    const sample = async (name: string) => {
      let max = 0;
      for (;;) {
        const st = await stats(name);
        max = Math.max(max, st.bufferedEvents);
        if ((await state(name))?.n === 8000) return max;
        await sleep(5);
      }
    };
    const limited = uniq('pending-200');
    await createWithConfig(limited, slow, { pendingEventsThreshold: 200, checkpointAfterMs: 0 });
    const maxLimited = await sample(limited);
    expect(maxLimited).toBeGreaterThan(0);
    expect(maxLimited).toBeLessThanOrEqual(200);
    const unlimited = uniq('pending-default');
    await createWithConfig(unlimited, slow, { checkpointAfterMs: 0 });
    expect(await sample(unlimited)).toBeGreaterThan(1000);
  }, 90_000);

  it('maxWriteBatchLength 10: emitted events are written once 10 are pending for a stream, even long before checkpointAfterMs', async () => {
    const src = uniq('batchlen');
    const out = uniq('batchlen-out');
    const name = uniq('batchlen-p');
    await createWithConfig(name, `fromStream('${src}').when({ E: (s, e) => { emit('${out}', 'Out', { n: e.body.n }); } })`,
      { maxWriteBatchLength: 10, checkpointAfterMs: 60_000 }, true);
    await eventually(async () => expect((await stats(name)).status).toBe('Running'));
    const processed = async (n: number) => {
      await eventually(async () => expect((await stats(name)).eventsProcessedAfterRestart).toBe(n), 10_000);
      await sleep(200);
    };
    const five = (from: number) => Array.from({ length: 5 }, (_, i) => newEvent('E', { n: from + i }));
    await appendOk(src, five(0));
    await processed(5);
    expect(await streamLength(out)).toBe(0); // 5 pending: held back (60 s have not passed)
    expect((await stats(name)).writePendingEventsAfterCheckpoint).toBe(5);
    await appendOk(src, five(5));
    await processed(10);
    await eventually(async () => expect(await streamLength(out)).toBe(10)); // 10 pending for one stream: written at once
    await appendOk(src, [newEvent('E', { n: 10 }), newEvent('E', { n: 11 }), newEvent('E', { n: 12 })]);
    await processed(13);
    expect(await streamLength(out)).toBe(10);
    expect((await stats(name)).writePendingEventsAfterCheckpoint).toBe(3);
  }, 30_000);

  it('checkpointAfterMs 1,000: a projection handling a steady trickle checkpoints at most about once a second', async () => {
    const src = uniq('after');
    const slowName = uniq('after-1000');
    const fastName = uniq('after-0');
    await createWithConfig(slowName, counter(src), { checkpointHandledThreshold: 1, checkpointAfterMs: 1000 });
    await createWithConfig(fastName, counter(src), { checkpointHandledThreshold: 1, checkpointAfterMs: 0 });
    const started = Date.now();
    let sent = 0;
    while (Date.now() - started < 2000) {
      await appendOk(src, [newEvent('E')]);
      sent++;
      await sleep(40);
    }
    await eventually(async () => expect(await state(slowName)).toEqual({ n: sent }), 10_000);
    await eventually(async () => expect(await state(fastName)).toEqual({ n: sent }), 10_000);
    expect(await checkpoints(slowName)).toBeLessThanOrEqual(5);
    expect(await checkpoints(fastName)).toBeGreaterThan(sent / 2);
  }, 30_000);
});

describe('bounded memory of a projection', () => {
  it('emitting to more streams than it remembers (10,000) keeps every stream in order and tracks each once', async () => {
    const src = uniq('many-streams');
    const out = uniq('ms');
    const name = uniq('many-streams-p');
    await createWithConfig(name, `fromStream('${src}').when({ Go: (s, e) => {
        for (let i = 0; i < 12000; i++) emit('${out}-' + i, 'Out', { round: e.body.round }); } })`,
      { trackEmittedStreams: true }, true);
    await appendOk(src, [newEvent('Go', { round: 1 })]);
    await eventually(async () => expect(await streamLength(`${out}-11999`)).toBe(1), 60_000);
    // The second round meets streams whose claim the projection forgot: they are checked again, not refused.
    await appendOk(src, [newEvent('Go', { round: 2 })]);
    await eventually(async () => expect(await streamLength(`${out}-11999`)).toBe(2), 60_000);
    for (const i of [0, 1, 5000, 11999]) expect(await streamLength(`${out}-${i}`)).toBe(2);
    expect((await stats(name)).status).toBe('Running');
    expect(await streamLength(`$projections-${name}-emittedstreams`)).toBe(12000);
  }, 120_000);
});

describe('projection statistics move with the work', () => {
  it('readsInProgress, bufferedEvents, writesInProgress, writePendingEvents{Before,After}Checkpoint and checkpointStatus leave their idle values', async () => {
    const src = uniq('busy');
    await appendMany(src, 10_000, (i) => newEvent('E', { i }), 1000);
    const name = uniq('busy-p');
    await createWithConfig(name, `fromStream('${src}').when({ E: (s, e) => {
        let x = 0; for (let k = 0; k < 100000; k++) x = (x + k) % 7;
        emit('${uniq('busy-out')}', 'Out', { i: e.body.i, pad: 'x'.repeat(4000) }); } })`, { checkpointAfterMs: 0, maxWriteBatchLength: 20 }, true);
    const seen = { readsInProgress: 0, bufferedEvents: 0, writesInProgress: 0, before: 0, after: 0, writing: false };
    // Clients appending meanwhile: their writes go before a projection's checkpoint in the writer's
    // queue, so a checkpoint waits there long enough to be seen with its pending events.
    let busy = true;
    const clients = (async () => {
      const other = uniq('busy-client');
      while (busy) await appendMany(other, 200, (i) => newEvent('C', { i, pad: 'y'.repeat(2000) }), 200);
    })();
    for (;;) {
      const st = await stats(name);
      seen.readsInProgress = Math.max(seen.readsInProgress, st.readsInProgress);
      seen.bufferedEvents = Math.max(seen.bufferedEvents, st.bufferedEvents);
      seen.writesInProgress = Math.max(seen.writesInProgress, st.writesInProgress);
      seen.before = Math.max(seen.before, st.writePendingEventsBeforeCheckpoint);
      seen.after = Math.max(seen.after, st.writePendingEventsAfterCheckpoint);
      seen.writing ||= /^Writing \(\d+\)$/.test(st.checkpointStatus);
      expect(st.writesInProgress).toBeLessThanOrEqual(1); // one checkpoint write in flight at a time, whatever maxAllowedWritesInFlight
      if (st.eventsProcessedAfterRestart === 10_000) break;
      // A fault would leave the loop waiting until the test's timeout: say it at once, with its reason.
      expect(st.status, st.stateReason).not.toMatch(/Faulted/);
      await sleep(2);
    }
    busy = false;
    await clients;
    expect(seen.readsInProgress).toBe(1);
    expect(seen.bufferedEvents).toBeGreaterThan(0);
    expect(seen.writesInProgress).toBe(1);
    expect(seen.before).toBeGreaterThan(0);
    // writePendingEventsAfterCheckpoint is shown exactly by the maxWriteBatchLength test above.
    expect(seen.writing).toBe(true);
    // Idle again once caught up and written.
    await eventually(async () => {
      const st = await stats(name);
      expect([st.readsInProgress, st.bufferedEvents, st.writesInProgress, st.writePendingEventsBeforeCheckpoint,
        st.writePendingEventsAfterCheckpoint, st.checkpointStatus]).toEqual([0, 0, 0, 0, 0, '']);
    }, 10_000);
  }, 90_000);
});
