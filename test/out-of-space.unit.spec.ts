import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ExpectedVersion, newUuid, OutOfSpaceError, Store, type ProposedEvent, type SpaceEvent } from '../src/store/index.js';

// The store on a disk that fills up, simulated deterministically: RocksDB's write batches throw
// what the binding throws on ENOSPC while `full` is set (test/disk-full.e2e.spec.ts does it on a
// real file system). A refused write changes nothing in memory: the next one is planned from
// the same log end, as if the refused one had never been asked for.

const ROCKS_NO_SPACE = 'IO error: No space left on device: While appending to file: /data/000004.log: No space left on device';

const dirs: string[] = [];
const stores: Store[] = [];

afterEach(async () => {
  for (const s of stores.splice(0)) await s.close().catch(() => {});
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A store whose writes fail as on a full disk while `disk.full` is true. */
async function openStore(dir = mkdtempSync(join(tmpdir(), 'svc-nospace-')), chunkSize = 256 * 1024 * 1024) {
  if (!dirs.includes(dir)) dirs.push(dir);
  const store = await Store.open({ dir, inMemory: false, chunkSize });
  stores.push(store);
  const disk = { full: false };
  const db = (store as unknown as { rocks: { db: { batch(): { _writeSync(o: unknown): void } } } }).rocks.db;
  const batch = db.batch.bind(db);
  db.batch = () => {
    const b = batch();
    const write = b._writeSync.bind(b);
    b._writeSync = (o) => {
      if (disk.full) throw Object.assign(new Error(ROCKS_NO_SPACE), { code: 'LEVEL_IO_ERROR' });
      write(o);
    };
    return b;
  };
  const events: SpaceEvent[] = [];
  store.space.subscribe((e) => events.push(e), 'the test');
  return { store, disk, events, dir };
}

function event(data: unknown = { n: 1 }, eventId = newUuid()): ProposedEvent {
  return { eventId, eventType: 'T', isJson: true, data: Buffer.from(JSON.stringify(data)), metadata: Buffer.alloc(0) };
}

function numbers(store: Store, stream: string): number[] {
  const page = store.readStreamForward(stream, 0, 100);
  return page.status === 'ok' ? page.events.map((e) => e.event!.eventNumber) : [];
}

describe('a store whose disk is full', () => {
  it('refuses the write with the reason, and changes nothing: the next write takes the same position and numbers', async () => {
    const { store, disk, events, dir } = await openStore();
    await store.append('s', ExpectedVersion.any, [event()]);
    const head = store.headPosition;
    disk.full = true;
    const refusedEvent = event({ refused: true });
    const refused = await Promise.allSettled([
      store.append('s', ExpectedVersion.exact(0), [refusedEvent]),
      store.append('new-stream', ExpectedVersion.noStream, [event()]),
    ]);
    for (const r of refused) {
      expect(r.status).toBe('rejected');
      const err = (r as PromiseRejectedResult).reason as OutOfSpaceError;
      expect(err).toBeInstanceOf(OutOfSpaceError);
      expect(err.code).toBe('OUT_OF_SPACE');
      expect(err.message).toMatch(/^No space left on device: While appending to file: \/data\/000004\.log\. The write was refused/);
    }
    expect(store.headPosition).toBe(head);
    expect(store.streamInfo('s')?.lastEventNumber).toBe(0);
    expect(store.streamInfo('new-stream')).toBeUndefined();
    expect(store.readAllForward(0, 100).records).toHaveLength(1);
    expect(store.space.failingSince).toBeInstanceOf(Date);
    expect(store.space.refusedWrites).toBe(2);
    expect(events.map((e) => e.kind)).toEqual(['full']);

    disk.full = false;
    // The same expected version and event id as refused: not a duplicate, and numbered as it would have been.
    const again = await store.append('s', ExpectedVersion.exact(0), [refusedEvent]);
    expect(again).toMatchObject({ firstEventNumber: 1, position: head, idempotent: false });
    expect((await store.append('new-stream', ExpectedVersion.noStream, [event()])).firstEventNumber).toBe(0);
    expect(store.space.failingSince).toBeUndefined();
    expect(events.map((e) => e.kind)).toEqual(['full', 'back']);
    expect(events[1]).toMatchObject({ kind: 'back', refusedWrites: 2 });

    await store.close();
    const reopened = await Store.open({ dir, inMemory: false, chunkSize: 256 * 1024 * 1024 });
    stores.push(reopened);
    expect(numbers(reopened, 's')).toEqual([0, 1]);
    expect(numbers(reopened, 'new-stream')).toEqual([0]);
    expect(reopened.readAllForward(0, 100).records.map((r) => r.position)).toContain(head);
  });

  it('keeps the chunk times of a refused batch out: a chunk first written by a refused batch holds only what was written', async () => {
    const { store, disk } = await openStore(undefined, 1024);
    await store.append('s', ExpectedVersion.any, [event({ pad: 'x'.repeat(800) })]);
    disk.full = true;
    await expect(store.append('s', ExpectedVersion.any, [event({ pad: 'y'.repeat(800) })])).rejects.toBeInstanceOf(OutOfSpaceError);
    await new Promise((resolve) => setTimeout(resolve, 5));
    disk.full = false;
    await store.append('s', ExpectedVersion.any, [event({ pad: 'z'.repeat(800) })]);
    const written = store.readAllForward(0, 10).records;
    expect(written).toHaveLength(2);
    const [, second] = written;
    expect(Math.floor(second.position / 1024)).toBe(1);
    expect(store.chunkTimeRange(1)).toEqual([second.created, second.created]);
  });

  it('refuses a projection checkpoint (a deferred-sync transaction) whole', async () => {
    const { store, disk } = await openStore();
    disk.full = true;
    await expect(store.transact([
      { streamId: 'emitted', expected: ExpectedVersion.any, events: [event()] },
      { streamId: '$projections-p-checkpoint', expected: ExpectedVersion.any, events: [event()] },
    ], true)).rejects.toBeInstanceOf(OutOfSpaceError);
    disk.full = false;
    expect(store.streamInfo('emitted')).toBeUndefined();
    expect(store.streamInfo('$projections-p-checkpoint')).toBeUndefined();
    expect(store.readAllForward(0, 100).records).toHaveLength(0);
  });

  it('an idle writer finds out by itself that writes succeed again, and says so once', async () => {
    const { store, disk, events } = await openStore();
    disk.full = true;
    for (let i = 0; i < 3; i++) await expect(store.append('s', ExpectedVersion.any, [event()])).rejects.toBeInstanceOf(OutOfSpaceError);
    expect(store.space.refusedWrites).toBe(3);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(store.space.failingSince).toBeInstanceOf(Date); // still full: the writer's probes are refused too, and not counted
    expect(store.space.refusedWrites).toBe(3);
    disk.full = false;
    const started = Date.now();
    while (store.space.failingSince !== undefined && Date.now() - started < 5000) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(store.space.failingSince).toBeUndefined();
    expect(events.map((e) => e.kind)).toEqual(['full', 'back']);
    expect(events[1]).toMatchObject({ refusedWrites: 3 });
    expect(store.space.episodes).toBe(1);
  });
});
