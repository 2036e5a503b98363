import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import {
  ExpectedVersion, InvalidWriteError, newUuid, Store, WrongExpectedVersionError, type ProposedEvent,
} from '../src/store/index.js';

// A large operation (thousands of events: a projection checkpoint with a burst of emitted events)
// is built in slices and written on the write thread as ONE RocksDB write (commit-pipeline.ts,
// client-writes.ts, write-thread.ts): the event loop turns meanwhile, readers see all of it or
// none, the writes behind it wait and see it, and a refused one writes nothing.

const dirs: string[] = [];
const stores: Store[] = [];

async function openStore(dir = mkdtempSync(join(tmpdir(), 'svc-large-'))): Promise<Store> {
  if (!dirs.includes(dir)) dirs.push(dir);
  const store = await Store.open({ dir, inMemory: false, chunkSize: 256 * 1024 * 1024 });
  stores.push(store);
  return store;
}

afterEach(async () => {
  for (const s of stores.splice(0)) await s.close().catch(() => {});
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function event(type: string, data: unknown = {}): ProposedEvent {
  return { eventId: newUuid(), eventType: type, isJson: true, data: Buffer.from(JSON.stringify(data)), metadata: Buffer.alloc(0), idempotent: false };
}

function burst(count: number, type = 'Burst'): ProposedEvent[] {
  return Array.from({ length: count }, (_, i) => event(type, { i }));
}

function numbersOf(store: Store, stream: string): number[] {
  const page = store.readStreamForward(stream, 0, 100_000);
  if (page.status !== 'ok') throw new Error(`${stream}: ${page.status}`);
  return page.events.map((e) => e.event!.eventNumber);
}

describe('large writes', () => {
  it('the event loop turns while a large transaction is built and written; readers see none of it until it is whole', async () => {
    const store = await openStore();
    await store.append('before', ExpectedVersion.any, [event('Before')]);
    const head = store.headPosition;
    const events = burst(30_000);
    let done = false;
    const writing = store.transact([
      { streamId: 'burst-a', expected: ExpectedVersion.any, events: events.slice(0, 15_000) },
      { streamId: 'burst-b', expected: ExpectedVersion.any, events: events.slice(15_000) },
    ], true).finally(() => { done = true; });
    // What a reader between two turns sees: records after the head, and the streams' infos.
    const seen = new Set<string>();
    let turns = 0;
    for (;;) {
      await nextTurn();
      if (done) break;
      turns++;
      seen.add(`${store.readAllForward(head, 10).records.length}:${store.streamInfo('burst-a') !== undefined}:${store.streamInfo('burst-b') !== undefined}`);
    }
    const [a, b] = await writing;
    // One turn held the whole commit before (no turn in between); now it is sliced.
    expect(turns).toBeGreaterThan(5);
    expect([...seen]).toEqual(['0:false:false']);
    expect([a.firstEventNumber, a.lastEventNumber, b.firstEventNumber, b.lastEventNumber]).toEqual([0, 14_999, 0, 14_999]);
    expect(numbersOf(store, 'burst-a')).toEqual(Array.from({ length: 15_000 }, (_, i) => i));
    const records = store.readAllForward(head, 40_000).records;
    expect(records.map((r) => JSON.parse(r.data.toString()).i)).toEqual(events.map((_, i) => i));
  });

  it('writes queued behind a large transaction wait for it, in log order, and their expected versions see it', async () => {
    const store = await openStore();
    const writing = store.transact([{ streamId: 'burst', expected: ExpectedVersion.any, events: burst(20_000) }], true);
    await nextTurn(); // the writer has taken it
    const after = store.append('burst', ExpectedVersion.exact(19_999), [event('After')]);
    const stale = store.append('burst', ExpectedVersion.noStream, [event('Stale')]);
    const other = store.append('other', ExpectedVersion.any, [event('Other')]);
    const [[big], appended, elsewhere] = await Promise.all([writing, after, other]);
    await expect(stale).rejects.toBeInstanceOf(WrongExpectedVersionError);
    expect(appended.firstEventNumber).toBe(20_000);
    const last = store.readEvent('burst', 19_999);
    if (last.status !== 'ok') throw new Error(last.status);
    expect(appended.position).toBeGreaterThan(last.event.event!.position);
    expect(elsewhere.position).toBeGreaterThan(big.position);
    expect(numbersOf(store, 'burst')).toEqual(Array.from({ length: 20_001 }, (_, i) => i));
  });

  it('a refused large operation writes nothing: a wrong expected version after it in its transaction, an event the door refuses deep in it', async () => {
    const store = await openStore();
    await store.append('existing', ExpectedVersion.any, [event('E')]);
    const head = store.headPosition;
    const refused = store.transact([
      { streamId: 'big', expected: ExpectedVersion.any, events: burst(20_000) },
      { streamId: 'existing', expected: ExpectedVersion.noStream, events: [event('Late')] },
    ], true);
    await expect(refused).rejects.toBeInstanceOf(WrongExpectedVersionError);
    const deep = burst(20_000);
    deep[12_345] = { ...deep[12_345], eventType: '' };
    await expect(store.append('deep', ExpectedVersion.any, deep)).rejects.toThrow(InvalidWriteError);
    await expect(store.append('deep', ExpectedVersion.any, deep)).rejects.toThrow(/\(event 12345\)/);
    expect(store.headPosition).toBe(head);
    expect(store.streamInfo('big')).toBeUndefined();
    expect(store.streamInfo('deep')).toBeUndefined();
    // and the writer goes on
    const next = await store.append('existing', ExpectedVersion.exact(0), [event('Next')]);
    expect(next.firstEventNumber).toBe(1);
  });

  it('a large append is in the log whole after a restart, with the appends around it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-large-'));
    const store = await openStore(dir);
    await store.append('around', ExpectedVersion.any, [event('First')]);
    await store.append('big', ExpectedVersion.noStream, burst(10_000));
    await store.append('around', ExpectedVersion.exact(0), [event('Last')]);
    await store.close();
    const reopened = await openStore(dir);
    const types = reopened.readAllForward(0, 20_000).records.map((r) => r.eventType);
    expect(types).toEqual(['First', ...Array.from({ length: 10_000 }, () => 'Burst'), 'Last']);
    expect(numbersOf(reopened, 'big')).toHaveLength(10_000);
  });
});
