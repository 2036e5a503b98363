import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ExpectedVersion, newUuid, Store, type EventRecord, type ProposedEvent } from '../src/store/index.js';
import { BLOCK_BYTES } from '../src/store/shared-blocks.js';

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

  it('a reader of $all leaves system streams out undecoded, telling their bytes, and ends where a plain read ends', async () => {
    const store = await openStore(64 * 1024 * 1024);
    for (let i = 0; i < 6000; i += 100) {
      const stream = ['user-1', '$system-1', '$$user-1', '$$$system-meta', '$'][(i / 100) % 5];
      const events = Array.from({ length: 100 }, (_, j) => event(i + j));
      await store.append(stream, ExpectedVersion.any, stream.startsWith('$$') ? [events[0]] : events);
    }
    const reader = {};
    let position = 0;
    for (;;) {
      const plain = store.readAllForward(position, 250);
      const shared = store.readAllForward(position, 250, reader, true);
      // In the blocks the log has passed (the last one is still being written, and read plainly),
      // the records of system streams are left out; the metastreams of user streams stay.
      const complete = Math.floor(store.headPosition / BLOCK_BYTES) * BLOCK_BYTES;
      const kept = plain.records.filter((r) => r.position >= complete
        || !r.streamId.startsWith('$') || (r.streamId.startsWith('$$') && !r.streamId.startsWith('$$$')));
      expect(view(shared.records)).toEqual(view(kept));
      expect(shared.nextPosition).toBe(plain.nextPosition);
      // Every byte covered is a record kept or a gap: the gaps are the skipped records' bytes, each where it was.
      const gaps = shared.gaps ?? [];
      if (position >= complete) expect(shared.gaps).toBeUndefined(); // a plain read from the block being written
      else expect(gaps.length).toBe(shared.records.length + 1);
      if (!shared.gaps) {
        if (plain.isEnd) break;
        position = plain.nextPosition;
        continue;
      }
      let at = position;
      for (let i = 0; i < shared.records.length; i++) {
        const skipped = plain.records.filter((r) => r.position >= at && r.position < shared.records[i].position);
        expect(gaps[i]).toBe(skipped.reduce((n, r) => n + r.size, 0));
        at = shared.records[i].position + shared.records[i].size;
      }
      expect(gaps[shared.records.length]).toBe(plain.records.filter((r) => r.position >= at).reduce((n, r) => n + r.size, 0));
      if (plain.isEnd) break;
      position = plain.nextPosition;
    }
    expect(store.headPosition).toBeGreaterThan(4 * BLOCK_BYTES);
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
