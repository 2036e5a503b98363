import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  ExpectedVersion, InvalidWriteError, jsonDepthExceeds, newUuid, PackedPlaces, Store, StreamDeletedError, WrongExpectedVersionError,
  type ProposedEvent,
} from '../src/store/index.js';

const dirs: string[] = [];
const stores: Store[] = [];

async function openStore(dir = mkdtempSync(join(tmpdir(), 'svc-store-')), chunkSize = 256 * 1024 * 1024,
  logCacheBytes?: number, maxEventBytes?: number, streamInfoCacheSize?: number): Promise<Store> {
  dirs.push(dir);
  const store = await Store.open({ dir, inMemory: false, chunkSize, logCacheBytes, maxEventBytes, streamInfoCacheSize });
  stores.push(store);
  return store;
}

afterEach(async () => {
  for (const s of stores.splice(0)) await s.close().catch(() => {});
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function event(type = 'T', data: unknown = { n: 1 }, eventId = newUuid()): ProposedEvent {
  return { eventId, eventType: type, isJson: true, data: Buffer.from(JSON.stringify(data)), metadata: Buffer.alloc(0) };
}

describe('links resolved with their targets read at once (resolvingLinks)', () => {
  it('resolves every link as one by one would: found, past the end, in a missing stream, truncated, not a link; nothing kept after', async () => {
    // No log tail: every target is read from RocksDB.
    const store = await openStore(undefined, undefined, 0);
    for (let s = 0; s < 5; s++) await store.append(`target-${s}`, ExpectedVersion.any, [event('A', { s, i: 0 }), event('B', { s, i: 1 }), event('C', { s, i: 2 })]);
    // target-4's first two events are truncated away ($tb 2).
    await store.append('$$target-4', ExpectedVersion.any, [{ ...event('$metadata', { $tb: 2 }) }]);
    const link = (data: string) => ({ eventId: newUuid(), eventType: '$>', isJson: false, data: Buffer.from(data), metadata: Buffer.alloc(0) });
    const targets = ['0@target-0', '2@target-1', '1@target-3', '9@target-2', '0@missing', '0@target-4', '2@target-4', '1@target-0'];
    await store.append('links', ExpectedVersion.any, [...targets.map(link), event('NotALink')]);
    const page = store.readStreamForward('links', 0, 100);
    if (page.status !== 'ok') throw new Error(page.status);
    const records = page.events.map((e) => e.event!);
    const view = (r: ReturnType<Store['resolveLink']>) => r.event ? `${r.event.eventNumber}@${r.event.streamId} ${r.event.data.toString('utf8')}` : 'unresolved';
    // The read counters (/stats readIndex) count the same records read either way, when they are used.
    const counted = () => ({ ...store.readCounters });
    records.forEach((r) => store.resolveLink(r)); // (the metadata read once, then cached, for both ways below)
    const before = counted();
    const oneByOne = records.map((r) => view(store.resolveLink(r)));
    const between = counted();
    const atOnce = store.resolvingLinks(records, () => records.map((r) => view(store.resolveLink(r))));
    const after = counted();
    expect(atOnce).toEqual(oneByOne);
    expect(after.notCachedRecord - between.notCachedRecord).toBe(between.notCachedRecord - before.notCachedRecord);
    expect(after.cachedRecord - between.cachedRecord).toBe(between.cachedRecord - before.cachedRecord);
    expect(store.resolvingLinks(records, () => 0)).toBe(0);
    expect(counted().notCachedRecord).toBe(after.notCachedRecord); // read ahead but not used: not counted
    expect(oneByOne).toEqual([
      '0@target-0 {"s":0,"i":0}', '2@target-1 {"s":1,"i":2}', '1@target-3 {"s":3,"i":1}', 'unresolved', 'unresolved',
      'unresolved', '2@target-4 {"s":4,"i":2}', '1@target-0 {"s":0,"i":1}', 'unresolved',
    ]);
    // Nothing read ahead outlives the call: a read after it sees the store as it is.
    await store.deleteStream('target-0', ExpectedVersion.any, true);
    expect(view(store.resolveLink(records[0]))).toBe('unresolved');
  });
});

describe('stream informations read many at once (prefetch)', () => {
  it('appends queued to thousands of streams, with a cache far smaller, decide on what each stream holds', async () => {
    const store = await openStore(undefined, undefined, undefined, undefined, 100);
    const names = Array.from({ length: 3000 }, (_, i) => `many-${i}`);
    // Queued together: the writer takes them in batches and reads their streams' informations at once.
    const first = await Promise.all(names.map((n) => store.append(n, ExpectedVersion.noStream, [event()])));
    expect(first.map((r) => r.firstEventNumber)).toEqual(names.map(() => 0));
    const second = await Promise.all(names.map((n, i) => (i % 3 === 0
      ? store.append(n, ExpectedVersion.exact(0), [event(), event()])
      : store.append(n, ExpectedVersion.noStream, [event()]).then(() => 'accepted', (err: Error) => err.constructor.name))));
    names.forEach((_, i) => {
      if (i % 3 === 0) expect(second[i]).toMatchObject({ firstEventNumber: 1, lastEventNumber: 2 });
      else expect(second[i]).toBe(WrongExpectedVersionError.name);
    });
    const page = store.readStreamForward('many-2999', 0, 10);
    if (page.status !== 'ok') throw new Error(page.status);
    expect(page.events).toHaveLength(1);
  });

  it('what a prefetch brings into memory is what each stream holds, and a stream never written stays unknown', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-store-'));
    let store = await openStore(dir);
    const names = Array.from({ length: 600 }, (_, i) => `pre-${i}`);
    await Promise.all(names.map((n, i) => store.append(n, ExpectedVersion.any, Array.from({ length: 1 + (i % 3) }, () => event()))));
    await store.close();
    store = await openStore(dir, undefined, undefined, undefined, 2000); // nothing in memory yet; room for all
    store.prefetchStreamInfos([...names, 'never-written-1', 'never-written-2']);
    expect(store.streamInfoCache.cached).toBeGreaterThanOrEqual(names.length + 2);
    expect(store.streamInfo('never-written-1')).toBeUndefined();
    expect(names.map((n) => store.streamInfo(n)?.lastEventNumber)).toEqual(names.map((_, i) => i % 3));
    const next = await store.append('pre-5', ExpectedVersion.exact(2), [event()]);
    expect(next.firstEventNumber).toBe(3);
  });
});

describe("a stream's index positions read without their keys (the scavenge's weighing)", () => {
  it('gives the positions of the entries in the range, oldest first, as many as asked, from memory or from disk', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-store-'));
    let store = await openStore(dir);
    const written: number[] = [];
    for (let i = 0; i < 30; i++) {
      // (another stream between them: the positions of one stream's entries are not contiguous)
      const r = await store.append('weighed', ExpectedVersion.any, [event()]);
      written.push(r.position);
      await store.append('other', ExpectedVersion.any, [event()]);
    }
    const check = (s: Store) => {
      expect(s.indexPositionsBetween('weighed', 0, 29, 100)).toEqual(written);
      expect(s.indexPositionsBetween('weighed', 5, 9, 100)).toEqual(written.slice(5, 10));
      expect(s.indexPositionsBetween('weighed', 5, 29, 3)).toEqual(written.slice(5, 8));
      expect(s.indexPositionsBetween('weighed', 25, 40, 100)).toEqual(written.slice(25));
      expect(s.indexPositionsBetween('weighed', 9, 5, 100)).toEqual([]);
      expect(s.indexPositionsBetween('never-written', 0, 10, 100)).toEqual([]);
    };
    check(store);
    await store.close();
    store = await openStore(dir);
    check(store);
  });
});

describe('names read back from the log', () => {
  it('every stream name and event type reads back exactly, ASCII or not, however many share a slot of the decoder\'s table', async () => {
    const store = await openStore(undefined, undefined, 0); // no log tail: every read decodes stored bytes
    const names = [
      ...Array.from({ length: 40_000 }, (_, i) => `s-${i}`), // more than the table's 16,384 slots
      'café-1', 'naïve-2', '日本-3', 'emoji-😀', `long-${'x'.repeat(120)}`, `long-é-${'y'.repeat(120)}`,
    ];
    const types = (i: number) => (i % 3 === 0 ? `T${i % 50}` : i % 3 === 1 ? 'Événement' : '型');
    for (let i = 0; i < names.length; i += 500) {
      await store.transact(names.slice(i, i + 500).map((streamId, j) => ({ streamId, expected: ExpectedVersion.any, events: [event(types(i + j))] })));
    }
    const seen: [string, string][] = [];
    for (let position = 0; ;) {
      const page = store.readAllForward(position, 4096);
      for (const r of page.records) if (!r.streamId.startsWith('$')) seen.push([r.streamId, r.eventType]);
      if (page.isEnd) break;
      position = page.nextPosition;
    }
    expect(seen).toEqual(names.map((n, i) => [n, types(i)]));
    // Twice: the second time most names are found in the table.
    const again = store.readAllForward(0, 100_000).records.filter((r) => !r.streamId.startsWith('$')).map((r) => [r.streamId, r.eventType]);
    expect(again).toEqual(seen);
  });
});

describe('store', () => {
  it('assigns contiguous event numbers and strictly increasing positions', async () => {
    const store = await openStore();
    await Promise.all(Array.from({ length: 200 }, (_, i) => store.append(`s-${i % 7}`, ExpectedVersion.any, [event('T', { i })])));
    const all = store.readAllForward(0, 1000).records;
    for (let i = 1; i < all.length; i++) expect(all[i].position).toBeGreaterThan(all[i - 1].position);
    for (let s = 0; s < 7; s++) {
      const page = store.readStreamForward(`s-${s}`, 0, 1000);
      if (page.status !== 'ok') throw new Error(page.status);
      expect(page.events.map((e) => e.event!.eventNumber)).toEqual(page.events.map((_, i) => i));
    }
  });

  it('serialises expected versions queued in the same flush', async () => {
    const store = await openStore();
    const results = await Promise.allSettled(
      Array.from({ length: 10 }, () => store.append('race', ExpectedVersion.exact(0), [event()])),
    );
    // Version 0 does not exist yet: every append expecting it fails, none writes.
    expect(results.every((r) => r.status === 'rejected' && r.reason instanceof WrongExpectedVersionError)).toBe(true);
    const wins = await Promise.allSettled(Array.from({ length: 10 }, () => store.append('race', ExpectedVersion.noStream, [event()])));
    expect(wins.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    const page = store.readStreamForward('race', 0, 100);
    expect(page.status === 'ok' && page.events.length).toBe(1);
  });

  it('treats a retry queued in the same flush as idempotent', async () => {
    const store = await openStore();
    const e = event();
    const [a, b] = await Promise.all([store.append('retry', ExpectedVersion.any, [e]), store.append('retry', ExpectedVersion.any, [e])]);
    expect(a.firstEventNumber).toBe(0);
    expect(b).toMatchObject({ firstEventNumber: 0, idempotent: true });
    expect(store.streamInfo('retry')!.lastEventNumber).toBe(0);
  });

  it('a partially matching retry is a conflict, not a duplicate', async () => {
    const store = await openStore();
    const e1 = event();
    await store.append('partial', ExpectedVersion.any, [e1, event()]);
    await expect(store.append('partial', ExpectedVersion.any, [e1, event()])).rejects.toBeInstanceOf(WrongExpectedVersionError);
    expect(store.streamInfo('partial')!.lastEventNumber).toBe(1);
  });

  it('applies metadata written earlier in the same flush to later appends', async () => {
    const store = await openStore();
    await store.append('meta', ExpectedVersion.any, [event()]);
    await Promise.all([
      store.deleteStream('meta', ExpectedVersion.any, false),
      store.append('meta', ExpectedVersion.any, [event('After')]),
    ]);
    const page = store.readStreamForward('meta', 0, 10);
    if (page.status !== 'ok') throw new Error(page.status);
    expect(page.events.map((e) => [e.event!.eventNumber, e.event!.eventType])).toEqual([[1, 'After']]);
  });

  it('a hard delete refuses every later write, also within the same flush', async () => {
    const store = await openStore();
    await store.append('gone', ExpectedVersion.any, [event()]);
    const [, late] = await Promise.allSettled([
      store.deleteStream('gone', ExpectedVersion.any, true),
      store.append('gone', ExpectedVersion.any, [event()]),
    ]);
    expect(late.status === 'rejected' && late.reason instanceof StreamDeletedError).toBe(true);
    expect(store.readStreamForward('gone', 0, 10).status).toBe('deleted');
  });

  it('keeps records within a chunk unless a record is larger than a chunk', async () => {
    const store = await openStore(undefined, 4096);
    for (let i = 0; i < 40; i++) await store.append('chunks', ExpectedVersion.any, [event('T', { pad: 'x'.repeat(300) })]);
    for (const r of store.readAllForward(0, 100).records) {
      expect(Math.floor(r.position / 4096)).toBe(Math.floor((r.position + r.size - 1) / 4096));
    }
  });

  it('restarts with every stream, position and event intact', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-store-'));
    const first = await openStore(dir);
    for (let i = 0; i < 50; i++) await first.append(`r-${i % 5}`, ExpectedVersion.any, [event('T', { i })]);
    const before = first.readAllForward(0, 1000).records.map((r) => [r.position, r.streamId, r.eventNumber, r.data.toString()]);
    const head = first.headPosition;
    await first.close();
    const second = await openStore(dir);
    expect(second.headPosition).toBe(head);
    expect(second.readAllForward(0, 1000).records.map((r) => [r.position, r.streamId, r.eventNumber, r.data.toString()])).toEqual(before);
    const next = await second.append('r-0', ExpectedVersion.exact(9), [event()]);
    expect(next.firstEventNumber).toBe(10);
  });

  it('refuses writes after close and finishes those queued before', async () => {
    const store = await openStore();
    const queued = store.append('closing', ExpectedVersion.any, [event()]);
    const closed = store.close();
    await expect(queued).resolves.toMatchObject({ firstEventNumber: 0 });
    await closed;
    await expect(store.append('closing', ExpectedVersion.any, [event()])).rejects.toThrow(/shutting down/);
  });

  it('a transaction writes to several streams atomically: all or nothing', async () => {
    const store = await openStore();
    await store.append('tx-b', ExpectedVersion.any, [event()]);
    await expect(store.transact([
      { streamId: 'tx-a', expected: ExpectedVersion.any, events: [event('A')] },
      { streamId: 'tx-b', expected: ExpectedVersion.exact(5), events: [event('B')] },
    ])).rejects.toBeInstanceOf(WrongExpectedVersionError);
    expect(store.streamInfo('tx-a')).toBeUndefined();
    expect(store.streamInfo('tx-b')!.lastEventNumber).toBe(0);
    const results = await store.transact([
      { streamId: 'tx-a', expected: ExpectedVersion.noStream, events: [event('A'), event('A')] },
      { streamId: 'tx-b', expected: ExpectedVersion.exact(0), events: [event('B')] },
    ]);
    expect(results.map((r) => [r.firstEventNumber, r.lastEventNumber])).toEqual([[0, 1], [1, 1]]);
    const all = store.readAllForward(0, 100).records.map((r) => r.streamId);
    expect(all).toEqual(['tx-b', 'tx-a', 'tx-a', 'tx-b']);
  });

  it('deferred-sync transactions queue behind client appends, each whole in its own flush', async () => {
    const store = await openStore();
    const commits: number[] = [];
    store.bus.subscribe((c) => commits.push(c.records.length), 'the test');
    const big = Array.from({ length: 2500 }, (_, i) => event('Link', { i }));
    const transaction = store.transact([{ streamId: 'links-a', expected: ExpectedVersion.any, events: big.slice(0, 1200) },
      { streamId: 'links-b', expected: ExpectedVersion.any, events: big.slice(1200) }], true);
    const second = store.transact([{ streamId: 'links-c', expected: ExpectedVersion.any, events: big.slice(0, 1100).map((e) => event(e.eventType)) }], true);
    const single = store.append('client', ExpectedVersion.any, [event('Placed')]);
    const [[a, b], [c], appended] = await Promise.all([transaction, second, single]);
    // The append was queued last and written first, alone (appends never wait for the write thread).
    expect(appended.position).toBeLessThan(a.position);
    expect(a.position).toBeLessThan(b.position);
    expect(b.position).toBeLessThan(c.position);
    expect(commits).toEqual([1, 2500, 1100]);
  });

  it('a deferred-sync transaction marked ahead (a system projection\'s checkpoint) goes before the other deferred ones queued, after the appends', async () => {
    const store = await openStore();
    const commits: number[] = [];
    store.bus.subscribe((c) => commits.push(c.records.length), 'the test');
    const links = (n: number) => Array.from({ length: n }, (_, i) => event('Link', { i }));
    // Queued in one turn, so the writer's first look sees them all: 600 + 600 + 600 events, then one ahead, then an append.
    const plain = [1, 2, 3].map((i) => store.transact([{ streamId: `user-projection-${i}`, expected: ExpectedVersion.any, events: links(600) }], true));
    const ahead = store.transact([{ streamId: '$streams', expected: ExpectedVersion.any, events: links(3) }], true, true);
    const single = store.append('client', ExpectedVersion.any, [event('Placed')]);
    const [p1, p2, p3] = (await Promise.all(plain)).map(([r]) => r.position);
    const [[a]] = await Promise.all([ahead]);
    const appended = await single;
    expect(appended.position).toBeLessThan(a.position);
    expect(a.position).toBeLessThan(p1);
    expect(p1).toBeLessThan(p2);
    expect(p2).toBeLessThan(p3);
    // The append alone (synced), then the links ahead with the first 1,000 records' worth of the others.
    expect(commits[0]).toBe(1);
    expect(commits[1]).toBe(3 + 600 + 600);
    expect(store.readAllForward(0, 10).records.slice(1, 4).map((r) => r.streamId)).toEqual(['$streams', '$streams', '$streams']);
  });

  it('deferred-sync transactions are in the log after a restart, in order, with the appends around them', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-store-'));
    const store = await openStore(dir);
    await store.append('before', ExpectedVersion.any, [event('A')]);
    await store.transact([{ streamId: 'deferred', expected: ExpectedVersion.any, events: [event('L1'), event('L2')] }], true);
    await store.append('after', ExpectedVersion.any, [event('B')]);
    await store.transact([{ streamId: 'deferred', expected: ExpectedVersion.any, events: [event('L3')] }], true);
    await store.close();
    const reopened = await openStore(dir);
    expect(reopened.readAllForward(0, 100).records.map((r) => r.eventType)).toEqual(['A', 'L1', 'L2', 'B', 'L3']);
    const page = reopened.readStreamForward('deferred', 0, 10);
    expect(page.status === 'ok' && page.lastEventNumber).toBe(2);
  });

  it('after a restart the newest records are served from memory again, byte for byte as before', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-store-'));
    const store = await openStore(dir);
    for (let i = 0; i < 20; i++) await store.append(`warm-${i % 3}`, ExpectedVersion.any, [event('T', { i }), event('U', { i })]);
    const before = store.readAllForward(0, 100).records.map((r) => [r.position, r.streamId, r.eventType, r.data.toString()]);
    await store.close();
    const reopened = await openStore(dir);
    const cachedBefore = reopened.readCounters.cachedRecord;
    const after = reopened.readAllForward(0, 100).records.map((r) => [r.position, r.streamId, r.eventType, r.data.toString()]);
    expect(after).toEqual(before);
    expect(reopened.readCounters.cachedRecord - cachedBefore).toBe(40);
  });

  it('reads the same whether records come from the in-memory log tail or from RocksDB', async () => {
    const cached = await openStore(undefined, 256 * 1024 * 1024, 4000); // only the newest ~20 records stay in memory
    const uncached = await openStore(undefined, 256 * 1024 * 1024, 0);
    for (let i = 0; i < 120; i++) {
      const e = event('T', { i });
      await cached.append(`c-${i % 4}`, ExpectedVersion.any, [e]);
      await uncached.append(`c-${i % 4}`, ExpectedVersion.any, [e]);
    }
    const view = (s: Store) => {
      const all: unknown[] = [];
      for (let position = 0; ;) {
        const page = s.readAllForward(position, 7);
        all.push(...page.records.map((r) => [r.position, r.streamId, r.eventNumber, r.data.toString()]));
        if (page.records.length === 0) break;
        position = page.nextPosition;
      }
      const streams = [0, 1, 2, 3].map((n) => {
        const page = s.readStreamBackward(`c-${n}`, -1, 50);
        return page.status === 'ok' ? page.events.map((e) => e.event!.data.toString()) : page.status;
      });
      const single = s.readEvent('c-1', 3);
      return { all, streams, single: single.status === 'ok' ? single.event.event!.data.toString() : single.status };
    };
    const expected = view(uncached);
    expect(expected.all).toHaveLength(120);
    expect(view(cached)).toEqual(expected);
    expect(cached.readCounters.cachedRecord).toBeGreaterThan(0);
    expect(cached.readCounters.notCachedRecord).toBeGreaterThan(0);
  });

  it('stream pages and single events read the same from memory and from RocksDB, at every window, also after a restart', async () => {
    // A cache of ~30 records: every stream is partly in memory and partly not, and the window moves as writes go on.
    const dir = mkdtempSync(join(tmpdir(), 'svc-store-'));
    let cached = await openStore(dir, 256 * 1024 * 1024, 6000);
    const uncached = await openStore(undefined, 256 * 1024 * 1024, 0);
    const both = async (write: (s: Store) => Promise<unknown>) => {
      await write(cached);
      await write(uncached);
    };
    for (let i = 0; i < 60; i++) {
      const e = [event('T', { i }), event('U', { i })];
      if (!(i > 40 && i % 5 === 3)) await both((s) => s.append(`w-${i % 5}`, ExpectedVersion.any, e)); // w-3 is hard-deleted at 40
      if (i === 20) await both((s) => s.deleteStream('w-1', ExpectedVersion.any, false)); // recreated by the next append to w-1
      if (i === 30) await both((s) => s.append('$$w-2', ExpectedVersion.any, [event('$metadata', { $maxCount: 5 })]));
      if (i === 40) await both((s) => s.deleteStream('w-3', ExpectedVersion.any, true));
      const link = (target: string): ProposedEvent =>
        ({ eventId: newUuid(), eventType: '$>', isJson: false, data: Buffer.from(target), metadata: Buffer.alloc(0) });
      if (i === 45) await both((s) => s.append('links', ExpectedVersion.any, [link('0@w-0'), link('3@w-1'), link('50@w-4')]));
    }
    const view = (s: Store) => {
      const out: unknown[] = [];
      for (const stream of ['w-0', 'w-1', 'w-2', 'w-3', 'w-4', '$$w-1', '$$w-2', 'links']) {
        for (let from = 0; from < 30; from += 3) {
          for (const page of [s.readStreamForward(stream, from, 4, true), s.readStreamBackward(stream, from, 4, true)]) {
            out.push(page.status === 'ok'
              ? [page.lastEventNumber, page.isEndOfStream, page.events.map((e) => [e.event?.eventNumber, e.event?.data.toString(), e.link?.position])]
              : page.status);
          }
          const single = s.readEvent(stream, from, true);
          out.push(single.status === 'ok' ? [single.event.event?.position, single.event.event?.data.toString()] : single.status);
        }
        const head = s.readStreamBackward(stream, -1, 3, false);
        out.push(head.status === 'ok' ? head.events.map((e) => e.event!.position) : head.status);
      }
      return out;
    };
    const expected = view(uncached);
    const notCachedBefore = cached.readCounters.notCachedRecord;
    expect(view(cached)).toEqual(expected);
    expect(cached.readCounters.notCachedRecord).toBeGreaterThan(notCachedBefore); // the older events come from RocksDB
    await cached.close();
    cached = await openStore(dir, 256 * 1024 * 1024, 6000);
    expect(view(cached)).toEqual(expected);
  });
});

describe('stream informations in bounded memory', () => {
  it('keeps at most the cache size in memory; every stream reads and appends right, also after a restart', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-store-'));
    const store = await openStore(dir, undefined, undefined, undefined, 100);
    for (let i = 0; i < 1000; i += 50) {
      await Promise.all(Array.from({ length: 50 }, (_, j) => store.append(`many-${i + j}`, ExpectedVersion.noStream, [event('A'), event('B')])));
    }
    expect(store.streamInfoCache.cached).toBeLessThanOrEqual(100);
    expect(store.streamCount).toBe(1000);
    const check = async (s: Store) => {
      for (let i = 0; i < 1000; i += 97) {
        const page = s.readStreamForward(`many-${i}`, 0, 10);
        expect(page.status === 'ok' && page.events.map((e) => e.event!.eventType)).toEqual(['A', 'B']);
      }
      // Expected versions are checked against what RocksDB holds for streams the cache forgot.
      await expect(s.append('many-3', ExpectedVersion.exact(0), [event('C')])).rejects.toBeInstanceOf(WrongExpectedVersionError);
      await expect(s.append('many-3', ExpectedVersion.noStream, [event('C')])).rejects.toBeInstanceOf(WrongExpectedVersionError);
      expect(s.streamInfoCache.cached).toBeLessThanOrEqual(100);
    };
    await check(store);
    expect((await store.append('many-7', ExpectedVersion.exact(1), [event('C')])).firstEventNumber).toBe(2);
    await store.close();
    const reopened = await openStore(dir, undefined, undefined, undefined, 100);
    expect(reopened.streamCount).toBe(1000);
    expect(reopened.streamInfoCache.cached).toBe(0); // nothing is loaded at start
    await check(reopened);
    expect(reopened.streamInfo('many-7')?.lastEventNumber).toBe(2);
    expect(reopened.streamInfo('never-written')).toBeUndefined();
  });
});

describe('records read back from packed places', () => {
  it('finds records of user streams, their metastreams and system streams (two key spaces) from RocksDB, and any range of them', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-store-'));
    let store = await openStore(dir);
    const streams = ['orders-1', '$$orders-1', '$system-thing', '$ce-orders', 'orders-2'];
    for (let i = 0; i < 40; i++) await store.append(streams[i % streams.length], ExpectedVersion.any, [event(`T${i}`, { i })]);
    const written = store.readAllForward(0, 1000).records.filter((r) => streams.includes(r.streamId));
    expect(written).toHaveLength(40);
    await store.close();
    stores.splice(stores.indexOf(store), 1);
    // Reopened: nothing is in the log tail's cache, every record comes from its key space.
    store = await openStore(dir);
    const places = new PackedPlaces(2);
    for (const r of written) places.push(r);
    expect(places.length).toBe(40);
    const back = store.recordsAtPacked(places, 0, 40);
    expect(back.map((r) => [r?.position, r?.streamId, r?.eventType, r?.data.toString()]))
      .toEqual(written.map((r) => [r.position, r.streamId, r.eventType, r.data.toString()]));
    const middle = store.recordsAtPacked(places.reverse(), 10, 13);
    expect(middle.map((r) => r?.eventType)).toEqual(['T29', 'T28', 'T27']);
  });
});

describe('the write door', () => {
  function raw(type: string, data: string, metadata = ''): ProposedEvent {
    return { eventId: newUuid(), eventType: type, isJson: true, data: Buffer.from(data), metadata: Buffer.from(metadata) };
  }

  async function refusal(p: Promise<unknown>): Promise<InvalidWriteError> {
    const outcome = await p.then(() => undefined, (err: unknown) => err);
    expect(outcome).toBeInstanceOf(InvalidWriteError);
    return outcome as InvalidWriteError;
  }

  it('a refused write in the middle of one batch fails alone: the writes around it are acknowledged and stored', async () => {
    const store = await openStore();
    // Queued in the same tick: one flush takes them all into one batch.
    const writes = [
      store.append('good-1', ExpectedVersion.any, [event('A')]),
      store.append('x'.repeat(70_000), ExpectedVersion.any, [event('B')]),
      store.transact([
        { streamId: 'good-2', expected: ExpectedVersion.any, events: [event('C')] },
        { streamId: 'bad-type', expected: ExpectedVersion.any, events: [event('T'.repeat(70_000))] },
      ]),
      store.append('good-3', ExpectedVersion.any, [event('D'), event('E')]),
      store.append('good-4', ExpectedVersion.any, [event('F'), raw('$>', '-5@')]),
      store.deleteStream('$all', ExpectedVersion.any, true),
      store.append('good-5', ExpectedVersion.noStream, [event('G')]),
    ];
    const [a, b, c, d, e, f, g] = await Promise.allSettled(writes);
    expect(a.status).toBe('fulfilled');
    expect(b.status === 'rejected' && b.reason.rule).toBe('stream-name');
    expect(c.status === 'rejected' && c.reason.rule).toBe('event-type');
    expect(d.status).toBe('fulfilled');
    expect(e.status === 'rejected' && e.reason.rule).toBe('link');
    expect(f.status === 'rejected' && f.reason.rule).toBe('stream-name');
    expect(g.status).toBe('fulfilled');
    const types = store.readAllForward(0, 100).records.map((r) => `${r.streamId}/${r.eventType}`);
    expect(types).toEqual(['good-1/A', 'good-3/D', 'good-3/E', 'good-5/G']);
    // Nothing of the refused transaction or of the half-good append was written: their streams do not exist.
    for (const stream of ['good-2', 'good-4', 'bad-type']) expect(store.streamInfo(stream)).toBeUndefined();
    // The writer keeps going.
    await store.append('after', ExpectedVersion.any, [event()]);
    expect(store.readStreamForward('after', 0, 1).status).toBe('ok');
  });

  it('names the stream and the rule: empty and $all streams, empty and long types, size, links, JSON depth', async () => {
    const store = await openStore(undefined, undefined, undefined, 4096);
    expect((await refusal(store.append('', ExpectedVersion.any, [event()]))).message).toMatch(/must not be empty/);
    expect((await refusal(store.append('$all', ExpectedVersion.any, [event()]))).message).toMatch(/'\$all' is the log itself/);
    expect((await refusal(store.append('$$', ExpectedVersion.any, [event()]))).message).toMatch(/metadata stream of no stream/);
    expect((await refusal(store.append('s', ExpectedVersion.any, [event('')]))).message).toMatch(/event type must not be empty/);
    const big = await refusal(store.append('s', ExpectedVersion.any, [raw('T', JSON.stringify({ s: 'x'.repeat(5000) }))]));
    expect(big.rule).toBe('event-size');
    expect(big.message).toMatch(/limited to 4,096 bytes \(maxAppendSize\)/);
    for (const body of ['5', '@s', '-1@s', '1.5@s', '1@', '1e3@s', '99999999999999999999@s']) {
      expect((await refusal(store.append('s', ExpectedVersion.any, [raw('$>', body)]))).rule, body).toBe('link');
    }
    const deep = '['.repeat(1001) + ']'.repeat(1001);
    expect((await refusal(store.append('s', ExpectedVersion.any, [raw('T', deep)]))).message).toMatch(/data is JSON nested deeper than 1000/);
    expect((await refusal(store.append('s', ExpectedVersion.any, [raw('T', '{}', deep)]))).message).toMatch(/metadata is JSON nested/);
    const long = await refusal(store.append('y'.repeat(70_000), ExpectedVersion.any, [event()]));
    expect(long.message).toMatch(/^Invalid write to stream 'y{60}… \(70,000 bytes\)': the stream name is 70,000 bytes/);
    expect(long.message.length).toBeLessThan(300);
    // At the limits, writes go through: a 65,533-byte name (its metastream fits), 1,000 levels, a good link.
    const atLimit = 'z'.repeat(65_533);
    await store.append(atLimit, ExpectedVersion.any, [event()]);
    await store.deleteStream(atLimit, ExpectedVersion.any, false);
    await store.append(atLimit, ExpectedVersion.any, [event()]); // recreating writes its $tb to $$name
    await store.append('s', ExpectedVersion.any, [raw('T', '['.repeat(1000) + ']'.repeat(1000)), raw('$>', '0@s')]);
    expect(store.streamInfo('s')?.lastEventNumber).toBe(1);
    expect(nothingWrittenBy(store, ['', '$all', '$$'])).toBe(true);
  });

  function nothingWrittenBy(store: Store, streams: string[]): boolean {
    return streams.every((s) => store.streamInfo(s) === undefined);
  }

  it('keeps the cluster\'s $epochs to the node: appends, metadata, deletes and transactions are refused, its own appends taken', async () => {
    const store = await openStore();
    for (const p of [
      store.append('$epochs', ExpectedVersion.any, [event('$epoch', { term: 99 })]),
      store.append('$$$epochs', ExpectedVersion.any, [event('$metadata', { $maxCount: 1 })]),
      store.deleteStream('$epochs', ExpectedVersion.any, true),
      store.transact([
        { streamId: 'fine', expected: ExpectedVersion.any, events: [event()] },
        { streamId: '$epochs', expected: ExpectedVersion.any, events: [event('$epoch', { term: 99 })] },
      ]),
    ]) {
      const refused = await refusal(p);
      expect(refused.rule).toBe('reserved');
      expect(refused.message).toMatch(/The \$epochs stream is written by cluster leaders only/);
    }
    expect(store.readAllForward(0, 100).records).toEqual([]);
    const own = await store.appendReserved('$epochs', ExpectedVersion.any, [event('$epoch', { term: 3 })]);
    expect(own.firstEventNumber).toBe(0);
    expect(store.streamInfo('$epochs')?.lastEventNumber).toBe(0);
  });

  it('measures JSON depth outside strings only', () => {
    expect(jsonDepthExceeds(Buffer.from('[[["[[[[", "]"]]]'), 3)).toBe(false);
    expect(jsonDepthExceeds(Buffer.from('[[[["\\"]]]]'), 3)).toBe(true);
    expect(jsonDepthExceeds(Buffer.from('{"a":{"b":{"c":"\\\"[[[[[["}}}'), 3)).toBe(false);
    expect(jsonDepthExceeds(Buffer.from('[{"a":[{"b":1}]}]'), 4)).toBe(false);
    expect(jsonDepthExceeds(Buffer.from('[{"a":[{"b":[]}]}]'), 4)).toBe(true);
  });
});
