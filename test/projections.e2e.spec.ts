import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { append, http, newEvent, startTestNode, type TestNode, uniq, eventually, sleep } from './support/node.js';

// Projections over HTTP, end to end (issue 4): create (source text raw in the body, whatever the
// content type), acorn validation (400 with line and column, nothing stored), state and result for
// the whole projection and per partition, the projection keeping up with new events, the three
// modes, the listings with their summary fields, query / config / commands / delete, emitting
// (emit, linkTo, copyTo with $causedBy / $correlationId), emitted-stream tracking and deletion, and
// the result / partition / checkpoint streams under the reference's names.

let t: TestNode;
beforeAll(async () => { t = await startTestNode({ projectionExecutionTimeout: 1000, projectionMemoryLimit: 32 }); });
afterAll(async () => { await t?.dispose(); });

// ---------------------------------------------------------------------------------------------
// helpers




type Mode = 'continuous' | 'onetime' | 'transient';

function create(mode: Mode, query: string, params: Record<string, string> = {}, contentType = 'application/json'): Promise<Response> {
  const qs = new URLSearchParams(params).toString();
  return http(t, `/projections/${mode}${qs ? `?${qs}` : ''}`, { method: 'POST', headers: { 'Content-Type': contentType }, body: query });
}

async function createOk(mode: Mode, name: string, query: string, params: Record<string, string> = {}): Promise<void> {
  const res = await create(mode, query, { name, ...params });
  expect(res.status, await res.clone().text()).toBe(201);
}

const p = (name: string) => `/projection/${encodeURIComponent(name)}`;

async function stats(name: string): Promise<any> {
  const res = await http(t, p(name));
  expect(res.status).toBe(200);
  return res.json();
}

async function stateText(name: string, partition?: string, which: 'state' | 'result' = 'state'): Promise<string> {
  const q = partition === undefined ? '' : `?partition=${encodeURIComponent(partition)}`;
  const res = await http(t, `${p(name)}/${which}${q}`);
  expect(res.status).toBe(200);
  return res.text();
}

async function stateOf(name: string, partition?: string): Promise<unknown> {
  const text = await stateText(name, partition);
  return text === '' ? undefined : JSON.parse(text);
}

async function resultOf(name: string, partition?: string): Promise<unknown> {
  const text = await stateText(name, partition, 'result');
  return text === '' ? undefined : JSON.parse(text);
}

async function waitState(name: string, expected: unknown, partition?: string, timeoutMs = 15_000): Promise<void> {
  await eventually(async () => expect(await stateOf(name, partition)).toEqual(expected), timeoutMs);
}

async function waitStatus(name: string, status: string | RegExp, timeoutMs = 5000): Promise<any> {
  return eventually(async () => {
    const s = await stats(name);
    if (typeof status === 'string') expect(s.status).toBe(status);
    else expect(s.status).toMatch(status);
    return s;
  }, timeoutMs);
}

function command(name: string, cmd: 'enable' | 'disable' | 'reset' | 'abort'): Promise<Response> {
  return http(t, `${p(name)}/command/${cmd}`, { method: 'POST' });
}

async function commandOk(name: string, cmd: 'enable' | 'disable' | 'reset' | 'abort'): Promise<void> {
  const res = await command(name, cmd);
  expect(res.status, await res.clone().text()).toBe(200);
  expect(await res.json()).toEqual({ name });
}

async function appendOk(stream: string, events: unknown[]): Promise<void> {
  const res = await append(t, stream, events);
  expect(res.status).toBe(201);
}

interface StoredEvent {
  eventNumber: number;
  eventType: string;
  eventId: string;
  isJson: boolean;
  data: string | null;
  body: any;
  metadata: any;
}

function tryJson(text: string | null | undefined): any {
  if (text === null || text === undefined || text === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** Every visible event of a stream, oldest first, links not resolved; or the HTTP status when it cannot be read. */
async function readStream(stream: string): Promise<StoredEvent[] | number> {
  const out: StoredEvent[] = [];
  for (let from = 0; ;) {
    const res = await http(t, `/streams/${encodeURIComponent(stream)}/${from}/forward/4096?embed=tryharder`, {
      headers: { Accept: 'application/json', 'ES-ResolveLinkTos': 'false' },
    });
    if (res.status !== 200) return res.status;
    const entries = [...(await res.json()).entries].reverse();
    for (const e of entries) {
      out.push({
        eventNumber: e.eventNumber, eventType: e.eventType, eventId: e.eventId, isJson: e.isJson,
        data: e.data ?? null, body: tryJson(e.data), metadata: tryJson(e.metaData),
      });
    }
    if (entries.length < 4096) return out;
    from = out[out.length - 1].eventNumber + 1;
  }
}

async function events(stream: string): Promise<StoredEvent[]> {
  const r = await readStream(stream);
  if (typeof r === 'number') throw new Error(`reading ${stream} answered ${r}`);
  return r;
}

interface AllEntry { streamId: string; eventType: string; data: string | null }

/** The whole of $all, newest first. */
async function readAll(): Promise<AllEntry[]> {
  const out: AllEntry[] = [];
  let path: string | undefined = '/streams/%24all/head/backward/4096?embed=tryharder';
  while (path) {
    const res = await http(t, path, { headers: { Accept: 'application/json' } });
    expect(res.status).toBe(200);
    const doc = await res.json();
    for (const e of doc.entries) out.push({ streamId: e.streamId, eventType: e.eventType, data: e.data ?? null });
    const next = doc.entries.length > 0 ? doc.links.find((l: any) => l.relation === 'next')?.uri as string | undefined : undefined;
    path = next ? `${new URL(next).pathname}?embed=tryharder` : undefined;
  }
  return out;
}

/** Ids of the events of a stream (the source events an emitting projection reacts to). */
async function sourceIds(stream: string): Promise<string[]> {
  return (await events(stream)).map((e) => e.eventId);
}

const SUMMARY_FIELDS = [
  'coreProcessingTime', 'version', 'epoch', 'effectiveName', 'writesInProgress', 'readsInProgress', 'partitionsCached',
  'status', 'stateReason', 'name', 'mode', 'position', 'progress', 'lastCheckpoint', 'eventsProcessedAfterRestart',
  'statusUrl', 'stateUrl', 'resultUrl', 'queryUrl', 'resultStreamUrl', 'enableCommandUrl', 'disableCommandUrl',
  'checkpointStatus', 'bufferedEvents', 'writePendingEventsBeforeCheckpoint', 'writePendingEventsAfterCheckpoint',
];

/** A counter of `type` events in `stream`: {n} */
function counter(stream: string, type = 'Tick'): string {
  return `fromStream('${stream}').when({ $init: function () { return { n: 0 }; }, '${type}': function (s, e) { s.n += 1; } })`;
}

// ---------------------------------------------------------------------------------------------

describe('create, then read state and result', () => {
  it('continuous: 201 with Location and {name}; state and result follow the log and keep up with new events', async () => {
    const name = uniq('count');
    const stream = uniq('cnt-src');
    await appendOk(stream, [newEvent('Add', { v: 2 }), newEvent('Add', { v: 3 })]);
    const query = `fromStream('${stream}').when({
      $init: function () { return { sum: 0, count: 0 }; },
      Add: function (s, e) { s.sum += e.body.v; s.count++; return s; }
    })`;
    const res = await create('continuous', query, { name });
    expect(res.status).toBe(201);
    expect(res.headers.get('location')).toBe(`${t.url}/projection/${name}`);
    expect(await res.json()).toEqual({ name });

    await waitState(name, { sum: 5, count: 2 });
    expect(await resultOf(name)).toEqual({ sum: 5, count: 2 });

    // live: each new append shows up
    await appendOk(stream, [newEvent('Add', { v: 10 })]);
    await waitState(name, { sum: 15, count: 3 });
    await appendOk(stream, [newEvent('Add', { v: 100 }), newEvent('Other', { v: 1000 }), newEvent('Add', { v: 1 })]);
    await waitState(name, { sum: 116, count: 5 }); // 'Other' has no handler

    const s = await stats(name);
    expect(s.status).toBe('Running');
    expect(s.mode).toBe('Continuous');
    expect(s.stateReason).toBe('');
    expect(s.eventsProcessedAfterRestart).toBe(5);
  });

  it('state/result are application/json, raw JSON text, with position headers; an unknown partition is an empty 200', async () => {
    const name = uniq('hdr');
    const stream = uniq('hdr-src');
    await appendOk(stream, [newEvent('Tick')]);
    await createOk('continuous', name, counter(stream));
    await waitState(name, { n: 1 });
    for (const which of ['state', 'result']) {
      const res = await http(t, `${p(name)}/${which}`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      expect(await res.text()).toBe('{"n":1}');
      const position = res.headers.get('es-position');
      expect(position).toBeTruthy();
      expect(() => JSON.parse(position!)).not.toThrow();
      const none = await http(t, `${p(name)}/${which}?partition=${uniq('nobody')}`);
      expect(none.status).toBe(200);
      expect(await none.text()).toBe('');
    }
  });

  it('foreachStream: state and result per partition (?partition=), transformBy shapes the result', async () => {
    const name = uniq('perstream');
    const type = uniq('Dep');
    const a = uniq('acct');
    const b = uniq('acct');
    await appendOk(a, [newEvent(type, { v: 1 }), newEvent(type, { v: 2 })]);
    await appendOk(b, [newEvent(type, { v: 5 })]);
    const query = `fromAll().foreachStream().when({
      $init: function () { return { total: 0, n: 0 }; },
      '${type}': function (s, e) { s.total += e.body.v; s.n++; }
    }).transformBy(function (s) { return { avg: s.total / s.n, n: s.n }; })`;
    await createOk('continuous', name, query);
    await waitState(name, { total: 3, n: 2 }, a);
    await waitState(name, { total: 5, n: 1 }, b);
    expect(await resultOf(name, a)).toEqual({ avg: 1.5, n: 2 });
    expect(await resultOf(name, b)).toEqual({ avg: 5, n: 1 });
    expect(await stateText(name)).toBe(''); // no root state in a per-stream projection

    await appendOk(b, [newEvent(type, { v: 7 })]);
    await waitState(name, { total: 12, n: 2 }, b);
    expect(await resultOf(name, b)).toEqual({ avg: 6, n: 2 });
    expect(await stateOf(name, a)).toEqual({ total: 3, n: 2 });
    expect((await stats(name)).partitionsCached).toBe(2);
  });

  it('partitionBy: partitions are the keys the function returns; events it maps to null are skipped', async () => {
    const name = uniq('bycolor');
    const stream = uniq('paint');
    await appendOk(stream, [
      newEvent('Paint', { color: 'red', l: 1 }), newEvent('Paint', { color: 'blue', l: 2 }),
      newEvent('Paint', { color: 'red', l: 3 }), newEvent('Paint', { l: 4 }), newEvent('Paint', { color: 7, l: 5 }),
    ]);
    const query = `fromStream('${stream}')
      .partitionBy(function (e) { return e.body.color === undefined ? null : e.body.color; })
      .when({ $init: function () { return { liters: 0 }; }, Paint: function (s, e) { s.liters += e.body.l; } })
      .outputState()`;
    await createOk('continuous', name, query);
    await waitState(name, { liters: 4 }, 'red');
    await waitState(name, { liters: 2 }, 'blue');
    await waitState(name, { liters: 5 }, '7'); // numbers become their decimal string
    expect(await resultOf(name, 'red')).toEqual({ liters: 4 });
    expect(await stateText(name)).toBe('');
    expect((await stats(name)).partitionsCached).toBe(3);
  });
});

describe('the source text is the raw body, whatever the content type', () => {
  const tricky = "a+b%20c&d=e;f g";
  for (const contentType of ['application/x-www-form-urlencoded', 'text/plain', 'application/json', 'application/javascript']) {
    it(`${contentType}: not decoded, stored and run byte for byte`, async () => {
      const name = uniq('raw');
      const stream = uniq('raw-src');
      await appendOk(stream, [newEvent('Tick')]);
      const query = `fromStream('${stream}').when({ Tick: function (s, e) { s.t = '${tricky}'; s.x = 1 + 2; } })`;
      const res = await create('continuous', query, { name }, contentType);
      expect(res.status, await res.clone().text()).toBe(201);
      await waitState(name, { t: tricky, x: 3 });
      const q = await http(t, `${p(name)}/query`);
      expect(q.status).toBe(200);
      expect(q.headers.get('content-type')).toMatch(/^application\/javascript/);
      expect(await q.text()).toBe(query);
    });
  }

  it('PUT query with a form content type is not decoded either', async () => {
    const name = uniq('rawput');
    const stream = uniq('rawput-src');
    await appendOk(stream, [newEvent('Tick')]);
    await createOk('continuous', name, counter(stream));
    await waitState(name, { n: 1 });
    const next = `fromStream('${stream}').when({ Tick: function (s, e) { s.t = '${tricky}'; } })`;
    const res = await http(t, `${p(name)}/query`, { method: 'PUT', headers: { 'Content-Type': 'application/x-www-form-urlencoded' }, body: next });
    expect(res.status).toBe(200);
    expect(await (await http(t, `${p(name)}/query`)).text()).toBe(next);
    await appendOk(stream, [newEvent('Tick')]);
    await waitState(name, { n: 1, t: tricky });
  });
});

describe('acorn validation', () => {
  const broken = "fromAll()\n  .when({\n  E: function(s, e) { var x = ; }\n})";

  it('a syntax error on create answers 400 with the message, line and column, and nothing is stored', async () => {
    const name = uniq('syntax');
    for (const mode of ['continuous', 'onetime', 'transient'] as const) {
      const res = await create(mode, broken, { name });
      expect(res.status).toBe(400);
      const text = await res.text();
      expect(text).toMatch(/Unexpected token/);
      expect(text).toMatch(/line 3\b/);
      expect(text).toMatch(/column 31\b/); // 1-based: the ';' is the 31st character of line 3
    }
    expect((await http(t, p(name))).status).toBe(404);
    expect((await http(t, `${p(name)}/query`)).status).toBe(404);
    const any = await (await http(t, '/projections/any')).json();
    expect(any.projections.map((x: any) => x.name)).not.toContain(name);
    const registry = await events('$projections-$all');
    expect(registry.filter((e) => e.data === name)).toEqual([]);
    expect(await readStream(`$projections-${name}`)).toBe(404);
    // the name was never taken
    await createOk('continuous', name, 'fromAll().when({ $init: function () { return {}; } })');
  });

  it('other syntax errors report their own positions', async () => {
    const res = await create('transient', 'fromAll(.when({})', { name: uniq('syntax') });
    expect(res.status).toBe(400);
    const text = await res.text();
    expect(text).toMatch(/line 1\b/);
    expect(text).toMatch(/column 9\b/);
    const unterminated = await create('transient', "fromAll().when({\n$any: function (s, e) { return 'x; }\n})", { name: uniq('syntax') });
    expect(unterminated.status).toBe(400);
    expect(await unterminated.text()).toMatch(/line 2\b/);
  });

  it('a syntax error on PUT query answers 400 and changes nothing: same query, same version, still running', async () => {
    const name = uniq('putbad');
    const stream = uniq('putbad-src');
    await appendOk(stream, [newEvent('Tick')]);
    const query = counter(stream);
    await createOk('continuous', name, query);
    await waitState(name, { n: 1 });
    const before = await stats(name);
    const res = await http(t, `${p(name)}/query`, { method: 'PUT', headers: { 'Content-Type': 'text/plain' }, body: broken });
    expect(res.status).toBe(400);
    const text = await res.text();
    expect(text).toMatch(/line 3\b/);
    expect(text).toMatch(/column 31\b/);
    expect(await (await http(t, `${p(name)}/query`)).text()).toBe(query);
    const after = await stats(name);
    expect(after.version).toBe(before.version);
    expect(after.epoch).toBe(before.epoch);
    expect(after.status).toBe('Running');
    const definitions = await events(`$projections-${name}`);
    expect(definitions).toHaveLength(1);
    await appendOk(stream, [newEvent('Tick')]);
    await waitState(name, { n: 2 });
  });

  it('a query that parses but fails while defining is created, and Faulted with the exception message', async () => {
    const name = uniq('defbad');
    const res = await create('continuous', "options({ notAnOption: true }); fromAll().when({ $any: function (s, e) {} })", { name });
    expect(res.status).toBe(201);
    const s = await waitStatus(name, /^Faulted/);
    expect(s.stateReason).toContain('Unrecognized option: notAnOption');
    const chain = uniq('defbad');
    await createOk('continuous', chain, "fromStream('x').foreachStream().when({})");
    const c = await waitStatus(chain, /^Faulted/);
    expect(c.stateReason).toMatch(/foreachStream/);
  });
});

describe('modes', () => {
  it('onetime runs to the end of the log, then Completed; state, result and its result stream ($Eof) are readable', async () => {
    const name = uniq('once');
    const stream = uniq('once-src');
    await appendOk(stream, [newEvent('Tick'), newEvent('Tick'), newEvent('Tick')]);
    await createOk('onetime', name, `${counter(stream)}.outputState()`);
    const s = await waitStatus(name, 'Completed');
    expect(s.mode).toBe('OneTime');
    expect(s.progress).toBe(100);
    expect(await stateOf(name)).toEqual({ n: 3 });
    expect(await resultOf(name)).toEqual({ n: 3 });
    const results = await events(`$projections-${name}-result`);
    expect(results.map((e) => e.eventType)).toEqual(['Result', '$Eof']);
    expect(results[0].body).toEqual({ n: 3 });
    // completed: later events change nothing
    await appendOk(stream, [newEvent('Tick')]);
    const witness = uniq('witness');
    await createOk('continuous', witness, counter(stream));
    await waitState(witness, { n: 4 });
    expect(await stateOf(name)).toEqual({ n: 3 });
    expect((await stats(name)).status).toBe('Completed');
  });

  it('onetime without a name gets a GUID name', async () => {
    const stream = uniq('anon-src');
    await appendOk(stream, [newEvent('Tick')]);
    const res = await create('onetime', counter(stream));
    expect(res.status).toBe(201);
    const { name } = await res.json();
    expect(name).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(res.headers.get('location')).toBe(`${t.url}/projection/${name}`);
    await waitStatus(name, 'Completed');
    expect(await stateOf(name)).toEqual({ n: 1 });
  });

  it('a continuous projection without a name is refused (seed: 400)', async () => {
    const res = await create('continuous', 'fromAll().when({})');
    expect(res.status).toBe(400);
    expect(await res.text()).toContain('Projection name is required');
  });

  it('transient runs and is readable, writes its result stream (one Result per partition, then $Eof), and leaves nothing else behind (even when deleted)', async () => {
    const name = uniq('tr');
    const stream = uniq('tr-src');
    await appendOk(stream, [newEvent('Tick'), newEvent('Tick')]);
    // emit is asked for but cannot be enabled for a transient projection; the emit target must stay empty
    const target = uniq('tr-target');
    const query = `fromStream('${stream}').partitionBy(function (e) { return 'k'; }).when({
      $init: function () { return { n: 0 }; },
      Tick: function (s, e) { s.n++; }
    }).outputState()`;
    await createOk('transient', name, query, { emit: 'yes', checkpoints: 'yes' });
    const s = await waitStatus(name, /^(Running|Completed)/);
    expect(s.mode).toBe('Transient');
    await waitState(name, { n: 2 }, 'k');
    expect(await resultOf(name, 'k')).toEqual({ n: 2 });

    const emitting = uniq('tr');
    await createOk('transient', emitting, `fromStream('${stream}').when({ Tick: function (s, e) { emit('${target}', 'X', {}); } })`, { emit: 'yes' });
    await waitStatus(emitting, /^(Completed|Faulted)/);

    const listed = (await (await http(t, '/projections/transient')).json()).projections.map((x: any) => x.name);
    expect(listed).toEqual(expect.arrayContaining([name, emitting]));
    const nonTransient = (await (await http(t, '/projections/all-non-transient')).json()).projections.map((x: any) => x.name);
    expect(nonTransient).not.toContain(name);

    // Its result stream, as a query's (§15): with handlers, one Result per partition at the end, then $Eof.
    const results = await eventually(async () => {
      const list = await events(`$projections-${name}-result`);
      expect(list.at(-1)?.eventType).toBe('$Eof');
      return list;
    });
    expect(results.map((e) => [e.eventType, e.body ?? null])).toEqual([['Result', { n: 2 }], ['$Eof', null]]);
    expect(results[0].metadata.partition).toBe('k');
    // The one that tried to emit faulted at its first event: it wrote nothing, not even $Eof.
    expect((await stats(emitting)).status).toMatch(/^Faulted/);
    expect(await readStream(`$projections-${emitting}-result`)).toBe(404);
    const resultStreams = [`$projections-${name}-result`, `$projections-${emitting}-result`];
    const leftovers = () => readAll().then((all) => all.filter((e) => !resultStreams.includes(e.streamId) && (
      e.streamId.includes(name) || e.streamId.includes(emitting) || e.streamId.includes(target)
      || (e.data ?? '').includes(name) || (e.data ?? '').includes(emitting))));
    expect(await leftovers()).toEqual([]);
    expect(await readStream(target)).toBe(404);

    for (const n of [name, emitting]) {
      const del = await http(t, `${p(n)}?deleteCheckpointStream=yes&deleteEmittedStreams=yes&deleteStateStream=yes`, { method: 'DELETE' });
      expect(del.status).toBe(204);
      expect((await http(t, p(n))).status).toBe(404);
    }
    expect(await leftovers()).toEqual([]);
  });
});

describe('listings and statistics', () => {
  it('each listing holds the right modes, with every summary field and absolute URLs', async () => {
    const stream = uniq('list-src');
    await appendOk(stream, [newEvent('Tick')]);
    const cont = uniq('l-cont');
    const once = uniq('l-once');
    const trans = uniq('l-trans');
    await createOk('continuous', cont, `${counter(stream)}.outputState()`);
    await createOk('onetime', once, counter(stream));
    await createOk('transient', trans, counter(stream));
    await waitState(cont, { n: 1 });
    await waitStatus(once, 'Completed');

    const names = async (path: string) => {
      const res = await http(t, path);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      const doc = await res.json();
      expect(Object.keys(doc)).toEqual(['projections']);
      return doc.projections as any[];
    };
    const any = await names('/projections/any');
    const nonTransient = await names('/projections/all-non-transient');
    const onetime = await names('/projections/onetime');
    const continuous = await names('/projections/continuous');
    const transient = await names('/projections/transient');
    const has = (list: any[], n: string) => list.some((x) => x.name === n);
    for (const n of [cont, once, trans]) expect(has(any, n)).toBe(true);
    expect([has(nonTransient, cont), has(nonTransient, once), has(nonTransient, trans)]).toEqual([true, true, false]);
    expect([has(continuous, cont), has(continuous, once), has(continuous, trans)]).toEqual([true, false, false]);
    expect([has(onetime, cont), has(onetime, once), has(onetime, trans)]).toEqual([false, true, false]);
    expect([has(transient, cont), has(transient, once), has(transient, trans)]).toEqual([false, false, true]);
    for (const x of continuous) expect(x.mode).toBe('Continuous');
    for (const x of onetime) expect(x.mode).toBe('OneTime');
    for (const x of transient) expect(x.mode).toBe('Transient');

    const summary = any.find((x) => x.name === cont);
    for (const field of SUMMARY_FIELDS) expect(summary, field).toHaveProperty(field);
    const url = `${t.url}/projection/${cont}`;
    expect(summary).toMatchObject({
      name: cont, effectiveName: cont, mode: 'Continuous', status: 'Running', stateReason: '',
      statusUrl: url, stateUrl: `${url}/state`, resultUrl: `${url}/result`, queryUrl: `${url}/query?config=yes`,
      enableCommandUrl: `${url}/command/enable`, disableCommandUrl: `${url}/command/disable`,
      resultStreamUrl: `${t.url}/streams/%24projections-${cont}-result`,
      eventsProcessedAfterRestart: 1, version: 0, epoch: -1,
    });
    expect(typeof summary.progress).toBe('number');
    expect(typeof summary.position).toBe('string');
    expect(typeof summary.lastCheckpoint).toBe('string');
    expect(any.find((x) => x.name === once).resultStreamUrl).toBeNull(); // no outputState: no result stream

    const single = await stats(cont);
    for (const field of SUMMARY_FIELDS) expect(single, field).toHaveProperty(field);
    const st = await http(t, `${p(cont)}/statistics`);
    expect(st.status).toBe(200);
    const wrapped = await st.json();
    expect(wrapped.projections).toHaveLength(1);
    expect(wrapped.projections[0].name).toBe(cont);
    for (const field of SUMMARY_FIELDS) expect(wrapped.projections[0], field).toHaveProperty(field);
  });

  it('every per-projection endpoint answers 404 for an unknown name', async () => {
    const name = uniq('ghost');
    const gets = ['', '/statistics', '/state', '/result', '/query', '/query?config=yes', '/config', '/state?partition=x'];
    for (const suffix of gets) expect((await http(t, `${p(name)}${suffix}`)).status, suffix).toBe(404);
    for (const cmd of ['enable', 'disable', 'reset', 'abort'] as const) expect((await command(name, cmd)).status, cmd).toBe(404);
    expect((await http(t, `${p(name)}/query`, { method: 'PUT', headers: { 'Content-Type': 'text/plain' }, body: 'fromAll().when({})' })).status).toBe(404);
    expect((await http(t, `${p(name)}/config`, { method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: '{}' })).status).toBe(404);
    expect((await http(t, p(name), { method: 'DELETE' })).status).toBe(404);
  });

  it('duplicate names answer 409; creating without credentials answers 401', async () => {
    const name = uniq('dup');
    await createOk('continuous', name, 'fromAll().when({ $init: function () { return {}; } })');
    const again = await create('continuous', 'fromAll().when({})', { name });
    expect(again.status).toBe(409);
    expect(await again.text()).toContain(name);
    const onetime = await create('onetime', 'fromAll().when({})', { name });
    expect(onetime.status).toBe(409);
    const anonymous = await http(t, `/projections/continuous?name=${uniq('anon')}`, {
      method: 'POST', headers: { 'Content-Type': 'text/plain' }, body: 'fromAll().when({})', authorization: '',
    });
    expect(anonymous.status).toBe(401);
  });
});

describe('query and config', () => {
  it('GET query?config=yes describes the definition; PUT query applies new code from the checkpoint (version+1, same epoch)', async () => {
    const name = uniq('q');
    const type = uniq('Ev');
    const stream = uniq('q-src');
    await appendOk(stream, [newEvent(type, { v: 1 }), newEvent(type, { v: 2 })]);
    const query = `fromAll().foreachStream().when({
      $init: function () { return { sum: 0 }; },
      '${type}': function (s, e) { s.sum += e.body.v; }
    }).outputState()`;
    await createOk('continuous', name, query, { emit: 'yes', trackemittedstreams: 'yes' });
    await waitState(name, { sum: 3 }, stream);

    const cfg = await http(t, `${p(name)}/query?config=yes`);
    expect(cfg.status).toBe(200);
    const doc = await cfg.json();
    expect(doc).toMatchObject({
      name, query, emitEnabled: true, trackEmittedStreams: true, checkpointsEnabled: true,
      outputConfig: { resultStreamName: `$projections-${name}-result` },
    });
    expect(doc.definition).toMatchObject({ allStreams: true, byStreams: true, events: [type] });
    expect(doc.definition).not.toHaveProperty('allEvents');
    // options: what the query's calls declared (no result stream named); the effective one is in outputConfig.
    expect(doc.definition.options).toEqual({ resultStreamName: null, definesFold: true, producesResults: true });
    const viaTrue = await http(t, `${p(name)}/query?config=true`);
    expect(viaTrue.status).toBe(200);
    expect(await viaTrue.json()).toEqual(doc);

    const before = await stats(name);
    const next = query.replace('s.sum += e.body.v;', 's.sum += e.body.v * 100;');
    const put = await http(t, `${p(name)}/query`, { method: 'PUT', headers: { 'Content-Type': 'text/plain' }, body: next });
    expect(put.status).toBe(200);
    expect(await put.json()).toEqual({ name });
    expect(await (await http(t, `${p(name)}/query`)).text()).toBe(next);
    const after = await waitStatus(name, 'Running');
    expect(after.version).toBe(before.version + 1);
    expect(after.epoch).toBe(before.epoch);
    // already processed events are not processed again; new ones use the new code
    await appendOk(stream, [newEvent(type, { v: 5 })]);
    await waitState(name, { sum: 503 }, stream);
    const definitions = await events(`$projections-${name}`);
    expect(definitions.map((e) => e.eventType)).toEqual(['$ProjectionUpdated', '$ProjectionUpdated']);
    expect(definitions[1].body.query).toBe(next);
  });

  it('PUT query ?emit=yes turns emitting on', async () => {
    const name = uniq('qemit');
    const stream = uniq('qemit-src');
    const target = uniq('qemit-out');
    await appendOk(stream, [newEvent('Tick')]);
    await createOk('continuous', name, counter(stream));
    await waitState(name, { n: 1 });
    expect((await (await http(t, `${p(name)}/config`)).json()).emitEnabled).toBe(false);
    const next = `fromStream('${stream}').when({ Tick: function (s, e) { emit('${target}', 'Out', { n: e.sequenceNumber }); } })`;
    const put = await http(t, `${p(name)}/query?emit=yes`, { method: 'PUT', headers: { 'Content-Type': 'text/plain' }, body: next });
    expect(put.status).toBe(200);
    expect((await (await http(t, `${p(name)}/config`)).json()).emitEnabled).toBe(true);
    await appendOk(stream, [newEvent('Tick')]);
    await eventually(async () => expect((await events(target)).map((e) => e.body)).toEqual([{ n: 1 }]));
    expect((await stats(name)).status).toBe('Running');
  });

  it('GET/PUT config: all fields; refused while running; validated; applied once stopped', async () => {
    const name = uniq('cfg');
    await createOk('continuous', name, 'fromAll().when({ $init: function () { return {}; } })');
    const res = await http(t, `${p(name)}/config`);
    expect(res.status).toBe(200);
    const config = await res.json();
    for (const field of ['emitEnabled', 'trackEmittedStreams', 'checkpointAfterMs', 'checkpointHandledThreshold',
      'checkpointUnhandledBytesThreshold', 'pendingEventsThreshold', 'maxWriteBatchLength', 'maxAllowedWritesInFlight',
      'projectionExecutionTimeout']) expect(config, field).toHaveProperty(field);
    expect(config.msgTypeId).toBe(300); // the established server's leaked member, which clients assert
    const wanted = {
      emitEnabled: true, trackEmittedStreams: true, checkpointAfterMs: 0, checkpointHandledThreshold: 10,
      checkpointUnhandledBytesThreshold: 5000, pendingEventsThreshold: 100, maxWriteBatchLength: 50,
      maxAllowedWritesInFlight: 2, projectionExecutionTimeout: 700,
    };
    const running = await http(t, `${p(name)}/config`, { method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(wanted) });
    expect(running.status).not.toBe(200);
    expect(await running.text()).toMatch(/stopped or faulted/);
    expect(await (await http(t, `${p(name)}/config`)).json()).toEqual(config);

    await commandOk(name, 'disable');
    const bad = await http(t, `${p(name)}/config`, { method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ ...wanted, projectionExecutionTimeout: 0 }) });
    expect(bad.status).toBe(400);
    const garbage = await http(t, `${p(name)}/config`, { method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: '{not json' });
    expect(garbage.status).toBe(400);
    expect(await garbage.text()).toContain('Failed to parse the projection config');
    expect(await (await http(t, `${p(name)}/config`)).json()).toEqual(config);

    const ok = await http(t, `${p(name)}/config`, { method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(wanted) });
    expect(ok.status).toBe(200);
    expect(await (await http(t, `${p(name)}/config`)).json()).toMatchObject(wanted);
    const doc = await (await http(t, `${p(name)}/query?config=yes`)).json();
    expect(doc).toMatchObject({ emitEnabled: true, trackEmittedStreams: true });
  });

  it('GET query?config=yes: definition.options names the result stream options() or outputTo() set, as outputConfig does', async () => {
    const set = uniq('opts');
    await createOk('continuous', set, `options({ resultStreamName: '${set}-out', $includeLinks: true, biState: true, processingLag: 0 });
      fromAll().when({ $init: function () { return {}; } }).outputState()`);
    const withOptions = await (await http(t, `${p(set)}/query?config=yes`)).json();
    expect(withOptions.definition.options).toEqual({
      resultStreamName: `${set}-out`, $includeLinks: true, biState: true, definesFold: true, producesResults: true,
    });
    expect(withOptions.outputConfig).toEqual({ resultStreamName: `${set}-out` });
    const routed = uniq('opts');
    await createOk('continuous', routed, `fromAll().when({ $init: function () { return {}; } }).outputState().outputTo('${routed}-out')`);
    const viaOutputTo = await (await http(t, `${p(routed)}/query?config=yes`)).json();
    expect(viaOutputTo.definition.options).toEqual({ resultStreamName: `${routed}-out`, definesFold: true, producesResults: true });
    expect(viaOutputTo.outputConfig).toEqual({ resultStreamName: `${routed}-out` });
  });

  it('trackemittedstreams without emit is forced off', async () => {
    const name = uniq('trackonly');
    await createOk('continuous', name, 'fromAll().when({ $init: function () { return {}; } })', { trackemittedstreams: 'yes' });
    const config = await (await http(t, `${p(name)}/config`)).json();
    expect(config.emitEnabled).toBe(false);
    expect(config.trackEmittedStreams).toBe(false);
  });
});

describe('commands', () => {
  it('disable stops processing; enable resumes and catches up exactly once', async () => {
    const name = uniq('dis');
    const witness = uniq('dis-w');
    const stream = uniq('dis-src');
    await appendOk(stream, [newEvent('Tick'), newEvent('Tick')]);
    await createOk('continuous', name, counter(stream));
    await createOk('continuous', witness, counter(stream));
    await waitState(name, { n: 2 });
    await commandOk(name, 'disable');
    const s = await waitStatus(name, 'Stopped');
    expect(s.status).not.toContain('(Enabled)');
    await appendOk(stream, [newEvent('Tick'), newEvent('Tick'), newEvent('Tick')]);
    await waitState(witness, { n: 5 });
    expect(await stateOf(name)).toEqual({ n: 2 }); // the witness saw them; the disabled one did not
    expect((await stats(name)).status).toBe('Stopped');
    await commandOk(name, 'enable');
    await waitState(name, { n: 5 });
    expect((await stats(name)).status).toBe('Running');
    await commandOk(name, 'enable'); // enabling a running projection is a no-op
    await appendOk(stream, [newEvent('Tick')]);
    await waitState(name, { n: 6 });
  });

  it('abort stops without a final checkpoint (Aborted); enable resumes from the last checkpoint with the right count', async () => {
    const name = uniq('abort');
    const witness = uniq('abort-w');
    const stream = uniq('abort-src');
    await appendOk(stream, Array.from({ length: 4 }, () => newEvent('Tick')));
    await createOk('continuous', name, counter(stream));
    await createOk('continuous', witness, counter(stream));
    await waitState(name, { n: 4 });
    await commandOk(name, 'abort');
    await waitStatus(name, 'Aborted');
    await appendOk(stream, [newEvent('Tick'), newEvent('Tick')]);
    await waitState(witness, { n: 6 });
    await commandOk(name, 'enable');
    await waitStatus(name, 'Running');
    await waitState(name, { n: 6 });
    await appendOk(stream, [newEvent('Tick')]);
    await waitState(name, { n: 7 });
  });

  it('created with enabled=no: Stopped, processes nothing until enabled', async () => {
    const name = uniq('off');
    const stream = uniq('off-src');
    await appendOk(stream, [newEvent('Tick')]);
    await createOk('continuous', name, counter(stream), { enabled: 'no' });
    expect((await stats(name)).status).toBe('Stopped');
    expect(await stateText(name)).toBe('');
    await commandOk(name, 'enable');
    await waitState(name, { n: 1 });
  });
});

describe('delete', () => {
  it('a running projection cannot be deleted; once disabled DELETE answers 204 and the name is free at once', async () => {
    const name = uniq('del');
    const stream = uniq('del-src');
    await appendOk(stream, [newEvent('Tick'), newEvent('Tick')]);
    await createOk('continuous', name, counter(stream));
    await waitState(name, { n: 2 });

    const refused = await http(t, p(name), { method: 'DELETE' });
    expect(refused.status).not.toBe(204);
    expect(await refused.text()).toMatch(/stopped or faulted/);
    expect((await stats(name)).status).toBe('Running');

    await commandOk(name, 'disable');
    const del = await http(t, p(name), { method: 'DELETE' });
    expect(del.status).toBe(204);
    expect(await del.text()).toBe('');
    expect((await http(t, p(name))).status).toBe(404);
    expect((await http(t, `${p(name)}/state`)).status).toBe(404);
    const any = await (await http(t, '/projections/any')).json();
    expect(any.projections.map((x: any) => x.name)).not.toContain(name);
    const registry = (await events('$projections-$all')).filter((e) => e.data === name).map((e) => e.eventType);
    expect(registry).toEqual(['$ProjectionCreated', '$ProjectionDeleted']);
    // kept without deleteCheckpointStream
    expect(Array.isArray(await readStream(`$projections-${name}-checkpoint`))).toBe(true);

    // reused at once, as a new projection: counting starts from scratch with the new code
    await appendOk(stream, [newEvent('Tick')]);
    const again = `fromStream('${stream}').when({ $init: function () { return { m: 0 }; }, Tick: function (s, e) { s.m += 10; } })`;
    await createOk('continuous', name, again);
    await waitState(name, { m: 30 });
    expect((await stats(name)).status).toBe('Running');
  });

  it('deleteCheckpointStream removes the checkpoint stream', async () => {
    const name = uniq('delcp');
    const stream = uniq('delcp-src');
    await appendOk(stream, [newEvent('Tick')]);
    await createOk('continuous', name, counter(stream));
    await waitState(name, { n: 1 });
    await commandOk(name, 'disable');
    expect((await events(`$projections-${name}-checkpoint`)).at(-1)?.eventType).toBe('$ProjectionCheckpoint');
    const del = await http(t, `${p(name)}?deleteCheckpointStream=true`, { method: 'DELETE' });
    expect(del.status).toBe(204);
    expect(await readStream(`$projections-${name}-checkpoint`)).toBe(404);
  });

  it('a deleted name producing results can be reused at once (deleted with every flag) and starts fresh', async () => {
    const name = uniq('reuse');
    const stream = uniq('reuse-src');
    await appendOk(stream, [newEvent('Tick'), newEvent('Tick')]);
    await createOk('continuous', name, `${counter(stream)}.outputState()`, { emit: 'yes', trackemittedstreams: 'yes' });
    await waitState(name, { n: 2 });
    await eventually(async () => expect((await events(`$projections-${name}-result`)).length).toBeGreaterThan(0));
    await commandOk(name, 'disable');
    const del = await http(t, `${p(name)}?deleteStateStream=yes&deleteCheckpointStream=yes&deleteEmittedStreams=yes`, { method: 'DELETE' });
    expect(del.status).toBe(204);

    const again = `fromStream('${stream}').when({ $init: function () { return { m: 0 }; }, Tick: function (s, e) { s.m += 10; } }).outputState()`;
    await createOk('continuous', name, again);
    const result = `$projections-${name}-result`;
    // wait for the first checkpoint of the new projection (its first result), or for a fault
    await eventually(async () => {
      if ((await stats(name)).status.startsWith('Faulted')) return;
      const visible = await readStream(result);
      expect(Array.isArray(visible) ? visible.at(-1)?.body : visible).toEqual({ m: 20 });
    });
    const s = await stats(name);
    expect(s.status, s.stateReason).toBe('Running');
    await appendOk(stream, [newEvent('Tick')]);
    await waitState(name, { m: 30 });
    await eventually(async () => {
      const visible = await readStream(`$projections-${name}-result`);
      expect(Array.isArray(visible) ? visible.at(-1)?.body : visible).toEqual({ m: 30 });
    });
  });
});

describe('emitting', () => {
  it('emit, linkTo and copyTo write the named streams with $causedBy / $correlationId; tracked; deleteEmittedStreams removes them', async () => {
    const name = uniq('emit');
    const src = uniq('em-src');
    const out = uniq('em-out');
    const links = uniq('em-links');
    const copies = uniq('em-copies');
    await appendOk(src, [
      newEvent('Order', { n: 1 }, { $correlationId: 'corr-1', user: 'u1', $secret: 'hidden' }),
      newEvent('Order', { n: 2 }),
    ]);
    const query = `fromStream('${src}').when({
      $init: function () { return { n: 0 }; },
      Order: function (s, e) {
        s.n++;
        emit('${out}', 'Emitted', { n: e.body.n }, { extra: 'm' });
        linkTo('${links}', e);
        copyTo('${copies}', e, { added: 'yes', $bad: 1 });
      }
    })`;
    await createOk('continuous', name, query, { emit: 'yes', trackemittedstreams: 'yes' });
    await waitState(name, { n: 2 });
    const ids = await sourceIds(src);

    const emitted = await eventually(async () => {
      const list = await events(out);
      expect(list).toHaveLength(2);
      return list;
    });
    expect(emitted.map((e) => [e.eventNumber, e.eventType, e.body])).toEqual([[0, 'Emitted', { n: 1 }], [1, 'Emitted', { n: 2 }]]);
    expect(emitted[0].metadata).toMatchObject({ extra: 'm', $causedBy: ids[0], $correlationId: 'corr-1' });
    expect(emitted[1].metadata).toMatchObject({ extra: 'm', $causedBy: ids[1] });
    expect(emitted[1].metadata).not.toHaveProperty('$correlationId');

    const linked = await eventually(async () => {
      const list = await events(links);
      expect(list).toHaveLength(2);
      return list;
    });
    expect(linked.map((e) => [e.eventType, e.data])).toEqual([['$>', `0@${src}`], ['$>', `1@${src}`]]);
    expect(linked[0].metadata).toMatchObject({ $causedBy: ids[0], $correlationId: 'corr-1' });
    expect(linked[1].metadata).toMatchObject({ $causedBy: ids[1] });

    const copied = await eventually(async () => {
      const list = await events(copies);
      expect(list).toHaveLength(2);
      return list;
    });
    expect(copied.map((e) => [e.eventType, e.isJson, e.body])).toEqual([['Order', true, { n: 1 }], ['Order', true, { n: 2 }]]);
    expect(copied[0].metadata).toMatchObject({ user: 'u1', added: 'yes', $correlationId: 'corr-1', $causedBy: ids[0] });
    expect(copied[0].metadata).not.toHaveProperty('$secret');
    expect(copied[0].metadata).not.toHaveProperty('$bad');
    expect(copied[1].metadata).toMatchObject({ added: 'yes', $causedBy: ids[1] });

    // tracked once per stream, however many events went there
    await appendOk(src, [newEvent('Order', { n: 3 })]);
    await eventually(async () => expect(await events(out)).toHaveLength(3));
    const tracked = await eventually(async () => {
      const list = await events(`$projections-${name}-emittedstreams`);
      expect(list).toHaveLength(3);
      return list;
    });
    expect(tracked.every((e) => e.eventType === '$StreamTracked')).toBe(true);
    expect(tracked.map((e) => e.data).sort()).toEqual([out, links, copies].sort());

    await commandOk(name, 'disable');
    const del = await http(t, `${p(name)}?deleteEmittedStreams=yes`, { method: 'DELETE' });
    expect(del.status).toBe(204);
    for (const s of [out, links, copies, `$projections-${name}-emittedstreams`]) expect(await readStream(s), s).toBe(404);
    expect(await events(src)).toHaveLength(3); // the source is not touched
  });

  it('without trackemittedstreams, deleteEmittedStreams cannot know the streams and leaves them', async () => {
    const name = uniq('notrack');
    const src = uniq('nt-src');
    const out = uniq('nt-out');
    await appendOk(src, [newEvent('Order', { n: 1 })]);
    await createOk('continuous', name, `fromStream('${src}').when({ Order: function (s, e) { emit('${out}', 'E', { n: 1 }); } })`, { emit: 'yes' });
    await eventually(async () => expect(await events(out)).toHaveLength(1));
    expect(await readStream(`$projections-${name}-emittedstreams`)).toBe(404);
    await commandOk(name, 'disable');
    expect((await http(t, `${p(name)}?deleteEmittedStreams=yes`, { method: 'DELETE' })).status).toBe(204);
    expect(await events(out)).toHaveLength(1);
  });

  it('emitting without emit enabled faults the projection with the reference reason', async () => {
    const name = uniq('noemit');
    const src = uniq('ne-src');
    const out = uniq('ne-out');
    await appendOk(src, [newEvent('Order', { n: 1 })]);
    await createOk('continuous', name, `fromStream('${src}').when({ Order: function (s, e) { emit('${out}', 'E', {}); } })`);
    const s = await waitStatus(name, /^Faulted/);
    expect(s.stateReason).toContain("'emit' is not allowed by the projection/configuration/mode");
    expect(await readStream(out)).toBe(404);
  });

  it('emitting into a stream written from the outside faults the projection', async () => {
    const name = uniq('foreign');
    const src = uniq('fo-src');
    const out = uniq('fo-out');
    await appendOk(out, [newEvent('Mine')]);
    await appendOk(src, [newEvent('Order', { n: 1 })]);
    await createOk('continuous', name, `fromStream('${src}').when({ Order: function (s, e) { emit('${out}', 'E', {}); } })`, { emit: 'yes' });
    const s = await waitStatus(name, /^Faulted/);
    expect(s.stateReason).toContain('written to from the outside');
    expect((await events(out)).map((e) => e.eventType)).toEqual(['Mine']);
  });
});

describe('result, partition and checkpoint streams', () => {
  it('partition results, links in the main result stream, the partition catalogue and the checkpoints use the reference names', async () => {
    const name = uniq('streams');
    const type = uniq('Hit');
    const a = uniq('pa');
    const b = uniq('pb');
    await appendOk(a, [newEvent(type, { v: 1 })]);
    await appendOk(b, [newEvent(type, { v: 2 })]);
    await appendOk(a, [newEvent(type, { v: 3 })]);
    const query = `fromAll().foreachStream().when({
      $init: function () { return { n: 0 }; },
      '${type}': function (s, e) { s.n += e.body.v; }
    }).outputState()`;
    await createOk('continuous', name, query);
    await waitState(name, { n: 4 }, a);
    await waitState(name, { n: 2 }, b);
    const tagPattern = /^\d+:-1:0:4$/;

    const aResults = await eventually(async () => {
      const list = await events(`$projections-${name}-${a}-result`);
      expect(list.at(-1)?.body).toEqual({ n: 4 });
      return list;
    });
    expect(aResults.every((e) => e.eventType === 'Result')).toBe(true);
    expect(aResults[0].metadata.$v).toMatch(tagPattern);
    const bResults = await events(`$projections-${name}-${b}-result`);
    expect(bResults.map((e) => [e.eventType, e.body])).toEqual([['Result', { n: 2 }]]);

    const main = await events(`$projections-${name}-result`);
    expect(main.every((e) => e.eventType === '$>')).toBe(true);
    const targets = main.map((e) => e.data);
    expect(targets).toContain(`${bResults[0].eventNumber}@$projections-${name}-${b}-result`);
    expect(targets).toContain(`${aResults.at(-1)!.eventNumber}@$projections-${name}-${a}-result`);

    const partitions = await eventually(async () => {
      const list = await events(`$projections-${name}-partitions`);
      expect(list).toHaveLength(2);
      return list;
    });
    expect(partitions.every((e) => e.eventType === '$partition')).toBe(true);
    expect(partitions.map((e) => e.data).sort()).toEqual([a, b].sort());

    const aCheckpoint = await eventually(async () => {
      const list = await events(`$projections-${name}-${a}-checkpoint`);
      // [state] when the result is the state (as the root checkpoint), else [state, result]
      expect(list.at(-1)?.body).toEqual([{ n: 4 }]);
      return list;
    });
    expect(aCheckpoint.at(-1)!.eventType).toBe('$Checkpoint');
    expect(aCheckpoint.at(-1)!.metadata.$v).toMatch(tagPattern);
    const checkpoint = await events(`$projections-${name}-checkpoint`);
    expect(checkpoint.at(-1)!.eventType).toBe('$ProjectionCheckpoint');
    expect(checkpoint.at(-1)!.metadata.$v).toMatch(tagPattern);
  });

  it('an unpartitioned projection writes Result events into its result stream (or resultStreamName) on change only', async () => {
    const name = uniq('rootres');
    const src = uniq('rr-src');
    const custom = uniq('rr-results');
    await appendOk(src, [newEvent('Tick')]);
    const query = `options({ resultStreamName: '${custom}' });
      fromStream('${src}').when({
        $init: function () { return { n: 0 }; },
        Tick: function (s, e) { s.n++; },
        Noop: function (s, e) { }
      }).outputState()`;
    await createOk('continuous', name, query);
    await waitState(name, { n: 1 });
    await eventually(async () => expect((await events(custom)).map((e) => e.body)).toEqual([{ n: 1 }]));
    await appendOk(src, [newEvent('Noop')]);
    await appendOk(src, [newEvent('Tick')]);
    await waitState(name, { n: 2 });
    await eventually(async () => {
      const list = await events(custom);
      expect(list.map((e) => e.eventType)).toEqual(['Result', 'Result']);
      expect(list.map((e) => e.body)).toEqual([{ n: 1 }, { n: 2 }]);
    });
    expect(await readStream(`$projections-${name}-result`)).toBe(404);
    expect((await stats(name)).resultStreamUrl).toBe(`${t.url}/streams/${encodeURIComponent(custom)}`);
  });
});
