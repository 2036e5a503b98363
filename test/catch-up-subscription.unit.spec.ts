import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ExpectedVersion, newUuid, Store, type ProposedEvent } from '../src/store/index.js';
import { AccessControl } from '../src/auth/access.js';
import { SYSTEM, ANONYMOUS } from '../src/auth/principal.js';
import { createVerbs, AccessDeniedError, type SubscriptionItem, type Verbs, type VerbSubjects } from '../src/verbs/index.js';
import { makeFilter, InvalidFilterError } from '../src/store/index.js';
import { LIVE_QUEUE_RECORDS } from '../src/verbs/subscription.js';
import { encodeReadEvent } from '../src/api/grpc/read-codec.js';
import { decodeMessage } from '../src/api/grpc/codecs.js';

// Catch-up subscriptions as a verb (src/verbs/subscription.ts), with the store in process: the
// order of items, the exclusive start, the bound on live events a slow consumer leaves waiting
// (it falls behind and catches up again, losing nothing), filters and their checkpoints; and the
// gRPC door's hand-written event encoding read back through the .proto files.

let dir: string;
let store: Store;
let verbs: Verbs;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'svc-catchup-'));
  store = await Store.open({ dir, inMemory: false, chunkSize: 256 * 1024 * 1024 });
  verbs = createVerbs({ store, access: new AccessControl(store, false) } as VerbSubjects); // the stream verbs only
});
afterEach(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

function events(n: number, type = 'E'): ProposedEvent[] {
  return Array.from({ length: n }, (_, i) => ({ eventId: newUuid(), eventType: type, isJson: true, data: Buffer.from(`{"i":${i}}`), metadata: Buffer.alloc(0) }));
}

/** Pulls items until `until` says stop (the subscription stays open); returns them. */
async function pull(items: AsyncGenerator<SubscriptionItem>, until: (seen: SubscriptionItem[]) => boolean): Promise<SubscriptionItem[]> {
  const seen: SubscriptionItem[] = [];
  for (;;) {
    const next = await items.next();
    if (next.done) return seen;
    seen.push(next.value);
    if (until(seen)) return seen;
  }
}

const numbers = (items: SubscriptionItem[]) => items.flatMap((i) => (i.kind === 'events' ? i.events.map((e) => e.event!.eventNumber) : []));

describe('a stream subscription', () => {
  it('delivers events after the start revision, says caught up once, then live events', async () => {
    await store.append('s', ExpectedVersion.any, events(4));
    const abort = new AbortController();
    const items = verbs.subscriptions.toStream(SYSTEM, 's', { kind: 'after', revision: 1 }, { resolveLinks: false, signal: abort.signal });
    const first = await pull(items, (seen) => seen.some((i) => i.kind === 'caughtUp'));
    expect(numbers(first)).toEqual([2, 3]);
    expect(first.at(-1)).toEqual({ kind: 'caughtUp', revision: 3 });
    await store.append('s', ExpectedVersion.any, events(1));
    const live = await items.next();
    expect(live.value).toMatchObject({ kind: 'events' });
    expect(numbers([live.value as SubscriptionItem])).toEqual([4]);
    abort.abort();
    expect((await items.next()).done).toBe(true);
  });

  it('refuses a principal the stream ACL refuses, before any item', () => {
    expect(() => verbs.subscriptions.toAll(ANONYMOUS, { kind: 'start' }, { resolveLinks: false, signal: new AbortController().signal }))
      .toThrow(AccessDeniedError);
  });

  it('a consumer that stops reading falls behind once the live queue is full, then catches up without a gap', async () => {
    const abort = new AbortController();
    const items = verbs.subscriptions.toStream(SYSTEM, 'slow', { kind: 'start' }, { resolveLinks: false, signal: abort.signal });
    await pull(items, (seen) => seen.some((i) => i.kind === 'caughtUp'));
    // The consumer does not pull while more than the bound is committed.
    const total = LIVE_QUEUE_RECORDS + 1000;
    for (let i = 0; i < total; i += 1000) await store.append('slow', ExpectedVersion.any, events(1000));
    const rest = await pull(items, (seen) => numbers(seen).length >= total);
    expect(rest.some((i) => i.kind === 'fellBehind')).toBe(true);
    const got = numbers(rest);
    expect(got).toEqual(Array.from({ length: total }, (_, i) => i));
    abort.abort();
  });
});

describe('a $all subscription', () => {
  it('from a position is exclusive; a filter passes matching events and checkpoints every interval', async () => {
    const first = await store.append('a-1', ExpectedVersion.any, events(1, 'Keep'));
    for (let i = 0; i < 10; i++) await store.append(`b-${i}`, ExpectedVersion.any, [...events(5, 'Drop'), ...events(5, 'Keep')]);
    const abort = new AbortController();
    const items = verbs.subscriptions.toAll(SYSTEM, { kind: 'after', position: first.position }, {
      resolveLinks: false, signal: abort.signal, filter: makeFilter('eventType', undefined, ['Keep']), checkpointInterval: 20,
    });
    const seen = await pull(items, (s) => s.some((i) => i.kind === 'caughtUp'));
    abort.abort();
    const delivered = seen.flatMap((i) => (i.kind === 'events' ? i.events.map((e) => e.event!) : []));
    expect(delivered).toHaveLength(50);
    expect(delivered.every((e) => e.eventType === 'Keep' && e.position > first.position)).toBe(true);
    const checkpoints = seen.filter((i) => i.kind === 'checkpoint').map((i) => (i as { position: number }).position);
    expect(checkpoints.length).toBeGreaterThanOrEqual(5);
    for (let i = 1; i < checkpoints.length; i++) expect(checkpoints[i]).toBeGreaterThan(checkpoints[i - 1]);
  });

  it('catching up from older than the log tail, reads on the log-read thread and delivers every event once, in order, then live', async () => {
    // A store without a log tail: every catch-up page comes from RocksDB, read off the event loop.
    await store.close();
    store = await Store.open({ dir, inMemory: false, chunkSize: 64 * 1024, logCacheBytes: 0 });
    verbs = createVerbs({ store, access: new AccessControl(store, false) } as VerbSubjects); // the stream verbs only
    for (let i = 0; i < 30; i++) await store.append(`thread-${i % 7}`, ExpectedVersion.any, events(100));
    const offLoopBefore = store.readCounters.offLoopRecord;
    const abort = new AbortController();
    const items = verbs.subscriptions.toAll(SYSTEM, { kind: 'start' }, { resolveLinks: false, signal: abort.signal });
    const seen = await pull(items, (got) => got.some((i) => i.kind === 'caughtUp'));
    const delivered = seen.flatMap((i) => (i.kind === 'events' ? i.events.map((e) => e.event!) : []));
    const users = delivered.filter((r) => r.streamId.startsWith('thread-'));
    expect(users).toHaveLength(3000);
    expect(users.map((r) => JSON.parse(r.data.toString()).i)).toEqual(Array.from({ length: 3000 }, (_, n) => n % 100));
    const positions = delivered.map((r) => r.position);
    expect(positions).toEqual([...positions].sort((a, b) => a - b));
    expect(new Set(positions).size).toBe(positions.length);
    expect(store.readCounters.offLoopRecord - offLoopBefore).toBeGreaterThanOrEqual(3000);
    await store.append('thread-live', ExpectedVersion.any, events(1));
    const live = await items.next();
    expect(live.value).toMatchObject({ kind: 'events', events: [{ event: { streamId: 'thread-live' } }] });
    abort.abort();
    await items.return(undefined);
  });

  it('two catch-ups on the log-read thread while appends go on: each delivers the whole log once, in order', async () => {
    // The thread reads pages ahead of a reader (log-read-thread-main.ts); the log's end moves
    // between a page read ahead and the request for it, and two readers share the thread.
    await store.close();
    store = await Store.open({ dir, inMemory: false, chunkSize: 64 * 1024, logCacheBytes: 0 });
    verbs = createVerbs({ store, access: new AccessControl(store, false) } as VerbSubjects);
    for (let i = 0; i < 40; i++) await store.append(`ahead-${i % 5}`, ExpectedVersion.any, events(100));
    const abort = new AbortController();
    const subscribe = () => verbs.subscriptions.toAll(SYSTEM, { kind: 'start' }, { resolveLinks: false, signal: abort.signal });
    const untilEnd = (seen: SubscriptionItem[]) => seen.some((i) => i.kind === 'events' && i.events.some((e) => e.event!.streamId === 'ahead-end'));
    const readers = [pull(subscribe(), untilEnd), pull(subscribe(), untilEnd)];
    for (let i = 0; i < 20; i++) {
      await store.append(`ahead-${i % 5}`, ExpectedVersion.any, events(25));
      await new Promise((r) => setImmediate(r));
    }
    await store.append('ahead-end', ExpectedVersion.any, events(1));
    const log: number[] = [];
    for (let at = 0; ;) {
      const page = store.readAllForward(at, 1000);
      log.push(...page.records.map((r) => r.position));
      if (page.isEnd) break;
      at = page.nextPosition;
    }
    for (const seen of await Promise.all(readers)) {
      const delivered = seen.flatMap((i) => (i.kind === 'events' ? i.events.map((e) => e.event!.position) : []));
      expect(delivered).toEqual(log);
    }
    expect(log.length).toBeGreaterThan(4500);
    abort.abort();
  });

  it('refuses a regular expression that could backtrack without end, and a broken one', () => {
    expect(() => makeFilter('streamName', '(a+)+$', [])).toThrow(InvalidFilterError);
    expect(() => makeFilter('streamName', '([a-z]*)*x', [])).toThrow(InvalidFilterError);
    expect(() => makeFilter('streamName', '(', [])).toThrow(InvalidFilterError);
    expect(makeFilter('eventType', '^[^$].*', []).regex?.test('OrderPlaced')).toBe(true);
  });
});

describe('the gRPC event encoding', () => {
  it('reads back through the .proto files: ids in both forms, positions, metadata map, resolved links', async () => {
    const target = await store.append('target', ExpectedVersion.any, [{ ...events(1, 'Target')[0], metadata: Buffer.from('{"m":1}') }]);
    await store.append('links', ExpectedVersion.any, [{ eventId: newUuid(), eventType: '$>', isJson: false, data: Buffer.from('0@target'), metadata: Buffer.alloc(0) }]);
    const page = store.readStreamForward('links', 0, 1, true);
    if (page.status !== 'ok') throw new Error('no page');
    const resolved = page.events[0];
    for (const form of ['string', 'structured'] as const) {
      const decoded = decodeMessage('event_store.client.streams.ReadResp', encodeReadEvent(resolved, form)) as any;
      const { event, link, commit_position } = decoded.event;
      expect(event.stream_identifier.stream_name.toString()).toBe('target');
      expect(event.stream_revision).toBe('0');
      expect(event.commit_position).toBe(String(target.position));
      expect(event.prepare_position).toBe(String(target.position));
      expect(event.metadata.type).toBe('Target');
      expect(event.metadata['content-type']).toBe('application/json');
      expect(Number(event.metadata.created) / 10_000).toBeCloseTo(resolved.event!.created / 1000, 0);
      expect(event.custom_metadata.toString()).toBe('{"m":1}');
      expect(JSON.parse(event.data.toString())).toEqual({ i: 0 });
      expect(link.metadata.type).toBe('$>');
      expect(link.metadata['content-type']).toBe('application/octet-stream');
      expect(commit_position).toBe(String(resolved.link!.position));
      if (form === 'string') expect(event.id.string).toMatch(/^[0-9a-f-]{36}$/);
      else {
        const bytes = Buffer.alloc(16);
        bytes.writeBigInt64BE(BigInt(event.id.structured.most_significant_bits), 0);
        bytes.writeBigInt64BE(BigInt(event.id.structured.least_significant_bits), 8);
        expect(bytes.equals(resolved.event!.eventId)).toBe(true);
      }
    }
  });
});
