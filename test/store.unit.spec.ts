import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  ExpectedVersion, newUuid, Store, StreamDeletedError, WrongExpectedVersionError, type ProposedEvent,
} from '../src/store/index.js';

const dirs: string[] = [];
const stores: Store[] = [];

async function openStore(dir = mkdtempSync(join(tmpdir(), 'svc-store-')), chunkSize = 256 * 1024 * 1024,
  logCacheBytes?: number): Promise<Store> {
  dirs.push(dir);
  const store = await Store.open({ dir, inMemory: false, chunkSize, logCacheBytes });
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
    store.bus.subscribe((c) => commits.push(c.records.length));
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
});
