import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ExpectedVersion, newUuid, Store, type ProposedEvent } from '../src/store/index.js';
import { metaKey } from '../src/store/keys.js';
import { Rocks } from '../src/store/rocks.js';
import { SPACE_RECLAIM } from '../src/store/space-reclaim.js';

// Giving back the space of deleted keys: Rocks.flushMemtable / reclaimSpace, and the writer's
// reclaim after a scavenge's removals.

const dirs: string[] = [];
const closers: (() => Promise<void>)[] = [];
const defaults = { ...SPACE_RECLAIM };

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'svc-space-'));
  dirs.push(dir);
  return dir;
}

afterEach(async () => {
  Object.assign(SPACE_RECLAIM, defaults);
  for (const close of closers.splice(0)) await close().catch(() => {});
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function openRocks(): Promise<Rocks> {
  const rocks = await Rocks.open(tempDir(), false);
  closers.push(() => rocks.close());
  return rocks;
}

function key(i: number): Buffer {
  const k = Buffer.alloc(5);
  k[0] = 0x01;
  k.writeUInt32BE(i, 1);
  return k;
}

const sstBytes = (rocks: Rocks) => Number(rocks.property('rocksdb.total-sst-files-size'));

async function until(condition: () => boolean, timeoutMs: number): Promise<void> {
  const started = Date.now();
  while (!condition()) {
    if (Date.now() - started > timeoutMs) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}

function rocksOf(store: Store): Rocks {
  return (store as unknown as { rocks: Rocks }).rocks;
}

describe('space reclaim', () => {
  it('flushMemtable writes the memtable to an L0 file and leaves no filler behind', async () => {
    const rocks = await openRocks();
    rocks.writeDurable(Array.from({ length: 100 }, (_, i) => [key(i), Buffer.from(`v${i}`)] as const));
    await rocks.flushMemtable();
    expect(Number(rocks.property('rocksdb.num-files-at-level0'))).toBeGreaterThanOrEqual(1);
    expect(rocks.property('rocksdb.num-immutable-mem-table')).toBe('0');
    expect(Number(rocks.property('rocksdb.cur-size-active-mem-table'))).toBeLessThan(16 * 1024 * 1024);
    expect(rocks.get(metaKey('rocks-memtable-filler'))).toBeUndefined();
    expect(rocks.get(key(42))?.toString()).toBe('v42');
    // Nothing that was written is in the WAL only: the values survive a reopen either way.
    expect(rocks.scan({ gte: key(0), lt: key(1000) }).keys).toHaveLength(100);
  });

  it('reclaimSpace gives back the space of deleted keys without waiting for more writes', async () => {
    const rocks = await openRocks();
    const count = 4096;
    for (let i = 0; i < count; i += 256) {
      rocks.writeDurable(Array.from({ length: 256 }, (_, j) => [key(i + j), randomBytes(4096)] as const));
    }
    await rocks.flushMemtable();
    const full = sstBytes(rocks);
    expect(full).toBeGreaterThan(15 * 1024 * 1024);
    // Delete all but every 64th key.
    const deletes: (readonly [Buffer])[] = [];
    for (let i = 0; i < count; i++) if (i % 64 !== 0) deletes.push([key(i)]);
    rocks.writeDurable(deletes);
    expect(sstBytes(rocks)).toBe(full);
    const flushes = await rocks.reclaimSpace();
    expect(flushes).toBeGreaterThanOrEqual(1);
    expect(flushes).toBeLessThanOrEqual(4);
    await until(() => sstBytes(rocks) < full / 8, 30_000);
    const left = rocks.scan({ gte: key(0), lt: key(count) });
    expect(left.keys.map((k) => k.readUInt32BE(1))).toEqual(Array.from({ length: count / 64 }, (_, i) => i * 64));
    expect(rocks.get(metaKey('rocks-memtable-filler'))).toBeUndefined();
  }, 60_000);

  it('stops when told to', async () => {
    const rocks = await openRocks();
    rocks.writeDurable([[key(1), Buffer.from('x')]]);
    let calls = 0;
    const flushes = await rocks.reclaimSpace(() => ++calls > 3);
    expect(flushes).toBe(1);
    expect(rocks.get(metaKey('rocks-memtable-filler'))).toBeUndefined();
    expect(rocks.get(key(1))?.toString()).toBe('x');
  });

  function event(i: number): ProposedEvent {
    return { eventId: newUuid(), eventType: 'T', isJson: false, data: randomBytes(2048), metadata: Buffer.from(`${i}`) };
  }

  async function storeWithRemovals(): Promise<{ store: Store; removed: number }> {
    const dir = tempDir();
    const store = await Store.open({ dir, inMemory: false, chunkSize: 256 * 1024 * 1024 });
    closers.push(() => store.close());
    for (let i = 0; i < 40; i++) {
      await store.append(`s-${i % 2}`, ExpectedVersion.any, Array.from({ length: 50 }, (_, j) => event(i * 50 + j)));
    }
    // What a scavenge would remove: every event of s-0 but its last.
    const records = store.readAllForward(0, 10_000).records.filter((r) => r.streamId === 's-0');
    await store.remove({ records: records.slice(0, -1), chunkOps: [], sync: true });
    return { store, removed: records.length - 1 };
  }

  it('the writer gives the space back a while after the last removal, once enough was removed', async () => {
    Object.assign(SPACE_RECLAIM, { afterMs: 50, minRemovedBytes: 1024 * 1024 });
    const { store, removed } = await storeWithRemovals();
    const rocks = rocksOf(store);
    // The removal's tombstones leave the memtable (flushed), and the L0 files are compacted away.
    await until(() => Number(rocks.property('rocksdb.num-entries-active-mem-table')) < removed
      && rocks.property('rocksdb.num-immutable-mem-table') === '0' && rocks.property('rocksdb.num-files-at-level0') === '0'
      && rocks.property('rocksdb.num-running-compactions') === '0', 30_000);
    expect(Number(rocks.property('rocksdb.num-files-at-level1')) + Number(rocks.property('rocksdb.num-files-at-level6'))).toBeGreaterThan(0);
    const page = store.readStreamForward('s-0', 0, 10_000);
    if (page.status !== 'ok') throw new Error(page.status);
    expect(page.events.filter((e) => e.event)).toHaveLength(1);
    expect(store.readStreamForward('s-1', 0, 10_000).status).toBe('ok');
  }, 60_000);

  it('a removal below the threshold leaves RocksDB alone, and close does not wait for an armed reclaim', async () => {
    Object.assign(SPACE_RECLAIM, { afterMs: 60_000, minRemovedBytes: 1024 * 1024 });
    const { store } = await storeWithRemovals();
    const started = performance.now();
    await store.close();
    expect(performance.now() - started).toBeLessThan(5_000);
    Object.assign(SPACE_RECLAIM, { afterMs: 10, minRemovedBytes: Infinity });
    const second = await storeWithRemovals();
    await new Promise((r) => setTimeout(r, 200));
    expect(Number(rocksOf(second.store).property('rocksdb.num-files-at-level0'))).toBe(0);
  });
});

describe('a clean close', () => {
  const walBytes = (dir: string) => readdirSync(dir).filter((f) => f.endsWith('.log')).reduce((sum, f) => sum + statSync(join(dir, f)).size, 0);
  // Random data: the write-ahead log is compressed, and zeros would leave it small anyway.
  const bulky = (i: number): ProposedEvent => ({
    eventId: newUuid(), eventType: 'Bulky', isJson: true, data: Buffer.from(JSON.stringify({ i, pad: randomBytes(6000).toString('base64') })), metadata: Buffer.alloc(0),
  });

  it('flushes a large memtable, so the next open replays no write-ahead log, and loses nothing', async () => {
    const dir = tempDir();
    let store = await Store.open({ dir, inMemory: false });
    const written: ProposedEvent[] = [];
    for (let a = 0; a < 15; a++) {
      const events = Array.from({ length: 100 }, (_, j) => bulky(a * 100 + j));
      written.push(...events);
      await store.append(`bulky-${a % 3}`, ExpectedVersion.any, events);
    }
    expect(Number(rocksOf(store).property('rocksdb.cur-size-active-mem-table'))).toBeGreaterThan(8 * 1024 * 1024);
    await store.close();
    expect(walBytes(dir)).toBeLessThan(1024 * 1024);

    store = await Store.open({ dir, inMemory: false });
    closers.push(() => store.close());
    // Nothing was replayed into the memtable: the events come from the table files.
    expect(Number(rocksOf(store).property('rocksdb.cur-size-active-mem-table'))).toBeLessThan(1024 * 1024);
    for (let s = 0; s < 3; s++) {
      const page = store.readStreamForward(`bulky-${s}`, 0, 1000);
      if (page.status !== 'ok') throw new Error(page.status);
      const expected = written.filter((_, i) => Math.floor(i / 100) % 3 === s);
      expect(page.events.map((e) => e.event!.eventId)).toEqual(expected.map((e) => e.eventId));
      expect(page.events.map((e) => Buffer.from(e.event!.data).toString())).toEqual(expected.map((e) => e.data.toString()));
    }
    const next = await store.append('bulky-0', ExpectedVersion.exact(499), [bulky(1500)]);
    expect(next.firstEventNumber).toBe(500);
  });

  it('flushes a log of many small entries too (the costliest to replay: ~175 ms a MB), and loses nothing', async () => {
    const dir = tempDir();
    let store = await Store.open({ dir, inMemory: false });
    const tiny = (i: number): ProposedEvent => ({ eventId: newUuid(), eventType: '$>', isJson: false, data: Buffer.from(`${i}@s-${i}`), metadata: Buffer.alloc(0) });
    for (let a = 0; a < 250; a++) {
      await store.transact(Array.from({ length: 200 }, (_, j) => ({ streamId: `link-${j % 50}`, expected: ExpectedVersion.any, events: [tiny(a * 200 + j)] })));
    }
    const logged = walBytes(dir);
    expect(logged).toBeGreaterThan(1024 * 1024);
    expect(logged).toBeLessThan(8 * 1024 * 1024); // (what a close left to the next open before)
    await store.close();
    expect(walBytes(dir)).toBeLessThan(64 * 1024);
    store = await Store.open({ dir, inMemory: false });
    closers.push(() => store.close());
    const page = store.readStreamForward('link-7', 0, 1000);
    if (page.status !== 'ok') throw new Error(page.status);
    expect(page.events.map((e) => e.event!.data.toString())).toEqual(Array.from({ length: 1000 }, (_, k) => `${Math.floor(k / 4) * 200 + 7 + (k % 4) * 50}@s-${Math.floor(k / 4) * 200 + 7 + (k % 4) * 50}`));
  });

  it('leaves a small memtable, and a flush past its time, to the next open to replay', async () => {
    const dir = tempDir();
    let rocks = await Rocks.open(dir, false);
    rocks.writeDurable(Array.from({ length: 100 }, (_, i) => [key(i), Buffer.from(`small-${i}`)] as const));
    expect(await rocks.flushBeforeClose()).toBe(false);
    await rocks.close();
    expect(walBytes(dir)).toBeGreaterThan(0);

    rocks = await Rocks.open(dir, false);
    closers.push(() => rocks.close());
    expect(rocks.get(key(99))?.toString()).toBe('small-99');
    const big = randomBytes(1024 * 1024);
    for (let i = 0; i < 10; i++) rocks.writeUnsynced([[key(1000 + i), Buffer.concat([big, Buffer.of(i)])]]);
    rocks.writeDurable([[key(2000), Buffer.from('last')]]);
    expect(Number(rocks.property('rocksdb.cur-size-active-mem-table'))).toBeGreaterThan(8 * 1024 * 1024); // large enough to flush
    expect(await rocks.flushBeforeClose(0)).toBe(false); // no time given: nothing waited for
    await rocks.close();
    closers.pop();
    rocks = await Rocks.open(dir, false);
    closers.push(() => rocks.close());
    expect(rocks.get(key(2000))?.toString()).toBe('last');
    expect(rocks.get(key(1009))?.subarray(-1)[0]).toBe(9);
  });
});
