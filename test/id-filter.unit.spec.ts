import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ExpectedVersion, newUuid, Store, type ProposedEvent } from '../src/store/index.js';
import { EventIdFilter } from '../src/store/id-filter.js';
import { eventIdKey } from '../src/store/keys.js';
import { Rocks } from '../src/store/rocks.js';

// The Bloom filter of stored event ids (src/store/id-filter.ts): never "not there" for an id that
// is stored, rarely "maybe" for one that is not, and retries are still recognised after a restart,
// before and after the filter has read the stored ids.

const dirs: string[] = [];
const stores: Store[] = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close().catch(() => {});
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A fresh data directory, removed after the test. */
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'svc-idf-'));
  dirs.push(dir);
  return dir;
}

/** Writes `count` random event-id keys over 500 streams, 5,000 to a write, as appends would have; returns them. */
function writeIdKeys(rocks: Rocks, count: number): Buffer[] {
  const keys = Array.from({ length: count }, (_, i) => eventIdKey(i % 500, randomBytes(16)));
  for (let i = 0; i < keys.length; i += 5000) rocks.writeDurable(keys.slice(i, i + 5000).map((k) => [k, Buffer.of(0)]));
  return keys;
}

const event = (id = newUuid()): ProposedEvent => ({ eventId: id, eventType: 'E', isJson: true, data: Buffer.from('{}'), metadata: Buffer.alloc(0) });

describe('the filter of stored event ids', () => {
  it('never denies a key it was given, and admits few it was not', async () => {
    const filter = new EventIdFilter(1024 * 1024);
    const added = Array.from({ length: 100_000 }, (_, i) => eventIdKey(i % 1000, randomBytes(16)));
    for (const k of added) filter.add(k);
    // Not loaded yet (no database read): every answer is "maybe".
    expect(filter.mightContain(eventIdKey(1, randomBytes(16)))).toBe(true);
    // Loaded from an empty database: the answers are its own from now on.
    const dir = tempDir();
    const rocks = await Rocks.open(dir, false);
    filter.load(rocks);
    await vi.waitFor(() => expect(filter.ready).toBe(true));
    await rocks.close();
    expect(added.every((k) => filter.mightContain(k))).toBe(true);
    const others = Array.from({ length: 100_000 }, (_, i) => eventIdKey(i % 1000, randomBytes(16)));
    const falsePositives = others.filter((k) => filter.mightContain(k)).length;
    expect(falsePositives / others.length).toBeLessThan(0.02); // 8M bits, 100k keys, 7 hashes: ~0.01%
  });

  it('admits every key its thread read and every key added meanwhile, and counts them', async () => {
    const dir = tempDir();
    const rocks = await Rocks.open(dir, false);
    const stored = writeIdKeys(rocks, 60_000);
    const filter = new EventIdFilter(64 * 1024);
    filter.load(rocks);
    // Appends go on while the thread reads: keys added in slices until the load has ended.
    const added: Buffer[] = [];
    while (!filter.ready) {
      for (let i = 0; i < 2000; i++) {
        const key = eventIdKey(i, randomBytes(16));
        filter.add(key);
        added.push(key);
      }
      await new Promise((r) => setImmediate(r));
    }
    await rocks.close();
    expect(filter.count).toBe(stored.length + added.length);
    expect(stored.filter((k) => !filter.mightContain(k))).toEqual([]);
    expect(added.filter((k) => !filter.mightContain(k))).toEqual([]);
  });

  it('a retry is recognised after a restart, before and after the filter has read the stored ids', async () => {
    const dir = tempDir();
    const options = { dir, inMemory: false, chunkSize: 1 << 28 };
    let store = await Store.open(options);
    const ids = Array.from({ length: 300 }, () => newUuid());
    for (let i = 0; i < ids.length; i++) await store.append(`s-${i % 30}`, ExpectedVersion.any, [event(ids[i]), event()]);
    await store.close();
    store = await Store.open(options);
    stores.push(store);
    // Right after the start (the filter may still be reading): answered from RocksDB.
    const early = await store.append('s-0', ExpectedVersion.any, [event(ids[0])]);
    expect(early).toMatchObject({ firstEventNumber: 0, idempotent: true });
    await vi.waitFor(() => expect(store.idFilter.ready).toBe(true));
    expect(store.idFilter.count).toBeGreaterThanOrEqual(ids.length);
    for (let i = 0; i < ids.length; i += 7) {
      const again = await store.append(`s-${i % 30}`, ExpectedVersion.any, [event(ids[i])]);
      expect(again).toMatchObject({ firstEventNumber: 2 * Math.floor(i / 30), idempotent: true });
    }
    // New ids append, and are recognised when retried at once.
    const fresh = newUuid();
    const first = await store.append('s-1', ExpectedVersion.any, [event(fresh)]);
    expect(first.idempotent).toBe(false);
    expect(await store.append('s-1', ExpectedVersion.any, [event(fresh)])).toMatchObject({ firstEventNumber: first.firstEventNumber, idempotent: true });
    expect(store.readStreamForward('s-1', 0, 100).status === 'ok' && (store.readStreamForward('s-1', 0, 100) as { events: unknown[] }).events.length).toBe(21);
  });

  it('a store without the filter recognises retries too', async () => {
    const dir = tempDir();
    const store = await Store.open({ dir, inMemory: false, chunkSize: 1 << 28, eventIdFilterBytes: 0 });
    stores.push(store);
    const id = newUuid();
    await store.append('s', ExpectedVersion.any, [event(id)]);
    expect(await store.append('s', ExpectedVersion.any, [event(id)])).toMatchObject({ firstEventNumber: 0, idempotent: true });
    expect(store.idFilter.enabled).toBe(false);
  });

  it('stops its thread between two pages when the database is about to close, and the database closes and opens again whole', async () => {
    const dir = tempDir();
    let rocks = await Rocks.open(dir, false);
    const stored = writeIdKeys(rocks, 200_000);
    // Stopped at every moment of a load: before its thread runs, while it reads, after it answered.
    for (const after of [0, 5, 20, 60]) {
      const filter = new EventIdFilter(1024 * 1024);
      filter.load(rocks);
      await new Promise((r) => setTimeout(r, after));
      await filter.stop();
      // Stopped before the end, it is not ready: every answer stays "maybe" (a read of RocksDB).
      if (after === 0) expect(filter.ready).toBe(false); // asked before its thread read a page
      if (!filter.ready) expect(filter.mightContain(eventIdKey(1, randomBytes(16)))).toBe(true);
      else expect(stored.every((k) => filter.mightContain(k))).toBe(true);
    }
    await rocks.close();
    rocks = await Rocks.open(dir, false);
    expect(rocks.getMany(stored.slice(0, 1000)).every((v) => v !== undefined)).toBe(true);
    await rocks.close();
  });
});
