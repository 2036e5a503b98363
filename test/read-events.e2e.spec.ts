import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN, append, basic, EVENTS_JSON, eventually, http, newEvent, OPS, readFeed, startTestNode, type TestNode, uniq,
} from './support/node.js';

// POST /projections/read-events end to end (projections.md §17 and §9, http-wire.md §8.4): the
// debugger feed that reads what a query definition would read, from a checkpoint tag, at most
// maxEvents matching events at a time. Every source kind (allStreams, streams[], categories[]),
// the event-type filter, paging on through readerPosition, $s positions, the fields left out when
// empty / false, JSON and non-JSON payloads, links resolved for stream and category sources
// (with linkMetadata), $includeLinks for fromAll, content validation, and every error answer.

const READ_EVENTS = '/projections/read-events';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const enc = encodeURIComponent;

interface Position { $c: number; $p: number }
interface ReadEvent {
  eventStreamId: string; eventNumber?: number; eventType: string; data: unknown;
  metadata?: unknown; linkMetadata?: unknown; isJson?: boolean; readerPosition: Position;
}
interface Page { correlationId: string; readerPosition: Position; events: ReadEvent[] }

function post(t: TestNode, body: unknown, opts: { authorization?: string; raw?: boolean } = {}): Promise<Response> {
  return http(t, READ_EVENTS, {
    method: 'POST', authorization: opts.authorization, headers: { 'Content-Type': 'application/json' },
    body: opts.raw ? (body as string) : JSON.stringify(body),
  });
}

function expectPosition(p: unknown, what: string): asserts p is Position {
  expect(p, what).toBeTypeOf('object');
  expect(Object.keys(p as object).sort(), what).toEqual(['$c', '$p']);
  const { $c, $p } = p as Position;
  expect(Number.isSafeInteger($c) && $c >= 0, `${what}.$c = ${$c}`).toBe(true);
  expect(Number.isSafeInteger($p) && $p >= 0, `${what}.$p = ${$p}`).toBe(true);
}

/** A 200 answer, checked for the documented envelope; returns the page. */
async function read(t: TestNode, body: unknown, authorization?: string): Promise<Page> {
  const res = await post(t, body, { authorization });
  const text = await res.text();
  expect(res.status, text).toBe(200);
  expect(res.headers.get('content-type') ?? '').toMatch(/^application\/json/);
  const page = JSON.parse(text) as Page;
  expect(Object.keys(page).sort()).toEqual(['correlationId', 'events', 'readerPosition']);
  expect(page.correlationId).toMatch(UUID);
  expectPosition(page.readerPosition, 'readerPosition');
  expect(Array.isArray(page.events)).toBe(true);
  page.events.forEach((e, i) => expectPosition(e.readerPosition, `events[${i}].readerPosition`));
  return page;
}

/** The event number; event number 0 may be left out as a default value (projections.md §17). */
const num = (e: ReadEvent): number => e.eventNumber ?? 0;
/** stream#number:type, to compare sequences at a glance. */
const sig = (e: ReadEvent): string => `${e.eventStreamId}#${num(e)}:${e.eventType}`;
const sigs = (events: ReadEvent[]): string[] => events.map(sig);

function keysOf(e: ReadEvent, withEventNumber = true): string[] {
  return Object.keys(e).filter((k) => withEventNumber || k !== 'eventNumber').sort();
}

async function appendOk(t: TestNode, stream: string, events: unknown[]): Promise<void> {
  const res = await append(t, stream, events);
  expect(res.status, `append to ${stream}: ${await res.clone().text()}`).toBe(201);
}

async function setMetadata(t: TestNode, stream: string, doc: unknown): Promise<void> {
  const res = await http(t, `/streams/${enc(stream)}/metadata`, {
    method: 'POST', headers: { 'Content-Type': EVENTS_JSON }, body: JSON.stringify([newEvent('$metadata', doc)]),
  });
  expect(res.status, `metadata of ${stream}`).toBe(201);
}

const link = (target: string, metadata?: unknown) => newEvent('$>', target, metadata);

/**
 * Reads the whole query page by page (maxEvents `max`), checking that every full page ends at its
 * last event's readerPosition and that positions only move forward; stops at the first empty page.
 */
async function readAllPages(t: TestNode, query: unknown, max: number, position?: unknown): Promise<{ pages: number[]; events: ReadEvent[]; end: Position }> {
  const pages: number[] = [];
  const events: ReadEvent[] = [];
  let at = position;
  for (let guard = 0; guard < 100; guard++) {
    const page = await read(t, { query, ...(at === undefined ? {} : { position: at }), maxEvents: max });
    pages.push(page.events.length);
    expect(page.events.length).toBeLessThanOrEqual(max);
    if (at !== undefined) expect(page.readerPosition.$c).toBeGreaterThanOrEqual((at as Position).$c);
    if (page.events.length === max) expect(page.readerPosition).toEqual(page.events[max - 1].readerPosition);
    events.push(...page.events);
    if (page.events.length === 0) return { pages, events, end: page.readerPosition };
    at = page.readerPosition;
  }
  throw new Error('paging did not end');
}

/** The readerPosition at the end of the log (a fromAll read that consumed everything). */
async function endOfLog(t: TestNode): Promise<Position> {
  let at: Position | undefined;
  for (;;) {
    const page = await read(t, { query: { allStreams: true }, ...(at ? { position: at } : {}), maxEvents: 4096 });
    at = page.readerPosition;
    if (page.events.length < 4096) return at;
  }
}

// ---------------------------------------------------------------------------------------------

describe('POST /projections/read-events', () => {
  let t: TestNode;
  beforeAll(async () => { t = await startTestNode(); });
  afterAll(async () => { await t?.dispose(); });

  describe('streams[] source', () => {
    it('reads one stream in order with the documented fields; other streams are not read', async () => {
      const s = uniq('re-one');
      const other = uniq('re-other');
      await appendOk(t, s, [newEvent('A', { n: 0 })]);
      await appendOk(t, other, [newEvent('X', { x: 1 })]);
      await appendOk(t, s, [newEvent('B', { n: 1 }, { m: 'b' })]);
      await appendOk(t, other, [newEvent('X', { x: 2 })]);
      await appendOk(t, s, [newEvent('C', { n: 2 })]);

      const page = await read(t, { query: { streams: [s] } });
      expect(sigs(page.events)).toEqual([`${s}#0:A`, `${s}#1:B`, `${s}#2:C`]);
      const [e0, e1, e2] = page.events;
      expect(e0).toMatchObject({ eventStreamId: s, eventType: 'A', data: { n: 0 }, isJson: true });
      expect(keysOf(e0, false)).toEqual(['data', 'eventStreamId', 'eventType', 'isJson', 'readerPosition']);
      expect(e1).toEqual({ eventStreamId: s, eventNumber: 1, eventType: 'B', data: { n: 1 }, metadata: { m: 'b' }, isJson: true, readerPosition: e1.readerPosition });
      expect(keysOf(e1)).toEqual(['data', 'eventNumber', 'eventStreamId', 'eventType', 'isJson', 'metadata', 'readerPosition']);
      // no metadata -> no metadata field; not read through a link -> no linkMetadata field
      expect(keysOf(e2)).toEqual(['data', 'eventNumber', 'eventStreamId', 'eventType', 'isJson', 'readerPosition']);
      expect(e2).toMatchObject({ eventNumber: 2, data: { n: 2 } });

      // reader positions move forward event by event; the page ends at or after the last one
      expect(e0.readerPosition.$c).toBeLessThan(e1.readerPosition.$c);
      expect(e1.readerPosition.$c).toBeLessThan(e2.readerPosition.$c);
      expect(page.readerPosition.$c).toBeGreaterThanOrEqual(e2.readerPosition.$c);

      // every request is its own reader: a fresh correlation id each time
      const again = await read(t, { query: { streams: [s] } });
      expect(sigs(again.events)).toEqual(sigs(page.events));
      expect(again.correlationId).not.toBe(page.correlationId);
    });

    it('leaves out eventNumber 0 like the other default values (false, 0) (projections.md §17)', async () => {
      const s = uniq('re-zero');
      await appendOk(t, s, [newEvent('A', { n: 0 }), newEvent('B', { n: 1 })]);
      const [e0, e1] = (await read(t, { query: { streams: [s] } })).events;
      expect(e0.eventType).toBe('A');
      expect('eventNumber' in e0, JSON.stringify(e0)).toBe(false);
      expect(e1.eventNumber).toBe(1);
    });

    it('merges several streams in log order (not the order listed); a missing stream among them is ignored', async () => {
      const a = uniq('re-a');
      const b = uniq('re-b');
      const missing = uniq('re-missing');
      await appendOk(t, a, [newEvent('A0')]);
      await appendOk(t, b, [newEvent('B0')]);
      await appendOk(t, b, [newEvent('B1')]);
      await appendOk(t, a, [newEvent('A1')]);
      const page = await read(t, { query: { streams: [b, missing, a] } });
      expect(sigs(page.events)).toEqual([`${a}#0:A0`, `${b}#0:B0`, `${b}#1:B1`, `${a}#1:A1`]);
    });

    it('resolves links: the target event is read, with the link\'s metadata as linkMetadata; dangling links are skipped', async () => {
      const x = uniq('re-target');
      const l = uniq('re-links');
      await appendOk(t, x, [newEvent('T0', { v: 0 }), newEvent('T1', { v: 1 }, { tm: 1 })]);
      await appendOk(t, l, [
        link(`0@${x}`, { via: 'L' }),
        link(`1@${x}`),
        link(`9@${x}`, { via: 'dangling' }),
        newEvent('P', { p: 1 }),
      ]);
      const page = await read(t, { query: { streams: [l] } });
      expect(sigs(page.events)).toEqual([`${x}#0:T0`, `${x}#1:T1`, `${l}#3:P`]);
      const [r0, r1, p] = page.events;
      expect(r0).toMatchObject({ eventStreamId: x, eventType: 'T0', data: { v: 0 }, linkMetadata: { via: 'L' }, isJson: true });
      expect(keysOf(r0, false)).toEqual(['data', 'eventStreamId', 'eventType', 'isJson', 'linkMetadata', 'readerPosition']);
      // the event's own metadata stays metadata; a link without metadata gives no linkMetadata
      expect(r1).toEqual({ eventStreamId: x, eventNumber: 1, eventType: 'T1', data: { v: 1 }, metadata: { tm: 1 }, isJson: true, readerPosition: r1.readerPosition });
      expect(keysOf(p)).toEqual(['data', 'eventNumber', 'eventStreamId', 'eventType', 'isJson', 'readerPosition']);

      // the type filter applies to the resolved event, not to the link ($>)
      expect(sigs((await read(t, { query: { streams: [l], events: ['T1'] } })).events)).toEqual([`${x}#1:T1`]);
      expect((await read(t, { query: { streams: [l], events: ['$>'] } })).events).toEqual([]);
      // $s counts in the stream that is read (the link stream), not in the target
      expect(sigs((await read(t, { query: { streams: [l] }, position: { $s: { [l]: 0 } } })).events)).toEqual([`${x}#1:T1`, `${l}#3:P`]);
    });

    it('honours the stream\'s truncation ($tb) like a stream read does', async () => {
      const s = uniq('re-tb');
      await appendOk(t, s, [newEvent('A'), newEvent('B'), newEvent('C')]);
      await setMetadata(t, s, { $tb: 2 });
      const feed = await readFeed(t, `/streams/${enc(s)}`);
      expect(feed.entries.map((e: { summary: string }) => e.summary)).toEqual(['C']);
      expect(sigs((await read(t, { query: { streams: [s] } })).events)).toEqual([`${s}#2:C`]);
    });
  });

  describe('event-type filter', () => {
    it('reads only the listed types; maxEvents counts matching events only', async () => {
      const s = uniq('re-types');
      await appendOk(t, s, ['A', 'B', 'C', 'A', 'B', 'C'].map((type, i) => newEvent(type, { i })));
      const query = { streams: [s], events: ['A', 'C'] };
      expect(sigs((await read(t, { query })).events)).toEqual([`${s}#0:A`, `${s}#2:C`, `${s}#3:A`, `${s}#5:C`]);

      const first = await read(t, { query, maxEvents: 3 });
      expect(sigs(first.events)).toEqual([`${s}#0:A`, `${s}#2:C`, `${s}#3:A`]);
      expect(first.readerPosition).toEqual(first.events[2].readerPosition);
      const second = await read(t, { query, position: first.readerPosition, maxEvents: 3 });
      expect(sigs(second.events)).toEqual([`${s}#5:C`]);

      // reading on from any event's readerPosition starts at the next matching event
      const all = (await read(t, { query })).events;
      for (let i = 0; i < all.length; i++) {
        const next = await read(t, { query, position: all[i].readerPosition, maxEvents: 1 });
        expect(sigs(next.events), `after ${sig(all[i])}`).toEqual(i + 1 < all.length ? [sig(all[i + 1])] : []);
      }
    });

    it('events omitted, empty, or allEvents: true read every type; an absent type reads nothing', async () => {
      const s = uniq('re-alltypes');
      await appendOk(t, s, [newEvent('A'), newEvent('B'), newEvent('C')]);
      const every = [`${s}#0:A`, `${s}#1:B`, `${s}#2:C`];
      expect(sigs((await read(t, { query: { streams: [s] } })).events)).toEqual(every);
      expect(sigs((await read(t, { query: { streams: [s], events: [] } })).events)).toEqual(every);
      expect(sigs((await read(t, { query: { streams: [s], allEvents: true } })).events)).toEqual(every);
      expect(sigs((await read(t, { query: { streams: [s], allEvents: true, events: [] } })).events)).toEqual(every);
      expect((await read(t, { query: { streams: [s], events: ['Nope'] } })).events).toEqual([]);
    });

    it('allEvents: true together with named events is rejected (projections.md §8)', async () => {
      const s = uniq('re-both');
      await appendOk(t, s, [newEvent('A'), newEvent('B')]);
      const res = await post(t, { query: { streams: [s], allEvents: true, events: ['A'] } });
      const text = await res.text();
      expect(res.status, text).toBe(400);
      expect(text).toBe('Both AllEvents and specific event filters cannot be set');
    });
  });

  describe('maxEvents and paging', () => {
    it('maxEvents defaults to 10 (also when null); 1 and 4096 are accepted', async () => {
      const s = uniq('re-default');
      await appendOk(t, s, Array.from({ length: 12 }, (_, i) => newEvent('E', { i })));
      const numbers = (p: Page) => p.events.map(num);
      const page = await read(t, { query: { streams: [s] } });
      expect(numbers(page)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
      expect(page.readerPosition).toEqual(page.events[9].readerPosition);
      expect(numbers(await read(t, { query: { streams: [s] }, maxEvents: null }))).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
      const rest = await read(t, { query: { streams: [s] }, position: page.readerPosition });
      expect(numbers(rest)).toEqual([10, 11]);
      expect(numbers(await read(t, { query: { streams: [s] }, maxEvents: 1 }))).toEqual([0]);
      expect(numbers(await read(t, { query: { streams: [s] }, maxEvents: 4096 }))).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
    });

    it('reading on from readerPosition continues without repeats or gaps', async () => {
      const s = uniq('re-pages');
      const noise = uniq('re-noise');
      for (let i = 0; i < 7; i++) {
        await appendOk(t, s, [newEvent('E', { i })]);
        await appendOk(t, noise, [newEvent('N', { i })]);
      }
      const { pages, events, end } = await readAllPages(t, { streams: [s] }, 3);
      expect(pages).toEqual([3, 3, 1, 0]);
      expect(events.map(num)).toEqual([0, 1, 2, 3, 4, 5, 6]);
      expect(events.every((e) => e.eventStreamId === s)).toBe(true);
      // positions strictly increase across pages
      for (let i = 1; i < events.length; i++) expect(events[i].readerPosition.$c).toBeGreaterThan(events[i - 1].readerPosition.$c);
      // reading from the end reads nothing and does not move backwards
      const after = await read(t, { query: { streams: [s] }, position: end });
      expect(after.events).toEqual([]);
      expect(after.readerPosition.$c).toBeGreaterThanOrEqual(end.$c);
      // every event's own readerPosition leads to the next event
      for (let i = 0; i < events.length; i++) {
        const next = await read(t, { query: { streams: [s] }, position: events[i].readerPosition, maxEvents: 1 });
        expect(next.events.map(num), `after #${i}`).toEqual(i + 1 < events.length ? [i + 1] : []);
      }
    });

    it('pages on through more log than one internal read (1,100 events)', async () => {
      const s = uniq('re-big');
      await appendOk(t, s, Array.from({ length: 1100 }, (_, i) => newEvent('E', { i })));
      const whole = await read(t, { query: { streams: [s] }, maxEvents: 4096 });
      expect(whole.events.map(num)).toEqual(Array.from({ length: 1100 }, (_, i) => i));
      expect(whole.events[1099].data).toEqual({ i: 1099 });
      const { pages, events } = await readAllPages(t, { streams: [s] }, 1000);
      expect(pages).toEqual([1000, 100, 0]);
      expect(events.map(num)).toEqual(Array.from({ length: 1100 }, (_, i) => i));
    });
  });

  describe('$s positions', () => {
    it('{$s: {stream: n}} reads on after event number n of that stream', async () => {
      const s = uniq('re-s');
      const o = uniq('re-s-other');
      await appendOk(t, s, Array.from({ length: 5 }, (_, i) => newEvent('E', { i })));
      await appendOk(t, o, [newEvent('O'), newEvent('O'), newEvent('O')]);
      const from = async (position: unknown, streams = [s]) => sigs((await read(t, { query: { streams }, position })).events);
      expect(await from({ $s: { [s]: 2 } })).toEqual([`${s}#3:E`, `${s}#4:E`]);
      expect(await from({ $s: { [s]: -1 } })).toEqual([0, 1, 2, 3, 4].map((n) => `${s}#${n}:E`));
      expect(await from({ $s: { [s]: 4 } })).toEqual([]);
      // a stream the query does not read makes no difference
      expect(await from({ $s: { [o]: 100 } })).toEqual([0, 1, 2, 3, 4].map((n) => `${s}#${n}:E`));
      // several streams: each one resumes after its own number; unlisted streams from the start
      expect(await from({ $s: { [s]: 3, [o]: 0 } }, [s, o])).toEqual([`${s}#4:E`, `${o}#1:O`, `${o}#2:O`]);
      expect(await from({ $s: { [o]: 1 } }, [s, o])).toEqual([...[0, 1, 2, 3, 4].map((n) => `${s}#${n}:E`), `${o}#2:O`]);
    });
  });

  describe('payloads', () => {
    it('JSON data and metadata are embedded as JSON, anything else as text; isJson is left out when false', async () => {
      const s = uniq('re-payloads');
      await appendOk(t, s, [
        newEvent('Json', { a: { b: [1, 2] }, s: 'x' }, { m: true }),
        newEvent('Text', 'hello, world', 'a note'),
        newEvent('Empty', {}),
      ]);
      const raw = await http(t, `/streams/${enc(s)}`, {
        method: 'POST', body: 'raw bytes',
        headers: { 'Content-Type': 'application/octet-stream', 'ES-EventType': 'Blob', 'ES-EventId': randomUUID() },
      });
      expect(raw.status, await raw.text()).toBe(201);
      const jsonText = await http(t, `/streams/${enc(s)}`, {
        method: 'POST', body: '{"k":"v"}',
        headers: { 'Content-Type': 'application/json', 'ES-EventType': 'JsonBody', 'ES-EventId': randomUUID() },
      });
      expect(jsonText.status, await jsonText.text()).toBe(201);
      // raw bytes that happen to be JSON text: still not a JSON event, so still text
      const looksJson = await http(t, `/streams/${enc(s)}`, {
        method: 'POST', body: '{"looks":"json"}',
        headers: { 'Content-Type': 'application/octet-stream', 'ES-EventType': 'BlobJsonText', 'ES-EventId': randomUUID() },
      });
      expect(looksJson.status, await looksJson.text()).toBe(201);

      const [json, text, empty, blob, single, blobJsonText] = (await read(t, { query: { streams: [s] } })).events;
      expect(json).toMatchObject({ eventType: 'Json', data: { a: { b: [1, 2] }, s: 'x' }, metadata: { m: true }, isJson: true });
      expect(text).toEqual({ eventStreamId: s, eventNumber: 1, eventType: 'Text', data: 'hello, world', metadata: 'a note', readerPosition: text.readerPosition });
      expect(keysOf(text)).toEqual(['data', 'eventNumber', 'eventStreamId', 'eventType', 'metadata', 'readerPosition']);
      expect(empty).toEqual({ eventStreamId: s, eventNumber: 2, eventType: 'Empty', data: {}, isJson: true, readerPosition: empty.readerPosition });
      expect(blob).toEqual({ eventStreamId: s, eventNumber: 3, eventType: 'Blob', data: 'raw bytes', readerPosition: blob.readerPosition });
      expect(keysOf(blob)).toEqual(['data', 'eventNumber', 'eventStreamId', 'eventType', 'readerPosition']);
      expect(single).toEqual({ eventStreamId: s, eventNumber: 4, eventType: 'JsonBody', data: { k: 'v' }, isJson: true, readerPosition: single.readerPosition });
      expect(blobJsonText).toEqual({ eventStreamId: s, eventNumber: 5, eventType: 'BlobJsonText', data: '{"looks":"json"}', readerPosition: blobJsonText.readerPosition });
    });

    it('content validation: an event flagged JSON whose data is not JSON is not read', async () => {
      const s = uniq('re-invalid');
      await appendOk(t, s, [
        newEvent('TextWithJsonMeta', 'not json at all', { m: 1 }),
        { eventId: randomUUID(), eventType: 'NoData', metadata: { m: 2 } },
        newEvent('Good', { ok: 1 }),
      ]);
      // precondition: both bad events are stored flagged JSON (their metadata is JSON)
      const feed = await readFeed(t, `/streams/${enc(s)}?embed=body`);
      const flags = Object.fromEntries(feed.entries.map((e: { eventType: string; isJson: boolean }) => [e.eventType, e.isJson]));
      expect(flags).toEqual({ TextWithJsonMeta: true, NoData: true, Good: true });

      const page = await read(t, { query: { streams: [s] } });
      expect(sigs(page.events)).toEqual([`${s}#2:Good`]);
    });
  });

  describe('allStreams (fromAll) source', () => {
    it('reads user events and metadata streams of user streams; skips $-streams and links unless $includeLinks', async () => {
      const start = await endOfLog(t);
      const x = uniq('re-all');
      const l = uniq('re-all-links');
      const sys = `$${uniq('re-sys')}`;
      await appendOk(t, x, [newEvent('U0', { u: 0 })]);
      await appendOk(t, sys, [newEvent('S0', { s: 0 })]);
      await setMetadata(t, x, { $maxCount: 100 });
      await setMetadata(t, sys, { $maxCount: 100 });
      await appendOk(t, l, [link(`0@${x}`)]);
      await appendOk(t, x, [newEvent('U1', 'plain text')]);

      const page = await read(t, { query: { allStreams: true }, position: start, maxEvents: 100 });
      expect(sigs(page.events)).toEqual([`${x}#0:U0`, `$$${x}#0:$metadata`, `${x}#1:U1`]);
      const [u0, meta, u1] = page.events;
      expect(u0).toMatchObject({ eventStreamId: x, data: { u: 0 }, isJson: true });
      expect(meta).toMatchObject({ eventStreamId: `$$${x}`, eventType: '$metadata', data: { $maxCount: 100 }, isJson: true });
      expect(u1).toEqual({ eventStreamId: x, eventNumber: 1, eventType: 'U1', data: 'plain text', readerPosition: u1.readerPosition });

      // with $includeLinks the link itself is read, unresolved
      const withLinks = await read(t, { query: { allStreams: true, options: { $includeLinks: true } }, position: start, maxEvents: 100 });
      expect(sigs(withLinks.events)).toEqual([`${x}#0:U0`, `$$${x}#0:$metadata`, `${l}#0:$>`, `${x}#1:U1`]);
      const lnk = withLinks.events[2];
      expect(lnk.data).toBe(`0@${x}`);
      expect(keysOf(lnk, false)).toEqual(['data', 'eventStreamId', 'eventType', 'readerPosition']);

      // the type filter, and paging through the whole tail one event at a time
      expect(sigs((await read(t, { query: { allStreams: true, events: ['U1', 'S0'] }, position: start })).events)).toEqual([`${x}#1:U1`]);
      const { pages, events } = await readAllPages(t, { allStreams: true }, 1, start);
      expect(pages).toEqual([1, 1, 1, 0]);
      expect(sigs(events)).toEqual(sigs(page.events));
    });

    it('reads the whole log from the start when no position is given', async () => {
      const x = uniq('re-all-start');
      await appendOk(t, x, [newEvent('First', { f: 1 })]);
      const { events } = await readAllPages(t, { allStreams: true }, 4096);
      const mine = events.filter((e) => e.eventStreamId === x);
      expect(sigs(mine)).toEqual([`${x}#0:First`]);
      expect(events.some((e) => e.eventStreamId.startsWith('$') && !e.eventStreamId.startsWith('$$'))).toBe(false);
      expect(events.some((e) => e.eventStreamId.startsWith('$$$'))).toBe(false);
      expect(events.some((e) => e.eventType === '$>')).toBe(false);
    });
  });

  describe('errors', () => {
    let s: string;
    beforeAll(async () => {
      s = uniq('re-errors');
      await appendOk(t, s, [newEvent('E')]);
    });

    async function expectStatus(res: Response, status: number, body?: string): Promise<void> {
      const text = await res.text();
      expect(res.status, text).toBe(status);
      if (body !== undefined) expect(text).toBe(body);
    }

    it('a body that is not JSON is 400', async () => {
      for (const body of ['not json', '{"query": {"streams": [', '']) {
        const res = await post(t, body, { raw: true });
        expect(res.status, JSON.stringify(body)).toBe(400);
      }
    });

    it('a body or a query that is not an object is 400', async () => {
      const bodies: unknown[] = [
        null, [], 'text', 5, true,
        {}, { position: {} }, { query: null }, { query: 'fromAll()' }, { query: [] }, { query: 5 }, { query: true },
      ];
      for (const body of bodies) {
        const res = await post(t, body);
        expect(res.status, JSON.stringify(body)).toBe(400);
      }
    });

    it('illegal source combinations are 400 with the reason (projections.md §8)', async () => {
      const cases: [unknown, string][] = [
        [{}, 'None of streams and categories are included'],
        [{ streams: [] }, 'None of streams and categories are included'],
        [{ allStreams: false, streams: [], categories: [] }, 'None of streams and categories are included'],
        [{ allStreams: true, streams: [s] }, 'Both FromAll and specific categories/streams cannot be set'],
        [{ allStreams: true, categories: ['c'] }, 'Both FromAll and specific categories/streams cannot be set'],
        [{ streams: [s], categories: ['c'] }, 'Streams and categories cannot be included in a filter at the same time'],
      ];
      for (const [query, reason] of cases) {
        const res = await post(t, { query });
        const text = await res.text();
        expect(res.status, `${JSON.stringify(query)}: ${text}`).toBe(400);
        expect(text, JSON.stringify(query)).toBe(reason);
        expect(res.headers.get('content-type') ?? '').toMatch(/^text\/plain/);
      }
    });

    it('malformed stream, category and event lists are 400', async () => {
      const queries: unknown[] = [
        { streams: s }, { streams: [1] }, { streams: [s, null] }, { categories: 'c' }, { categories: [{}] },
        { streams: [s], events: 'E' }, { streams: [s], events: [1] },
      ];
      for (const query of queries) {
        const res = await post(t, { query });
        expect(res.status, JSON.stringify(query)).toBe(400);
      }
    });

    it('maxEvents outside 1..4096 or not an integer is 400', async () => {
      for (const maxEvents of [0, -1, 4097, 2.5, '5', true, {}, []]) {
        const res = await post(t, { query: { streams: [s] }, maxEvents });
        const text = await res.text();
        expect(res.status, `${JSON.stringify(maxEvents)}: ${text}`).toBe(400);
      }
    });

    it('a malformed position is 400', async () => {
      const positions: unknown[] = [
        'abc', 5, [], { $c: -1 }, { $c: 'x' }, { $c: 1.5 },
        { $s: 'x' }, { $s: null }, { $s: 5 }, { $s: { [s]: '1' } }, { $s: { [s]: 1.5 } }, { $s: { [s]: null } },
      ];
      for (const position of positions) {
        const res = await post(t, { query: { streams: [s] }, position });
        const text = await res.text();
        expect(res.status, `${JSON.stringify(position)}: ${text}`).toBe(400);
      }
    });

    it('404 when every named stream (or category) is missing', async () => {
      const m1 = uniq('re-nothere');
      const m2 = uniq('re-nothere');
      await expectStatus(await post(t, { query: { streams: [m1] } }), 404);
      await expectStatus(await post(t, { query: { streams: [m1, m2] } }), 404);
      // no $by_category on this node: no $ce- stream for any category
      await expectStatus(await post(t, { query: { categories: ['renocat'] } }), 404);
      await expectStatus(await post(t, { query: { categories: ['renocat', 'renocat2'] } }), 404);
      // but one existing stream is enough
      expect(sigs((await read(t, { query: { streams: [m1, s] } })).events)).toEqual([`${s}#0:E`]);
    });

    it('401 for anonymous requests and bad credentials, whatever the body', async () => {
      for (const authorization of ['', basic('admin', 'wrong'), basic('nobody', 'changeit')]) {
        await expectStatus(await post(t, { query: { streams: [s] } }, { authorization }), 401);
        await expectStatus(await post(t, 'not json', { authorization, raw: true }), 401);
      }
    });

    describe('read access', () => {
      let closed: string;
      let sys: string;
      beforeAll(async () => {
        closed = uniq('re-closed');
        sys = `$${uniq('re-sysacl')}`;
        await appendOk(t, closed, [newEvent('Secret', { s: 1 })]);
        await setMetadata(t, closed, { $acl: { $r: '$admins' } });
        await appendOk(t, sys, [newEvent('Sys')]);
      });

      it('ops may read a user stream but not $all, an admins-only stream or a $-stream', async () => {
        const mine = await read(t, { query: { streams: [s] } }, OPS);
        expect(sigs(mine.events)).toEqual([`${s}#0:E`]);
        await expectStatus(await post(t, { query: { allStreams: true } }, { authorization: OPS }), 401);
        await expectStatus(await post(t, { query: { streams: [closed] } }, { authorization: OPS }), 401);
        await expectStatus(await post(t, { query: { streams: [s, closed] } }, { authorization: OPS }), 401);
        await expectStatus(await post(t, { query: { streams: [sys] } }, { authorization: OPS }), 401);
        // admins read them all
        expect(sigs((await read(t, { query: { streams: [closed] } }, ADMIN)).events)).toEqual([`${closed}#0:Secret`]);
        expect(sigs((await read(t, { query: { streams: [sys] } }, ADMIN)).events)).toEqual([`${sys}#0:Sys`]);
      });

      it('the access check cannot be sidestepped by spelling the members in another case', async () => {
        // the request members are matched case-insensitively; the access check must read the same members
        const attempts: unknown[] = [
          { query: { AllStreams: true } },
          { Query: { allStreams: true } },
          { query: { Streams: [closed] } },
          { Query: { streams: [closed] } },
        ];
        for (const body of attempts) {
          const res = await post(t, body, { authorization: OPS });
          const text = await res.text();
          expect(res.status, `${JSON.stringify(body)} as ops: ${text.slice(0, 200)}`).toBe(401);
          expect(text).not.toContain('Secret');
        }
      });
    });
  });
});

// ---------------------------------------------------------------------------------------------

describe('POST /projections/read-events over categories ($by_category running)', () => {
  let t: TestNode;
  const cat = `recat${randomUUID().slice(0, 8)}`;
  const cat2 = `recattwo${randomUUID().slice(0, 8)}`;
  let start: Position;

  beforeAll(async () => {
    t = await startTestNode({ startStandardProjections: true });
    start = await endOfLog(t);
    await appendOk(t, `${cat}-1`, [newEvent('A', { i: 0 })]);
    await appendOk(t, `${cat}-2`, [newEvent('B', { i: 1 })]);
    await appendOk(t, `${cat2}-1`, [newEvent('A', { i: 2 })]);
    await appendOk(t, `${cat}-1`, [newEvent('C', { i: 3 }, { m: 3 })]);
    await eventually(async () => {
      expect((await read(t, { query: { categories: [cat] } })).events).toHaveLength(3);
      expect((await read(t, { query: { categories: [cat2] } })).events).toHaveLength(1);
    });
  });
  afterAll(async () => { await t?.dispose(); });

  it('reads the original events of the category through $ce-{c}, each with the link\'s metadata', async () => {
    const page = await read(t, { query: { categories: [cat] } });
    expect(sigs(page.events)).toEqual([`${cat}-1#0:A`, `${cat}-2#0:B`, `${cat}-1#1:C`]);
    const [a, b, c] = page.events;
    expect(a).toMatchObject({ eventStreamId: `${cat}-1`, eventType: 'A', data: { i: 0 }, isJson: true, linkMetadata: { $o: `${cat}-1` } });
    expect(keysOf(a, false)).toEqual(['data', 'eventStreamId', 'eventType', 'isJson', 'linkMetadata', 'readerPosition']);
    expect(b).toMatchObject({ eventStreamId: `${cat}-2`, data: { i: 1 }, linkMetadata: { $o: `${cat}-2` } });
    expect(c).toMatchObject({ eventStreamId: `${cat}-1`, eventNumber: 1, data: { i: 3 }, metadata: { m: 3 }, linkMetadata: { $o: `${cat}-1` } });
    expect(keysOf(c)).toEqual(['data', 'eventNumber', 'eventStreamId', 'eventType', 'isJson', 'linkMetadata', 'metadata', 'readerPosition']);
  });

  it('filters by event type, and pages on through readerPosition', async () => {
    expect(sigs((await read(t, { query: { categories: [cat], events: ['C', 'A'] } })).events)).toEqual([`${cat}-1#0:A`, `${cat}-1#1:C`]);
    const { pages, events } = await readAllPages(t, { categories: [cat] }, 2);
    expect(pages).toEqual([2, 1, 0]);
    expect(sigs(events)).toEqual([`${cat}-1#0:A`, `${cat}-2#0:B`, `${cat}-1#1:C`]);
  });

  it('$s positions count in the $ce-{c} stream', async () => {
    const page = await read(t, { query: { categories: [cat] }, position: { $s: { [`$ce-${cat}`]: 0 } } });
    expect(sigs(page.events)).toEqual([`${cat}-2#0:B`, `${cat}-1#1:C`]);
    const none = await read(t, { query: { categories: [cat] }, position: { $s: { [`$ce-${cat}`]: 2 } } });
    expect(none.events).toEqual([]);
  });

  it('several categories merge in log order; a missing category among them is ignored, all missing is 404', async () => {
    const page = await read(t, { query: { categories: [cat2, 'recatmissing', cat] } });
    expect(sigs(page.events)).toEqual([`${cat}-1#0:A`, `${cat}-2#0:B`, `${cat2}-1#0:A`, `${cat}-1#1:C`]);
    const res = await post(t, { query: { categories: ['recatmissing'] } });
    expect(res.status, await res.text()).toBe(404);
  });

  it('reading a category needs read access to its $ce- stream (a $-stream: admins only by default)', async () => {
    const res = await post(t, { query: { categories: [cat] } }, { authorization: OPS });
    expect(res.status, await res.text()).toBe(401);
    expect(sigs((await read(t, { query: { categories: [cat] } }, ADMIN)).events)).toHaveLength(3);
  });

  it('fromAll does not read the $ce- links (nor any other system projection output), even with $includeLinks', async () => {
    const expected = [`${cat}-1#0:A`, `${cat}-2#0:B`, `${cat2}-1#0:A`, `${cat}-1#1:C`];
    const plain = await read(t, { query: { allStreams: true }, position: start, maxEvents: 100 });
    expect(sigs(plain.events)).toEqual(expected);
    const withLinks = await read(t, { query: { allStreams: true, options: { $includeLinks: true } }, position: start, maxEvents: 100 });
    expect(sigs(withLinks.events)).toEqual(expected);
    // while the $ce- stream itself, read as a stream, resolves to the same events as the category
    const asStream = await read(t, { query: { streams: [`$ce-${cat}`] } });
    expect(sigs(asStream.events)).toEqual([`${cat}-1#0:A`, `${cat}-2#0:B`, `${cat}-1#1:C`]);
  });
});
