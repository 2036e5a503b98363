import { expect } from 'vitest';
import { ADMIN, EVENTS_JSON, eventually, newEvent, sleep, uniq } from './node.js';

// Helpers of the scavenge end-to-end tests: a dataset holding every removable kind, a snapshot
// of the log ($all with the position of every record), the model of what a scavenge must leave
// (the contract's rules applied to the snapshot), and the scavenge HTTP calls.
// Everything talks HTTP to `{ url }`, so it works for an in-process node and a child process.

export const CHUNK_SIZE = 4096;
export const ZERO_GUID = '00000000-0000-0000-0000-000000000000';
export const ATOM_JSON = 'application/vnd.eventstore.atom+json';
export const TOMBSTONE_TYPE = '$streamDeleted';
export const TOMBSTONE_NUMBER = Number.MAX_SAFE_INTEGER;
/** Streams a scavenge writes: its points and its history (and their metastreams). */
export const SCAVENGE_STREAM = /^(\$\$)?\$scavenge(s|s-[0-9a-f-]{36}|Points)$/;

export interface Target { url: string }

/** fetch with admin credentials unless `authorization` is given ('' for none). */
export function request(t: Target, path: string, init: RequestInit & { authorization?: string } = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  const auth = init.authorization ?? ADMIN;
  if (auth) headers.set('Authorization', auth);
  return fetch(t.url + path, { ...init, headers, redirect: 'manual' });
}

export const enc = encodeURIComponent;

async function json(t: Target, path: string, headers: Record<string, string> = {}): Promise<any> {
  const res = await request(t, path, { headers: { Accept: ATOM_JSON, ...headers } });
  expect(res.status, `GET ${path}`).toBe(200);
  return res.json();
}

function linkOf(doc: any, relation: string): string | undefined {
  return doc.links?.find((l: any) => l.relation === relation)?.uri;
}

/** Runs `f` over `items`, `width` at a time. */
export async function inParallel<T, R>(items: T[], width: number, f: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(width, items.length) }, async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await f(items[i]);
    }
  }));
  return out;
}

// ---------------------------------------------------------------------------------------------
// writes

export async function appendOk(t: Target, stream: string, events: unknown[], headers: Record<string, string> = {}): Promise<Response> {
  const res = await request(t, `/streams/${enc(stream)}`, {
    method: 'POST', headers: { 'Content-Type': EVENTS_JSON, ...headers }, body: JSON.stringify(events),
  });
  expect(res.status, `append to ${stream}: ${await res.clone().text()}`).toBe(201);
  return res;
}

export async function setMetadata(t: Target, stream: string, doc: unknown): Promise<void> {
  const res = await request(t, `/streams/${enc(stream)}/metadata`, {
    method: 'POST', headers: { 'Content-Type': EVENTS_JSON }, body: JSON.stringify([newEvent('$metadata', doc)]),
  });
  expect(res.status, `metadata of ${stream}: ${await res.clone().text()}`).toBe(201);
}

export async function deleteStream(t: Target, stream: string, hard: boolean): Promise<void> {
  const res = await request(t, `/streams/${enc(stream)}`, { method: 'DELETE', headers: hard ? { 'SVC-HardDelete': 'true' } : {} });
  expect(res.status, `delete ${stream}`).toBe(204);
}

// ---------------------------------------------------------------------------------------------
// the dataset

export interface Dataset {
  prefix: string;
  plain: string;
  /** 10 events, then soft-deleted: 0..8 removable, 9 (its last) stays. */
  soft: string;
  /** 8 events and 3 metadata records, then hard-deleted: all removable but the tombstone. */
  hard: string;
  /** $maxCount 3, 20 events: 0..16 removable. */
  maxCount: string;
  /** $tb 10, 16 events: 0..9 removable. */
  tb: string;
  /** $maxAge 1 s: 12 events older than that, then 3 new ones (undefined when left out). */
  maxAge: string | undefined;
  /** 6 events, metadata written 5 times (custom keys only): only its metastream loses records. */
  meta: string;
  /** `$>` links to removed and to kept events. */
  links: string;
  /** Written last (in the last chunk): 3 events, then soft-deleted. */
  tail: string;
  /** Every stream above (original streams). */
  streams: string[];
  /** Each link of `links` (by event number): its target and whether the scavenge removes it. */
  linkTargets: { target: string; removed: boolean }[];
}

const PAD = 'p'.repeat(240);

function ev(type: string, i: number) {
  return newEvent(type, { i, pad: PAD });
}

/**
 * Writes the dataset interleaved across its streams, so each 4 KiB chunk mixes kinds (about 16
 * records a chunk: a few hundred records in all, over ~10 chunks). With `maxAge`, waits until
 * the old $maxAge events are more than 1 s old and then writes 3 newer ones; then 2 plain
 * events and the soft-deleted tail stream.
 */
export async function buildDataset(t: Target, opts: { maxAge?: boolean } = {}): Promise<Dataset> {
  const withMaxAge = opts.maxAge ?? true;
  const prefix = uniq('sc');
  const d: Dataset = {
    prefix,
    plain: `${prefix}-plain`, soft: `${prefix}-soft`, hard: `${prefix}-hard`, maxCount: `${prefix}-maxcount`,
    tb: `${prefix}-tb`, maxAge: withMaxAge ? `${prefix}-maxage` : undefined, meta: `${prefix}-meta`, links: `${prefix}-links`,
    tail: `${prefix}-tail`, streams: [], linkTargets: [],
  };
  d.streams = [d.plain, d.soft, d.hard, d.maxCount, d.tb, ...(d.maxAge ? [d.maxAge] : []), d.meta, d.links, d.tail];
  const links: { target: string; removed: boolean }[] = [
    { target: `0@${d.maxCount}`, removed: true },
    { target: `19@${d.maxCount}`, removed: false },
    { target: `2@${d.soft}`, removed: true },
    { target: `9@${d.soft}`, removed: false },
    { target: `1@${d.hard}`, removed: true },
    { target: `3@${d.tb}`, removed: true },
    { target: `12@${d.tb}`, removed: false },
    { target: `4@${d.plain}`, removed: false },
    { target: `2@${d.meta}`, removed: false },
    ...(d.maxAge ? [{ target: `0@${d.maxAge}`, removed: true }] : []),
  ];
  d.linkTargets = links;

  await setMetadata(t, d.maxCount, { $maxCount: 3 });
  await setMetadata(t, d.tb, { $tb: 10 });
  if (d.maxAge) await setMetadata(t, d.maxAge, { $maxAge: 1 });
  await setMetadata(t, d.hard, { h: 1 });
  let lastOldMaxAge = 0;
  for (let r = 0; r < 20; r++) {
    // one write per stream a round, the round's writes at once (the writer commits them together)
    const round: Promise<unknown>[] = [appendOk(t, d.plain, [ev('Plain', r)]), appendOk(t, d.maxCount, [ev('Counted', r)])];
    if (r < 10) round.push(appendOk(t, d.soft, [ev('Soft', r)]));
    if (r === 10) round.push(deleteStream(t, d.soft, false));
    if (r < 8) round.push(appendOk(t, d.hard, [ev('Hard', r)]));
    if (r === 3) round.push(setMetadata(t, d.hard, { h: 2 }));
    if (r === 6) round.push(setMetadata(t, d.hard, { h: 3 }));
    if (r === 8) round.push(deleteStream(t, d.hard, true));
    if (r < 16) round.push(appendOk(t, d.tb, [ev('Truncated', r)]));
    if (d.maxAge && r < 12) round.push(appendOk(t, d.maxAge, [ev('Aged', r)]));
    if (r < 6) round.push(appendOk(t, d.meta, [ev('Meta', r)]));
    if (r % 3 === 0 && r <= 12) round.push(setMetadata(t, d.meta, { v: r / 3, note: `metadata ${r / 3}` }));
    if (r >= 10 && r - 10 < links.length) round.push(appendOk(t, d.links, [newEvent('$>', links[r - 10].target)]));
    await Promise.all(round);
    if (d.maxAge && r < 12) lastOldMaxAge = Date.now();
  }
  if (d.maxAge) {
    await sleep(Math.max(0, lastOldMaxAge + 1300 - Date.now()));
    for (let i = 12; i < 15; i++) await appendOk(t, d.maxAge, [ev('Aged', i)]);
  }
  await appendOk(t, d.plain, [ev('Plain', 20), ev('Plain', 21)]);
  await appendOk(t, d.tail, [ev('Tail', 0), ev('Tail', 1), ev('Tail', 2)]);
  await deleteStream(t, d.tail, false);
  return d;
}

/** The dataset's streams and their metastreams, as read (the hard-deleted one answers 410 for both). */
export function datasetStreams(d: Dataset): string[] {
  return d.streams.flatMap((s) => [s, `$$${s}`]);
}

export function inDataset(d: Dataset, streamId: string): boolean {
  return streamId.startsWith(d.prefix) || streamId.startsWith(`$$${d.prefix}`);
}

// ---------------------------------------------------------------------------------------------
// the log as read: $all with positions

export interface LogRecord {
  position: number;
  streamId: string;
  eventNumber: number;
  eventType: string;
  eventId: string;
  /** As `embed=tryharder` shows it (JSON reindented, other data as text). */
  data: string | null;
  metaData: string | null;
  isJson: boolean;
  updated: string;
  /** µs since the epoch (from `updated`). */
  created: number;
}

export function formatPosition(position: number): string {
  const hex = position.toString(16).toUpperCase().padStart(16, '0');
  return hex + hex;
}

function positionIn(uri: string): number {
  const m = /\/([0-9A-F]{16})([0-9A-F]{16})\/(?:forward|backward)\/\d+$/.exec(uri);
  expect(m, uri).not.toBeNull();
  return parseInt(m![2], 16);
}

export function parseCreated(updated: string): number {
  const m = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,6}))?Z$/.exec(updated);
  expect(m, updated).not.toBeNull();
  return Date.parse(`${m![1]}Z`) * 1000 + Number((m![2] ?? '').padEnd(6, '0'));
}

function recordOf(entry: any, position: number): LogRecord {
  return {
    position, streamId: entry.streamId, eventNumber: entry.eventNumber, eventType: entry.eventType, eventId: entry.eventId,
    data: entry.data, metaData: entry.metaData, isJson: entry.isJson, updated: entry.updated, created: parseCreated(entry.updated),
  };
}

/** Where `$all` ends: the position after its newest record. */
export async function allEnd(t: Target): Promise<number> {
  const head = await json(t, '/streams/%24all/head/backward/1');
  return positionIn(linkOf(head, 'previous')!);
}

/**
 * Every record of `$all`, oldest first, each with its exact position: a backward page of one
 * record links `next` to that record's position. Read chunk by chunk, the chunks in parallel.
 */
export async function readAll(t: Target): Promise<LogRecord[]> {
  const end = await allEnd(t);
  const chunks = Array.from({ length: Math.ceil(end / CHUNK_SIZE) }, (_, k) => k);
  const parts = await inParallel(chunks, 8, async (k) => {
    const low = k * CHUNK_SIZE;
    const out: LogRecord[] = [];
    let from = Math.min((k + 1) * CHUNK_SIZE, end);
    while (from > low) {
      const page = await json(t, `/streams/%24all/${formatPosition(from)}/backward/1?embed=tryharder`);
      if (page.entries.length === 0) break;
      const position = positionIn(linkOf(page, 'next')!);
      if (position < low) break;
      out.push(recordOf(page.entries[0], position));
      from = position;
    }
    return out.reverse();
  });
  return parts.flat();
}

export function title(r: LogRecord): string {
  return `${r.position}:${r.eventNumber}@${r.streamId}(${r.eventType})`;
}

// ---------------------------------------------------------------------------------------------
// the model

export interface Point { position: number; created: number; eventNumber: number; threshold: number }

export function pointsIn(records: LogRecord[]): Point[] {
  return records.filter((r) => r.streamId === '$scavengePoints' && r.eventType === '$scavengePoint').map((r) => {
    let threshold = 0;
    try {
      threshold = JSON.parse(r.data ?? '{}')?.threshold ?? 0;
    } catch { /* not JSON: 0 */ }
    return { position: r.position, created: r.created, eventNumber: r.eventNumber, threshold };
  });
}

interface Limits { tb?: number; maxCount?: number; maxAge?: number }

function limitsOf(data: string | null): Limits | undefined {
  let doc: unknown;
  try {
    doc = JSON.parse(data ?? '');
  } catch {
    return undefined;
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) return undefined;
  const o = doc as Record<string, unknown>;
  const num = (v: unknown, min: number) => (typeof v === 'number' && Number.isInteger(v) && v >= min ? v : undefined);
  return { tb: num(o.$tb, 0), maxCount: num(o.$maxCount, 1), maxAge: num(o.$maxAge, 1) };
}

/**
 * The records of `records` (a snapshot of $all) a scavenge up to `point` removes, by the
 * contract's rules: below the point only; of a tombstoned stream everything but the tombstone,
 * and all of its metastream; of a metastream all but its last record; of a stream with metadata
 * (its metastream's last record below the point) the events before $tb, beyond $maxCount and
 * older than $maxAge at the point's time, never the stream's last event. Others are untouched.
 */
export function removableBy(records: LogRecord[], point: { position: number; created: number }): LogRecord[] {
  const below = records.filter((r) => r.position < point.position);
  const byStream = new Map<string, LogRecord[]>();
  for (const r of below) {
    const list = byStream.get(r.streamId) ?? [];
    list.push(r);
    byStream.set(r.streamId, list);
  }
  const isTombstone = (r: LogRecord) => r.eventType === TOMBSTONE_TYPE && r.eventNumber === TOMBSTONE_NUMBER;
  const tombstoned = new Set(below.filter(isTombstone).map((r) => r.streamId));
  const removable: LogRecord[] = [];
  for (const r of below) {
    const s = r.streamId;
    if (s.startsWith('$$$$')) continue;
    if (s.startsWith('$$')) {
      const list = byStream.get(s)!;
      if (tombstoned.has(s.slice(2)) || r !== list[list.length - 1]) removable.push(r);
      continue;
    }
    if (tombstoned.has(s)) {
      if (!isTombstone(r)) removable.push(r);
      continue;
    }
    const metas = byStream.get(`$$${s}`);
    const limits = metas ? limitsOf(metas[metas.length - 1].data) : undefined;
    if (!limits) continue;
    const last = Math.max(...byStream.get(s)!.map((x) => x.eventNumber));
    if (r.eventNumber === last) continue;
    const n = r.eventNumber;
    if ((limits.tb !== undefined && n < limits.tb)
      || (limits.maxCount !== undefined && n <= last - limits.maxCount)
      || (limits.maxAge !== undefined && r.created < point.created - limits.maxAge * 1_000_000)) removable.push(r);
  }
  return removable;
}

/** Chunk weights as the contract counts them: 2 per removable record, in the record's chunk. */
export function weightsOf(removable: LogRecord[]): Map<number, number> {
  const weights = new Map<number, number>();
  for (const r of removable) {
    const c = Math.floor(r.position / CHUNK_SIZE);
    weights.set(c, (weights.get(c) ?? 0) + 2);
  }
  return weights;
}

/**
 * Checks `after` (the log after a scavenge) against `before` less `removed`: the records older
 * than the newest of `before` are exactly the kept ones, at the same positions with the same
 * content; anything newer belongs to the scavenge's own streams. `only` restricts the
 * comparison to some streams (a node whose other writers keep writing).
 */
export function expectLogIs(after: LogRecord[], before: LogRecord[], removed: LogRecord[], only?: (streamId: string) => boolean): void {
  const wanted = (r: LogRecord) => !only || only(r.streamId);
  const end = before[before.length - 1].position;
  const gone = new Set(removed.map((r) => r.position));
  const expected = before.filter((r) => !gone.has(r.position) && wanted(r));
  const actual = after.filter((r) => r.position <= end && wanted(r));
  const expectedAt = new Map(expected.map((r) => [r.position, r]));
  const actualAt = new Map(actual.map((r) => [r.position, r]));
  const missing = expected.filter((r) => !actualAt.has(r.position)).map(title);
  const unexpected = actual.filter((r) => !expectedAt.has(r.position)).map(title);
  expect({ missing, unexpected }, 'records kept / removed against the model').toEqual({ missing: [], unexpected: [] });
  expect(actual, 'kept records read exactly as before').toEqual(expected);
  const newer = after.filter((r) => r.position > end && wanted(r));
  expect(newer.filter((r) => !SCAVENGE_STREAM.test(r.streamId)).map(title), 'records written since').toEqual([]);
}

// ---------------------------------------------------------------------------------------------
// stream reads

export interface StreamView { status: number; entries: Record<string, unknown>[] }

function stripEntry(e: any): Record<string, unknown> {
  const { id: _id, links: _links, ...rest } = e;
  if (rest.content && typeof rest.content === 'object') rest.content = { ...rest.content };
  return rest;
}

/** A whole stream, oldest first, as a read shows it (links resolved, `embed=tryharder`), without URLs. */
export async function readStream(t: Target, stream: string, headers: Record<string, string> = {}): Promise<StreamView> {
  const res = await request(t, `/streams/${enc(stream)}/0/forward/4096?embed=tryharder`, { headers: { Accept: ATOM_JSON, ...headers } });
  if (res.status !== 200) return { status: res.status, entries: [] };
  const doc = await res.json() as any;
  return { status: 200, entries: doc.entries.map(stripEntry).reverse() };
}

export async function readStreams(t: Target, streams: string[]): Promise<Record<string, StreamView>> {
  const views = await inParallel(streams, 8, (s) => readStream(t, s));
  return Object.fromEntries(streams.map((s, i) => [s, views[i]]));
}

/** Events of a stream (forward, links not resolved) with their data parsed when JSON. */
export async function streamEvents(t: Target, stream: string): Promise<{ eventNumber: number; eventType: string; data: any }[]> {
  const view = await readStream(t, stream, { 'SVC-ResolveLinkTos': 'False' });
  expect(view.status, `read ${stream}`).toBe(200);
  return view.entries.map((e: any) => ({
    eventNumber: e.eventNumber, eventType: e.eventType, data: e.isJson ? JSON.parse(e.data) : e.data,
  }));
}

/** The status of a single-event read of each record (links resolved as by default). */
export async function eventStatuses(t: Target, records: LogRecord[]): Promise<Record<string, number>> {
  const keyed = records.filter((r) => r.eventType !== TOMBSTONE_TYPE);
  const statuses = await inParallel(keyed, 16, async (r) => {
    const res = await request(t, `/streams/${enc(r.streamId)}/${r.eventNumber}`, { headers: { Accept: ATOM_JSON } });
    await res.arrayBuffer();
    return res.status;
  });
  return Object.fromEntries(keyed.map((r, i) => [`${r.eventNumber}@${r.streamId}`, statuses[i]]));
}

// ---------------------------------------------------------------------------------------------
// scavenge over HTTP

export type Query = Record<string, string | number | boolean>;

export function postScavenge(t: Target, query: Query = {}, authorization?: string): Promise<Response> {
  const qs = new URLSearchParams(Object.entries(query).map(([k, v]) => [k, String(v)])).toString();
  return request(t, `/admin/scavenge${qs ? `?${qs}` : ''}`, { method: 'POST', ...(authorization === undefined ? {} : { authorization }) });
}

export async function startScavenge(t: Target, query: Query = {}): Promise<string> {
  const res = await postScavenge(t, query);
  const text = await res.text();
  expect(res.status, `POST /admin/scavenge: ${text}`).toBe(200);
  const { scavengeId } = JSON.parse(text);
  expect(scavengeId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
  return scavengeId;
}

export async function getJson(t: Target, path: string): Promise<any> {
  const res = await request(t, path, { headers: { Accept: 'application/json' } });
  const text = await res.text();
  expect(res.status, `GET ${path}: ${text}`).toBe(200);
  return JSON.parse(text);
}

export const current = (t: Target) => getJson(t, '/admin/scavenge/current');
export const last = (t: Target) => getJson(t, '/admin/scavenge/last');

/** Waits until no scavenge runs; returns the last one's result (it must be `id`). */
export async function waitForEnd(t: Target, id: string, timeoutMs = 20_000): Promise<string> {
  await eventually(async () => expect((await current(t)).scavengeId).toBe(''), timeoutMs);
  const l = await last(t);
  expect(l.scavengeId).toBe(id);
  expect(l.scavengeLink).toBe(`/admin/scavenge/${id}`);
  return l.scavengeResult;
}

/** Starts a scavenge and waits for it; expects Success; returns its id. */
export async function scavengeOk(t: Target, query: Query = {}): Promise<string> {
  const id = await startScavenge(t, query);
  expect(await waitForEnd(t, id)).toBe('Success');
  return id;
}

/**
 * Waits until the running scavenge reports `phase` with at least `chunksDone` chunks of it done
 * and (if `chunksDone` > 0) at least three left (returns its progress).
 */
export async function waitForPhase(t: Target, id: string, phase: string, chunksDone = 0, timeoutMs = 20_000): Promise<any> {
  const seen: string[] = [];
  return eventually(async () => {
    const c = await current(t);
    const now = c.scavengeId === id ? `${c.progress.phase} ${c.progress.chunksDone}/${c.progress.chunksTotal}` : `not running (${c.scavengeId})`;
    if (seen[seen.length - 1] !== now) seen.push(now);
    const why = `waiting for ${phase} with ${chunksDone} chunks done; seen: ${seen.join(' -> ')}`;
    expect(c.scavengeId, why).toBe(id);
    expect(c.progress?.phase, why).toBe(phase);
    expect(c.progress.chunksDone, why).toBeGreaterThanOrEqual(chunksDone);
    // 3 chunks or more left, one of the last two holding removable records (the dataset's tail): the run is mid-way
    if (chunksDone > 0) expect(c.progress.chunksDone, why).toBeLessThanOrEqual(c.progress.chunksTotal - 3);
    return c.progress;
  }, timeoutMs);
}

/**
 * A slow scavenge: at 4% a run rests 24 ms per ms of work, in rests of a second or more, so with
 * this dataset its chunk execution lasts seconds with rests between chunks (at 1% it would take
 * ~20 s even to get there).
 */
export const SLOW = 4;

/** The events of `$scavenges-{id}`. */
export function historyOf(t: Target, id: string) {
  return streamEvents(t, `$scavenges-${id}`);
}

/** The chunk numbers below a point (the point's own chunk is complete too: it ends after it). */
export function chunksBelow(point: Point): number[] {
  return Array.from({ length: Math.floor(point.position / CHUNK_SIZE) + 1 }, (_, c) => c);
}

/**
 * A log between `before` and the model (a stopped or killed scavenge): every record the model
 * keeps is there unchanged, the others are there unchanged or gone, nothing else is new but the
 * scavenge's own streams. Returns how many of `removed` are gone already.
 */
export function expectLogBetween(mid: LogRecord[], before: LogRecord[], removed: LogRecord[]): number {
  const end = before[before.length - 1].position;
  const gone = new Set(removed.map((r) => r.position));
  const beforeAt = new Map(before.map((r) => [r.position, r]));
  const old = mid.filter((r) => r.position <= end);
  const midAt = new Map(old.map((r) => [r.position, r]));
  const missingKept = before.filter((r) => !gone.has(r.position) && !midAt.has(r.position)).map(title);
  const unknown = old.filter((r) => !beforeAt.has(r.position)).map(title);
  expect({ missingKept, unknown }).toEqual({ missingKept: [], unknown: [] });
  expect(old, 'records still there read as before').toEqual(old.map((r) => beforeAt.get(r.position)));
  const newer = mid.filter((r) => r.position > end);
  expect(newer.filter((r) => !SCAVENGE_STREAM.test(r.streamId)).map(title), 'records written since').toEqual([]);
  return removed.filter((r) => !midAt.has(r.position)).length;
}

/** `n@stream` of every record of $all, paging forward from the start by `count` (following `previous`). */
export async function allTitlesForward(t: Target, count: number): Promise<string[]> {
  const out: string[] = [];
  let path = `/streams/%24all/${formatPosition(0)}/forward/${count}`;
  for (let page = 0; page < 10_000; page++) {
    const doc = await json(t, path);
    out.push(...doc.entries.map((e: any) => e.title).reverse());
    const previous = linkOf(doc, 'previous');
    if (doc.entries.length === 0 || !previous) break;
    path = previous.slice(t.url.length);
  }
  return out;
}

/** `n@stream` of every record of $all, paging backward from the head by `count` (following `next`). */
export async function allTitlesBackward(t: Target, count: number): Promise<string[]> {
  const out: string[] = [];
  let path = `/streams/%24all/head/backward/${count}`;
  for (let page = 0; page < 10_000; page++) {
    const doc = await json(t, path);
    out.push(...doc.entries.map((e: any) => e.title));
    const next = linkOf(doc, 'next');
    if (!next) break;
    path = next.slice(t.url.length);
  }
  return out.reverse();
}
