import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { append, eventually, http, sleep, startTestNode, type TestNode } from './support/node.js';

// Projections holding up under load (issue 5). Twenty continuous user projections of every
// shape (fromAll counters, fromCategory('order').foreachStream() sums, partitionBy on a body
// field, emitters of events and links, outputState / transformBy with result streams) and the
// five system projections run together:
//  - while concurrent HTTP writers append for ~5 s: nothing faults, GET /projections/any keeps
//    answering 200, and once the writers stop every projection catches up to exactly the states,
//    results and emitted streams the appended events imply (computed here from the workload);
//  - across a graceful restart in the middle of a deterministic workload: every state, result
//    and emitted stream equals that of a node that ran the same workload without a restart (and
//    the model), and each source event caused exactly one event in each emitted stream.
// Speed is not asserted; behaviour under load is.

const ATOM = 'application/vnd.eventstore.atom+json';
const enc = encodeURIComponent;

const ORDER_STREAMS = 24;
const CUST_STREAMS = 8;
const REGIONS = ['r0', 'r1', 'r2', 'r3', 'r4'];
const BUCKETS = ['b0', 'b1', 'b2', 'b3'];
const SYSTEM = ['$streams', '$stream_by_category', '$by_category', '$by_event_type', '$by_correlation_id'];
const orderStreams = Array.from({ length: ORDER_STREAMS }, (_, i) => `order-${i}`);
const custStreams = Array.from({ length: CUST_STREAMS }, (_, i) => `cust-${i}`);

// ---------------------------------------------------------------------------------------------
// the workload

interface Body { v?: number; region: string }
/** A source event as appended; `seq` is its event number in its stream. */
interface Ev { stream: string; type: string; body: Body; eventId: string; seq: number }

/** A small seeded PRNG (mulberry32): the same seed gives the same workload. */
function prng(seed: number): (n: number) => number {
  let a = seed >>> 0;
  return (n) => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * n);
  };
}

/** 1 to 3 (or `size`) events for one stream (order streams: Placed / Paid / Shipped; cust streams: Visited). */
function makeBatch(int: (n: number) => number, stream: string, size = 1 + int(3)): Omit<Ev, 'seq'>[] {
  return Array.from({ length: size }, () => {
    const region = REGIONS[int(REGIONS.length)];
    const v = 1 + int(100);
    if (stream.startsWith('cust-')) return { stream, type: 'Visited', body: { v, region }, eventId: randomUUID() };
    const x = int(20);
    const type = x < 10 ? 'Placed' : x < 17 ? 'Paid' : 'Shipped';
    return { stream, type, body: type === 'Shipped' ? { region } : { v, region }, eventId: randomUUID() };
  });
}

function wire(events: Omit<Ev, 'seq'>[]): unknown[] {
  return events.map((e) => ({ eventId: e.eventId, eventType: e.type, data: e.body }));
}

// ---------------------------------------------------------------------------------------------
// the twenty projections

interface Spec {
  name: string;
  query: string;
  /** Partitions to read state (and result) of, besides the whole projection. */
  partitions?: string[];
  /** Produces results: read /result too, and the last event of the result stream(s). */
  results?: 'root' | 'partitions';
}

const visibleStreams = [
  ...orderStreams, ...custStreams, ...REGIONS.map((r) => `copy-${r}`), ...orderStreams.map((s) => `summary-${s}`), 'milestone-all',
];

const SPECS: Spec[] = [
  // fromAll counters (they also see the events the emitters below write to non-$ streams)
  { name: 'all_count', query: `fromAll().when({
      $init: function () { return { n: 0, types: {} }; },
      $any: function (s, e) { s.n += 1; s.types[e.eventType] = (s.types[e.eventType] || 0) + 1; }
    })` },
  { name: 'all_money', query: `fromAll().when({
      $init: function () { return { placed: 0, paid: 0, placedSum: 0, paidSum: 0 }; },
      Placed: function (s, e) { s.placed += 1; s.placedSum += e.body.v; },
      Paid: function (s, e) { s.paid += 1; s.paidSum += e.body.v; }
    })` },
  { name: 'all_by_category', query: `fromAll().when({
      $init: function () { return {}; },
      $any: function (s, e) { var c = e.streamId.split('-')[0]; s[c] = (s[c] || 0) + 1; }
    })` },
  { name: 'all_result', results: 'root', query: `fromAll().when({
      $init: function () { return { n: 0, sum: 0 }; },
      Visited: function (s, e) { s.n += 1; s.sum += e.body.v; }
    }).transformBy(function (s) { return { visits: s.n, total: s.sum }; }).outputState()` },
  // fromCategory('order').foreachStream()
  { name: 'order_placed_sum', partitions: orderStreams, query: `fromCategory('order').foreachStream().when({
      $init: function () { return { n: 0, sum: 0 }; },
      Placed: function (s, e) { s.n += 1; s.sum += e.body.v; }
    })` },
  { name: 'order_paid_sum', partitions: orderStreams, query: `fromCategory('order').foreachStream().when({
      $init: function () { return { n: 0, sum: 0 }; },
      Paid: function (s, e) { s.n += 1; s.sum += e.body.v; }
    })` },
  { name: 'order_any', partitions: orderStreams, query: `fromCategory('order').foreachStream().when({
      $init: function () { return { n: 0, last: -1 }; },
      $any: function (s, e) { s.n += 1; s.last = e.sequenceNumber; }
    })` },
  { name: 'order_result', partitions: orderStreams, results: 'partitions', query: `fromCategory('order').foreachStream().when({
      $init: function () { return { placed: 0, paid: 0 }; },
      Placed: function (s, e) { s.placed += e.body.v; },
      Paid: function (s, e) { s.paid += e.body.v; }
    }).transformBy(function (s) { return { balance: s.placed - s.paid }; }).outputState()` },
  // partitionBy on a body field
  { name: 'region_placed', partitions: REGIONS, query: `fromAll().partitionBy(function (e) { return e.body.region; }).when({
      $init: function () { return { n: 0, sum: 0 }; },
      Placed: function (s, e) { s.n += 1; s.sum += e.body.v; }
    })` },
  { name: 'region_paid', partitions: REGIONS, query: `fromCategory('order').partitionBy(function (e) { return e.body.region; }).when({
      $init: function () { return { n: 0, sum: 0 }; },
      Paid: function (s, e) { s.n += 1; s.sum += e.body.v; }
    })` },
  { name: 'region_any', partitions: REGIONS, query: `fromAll().partitionBy(function (e) { return e.body ? e.body.region : undefined; }).when({
      $init: function () { return { n: 0 }; },
      $any: function (s, e) { s.n += 1; }
    })` },
  { name: 'bucket_result', partitions: BUCKETS, results: 'partitions', query: `fromAll().partitionBy(function (e) { return 'b' + (e.body.v % 4); }).when({
      $init: function () { return { n: 0, sum: 0 }; },
      Placed: function (s, e) { s.n += 1; s.sum += e.body.v; }
    }).outputState()` },
  // emitters
  { name: 'emit_copy', query: `fromCategory('order').when({
      Placed: function (s, e) { emit('copy-' + e.body.region, 'Copied', { v: e.body.v, from: e.streamId, n: e.sequenceNumber }); }
    })` },
  { name: 'emit_links', query: `fromAll().when({
      Paid: function (s, e) { linkTo('paid-' + e.body.region, e); }
    })` },
  { name: 'emit_milestones', query: `fromAll().when({
      $init: function () { return { n: 0 }; },
      Placed: function (s, e) { s.n += 1; if (s.n % 10 === 0) emit('milestone-all', 'Milestone', { n: s.n, v: e.body.v }); }
    })` },
  { name: 'emit_summary', partitions: orderStreams, query: `fromCategory('order').foreachStream().when({
      $init: function () { return { paid: 0 }; },
      Paid: function (s, e) { s.paid += e.body.v; emit('summary-' + e.streamId, 'PaidTotal', { total: s.paid }); }
    })` },
  // outputState and other sources
  { name: 'cust_result', results: 'root', query: `fromCategory('cust').when({
      $init: function () { return { n: 0, sum: 0 }; },
      Visited: function (s, e) { s.n += 1; s.sum += e.body.v; }
    }).outputState()` },
  { name: 'streams_count', partitions: visibleStreams, query: `fromAll().foreachStream().when({
      $init: function () { return { n: 0 }; },
      $any: function (s, e) { s.n += 1; }
    })` },
  { name: 'two_categories', results: 'root', query: `fromCategories(['order', 'cust']).when({
      $init: function () { return { order: 0, cust: 0 }; },
      $any: function (s, e) { s[e.streamId.split('-')[0]] += 1; }
    }).outputState()` },
  { name: 'two_streams', results: 'root', query: `fromStreams(['order-0', 'order-1']).when({
      $init: function () { return { n: 0, sum: 0 }; },
      $any: function (s, e) { s.n += 1; s.sum += e.body.v || 0; }
    }).outputState()` },
];

// ---------------------------------------------------------------------------------------------
// what the workload implies

interface PartitionSnap { state: unknown; result?: unknown; resultStream?: unknown }
interface Snap { state: unknown; result?: unknown; resultStream?: unknown; partitions?: Record<string, PartitionSnap> }
/** An event an emitter wrote: type, data (parsed JSON, or the link text) and the source event that caused it. */
interface Emitted { eventType: string; data: unknown; causedBy: string }
/** An event a fromAll() query reads: the source events and the emitted (non-link) ones. */
interface Visible { stream: string; type: string; body: Record<string, unknown> }

function countBy<T>(items: T[], key: (x: T) => string | undefined): Record<string, number> {
  const out: Record<string, number> = {};
  for (const x of items) {
    const k = key(x);
    if (k !== undefined) out[k] = (out[k] ?? 0) + 1;
  }
  return out;
}

/** Per key: the fold of the items with that key (keys without items are absent). */
function foldBy<T, S>(items: T[], key: (x: T) => string | undefined, init: () => S, fold: (s: S, x: T) => void): Record<string, S> {
  const out: Record<string, S> = {};
  for (const x of items) {
    const k = key(x);
    if (k === undefined) continue;
    fold((out[k] ??= init()), x);
  }
  return out;
}

/** The partitions of `keys`, with the folded value or undefined where the query created none. */
function partitionsOf<S>(keys: string[], values: Record<string, S>, result?: (s: S) => unknown): Record<string, PartitionSnap> {
  return Object.fromEntries(keys.map((k) => {
    const v = values[k];
    const snap: PartitionSnap = { state: v };
    if (result) {
      snap.result = v === undefined ? undefined : result(v);
      snap.resultStream = snap.result;
    }
    return [k, snap];
  }));
}

const sumOf = (events: Ev[]) => events.reduce((a, e) => a + (e.body.v ?? 0), 0);

/**
 * The emitted streams, states and results that `events` imply. `placedOrder` and `paidOrder`
 * are the Placed and Paid events in log order (fromAll emitters see them in that order).
 */
function model(events: Ev[], placedOrder: Ev[], paidOrder: Ev[]): { snaps: Record<string, Snap>; emitted: Record<string, Emitted[]> } {
  const placed = events.filter((e) => e.type === 'Placed');
  const paid = events.filter((e) => e.type === 'Paid');
  const visited = events.filter((e) => e.type === 'Visited');
  const orders = events.filter((e) => e.stream.startsWith('order-'));

  // emitted streams
  const emitted: Record<string, Emitted[]> = {};
  const add = (stream: string, e: Emitted) => (emitted[stream] ??= []).push(e);
  for (const r of REGIONS) emitted[`copy-${r}`] = [];
  for (const r of REGIONS) emitted[`paid-${r}`] = [];
  emitted['milestone-all'] = [];
  for (const s of orderStreams) emitted[`summary-${s}`] = [];
  for (const e of placedOrder) add(`copy-${e.body.region}`, { eventType: 'Copied', data: { v: e.body.v, from: e.stream, n: e.seq }, causedBy: e.eventId });
  for (const e of paidOrder) add(`paid-${e.body.region}`, { eventType: '$>', data: `${e.seq}@${e.stream}`, causedBy: e.eventId });
  placedOrder.forEach((e, i) => {
    if ((i + 1) % 10 === 0) add('milestone-all', { eventType: 'Milestone', data: { n: i + 1, v: e.body.v }, causedBy: e.eventId });
  });
  for (const s of orderStreams) {
    let total = 0;
    for (const e of paid.filter((x) => x.stream === s)) {
      total += e.body.v!;
      add(`summary-${s}`, { eventType: 'PaidTotal', data: { total }, causedBy: e.eventId });
    }
  }

  const visible: Visible[] = [
    ...events.map((e) => ({ stream: e.stream, type: e.type, body: e.body as unknown as Record<string, unknown> })),
    ...Object.entries(emitted).filter(([, list]) => list.length > 0 && list[0].eventType !== '$>')
      .flatMap(([stream, list]) => list.map((x) => ({ stream, type: x.eventType, body: x.data as Record<string, unknown> }))),
  ];

  const nSum = (list: Ev[]) => (list.length === 0 ? undefined : { n: list.length, sum: sumOf(list) });
  const nSumBy = (list: Ev[], key: (e: Ev) => string) => foldBy(list, key, () => ({ n: 0, sum: 0 }), (s, e) => { s.n++; s.sum += e.body.v!; });
  const orderAny = foldBy(orders, (e) => e.stream, () => ({ n: 0, last: -1 }), (s, e) => { s.n++; s.last = e.seq; });
  const balances = foldBy(orders.filter((e) => e.type !== 'Shipped'), (e) => e.stream, () => ({ placed: 0, paid: 0 }), (s, e) => {
    if (e.type === 'Placed') s.placed += e.body.v!; else s.paid += e.body.v!;
  });
  const visits = nSum(visited);
  const twoStreams = events.filter((e) => e.stream === 'order-0' || e.stream === 'order-1');
  const byCategory = countBy(events, (e) => e.stream.split('-')[0]);
  const root = (state: unknown, result?: (s: any) => unknown): Snap => {
    const snap: Snap = { state };
    if (result) snap.result = snap.resultStream = state === undefined ? undefined : result(state);
    return snap;
  };
  const same = (s: unknown) => s;

  const snaps: Record<string, Snap> = {
    all_count: root(visible.length === 0 ? undefined : { n: visible.length, types: countBy(visible, (e) => e.type) }),
    all_money: root(placed.length + paid.length === 0 ? undefined
      : { placed: placed.length, paid: paid.length, placedSum: sumOf(placed), paidSum: sumOf(paid) }),
    all_by_category: root(visible.length === 0 ? undefined : countBy(visible, (e) => e.stream.split('-')[0])),
    all_result: root(visits, (s) => ({ visits: s.n, total: s.sum })),
    order_placed_sum: { state: undefined, partitions: partitionsOf(orderStreams, nSumBy(placed, (e) => e.stream)) },
    order_paid_sum: { state: undefined, partitions: partitionsOf(orderStreams, nSumBy(paid, (e) => e.stream)) },
    order_any: { state: undefined, partitions: partitionsOf(orderStreams, orderAny) },
    order_result: { state: undefined, result: undefined, partitions: partitionsOf(orderStreams, balances, (s) => ({ balance: s.placed - s.paid })) },
    region_placed: { state: undefined, partitions: partitionsOf(REGIONS, nSumBy(placed, (e) => e.body.region)) },
    region_paid: { state: undefined, partitions: partitionsOf(REGIONS, nSumBy(paid, (e) => e.body.region)) },
    region_any: { state: undefined, partitions: partitionsOf(REGIONS, foldBy(events, (e) => e.body.region, () => ({ n: 0 }), (s) => { s.n++; })) },
    bucket_result: { state: undefined, result: undefined, partitions: partitionsOf(BUCKETS, nSumBy(placed, (e) => `b${e.body.v! % 4}`), same) },
    emit_copy: root(placed.length === 0 ? undefined : {}),
    emit_links: root(paid.length === 0 ? undefined : {}),
    emit_milestones: root(placed.length === 0 ? undefined : { n: placed.length }),
    emit_summary: { state: undefined, partitions: partitionsOf(orderStreams, foldBy(paid, (e) => e.stream, () => ({ paid: 0 }), (s, e) => { s.paid += e.body.v!; })) },
    cust_result: root(visits, same),
    streams_count: { state: undefined, partitions: partitionsOf(visibleStreams, foldBy(visible, (e) => e.stream, () => ({ n: 0 }), (s) => { s.n++; })) },
    two_categories: root(byCategory.order === undefined && byCategory.cust === undefined ? undefined
      : { order: byCategory.order ?? 0, cust: byCategory.cust ?? 0 }, same),
    two_streams: root(twoStreams.length === 0 ? undefined : { n: twoStreams.length, sum: sumOf(twoStreams) }, same),
  };
  return { snaps, emitted };
}

// ---------------------------------------------------------------------------------------------
// reading the node

async function createProjections(t: TestNode): Promise<void> {
  for (const s of SPECS) {
    const res = await http(t, `/projections/continuous?name=${enc(s.name)}&emit=yes`, {
      method: 'POST', headers: { 'Content-Type': 'application/javascript' }, body: s.query,
    });
    expect(res.status, `${s.name}: ${await res.text()}`).toBe(201);
  }
}

async function appendOk(t: TestNode, stream: string, events: unknown[]): Promise<void> {
  const res = await append(t, stream, events);
  expect(res.status, `append to ${stream}: ${await res.text()}`).toBe(201);
}

/** Parsed JSON of a 200 answer; undefined for an empty body. */
async function getJson(t: TestNode, path: string): Promise<unknown> {
  const res = await http(t, path);
  const text = await res.text();
  expect(res.status, `GET ${path}: ${text}`).toBe(200);
  return text === '' ? undefined : JSON.parse(text);
}

/** The data of the last event of a stream (parsed), undefined when the stream does not exist. */
async function lastData(t: TestNode, stream: string): Promise<unknown> {
  const res = await http(t, `/streams/${enc(stream)}/head/backward/1?embed=body`, { headers: { Accept: ATOM } });
  if (res.status === 404) {
    await res.body?.cancel();
    return undefined;
  }
  expect(res.status, `GET ${stream}`).toBe(200);
  const doc = await res.json();
  return doc.entries.length === 0 ? undefined : JSON.parse(doc.entries[0].data);
}

async function snapshot(t: TestNode): Promise<Record<string, Snap>> {
  const out: Record<string, Snap> = {};
  await Promise.all(SPECS.map(async (s) => {
    const p = `/projection/${enc(s.name)}`;
    const snap: Snap = { state: await getJson(t, `${p}/state`) };
    if (s.results) snap.result = await getJson(t, `${p}/result`);
    if (s.results === 'root') snap.resultStream = await lastData(t, `$projections-${s.name}-result`);
    if (s.partitions) {
      snap.partitions = {};
      for (const partition of s.partitions) {
        const ps: PartitionSnap = { state: await getJson(t, `${p}/state?partition=${enc(partition)}`) };
        if (s.results) {
          ps.result = await getJson(t, `${p}/result?partition=${enc(partition)}`);
          ps.resultStream = await lastData(t, `$projections-${s.name}-${partition}-result`);
        }
        snap.partitions[partition] = ps;
      }
    }
    out[s.name] = snap;
  }));
  return out;
}

interface StoredEvent { eventNumber: number; eventType: string; data: string | null; meta: any }

/**
 * Every event of a stream, oldest first, links not resolved ([] when the stream does not exist).
 * embed=body gives JSON data and the metadata; link texts (not JSON) need embed=tryharder.
 */
async function readAll(t: TestNode, stream: string, embed: 'body' | 'tryharder' = 'body'): Promise<StoredEvent[]> {
  const out: StoredEvent[] = [];
  for (let from = 0; ;) {
    const res = await http(t, `/streams/${enc(stream)}/${from}/forward/4096?embed=${embed}`, {
      headers: { Accept: ATOM, 'SVC-ResolveLinkTos': 'False' },
    });
    if (res.status === 404) {
      await res.body?.cancel();
      return out;
    }
    expect(res.status, `GET ${stream}`).toBe(200);
    const doc = await res.json();
    const page: StoredEvent[] = doc.entries.map((e: any) => ({
      eventNumber: e.eventNumber, eventType: e.eventType, data: e.data ?? null, meta: e.metaData ? JSON.parse(e.metaData) : null,
    }));
    page.sort((a, b) => a.eventNumber - b.eventNumber);
    out.push(...page);
    if (page.length < 4096) return out;
    from = page[page.length - 1].eventNumber + 1;
  }
}

/** An emitted stream as written: numbered without gaps from 0, each event with its $causedBy. */
async function readEmitted(t: TestNode, stream: string): Promise<Emitted[]> {
  const events = await readAll(t, stream, stream.startsWith('paid-') ? 'tryharder' : 'body');
  expect(events.map((e) => e.eventNumber), `${stream} numbering`).toEqual(events.map((_, i) => i));
  return events.map((e) => ({
    eventType: e.eventType,
    data: e.eventType === '$>' ? e.data : JSON.parse(e.data ?? 'null'),
    causedBy: e.meta?.$causedBy,
  }));
}

async function readAllEmitted(t: TestNode, streams: string[]): Promise<Record<string, Emitted[]>> {
  const out: Record<string, Emitted[]> = {};
  for (const s of streams) out[s] = await readEmitted(t, s);
  return out;
}

/** Each source event caused at most one event per emitted stream. */
function expectNoDuplicates(emitted: Record<string, Emitted[]>): void {
  for (const [stream, list] of Object.entries(emitted)) {
    const seen = countBy(list, (e) => e.causedBy);
    const twice = Object.entries(seen).filter(([, n]) => n > 1);
    expect(twice, `${stream}: $causedBy values that occur more than once`).toEqual([]);
  }
}

/**
 * The source events of one type in log order, as $by_event_type linked them into $et-{type}
 * (each exactly once, and each stream's events in stream order).
 */
async function logOrder(t: TestNode, type: string, events: Ev[]): Promise<Ev[]> {
  const byTarget = new Map(events.filter((e) => e.type === type).map((e) => [`${e.seq}@${e.stream}`, e]));
  const links = await readAll(t, `$et-${type}`, 'tryharder');
  const targets = links.map((l) => l.data ?? '');
  expect(targets.filter((x) => !byTarget.has(x)), `$et-${type}: links to events not appended`).toEqual([]);
  expect(targets.length, `$et-${type}: one link per ${type} event`).toBe(byTarget.size);
  expect(new Set(targets).size, `$et-${type}: no duplicate links`).toBe(targets.length);
  const order = targets.map((x) => byTarget.get(x)!);
  for (const s of new Set(order.map((e) => e.stream))) {
    const seqs = order.filter((e) => e.stream === s).map((e) => e.seq);
    expect(seqs, `$et-${type}: ${s} in stream order`).toEqual([...seqs].sort((a, b) => a - b));
  }
  return order;
}

/** Number of events in a stream (last event number + 1), 0 when it does not exist. */
async function streamLength(t: TestNode, stream: string): Promise<number> {
  const res = await http(t, `/streams/${enc(stream)}/head/backward/1?embed=rich`, { headers: { Accept: ATOM } });
  if (res.status === 404) {
    await res.body?.cancel();
    return 0;
  }
  expect(res.status, `GET ${stream}`).toBe(200);
  const doc = await res.json();
  return doc.entries.length === 0 ? 0 : doc.entries[0].eventNumber + 1;
}

interface Listed { name: string; status: string; progress: number; position: string }

async function listing(t: TestNode): Promise<Listed[]> {
  const res = await http(t, '/projections/any');
  expect(res.status).toBe(200);
  return (await res.json()).projections;
}

const ALL_NAMES = [...SPECS.map((s) => s.name), ...SYSTEM].sort();

/** Until every projection is Running with progress 100 (none faulted on the way; fails fast on a fault). */
async function waitCaughtUp(t: TestNode, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const list = await listing(t);
    expect(list.map((p) => p.name).sort()).toEqual(ALL_NAMES);
    const notRunning = list.filter((p) => p.status !== 'Running');
    expect(notRunning.map((p) => `${p.name}: ${p.status} ${(p as any).stateReason ?? ''}`), 'projections not Running').toEqual([]);
    const behind = list.filter((p) => p.progress !== 100);
    if (behind.length === 0) return;
    if (Date.now() > deadline) {
      expect(behind.map((p) => `${p.name}: ${p.progress}% ${p.position}`), 'projections not caught up').toEqual([]);
    }
    await sleep(100);
  }
}

const EMITTED_STREAMS = [
  ...REGIONS.map((r) => `copy-${r}`), ...REGIONS.map((r) => `paid-${r}`), 'milestone-all', ...orderStreams.map((s) => `summary-${s}`),
];

/**
 * Waits until the node shows exactly what `events` imply: every projection Running and caught up,
 * every state, result, result stream and emitted stream as the model says. Returns what it read.
 */
async function expectCaughtUp(t: TestNode, events: Ev[], timeoutMs: number) {
  return eventually(async () => {
    await waitCaughtUp(t, 0);
    const placedOrder = await logOrder(t, 'Placed', events);
    const paidOrder = await logOrder(t, 'Paid', events);
    const expected = model(events, placedOrder, paidOrder);
    const emitted = await readAllEmitted(t, EMITTED_STREAMS);
    expectNoDuplicates(emitted);
    expect(emitted).toEqual(expected.emitted);
    const snaps = await snapshot(t);
    expect(snaps).toEqual(expected.snaps);
    // the category indexes the fromCategory() queries read: each event once
    for (const [category, streams] of [['order', orderStreams], ['cust', custStreams]] as const) {
      const links = (await readAll(t, `$ce-${category}`, 'tryharder')).map((l) => l.data);
      const want = events.filter((e) => (streams as readonly string[]).includes(e.stream)).map((e) => `${e.seq}@${e.stream}`);
      expect([...links].sort(), `$ce-${category}`).toEqual([...want].sort());
    }
    return { snaps, emitted, placedOrder, paidOrder };
  }, timeoutMs);
}

// ---------------------------------------------------------------------------------------------

const nodes: TestNode[] = [];
afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.dispose()));
});

async function node(): Promise<TestNode> {
  const t = await startTestNode({ startStandardProjections: true });
  nodes.push(t);
  return t;
}

describe('projections under load', () => {
  it('20 projections and the system projections stay Running under concurrent writers, the listing keeps answering, and all catch up exactly', async () => {
    const t = await node();
    await createProjections(t);
    await waitCaughtUp(t, 10_000);

    // writers: each owns some streams (so it knows their event numbers), appends 1-3 events per request
    const WRITERS = 6;
    const LOAD_MS = 5000;
    const EVENTS_PER_SECOND_PER_WRITER = 150;
    const appended: Ev[] = [];
    const failures: string[] = [];
    const started = Date.now();
    const deadline = started + LOAD_MS;
    const writer = async (w: number) => {
      const int = prng(1000 + w);
      const mine = [...orderStreams, ...custStreams].filter((_, i) => i % WRITERS === w);
      const next = new Map(mine.map((s) => [s, 0]));
      let sent = 0;
      while (Date.now() < deadline) {
        const stream = mine[int(mine.length)];
        const batch = makeBatch(int, stream);
        try {
          const res = await append(t, stream, wire(batch));
          const text = await res.text();
          if (res.status !== 201) failures.push(`append to ${stream}: ${res.status} ${text}`);
          else {
            for (const e of batch) {
              const seq = next.get(stream)!;
              next.set(stream, seq + 1);
              appended.push({ ...e, seq });
            }
          }
        } catch (err) {
          failures.push(`append to ${stream}: ${(err as Error).message}`);
        }
        sent += batch.length;
        const due = started + (sent / EVENTS_PER_SECOND_PER_WRITER) * 1000;
        if (due > Date.now()) await sleep(due - Date.now());
      }
    };

    // the listing, polled all through the load
    const polls: { status: number; ms: number }[] = [];
    const pollProblems: string[] = [];
    let writing = true;
    const poller = async () => {
      while (writing) {
        const t0 = performance.now();
        try {
          const res = await http(t, '/projections/any');
          const text = await res.text();
          polls.push({ status: res.status, ms: performance.now() - t0 });
          if (res.status !== 200) pollProblems.push(`GET /projections/any answered ${res.status}: ${text}`);
          else {
            const list: Listed[] = JSON.parse(text).projections;
            const names = list.map((p) => p.name).sort();
            if (JSON.stringify(names) !== JSON.stringify(ALL_NAMES)) pollProblems.push(`listed ${names.join(',')}`);
            for (const p of list) if (p.status !== 'Running') pollProblems.push(`${p.name} was ${p.status}: ${(p as any).stateReason}`);
          }
        } catch (err) {
          pollProblems.push(`GET /projections/any failed: ${(err as Error).message}`);
        }
        await sleep(100);
      }
    };

    const polling = poller();
    await Promise.all(Array.from({ length: WRITERS }, (_, w) => writer(w)));
    const loadSeconds = (Date.now() - started) / 1000;
    writing = false;
    await polling;

    expect(failures, 'failed appends').toEqual([]);
    expect(pollProblems, 'listing problems during the load').toEqual([]);
    // the poller really ran through the load (one poll every ~100 ms plus its answer time; not a speed figure)
    expect(polls.length).toBeGreaterThanOrEqual(5);
    // every stream got events, and every event type occurred (the model's partitions are all exercised)
    expect(new Set(appended.map((e) => e.stream)).size).toBe(ORDER_STREAMS + CUST_STREAMS);
    expect(new Set(appended.map((e) => e.type))).toEqual(new Set(['Placed', 'Paid', 'Shipped', 'Visited']));
    const sorted = polls.map((p) => p.ms).sort((a, b) => a - b);
    console.info(`load: ${appended.length} events in ${loadSeconds.toFixed(1)} s (${Math.round(appended.length / loadSeconds)}/s) by ${WRITERS} writers; `
      + `GET /projections/any x${polls.length}, p50 ${sorted[Math.floor(sorted.length / 2)].toFixed(1)} ms, max ${sorted[sorted.length - 1].toFixed(1)} ms`);

    await expectCaughtUp(t, appended, 20_000);
  }, 60_000);

  it('a restart in the middle of a workload ends in the same states, results and emitted streams as no restart, with no duplicate emitted event', async () => {
    // one deterministic workload (same events, same ids, same order) for both nodes
    const int = prng(42);
    const streams = [...orderStreams, ...custStreams];
    const next = new Map(streams.map((s) => [s, 0]));
    const batches: Ev[][] = [];
    const cut = 385;
    for (let i = 0; i < 700; i++) {
      const stream = streams[i < streams.length ? i : int(streams.length)];
      // the last appends before the restart are large, so the projections are busy with them when it comes
      const size = i >= cut - 6 && i < cut ? 60 : undefined;
      batches.push(makeBatch(int, stream, size).map((e) => {
        const seq = next.get(stream)!;
        next.set(stream, seq + 1);
        return { ...e, seq };
      }));
    }
    const events = batches.flat();

    const run = async (restart: boolean) => {
      const t = await node();
      await createProjections(t);
      await waitCaughtUp(t, 10_000);
      let restarting: Promise<void> | undefined;
      const failedDuringRestart: string[] = [];
      /** Appends one batch; only while the node restarts may an attempt fail (then it is retried unless it landed). */
      const appendBatch = async (batch: Ev[]) => {
        const stream = batch[0].stream;
        for (let attempt = 1; ; attempt++) {
          let outcome: string;
          try {
            const res = await append(t, stream, wire(batch));
            const text = await res.text();
            if (res.status === 201) return;
            outcome = `${res.status} ${text}`;
          } catch (err) {
            outcome = (err as Error).message;
          }
          if (!restarting || attempt > 3) throw new Error(`append to ${stream} failed: ${outcome}`);
          failedDuringRestart.push(outcome);
          await restarting;
          // Did the failed attempt land after all? This writer is the stream's only one.
          const length = await streamLength(t, stream);
          if (length === batch[batch.length - 1].seq + 1) return;
          expect(length, `${stream} after a failed append (${outcome})`).toBe(batch[0].seq);
        }
      };
      for (const batch of batches.slice(0, cut)) await appendBatch(batch);
      // The restart starts at once (the projections are still busy with the last, large appends)
      // and the writer goes on with the rest meanwhile.
      if (restart) restarting = t.restart();
      for (const batch of batches.slice(cut)) await appendBatch(batch);
      await restarting;
      const seen = await expectCaughtUp(t, events, 20_000);
      return { t, failedDuringRestart, ...seen };
    };

    const [restarted, straight] = await Promise.all([run(true), run(false)]);
    console.info(`restart: ${events.length} events (${cut} of ${batches.length} appends before the restart began); `
      + `append attempts that failed during the restart and were retried: ${JSON.stringify(restarted.failedDuringRestart)}`);
    expect(straight.failedDuringRestart).toEqual([]);

    // sequential appends: the log order is the workload's on both nodes
    const inOrder = (type: string) => events.filter((e) => e.type === type).map((e) => e.eventId);
    expect(restarted.placedOrder.map((e) => e.eventId)).toEqual(inOrder('Placed'));
    expect(straight.placedOrder.map((e) => e.eventId)).toEqual(inOrder('Placed'));
    expect(restarted.paidOrder.map((e) => e.eventId)).toEqual(inOrder('Paid'));

    // the restarted node equals the one that ran straight through
    expect(restarted.snaps).toEqual(straight.snaps);
    expect(restarted.emitted).toEqual(straight.emitted);
    // and every emitted stream holds each source event's consequence exactly once
    const sources = new Set(events.map((e) => e.eventId));
    for (const [stream, list] of Object.entries(restarted.emitted)) {
      expect(list.filter((e) => !sources.has(e.causedBy)), `${stream}: $causedBy not a source event`).toEqual([]);
    }
    expect(restarted.emitted['copy-r0'].length + restarted.emitted['copy-r1'].length + restarted.emitted['copy-r2'].length
      + restarted.emitted['copy-r3'].length + restarted.emitted['copy-r4'].length).toBe(inOrder('Placed').length);
    // after the restart each projection only processed what was left, not the whole log again
    const after = await listing(restarted.t);
    const all = (await listing(straight.t));
    for (const p of after.filter((x) => !SYSTEM.includes(x.name))) {
      const full = all.find((x) => x.name === p.name) as any;
      expect((p as any).eventsProcessedAfterRestart, p.name).toBeLessThan(full.eventsProcessedAfterRestart);
    }
  }, 90_000);
});
