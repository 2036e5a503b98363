import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { eventNumberAt, ExpectedVersion, inDollarStream, newUuid, Store, type EventRecord, type ProposedEvent, type RecordSieve } from '../src/store/index.js';
import { BLOCK_BYTES, type BlockReadAhead } from '../src/store/shared-blocks.js';
import { Rocks } from '../src/store/rocks.js';
import { metaKey, u64Value } from '../src/store/keys.js';

// The log blocks the projections share (src/store/shared-blocks.ts): a shared read answers
// exactly what a plain read answers, a scavenge's removal is never served from a block read
// before it, and readers move as a convoy: one ahead waits while the cache is full of blocks a
// slower one has still to read; the slowest never waits.

const dirs: string[] = [];
const stores: Store[] = [];

async function openStore(sharedReadBytes: number): Promise<Store> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-blocks-'));
  dirs.push(dir);
  // No log tail: every plain read goes to RocksDB, as a projection far behind the head does.
  const store = await Store.open({ dir, inMemory: false, chunkSize: 256 * 1024 * 1024, logCacheBytes: 0, sharedReadBytes });
  stores.push(store);
  return store;
}

afterEach(async () => {
  for (const s of stores.splice(0)) await s.close().catch(() => {});
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** Events of ~1 KB, so that a few thousand fill several blocks. */
function event(i: number): ProposedEvent {
  return { eventId: newUuid(), eventType: 'E', isJson: true, data: Buffer.from(JSON.stringify({ i, pad: 'x'.repeat(1000) })), metadata: Buffer.alloc(0) };
}

async function fill(store: Store, count: number): Promise<void> {
  for (let i = 0; i < count; i += 100) {
    await store.append(`s-${i % 7}`, ExpectedVersion.any, Array.from({ length: 100 }, (_, j) => event(i + j)));
  }
}

const view = (records: EventRecord[]) => records.map((r) => [r.position, r.streamId, r.eventNumber, r.data.toString('utf8')]);

describe('a read with a sieve (the system projections: records decoded only when they may be indexed)', () => {
  /** One stream in three is a system stream; events are numbered per stream. */
  async function mixed(store: Store, count: number): Promise<void> {
    for (let i = 0; i < count; i += 50) {
      const stream = i % 150 === 0 ? `$sys-${i % 11}` : `s-${i % 13}`;
      await store.append(stream, ExpectedVersion.any, Array.from({ length: 50 }, (_, j) => event(i + j)));
    }
  }
  const firstsAndSomeOfUsers: RecordSieve = (buf, start) => eventNumberAt(buf, start) === 0 || (eventNumberAt(buf, start) % 7 === 3 && !inDollarStream(buf, start));
  const wanted = (r: EventRecord) => r.eventNumber === 0 || (r.eventNumber % 7 === 3 && !r.streamId.startsWith('$'));

  for (const [name, logCacheBytes] of [['from blocks and RocksDB', 0], ['from blocks and the log tail', 64 * 1024 * 1024]] as const) {
    it(`keeps exactly what the sieve accepts, tells the bytes and the count of what it left out, ${name}`, async () => {
      const dir = mkdtempSync(join(tmpdir(), 'svc-blocks-'));
      dirs.push(dir);
      const store = await Store.open({ dir, inMemory: false, chunkSize: 256 * 1024 * 1024, logCacheBytes, sharedReadBytes: 64 * 1024 * 1024 });
      stores.push(store);
      await mixed(store, 3000); // ~3 MB: blocks, then the part of the log no block holds yet
      const reader = {};
      let position = 0;
      let kept = 0;
      for (;;) {
        const plain = store.readAllForward(position, 333);
        const sieved = store.readAllForward(position, 333, reader, false, firstsAndSomeOfUsers);
        expect(view(sieved.records)).toEqual(view(plain.records.filter(wanted)));
        expect(sieved.nextPosition).toBe(plain.nextPosition);
        expect(sieved.isEnd).toBe(plain.isEnd);
        // Every byte and every record of the page is either kept or told as left out.
        const { gaps, sieved: refused } = sieved;
        expect(gaps).toHaveLength(sieved.records.length + 1);
        expect(refused).toHaveLength(sieved.records.length + 1);
        const keptBytes = sieved.records.reduce((sum, r) => sum + r.size, 0);
        expect(gaps!.reduce((a, b) => a + b, 0) + keptBytes).toBe(plain.nextPosition - position);
        expect(refused!.reduce((a, b) => a + b, 0) + sieved.records.length).toBe(plain.records.length);
        kept += sieved.records.length;
        if (plain.isEnd) break;
        position = plain.nextPosition;
      }
      expect(kept).toBeGreaterThan(100);
      expect(kept).toBeLessThan(3000 / 3);
    });

    it(`ends a long read after its \`keep\`-th accepted record, and the pages that follow go on from there, ${name}`, async () => {
      const dir = mkdtempSync(join(tmpdir(), 'svc-blocks-'));
      dirs.push(dir);
      const store = await Store.open({ dir, inMemory: false, chunkSize: 256 * 1024 * 1024, logCacheBytes, sharedReadBytes: 64 * 1024 * 1024 });
      stores.push(store);
      await mixed(store, 3000);
      const all = store.readAllForward(0, 10_000);
      expect(all.isEnd).toBe(true);
      const reader = {};
      const seen: EventRecord[] = [];
      let position = 0;
      let refusedTotal = 0;
      let pages = 0;
      for (;;) {
        const page = store.readAllForward(position, 2000, reader, false, firstsAndSomeOfUsers, 7);
        pages++;
        expect(page.records.length).toBeLessThanOrEqual(7);
        if (!page.isEnd) expect(page.records.length).toBe(7);
        // A page that ended at its seventh record ends right after it.
        if (page.records.length === 7) expect(page.nextPosition).toBe(page.records[6].position + page.records[6].size);
        const keptBytes = page.records.reduce((sum, r) => sum + r.size, 0);
        expect(page.gaps!.reduce((a, b) => a + b, 0) + keptBytes).toBe(page.nextPosition - position);
        refusedTotal += page.sieved!.reduce((a, b) => a + b, 0);
        seen.push(...page.records);
        if (page.isEnd) break;
        position = page.nextPosition;
      }
      expect(view(seen)).toEqual(view(all.records.filter(wanted)));
      expect(refusedTotal + seen.length).toBe(all.records.length);
      expect(pages).toBeGreaterThan(seen.length / 7);
    });
  }
});

describe('shared log blocks', () => {
  it('a shared read answers what a plain read answers, from any position, across blocks and up to the head', async () => {
    const store = await openStore(64 * 1024 * 1024);
    await fill(store, 3000); // ~3 MB: six blocks and part of a seventh
    expect(store.headPosition).toBeGreaterThan(5 * BLOCK_BYTES);
    const reader = {};
    let position = 0;
    let pages = 0;
    for (;;) {
      const plain = store.readAllForward(position, 333);
      const shared = store.readAllForward(position, 333, reader);
      expect(view(shared.records)).toEqual(view(plain.records));
      expect(shared.nextPosition).toBe(plain.nextPosition);
      expect(shared.isEnd).toBe(plain.isEnd);
      pages++;
      if (plain.isEnd) break;
      position = plain.nextPosition;
    }
    expect(pages).toBeGreaterThan(8);
    // From a position inside a record (not a record's start): the records after it, as a plain read.
    expect(view(store.readAllForward(BLOCK_BYTES + 7, 50, reader).records)).toEqual(view(store.readAllForward(BLOCK_BYTES + 7, 50).records));
    expect(store.blocks.counters.hits).toBeGreaterThan(2000);
    // The node's read statistics count them: rows read from RocksDB once, records from memory after.
    expect(store.readCounters.notCachedRecord).toBeGreaterThanOrEqual(store.blocks.counters.reads);
    expect(store.readCounters.cachedRecord).toBeGreaterThan(0);
  });

  it('a reader of $all never reads the records of system streams, tells their bytes where they were, and ends at the head', async () => {
    const store = await openStore(64 * 1024 * 1024);
    for (let i = 0; i < 6000; i += 100) {
      const stream = ['user-1', '$system-1', '$$user-1', '$$$system-meta', '$'][(i / 100) % 5];
      const events = Array.from({ length: 100 }, (_, j) => event(i + j));
      await store.append(stream, ExpectedVersion.any, stream.startsWith('$$') ? [events[0]] : events);
    }
    expect(store.headPosition).toBeGreaterThan(4 * BLOCK_BYTES);
    // The whole log, read plainly (both key spaces merged in log order).
    const all: EventRecord[] = [];
    for (let position = 0; ;) {
      const page = store.readAllForward(position, 333);
      all.push(...page.records);
      if (page.isEnd) break;
      position = page.nextPosition;
    }
    expect(all.map((r) => r.position)).toEqual([...all.map((r) => r.position)].sort((a, b) => a - b));
    // The metastreams of user streams stay with the user records; the system streams' records are left out.
    const kept = all.filter((r) => !r.streamId.startsWith('$') || (r.streamId.startsWith('$$') && !r.streamId.startsWith('$$$')));
    expect(kept.length).toBeLessThan(all.length);
    const reader = {};
    const read: EventRecord[] = [];
    let position = 0;
    let pages = 0;
    for (;;) {
      const page = store.readAllForward(position, 250, reader, true);
      pages++;
      const gaps = page.gaps!;
      expect(gaps.length).toBe(page.records.length + 1);
      // Every byte covered is a record handed out or a gap: each gap holds the records left out there.
      let at = position;
      page.records.forEach((r, i) => {
        const skipped = all.filter((s) => s.position >= at && s.position < r.position);
        expect(skipped.every((s) => s.streamId.startsWith('$'))).toBe(true);
        expect(gaps[i]).toBe(skipped.reduce((n, s) => n + s.size, 0));
        at = r.position + r.size;
      });
      expect(gaps[page.records.length]).toBe(page.nextPosition - at);
      read.push(...page.records);
      if (page.isEnd) {
        expect(page.nextPosition).toBe(store.headPosition);
        break;
      }
      position = page.nextPosition;
    }
    expect(view(read)).toEqual(view(kept));
    expect(pages).toBeGreaterThan(3);
    // The blocks held user records only: fewer rows read than the log holds.
    expect(store.blocks.counters.reads).toBeLessThanOrEqual(kept.length + 250);
  });

  it('a database written before the split keeps its older system records with the others: every read still finds them', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-blocks-'));
    dirs.push(dir);
    const options = { dir, inMemory: false, chunkSize: 256 * 1024 * 1024, logCacheBytes: 0, sharedReadBytes: 64 * 1024 * 1024 };
    /** Sets where the split is, as a database written before the split had it at its first open since. */
    const splitAt = async (position: number) => {
      const rocks = await Rocks.open(dir, false);
      rocks.writeDurable([[metaKey('syslog-from'), u64Value(position)]]);
      await rocks.close();
    };
    const write = async (store: Store, n: number) => {
      for (const stream of ['user-a', '$system-a', '$$user-a', 'user-b']) {
        await store.append(stream, ExpectedVersion.any, Array.from({ length: stream.startsWith('$$') ? 1 : n }, (_, i) => event(i)));
      }
    };
    await splitAt(Number.MAX_SAFE_INTEGER); // everything written now goes where it went before the split
    let store = await Store.open(options);
    await write(store, 300);
    const head = store.headPosition;
    await store.close();
    await splitAt(head);
    store = await Store.open(options);
    stores.push(store);
    await write(store, 300);
    const all = store.readAllForward(0, 100_000).records;
    expect(all.length).toBe(2 * (3 * 300 + 1));
    expect(all.map((r) => r.position)).toEqual([...all.map((r) => r.position)].sort((a, b) => a - b));
    expect(view(store.readAllBackward(store.headPosition, 100_000).records.reverse())).toEqual(view(all));
    // Stream reads find the system stream's records on both sides of the split.
    const system = store.readStreamForward('$system-a', 0, 1000);
    expect(system.status === 'ok' && system.events.map((e) => e.event!.eventNumber)).toEqual(Array.from({ length: 600 }, (_, i) => i));
    // A reader of $all skips them on both sides, from the blocks and from plain reads.
    const users = all.filter((r) => !r.streamId.startsWith('$') || r.streamId === '$$user-a');
    for (const shared of [{}, undefined]) {
      const read: EventRecord[] = [];
      for (let position = 0; ;) {
        const page = store.readAllForward(position, 200, shared, true);
        read.push(...page.records);
        if (page.isEnd) break;
        position = page.nextPosition;
      }
      expect(view(read)).toEqual(view(users));
    }
  });

  it('records a scavenge removed are not served from a block read before', async () => {
    const store = await openStore(64 * 1024 * 1024);
    await fill(store, 2000);
    const reader = {};
    const before = store.readAllForward(0, 2000, reader).records;
    const gone = before.filter((r) => r.streamId === 's-0');
    expect(gone.length).toBeGreaterThan(0);
    await store.remove({ records: gone, chunkOps: [], sync: true });
    const after = store.readAllForward(0, 2000, reader).records;
    expect(after.some((r) => r.streamId === 's-0')).toBe(false);
    expect(view(after)).toEqual(view(store.readAllForward(0, 2000).records));
  });

  it('the blocks after a reader are read ahead on the log-read thread, and then served without reading RocksDB again', async () => {
    const store = await openStore(64 * 1024 * 1024);
    await fill(store, 3000);
    const reader = {};
    const first = store.readAllForward(0, 200, reader);
    // Reading inside block 0 sent the next blocks to the thread.
    const landing = store.blocks.landingAt(BLOCK_BYTES);
    expect(landing).toBeDefined();
    await landing;
    await store.blocks.landingAt(2 * BLOCK_BYTES);
    const { reads, readAhead } = store.blocks.counters;
    expect(readAhead).toBeGreaterThan(0);
    // From block 1 on the records come from the blocks read ahead: no read of RocksDB for them.
    let position = first.nextPosition;
    while (position < 2 * BLOCK_BYTES) {
      const plain = store.readAllForward(position, 300);
      const shared = store.readAllForward(position, 300, {});
      expect(view(shared.records)).toEqual(view(plain.records));
      position = shared.nextPosition;
    }
    expect(store.blocks.counters.reads - reads).toBe(0);
  });

  it('a block read ahead before a scavenge removed records from it is not kept', async () => {
    const store = await openStore(64 * 1024 * 1024);
    await fill(store, 2000);
    // The thread reads the block at once, before the removal; its answer is held until after it.
    let deliver!: () => void;
    const held = new Promise<void>((resolve) => { deliver = resolve; });
    let arrived!: () => void;
    const read = new Promise<void>((resolve) => { arrived = resolve; });
    const thread = (store as unknown as { readThread: BlockReadAhead }).readThread;
    store.blocks.readAheadOn({
      forward: (r) => thread.forward(r)?.then(async (rows) => {
        if (r.from === BLOCK_BYTES) arrived();
        await held;
        return rows;
      }),
    });
    store.readAllForward(0, 100, {});
    const landing = store.blocks.landingAt(BLOCK_BYTES);
    expect(landing).toBeDefined();
    await read;
    const gone = store.readAllForward(0, 2000).records.filter((r) => r.streamId === 's-0');
    await store.remove({ records: gone, chunkOps: [], sync: true });
    deliver();
    await landing;
    const after = store.readAllForward(0, 2000, {}).records;
    expect(after.some((r) => r.streamId === 's-0')).toBe(false);
    expect(view(after)).toEqual(view(store.readAllForward(0, 2000).records));
  });

  it('a reader ahead waits while the cache is full of blocks a slower reader has still to read; the slowest never waits', async () => {
    const store = await openStore(3 * BLOCK_BYTES); // room for about three blocks
    await fill(store, 12_000); // ~24 blocks: the readers below are catching up, not live
    const head = store.headPosition;
    const slow = {};
    const fast = {};
    // The slow reader at the start; the fast one reads ahead until the cache is full.
    expect(store.blocks.mustWait(slow, 0, head)).toBe(false);
    store.readAllForward(0, 10, slow);
    let position = 0;
    let waited = false;
    for (let i = 0; i < 40 && !waited; i++) {
      if (store.blocks.mustWait(fast, position, head)) {
        waited = true;
        break;
      }
      position = store.readAllForward(position, 500, fast).nextPosition;
    }
    expect(waited).toBe(true);
    expect(position).toBeGreaterThan(BLOCK_BYTES);
    expect(position).toBeLessThan(5 * BLOCK_BYTES);
    // The slow reader is never held up, and once it has passed the blocks, the fast one goes on.
    let slowAt = 0;
    while (slowAt < position) {
      expect(store.blocks.mustWait(slow, slowAt, head)).toBe(false);
      slowAt = store.readAllForward(slowAt, 500, slow).nextPosition;
    }
    expect(store.blocks.mustWait(slow, slowAt, head)).toBe(false); // where it reads next
    expect(store.blocks.mustWait(fast, position, head)).toBe(false);
    // A reader near the end of the log follows it live: it never waits for one catching up behind it.
    expect(store.blocks.mustWait({}, head - 2 * BLOCK_BYTES, head)).toBe(false);
    // A reader that left (caught up, stopped) holds nobody up.
    store.blocks.leave(slow);
    store.blocks.leave(fast);
    expect(store.blocks.mustWait({}, 11 * BLOCK_BYTES, head)).toBe(false);
  });
});
