import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN, append, basic, eventually, http, newEvent, newUser, OPS, startTestNode, uniq, type TestNode,
} from './support/node.js';

// POST /projections/debug (docs/projection-debugger.md): a query run over chosen events, step by
// step, in a sandbox made as a running projection's, writing nothing. The debugger's steps are
// compared with the real run of the same query over the same events: the final state of every
// partition (and the shared state, the result), and every event it emitted or linked. Then what
// it refuses (400/404 with the reason, nothing changed) and whose reads it respects (stream ACLs).

let t: TestNode;
// A looping handler meets the CPU limit in a second, not the default five.
beforeAll(async () => { t = await startTestNode({ projectionExecutionTimeout: 1000 }); });
afterAll(async () => { await t?.dispose(); });

interface Step {
  event: { streamId: string; eventNumber: number; eventType: string; data: unknown; position: number; link?: unknown };
  partition: string | null;
  handler: string | null;
  calls: string[];
  stateBefore?: unknown;
  stateAfter?: unknown;
  sharedStateBefore?: unknown;
  sharedStateAfter?: unknown;
  result?: unknown;
  emits: { streamId: string; eventType: string; data: unknown; metadata: Record<string, unknown>; isLink: boolean }[];
  logs?: string[];
  skipped?: string;
  error?: string;
}
interface Report { name: string; biState: boolean; producesResults: boolean; steps: Step[]; truncated?: string; fault?: string }

function post(body: unknown, authorization = ADMIN): Promise<Response> {
  return http(t, '/projections/debug', {
    method: 'POST', authorization, headers: { 'Content-Type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

async function debug(body: unknown, authorization = ADMIN): Promise<{ report: Report; text: string }> {
  const res = await post(body, authorization);
  const text = await res.text();
  expect(res.status, text).toBe(200);
  return { report: JSON.parse(text) as Report, text };
}

async function refused(body: unknown, status: number, message?: RegExp, authorization = ADMIN): Promise<string> {
  const res = await post(body, authorization);
  const text = await res.text();
  expect(res.status, text).toBe(status);
  if (message) expect(text).toMatch(message);
  return text;
}

/** Events of a stream (links not resolved), oldest first: type, data text, metadata. */
async function storedEvents(stream: string): Promise<{ eventType: string; data: string; metadata: Record<string, unknown> }[]> {
  const res = await http(t, `/streams/${encodeURIComponent(stream)}/0/forward/4096?embed=tryharder`, {
    headers: { Accept: 'application/json', 'ES-ResolveLinkTos': 'false' },
  });
  expect(res.status, stream).toBe(200);
  return [...(await res.json()).entries].reverse().map((e: { eventType: string; data?: string; metaData?: string }) => ({
    eventType: e.eventType, data: e.data ?? '', metadata: e.metaData ? JSON.parse(e.metaData) : {},
  }));
}

/** The newest position of the log ($all's head link). */
async function logHead(): Promise<string> {
  const res = await http(t, '/streams/%24all/head/backward/1', { headers: { Accept: 'application/vnd.eventstore.atom+json' } });
  expect(res.status).toBe(200);
  return (await res.json()).links.find((l: { relation: string }) => l.relation === 'previous').uri;
}

async function createProjection(name: string, query: string): Promise<void> {
  const res = await http(t, `/projections/continuous?name=${name}&emit=yes`, { method: 'POST', body: query });
  expect(res.status, await res.text()).toBe(201);
}

async function stateOf(name: string, partition = ''): Promise<unknown> {
  const res = await http(t, `/projection/${name}/${partition === '' ? 'state' : `state?partition=${encodeURIComponent(partition)}`}`);
  const text = await res.text();
  return text === '' ? null : JSON.parse(text);
}

async function resultOf(name: string, partition: string): Promise<unknown> {
  const text = await (await http(t, `/projection/${name}/result?partition=${encodeURIComponent(partition)}`)).text();
  return text === '' ? null : JSON.parse(text);
}

/** Runs the projection until it handled `count` events, then stops it (its last checkpoint written): the log is quiet. */
async function runToEnd(name: string, count: number): Promise<void> {
  await eventually(async () => {
    const s = (await (await http(t, `/projection/${name}/statistics`)).json()).projections[0];
    expect(s.status).toMatch(/^Running/);
    expect(s.eventsProcessedAfterRestart).toBeGreaterThanOrEqual(count);
  }, 10_000);
  expect((await http(t, `/projection/${name}/command/disable`, { method: 'POST' })).status).toBe(200);
}

/** The last state each partition reached in the steps. */
function finalStates(steps: Step[], key: 'stateAfter' | 'result' = 'stateAfter'): Map<string, unknown> {
  const states = new Map<string, unknown>();
  for (const s of steps) if (s.partition !== null && !s.skipped) states.set(s.partition, s[key]);
  return states;
}

describe('a partitioned query that emits and links', () => {
  const x = uniq('dbg').replace(/-/g, '');
  const orders = `orders-${x}`;
  const returns = `returns-${x}`;
  const query = `fromStreams(['${orders}', '${returns}'])
  .partitionBy(function (e) { return e.body.customer; })
  .when({
    $init: function () { return { placed: 0, total: 0, returned: 0 }; },
    $created: function (s, e) { emit('customers-${x}', 'CustomerSeen', { customer: e.partition }); },
    OrderPlaced: function (s, e) { s.placed++; s.total += e.body.amount; linkTo('placed-${x}', e); },
    OrderReturned: function (s, e) {
      s.returned++;
      log('returned ' + e.body.customer);
      emit('returned-' + e.body.customer + '-${x}', 'Returned', { customer: e.body.customer, n: s.returned }, { source: 'test' });
    }
  })
  .transformBy(function (s) { return { customerTotal: s.total - s.returned }; })`;
  const name = `real-${x}`;
  let report: Report;
  let text: string;

  beforeAll(async () => {
    const placed = (customer: string, amount: number) => newEvent('OrderPlaced', `{"customer":"${customer}","amount":${amount},"ref":12345678901234567890}`);
    expect((await append(t, orders, [placed('ann', 5), placed('bob', 7), newEvent('Noise', { customer: 'ann' })])).status).toBe(201);
    expect((await append(t, returns, [newEvent('OrderReturned', { customer: 'ann' })])).status).toBe(201);
    expect((await append(t, orders, [placed('ann', 11), placed('cyd', 1)])).status).toBe(201);
    expect((await append(t, returns, [newEvent('OrderReturned', { customer: 'cyd' }), newEvent('OrderReturned', { customer: 'ann' })])).status).toBe(201);
    await createProjection(name, query);
    await runToEnd(name, 7);
    ({ report, text } = await debug({ name, events: { first: 100 } }));
  });

  it('steps through the events the source reads, with the handler, the calls and the states before and after', () => {
    expect(report).toMatchObject({ name, biState: false, producesResults: true });
    expect(report.fault).toBeUndefined();
    // The Noise event has no handler: the source does not deliver it.
    expect(report.steps.map((s) => `${s.event.streamId}#${s.event.eventNumber}:${s.handler}@${s.partition}`)).toEqual([
      `${orders}#0:OrderPlaced@ann`, `${orders}#1:OrderPlaced@bob`, `${returns}#0:OrderReturned@ann`,
      `${orders}#3:OrderPlaced@ann`, `${orders}#4:OrderPlaced@cyd`, `${returns}#1:OrderReturned@cyd`, `${returns}#2:OrderReturned@ann`,
    ]);
    const [first, , third] = report.steps;
    expect(first.calls).toEqual(['partitionBy', '$init', '$created', 'OrderPlaced']);
    expect(first.stateBefore).toBeNull();
    expect(first.stateAfter).toEqual({ placed: 1, total: 5, returned: 0 });
    expect(first.result).toEqual({ customerTotal: 5 });
    expect(third.calls).toEqual(['partitionBy', 'OrderReturned']);
    expect(third.stateBefore).toEqual({ placed: 1, total: 5, returned: 0 });
    expect(third.stateAfter).toEqual({ placed: 1, total: 5, returned: 1 });
    expect(third.logs).toEqual(['returned ann']);
    expect(third.emits).toEqual([{
      streamId: `returned-ann-${x}`, eventType: 'Returned', data: { customer: 'ann', n: 1 }, isLink: false,
      metadata: { source: 'test', $causedBy: expect.any(String) },
    }]);
    expect(first.emits.map((e) => [e.streamId, e.eventType, e.data, e.isLink])).toEqual([
      [`customers-${x}`, 'CustomerSeen', { customer: 'ann' }, false],
      [`placed-${x}`, '$>', `0@${orders}`, true],
    ]);
  });

  it('ends each partition in the state and result the real run ended in', async () => {
    const states = finalStates(report.steps);
    expect([...states.keys()].sort()).toEqual(['ann', 'bob', 'cyd']);
    for (const [partition, state] of states) {
      expect(state, partition).toEqual(await stateOf(name, partition));
      expect(finalStates(report.steps, 'result').get(partition), partition).toEqual(await resultOf(name, partition));
    }
  });

  it('reports exactly the events the real run emitted and linked, stream by stream, in order', async () => {
    const emitted = new Map<string, { eventType: string; data: unknown; source?: unknown }[]>();
    for (const step of report.steps) {
      for (const e of step.emits) {
        const list = emitted.get(e.streamId) ?? [];
        list.push({ eventType: e.eventType, data: e.data, source: e.metadata.source });
        emitted.set(e.streamId, list);
      }
    }
    expect([...emitted.keys()].sort()).toEqual([`customers-${x}`, `placed-${x}`, `returned-ann-${x}`, `returned-cyd-${x}`].sort());
    for (const [stream, events] of emitted) {
      const stored = await storedEvents(stream);
      const asStored = stored.map((e) => ({ eventType: e.eventType, data: e.eventType === '$>' ? e.data : JSON.parse(e.data), source: e.metadata.source }));
      expect(asStored, stream).toEqual(events);
    }
  });

  it('keeps every digit of the event data (the body writes stored JSON as it is)', () => {
    expect(text).toContain('"ref":12345678901234567890');
  });

  it('writes nothing: the log ends where it ended, the projection is as it was', async () => {
    const head = await logHead();
    const before = await stateOf(name, 'ann');
    await debug({ name, events: { first: 100 } });
    await debug({ query, emit: true, events: { stream: orders, from: 0, count: 10 } });
    expect(await logHead()).toBe(head);
    expect(await stateOf(name, 'ann')).toEqual(before);
    const stats = (await (await http(t, `/projection/${name}/statistics`)).json()).projections[0];
    expect(stats.status).toMatch(/^Stopped/);
  });

  it('runs a stream range: events the query does not read are steps that say why', async () => {
    const { report: range } = await debug({ query, emit: true, events: { stream: orders, from: 1, count: 3 } });
    expect(range.steps.map((s) => [s.event.eventNumber, s.handler, s.partition])).toEqual([[1, 'OrderPlaced', 'bob'], [2, null, null], [3, 'OrderPlaced', 'ann']]);
    expect(range.steps[1].skipped).toMatch(/no handler for events of type 'Noise'/);
    // A new run: ann's partition starts again from $init here.
    expect(range.steps[2].stateBefore).toBeNull();
    expect(range.steps[2].stateAfter).toEqual({ placed: 1, total: 11, returned: 0 });
  });

  it('a new query without emit faults where it emits, as the projection would', async () => {
    const { report: noEmit } = await debug({ query, events: { first: 5 } });
    expect(noEmit.steps).toHaveLength(1);
    expect(noEmit.steps[0].error).toBe("'emit' is not allowed by the projection/configuration/mode");
    expect(noEmit.fault).toMatch(/^The debug projection failed to process an event\.\r\nHandler: js\r\nEvent Position: C:\d+\/P:\d+/);
  });
});

describe('a bi-state query', () => {
  const x = uniq('bi').replace(/-/g, '');
  const stream = `visits-${x}`;
  const query = `fromStream('${stream}')
  .partitionBy(function (e) { return e.body.page; })
  .when({
    $init: function () { return { views: 0 }; },
    $initShared: function () { return { total: 0, pages: [] }; },
    Viewed: function (s, e) {
      s[0].views++;
      s[1].total++;
      if (s[1].pages.indexOf(e.body.page) < 0) s[1].pages.push(e.body.page);
      return s;
    }
  })`;
  const name = `bi-${x}`;

  it('steps the shared state with the partition state, ending where the real run ended', async () => {
    const views = ['home', 'about', 'home', 'docs', 'home'].map((page) => newEvent('Viewed', { page }));
    expect((await append(t, stream, views)).status).toBe(201);
    await createProjection(name, query);
    await runToEnd(name, views.length);
    const { report } = await debug({ name });
    expect(report.biState).toBe(true);
    expect(report.steps).toHaveLength(5);
    expect(report.steps[0].calls).toEqual(['partitionBy', '$init', '$initShared', 'Viewed']);
    expect(report.steps[0].sharedStateBefore).toBeNull();
    expect(report.steps[0].sharedStateAfter).toEqual({ total: 1, pages: ['home'] });
    expect(report.steps[1].sharedStateBefore).toEqual({ total: 1, pages: ['home'] });
    const last = report.steps[4];
    expect(last.sharedStateAfter).toEqual(await stateOf(name));
    for (const [partition, state] of finalStates(report.steps)) expect(state, partition).toEqual(await stateOf(name, partition));
  });
});

describe('what a run refuses', () => {
  const stream = uniq('dbg-bad');
  beforeAll(async () => {
    expect((await append(t, stream, [newEvent('E', { n: 1 })])).status).toBe(201);
  });

  it('a syntax error is 400 with its line and column', async () => {
    await refused({ query: `fromStream('${stream}')\n  .when({ E: function (s) { return s; ) })` }, 400, /at line 2, column \d+$/);
  });

  it('a query whose definition fails or cannot run is 400 with the reason', async () => {
    await refused({ query: 'throw 123;' }, 400, /^123$/);
    await refused({ query: 'fromAll().foreachStream().partitionBy(function (e) { return "x"; })' }, 400, /is not a function/);
    await refused({ query: 'fromStream("a").when({ $any: function () {} }); fromCategory("b");' }, 400, /^Streams and categories cannot be included in a filter at the same time$/);
  });

  it('an unknown projection is 404; no query and no name is 400', async () => {
    await refused({ name: uniq('nobody') }, 404, /not found/);
    await refused({}, 400, /Give the query to debug, or the name of a projection/);
  });

  it('event counts out of bounds, malformed members and unknown members are 400', async () => {
    const query = `fromStream('${stream}').when({ $any: function (s) { return s; } })`;
    await refused({ query, events: { first: 1001 } }, 400, /1 to 1000 events/);
    await refused({ query, events: { first: 0 } }, 400, /1 to 1000 events/);
    await refused({ query, events: { stream, from: 0, count: 5000 } }, 400, /1 to 1000 events/);
    await refused({ query, events: { stream, from: -1, count: 5 } }, 400, /from must be/);
    await refused({ query, events: { first: 2.5 } }, 400, /events.first must be an integer/);
    await refused({ query, events: { first: 2, stream } }, 400, /not both/);
    await refused({ query, events: { count: 2 } }, 400, /need events.stream/);
    await refused({ query, events: 'all' }, 400, /events must be/);
    await refused({ query: 5 }, 400, /query must be/);
    await refused({ query, mode: 'Forever' }, 400, /mode must be/);
    await refused({ query, extra: 1 }, 400, /^Unknown member extra: the body takes/);
    await refused({ query, events: { frist: 2 } }, 400, /^Unknown member events.frist:/);
    await refused([], 400, /The body must be a JSON object/);
    await refused('not json', 400);
  });

  it('a missing stream is 404, as is a source none of whose streams exists', async () => {
    const query = `fromStream('${stream}').when({ $any: function (s) { return s; } })`;
    await refused({ query, events: { stream: uniq('missing'), from: 0, count: 5 } }, 404, /not found/);
    await refused({ query: `fromStream('${uniq('missing')}').when({ $any: function (s) { return s; } })` }, 404, /exists/);
  });

  it('a handler that throws, loops or grows a NaN state stops the run at that step with the reason', async () => {
    const run = async (handler: string) => (await debug({ query: `fromStream('${stream}').when({ E: ${handler} })` })).report;
    expect((await run('function () { throw new Error("boom"); }')).steps[0].error).toBe('boom');
    expect((await run('function () { for (;;) {} }')).steps[0].error).toBe('Projection script took too long to execute');
    expect((await run('function (s) { s.x = NaN; }')).steps[0].error).toMatch(/NaN/);
  }, 20_000);
});

describe('whose reads a run respects', () => {
  const closed = uniq('dbg-closed');
  const open = uniq('dbg-open');
  let user: string;
  beforeAll(async () => {
    user = await newUser(t);
    expect((await append(t, closed, [newEvent('Secret', { s: 'hidden' })])).status).toBe(201);
    expect((await append(t, open, [newEvent('Public', { p: 1 })])).status).toBe(201);
    const meta = await http(t, `/streams/${closed}/metadata`, {
      method: 'POST', headers: { 'Content-Type': 'application/vnd.eventstore.events+json' },
      body: JSON.stringify([newEvent('$metadata', { $acl: { $r: '$admins' } })]),
    });
    expect(meta.status).toBe(201);
  });

  const any = (s: string) => `fromStream('${s}').when({ $any: function (st, e) { st.last = e.body; return st; } })`;

  it('a user who may read a stream debugs over it; one who may not gets 401 and no event', async () => {
    const who = basic(user, 'pw');
    const { report } = await debug({ query: any(open) }, who);
    expect(report.steps[0].stateAfter).toEqual({ last: { p: 1 } });
    for (const body of [{ query: any(closed) }, { query: any(open), events: { stream: closed, from: 0, count: 5 } }, { query: 'fromAll().when({ $any: function (s) { return s; } })' }]) {
      const text = await refused(body, 401, undefined, who);
      expect(text).not.toContain('hidden');
    }
    await refused({ query: any(open) }, 401, undefined, '');
    await refused({ query: any(closed) }, 401, undefined, OPS);
    expect((await debug({ query: any(closed) })).report.steps[0].stateAfter).toEqual({ last: { s: 'hidden' } });
  });

  it('debugging an existing projection reads its source as the caller', async () => {
    const name = uniq('dbg-closed-projection');
    const created = await http(t, `/projections/continuous?name=${name}&enabled=no`, { method: 'POST', body: any(closed) });
    expect(created.status).toBe(201);
    await refused({ name }, 401, undefined, basic(user, 'pw'));
    expect((await debug({ name })).report.steps).toHaveLength(1);
  });
});
