import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  ExpectedVersion, newUuid, ReplicationLostError, ReplicationMismatchError, Store, type ProposedEvent, type ReplicationGate, type ShippedBatch,
} from '../src/store/index.js';
import { commonPoint, epochHistory, writeEpoch } from '../src/cluster/epochs.js';
import { decodeRecords, FrameError, recordsFrame } from '../src/cluster/frames.js';

// The pieces of replication that need no network: a follower's store applying a leader's
// batches (same positions, same reads, idempotency known), where two logs stop agreeing
// (epochs), and the record frame codec refusing what does not parse.

const dirs: string[] = [];
const stores: Store[] = [];

async function openStore(boundedReads = false, dir = mkdtempSync(join(tmpdir(), 'svc-repl-'))): Promise<Store> {
  if (!dirs.includes(dir)) dirs.push(dir);
  const store = await Store.open({ dir, inMemory: false, chunkSize: 64 * 1024, boundedReads });
  stores.push(store);
  return store;
}

afterEach(async () => {
  for (const s of stores.splice(0)) await s.close().catch(() => {});
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function event(data: unknown = { n: 1 }, eventId = newUuid()): ProposedEvent {
  return { eventId, eventType: 'T', isJson: true, data: Buffer.from(JSON.stringify(data)), metadata: Buffer.alloc(0) };
}

/** Ships everything in `leader` from `from` to `follower`, the way a catching-up session does. */
async function ship(leader: Store, follower: Store, from = follower.headPosition): Promise<void> {
  const batch = leader.logRows(from, 100_000);
  const wire = decodeRecords(recordsFrame(batch).subarray(5));
  await follower.applyReplicated(wire, () => true);
}

describe('a follower\'s copy of the log', () => {
  it('holds the leader\'s records at the leader\'s positions, with the same reads and the same idempotency', async () => {
    const [leader, follower] = [await openStore(), await openStore()];
    const [id, id2] = [newUuid(), newUuid()];
    await leader.append('orders', ExpectedVersion.noStream, [event({ a: 1 }, id), event({ a: 2 }, id2)]);
    await leader.append('$$orders', ExpectedVersion.any, [event({ $maxCount: 10 })]);
    for (let i = 0; i < 50; i++) await leader.append(`s-${i % 5}`, ExpectedVersion.any, [event({ i })]);
    await leader.deleteStream('s-4', ExpectedVersion.any, true);
    await ship(leader, follower);
    expect(follower.headPosition).toBe(leader.headPosition);
    expect(follower.recordCount).toBe(leader.recordCount);
    const strip = (page: ReturnType<Store['readAllForward']>) => page.records.map((r) => [r.position, r.streamId, r.eventNumber, r.data.toString()]);
    expect(strip(follower.readAllForward(0, 1000))).toEqual(strip(leader.readAllForward(0, 1000)));
    expect(follower.streamInfo('s-4')?.tombstoned).toBe(true);
    expect(follower.metadataOf('orders').raw).toEqual({ $maxCount: 10 });
    // Should it lead next, a client's retry of the first append is recognised.
    const retry = await follower.append('orders', ExpectedVersion.noStream, [event({ a: 1 }, id), event({ a: 2 }, id2)]);
    expect(retry.idempotent).toBe(true);
    expect(retry.firstEventNumber).toBe(0);
  });

  it('refuses a batch that does not follow its log, and writes nothing of it', async () => {
    const [leader, follower] = [await openStore(), await openStore()];
    await leader.append('a', ExpectedVersion.any, [event(), event()]);
    await ship(leader, follower);
    const head = follower.headPosition;
    // The same records again: event numbers that go back.
    await expect(ship(leader, follower, 0)).rejects.toBeInstanceOf(ReplicationMismatchError);
    expect(follower.headPosition).toBe(head);
    // A batch queued behind one that failed is refused too (no hole in the log).
    await expect(follower.applyReplicated(leader.logRows(0, 10), () => false)).rejects.toBeInstanceOf(ReplicationMismatchError);
  });
});

/** A leader's gate whose quorum answers when the test says so. */
class QuorumByHand implements ReplicationGate {
  readonly waiting: { position: number; settle: () => void; fail: (err: Error) => void }[] = [];
  refusal(): string | undefined { return undefined; }
  shipped(_batch: ShippedBatch, _next: number): void {}
  whenReplicated(position: number, settle: () => void, fail: (err: Error) => void): void {
    this.waiting.push({ position, settle, fail });
  }
  /** The quorum now holds the log up to `position`. */
  holds(position: number): void {
    while (this.waiting.length > 0 && this.waiting[0].position <= position) this.waiting.shift()!.settle();
  }
  lose(): void {
    for (const w of this.waiting.splice(0)) w.fail(new ReplicationLostError('the term ended'));
  }
  async queued(n: number): Promise<number> {
    await vi.waitFor(() => expect(this.waiting.length).toBe(n));
    return this.waiting[n - 1].position;
  }
}

describe('a leader\'s reads', () => {
  it('show a write once a quorum holds it, while the writer already plans on it', async () => {
    const leader = await openStore();
    await leader.append('a', ExpectedVersion.noStream, [event({ n: 0 }), event({ n: 1 })]);
    const committedHead = leader.headPosition;
    const gate = new QuorumByHand();
    leader.setReplicationGate(gate);
    const seen = () => ({
      head: leader.headPosition,
      all: leader.readAllForward(0, 100).records.map((r) => r.data.toString()),
      allBackward: leader.readAllBackward(Number.MAX_SAFE_INTEGER, 100).records.length,
      last: leader.streamInfo('a')?.lastEventNumber,
      stored: leader.storedRecords('a', 0, 100).length,
      tb: leader.metadataOf('a').truncateBefore,
    });
    const before = seen();
    expect(before).toMatchObject({ head: committedHead, last: 1, stored: 2, allBackward: 2, tb: undefined });

    const third = leader.append('a', ExpectedVersion.exact(1), [event({ n: 2 })]);
    const thirdEnd = await gate.queued(1);
    // Durable here, not yet held by a quorum: nothing a read returns shows it.
    expect(leader.logEnd).toBe(thirdEnd);
    expect(thirdEnd).toBeGreaterThan(committedHead);
    expect(seen()).toEqual(before);
    expect(leader.readEvent('a', 2).status).toBe('notFound');
    expect(leader.readStreamBackward('a', -1, 10)).toMatchObject({ status: 'ok', lastEventNumber: 1 });

    // The writer plans on batches in flight: the next event number, and a soft delete in flight
    // (an append expecting no stream recreates the soft-deleted stream).
    const fourth = leader.append('a', ExpectedVersion.exact(2), [event({ n: 3 })]);
    await gate.queued(2);
    const deleted = leader.deleteStream('a', ExpectedVersion.exact(3), false);
    await gate.queued(3);
    const recreated = leader.append('a', ExpectedVersion.noStream, [event({ n: 4 })]);
    const lastEnd = await gate.queued(4);
    expect(seen()).toEqual(before);

    gate.holds(thirdEnd);
    expect(await third).toMatchObject({ firstEventNumber: 2 });
    expect(seen()).toMatchObject({ head: thirdEnd, last: 2, stored: 3, allBackward: 3, tb: undefined });
    expect(leader.readEvent('a', 2).status).toBe('ok');
    expect(leader.readEvent('a', 3).status).toBe('notFound');

    gate.holds(lastEnd);
    expect(await fourth).toMatchObject({ firstEventNumber: 3 });
    await deleted;
    expect(await recreated).toMatchObject({ firstEventNumber: 4 });
    expect(leader.headPosition).toBe(lastEnd);
    expect(leader.metadataOf('a').truncateBefore).toBe(4);
    const page = leader.readStreamForward('a', 0, 10, false);
    expect(page.status === 'ok' && page.events.map((e) => e.event!.data.toString())).toEqual([JSON.stringify({ n: 4 })]);
  });

  it('never show a write whose term ended before a quorum held it', async () => {
    const leader = await openStore();
    await leader.append('a', ExpectedVersion.any, [event()]);
    const head = leader.headPosition;
    const gate = new QuorumByHand();
    leader.setReplicationGate(gate);
    const lost = leader.append('a', ExpectedVersion.any, [event(), event()]);
    await gate.queued(1);
    gate.lose();
    await expect(lost).rejects.toBeInstanceOf(ReplicationLostError);
    expect(leader.headPosition).toBe(head);
    expect(leader.logEnd).toBeGreaterThan(head);
    expect(leader.streamInfo('a')?.lastEventNumber).toBe(0);
    expect(leader.readAllForward(0, 100).records).toHaveLength(1);
  });
});

describe('a cluster node\'s reads', () => {
  it('on a follower, show the leader\'s records once its commit position passes them', async () => {
    const [leader, follower] = [await openStore(), await openStore(true)];
    await leader.append('a', ExpectedVersion.any, [event({ n: 0 }), event({ n: 1 })]);
    await ship(leader, follower, 0);
    // Durable here (acknowledged to the leader), not yet known to be held by a quorum.
    expect(follower.logEnd).toBe(leader.logEnd);
    expect(follower.headPosition).toBe(0);
    expect(follower.streamInfo('a')).toBeUndefined();
    expect(follower.readAllForward(0, 10).records).toEqual([]);
    const published: number[] = [];
    follower.bus.subscribe((c) => { published.push(c.nextPosition); }, 'the test');
    follower.commitThrough(leader.logEnd + 1_000); // a commit ahead of this copy shows what it holds
    expect(follower.headPosition).toBe(leader.logEnd);
    expect(follower.streamInfo('a')?.lastEventNumber).toBe(1);
    expect(published).toEqual([leader.logEnd]);
  });

  it('after a restart, show no record past the last commit position known, until it is committed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-repl-'));
    let leader = await openStore(true, dir);
    const gate = new QuorumByHand();
    leader.setReplicationGate(gate);
    const first = leader.append('kept', ExpectedVersion.any, [event({ n: 0 }), event({ n: 1 })]);
    gate.holds(await gate.queued(1));
    await first;
    const committed = leader.headPosition;
    // A tail no quorum acknowledged: more of a stream, a new stream, a hard delete, new metadata.
    const tail = [
      () => leader.append('kept', ExpectedVersion.any, [event({ n: 2 })]),
      () => leader.append('fresh', ExpectedVersion.any, [event()]),
      () => leader.deleteStream('doomed-later', ExpectedVersion.any, true),
      () => leader.append('$$kept', ExpectedVersion.any, [event({ $maxCount: 1 })]),
    ];
    for (const [i, write] of tail.entries()) {
      void write().catch(() => undefined);
      await gate.queued(1 + i); // each its own batch
    }
    const end = leader.logEnd;
    await leader.close();
    stores.splice(stores.indexOf(leader), 1);

    leader = await openStore(true, dir);
    expect(leader.logEnd).toBe(end);
    expect(leader.headPosition).toBe(committed);
    expect(leader.streamInfo('kept')?.lastEventNumber).toBe(1);
    expect(leader.readStreamBackward('kept', -1, 10)).toMatchObject({ status: 'ok', lastEventNumber: 1 });
    expect(leader.readStreamForward('fresh', 0, 10, false).status).toBe('noStream');
    expect(leader.metadataOf('kept').maxCount).toBeUndefined();
    expect(leader.readAllForward(0, 100).records.map((r) => r.streamId)).toEqual(['kept', 'kept']);
    // The cluster commits it (a new term's epoch, or the leader's commit position on a follower).
    leader.commitThrough(end);
    expect(leader.headPosition).toBe(end);
    expect(leader.streamInfo('kept')?.lastEventNumber).toBe(2);
    expect(leader.readStreamForward('fresh', 0, 10, false).status).toBe('ok');
    expect(leader.streamInfo('doomed-later')?.tombstoned).toBe(true);
    expect(leader.metadataOf('kept').maxCount).toBe(1);
  });

  it('of data that never had a commit position (a single node\'s) show all of it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-repl-'));
    const single = await openStore(false, dir);
    await single.append('a', ExpectedVersion.any, [event()]);
    const end = single.logEnd;
    await single.close();
    stores.splice(stores.indexOf(single), 1);
    const clustered = await openStore(true, dir);
    expect(clustered.headPosition).toBe(end);
    expect(clustered.streamInfo('a')?.lastEventNumber).toBe(0);
  });
});

describe('where two logs stop agreeing', () => {
  it('is the follower\'s end when its last epoch is the leader\'s current one', async () => {
    const leader = await openStore();
    await writeEpoch(leader, 7, { name: 'n1', instanceId: 'i1' });
    await leader.append('a', ExpectedVersion.any, [event(), event()]);
    const followerEnd = leader.headPosition;
    await leader.append('a', ExpectedVersion.any, [event()]);
    expect(commonPoint(leader, { name: 'n2', instanceId: 'i2', term: 7, epochs: epochHistory(leader), logEnd: followerEnd })).toBe(followerEnd);
  });

  it('cuts an old leader\'s tail at the new leader\'s epoch', async () => {
    const [oldLeader, newLeader] = [await openStore(), await openStore()];
    await writeEpoch(oldLeader, 5, { name: 'n1', instanceId: 'i1' });
    await oldLeader.append('a', ExpectedVersion.any, [event()]);
    await ship(oldLeader, newLeader);
    await oldLeader.append('a', ExpectedVersion.any, [event(), event()]); // never replicated
    const epoch = await writeEpoch(newLeader, 9, { name: 'n2', instanceId: 'i2' });
    await newLeader.append('b', ExpectedVersion.any, [event()]);
    const hello = { name: 'n1', instanceId: 'i1', term: 9, epochs: epochHistory(oldLeader), logEnd: oldLeader.headPosition };
    expect(commonPoint(newLeader, hello)).toBe(epoch.position);
    expect(epoch.position).toBeLessThan(oldLeader.headPosition);
  });

  it('is the start of the log when no epoch is shared, and the empty log\'s end for a new node', async () => {
    const [a, b] = [await openStore(), await openStore()];
    await writeEpoch(a, 3, { name: 'n1', instanceId: 'i1' });
    await writeEpoch(b, 4, { name: 'n2', instanceId: 'i2' });
    expect(commonPoint(b, { name: 'n1', instanceId: 'i1', term: 4, epochs: epochHistory(a), logEnd: a.headPosition })).toBe(0);
    expect(commonPoint(b, { name: 'n3', instanceId: 'i3', term: 4, epochs: [], logEnd: 0 })).toBe(0);
  });
});

describe('record frames', () => {
  it('round-trip and refuse what does not parse', () => {
    const batch = { positions: [0, 100], records: [Buffer.from('abc'), Buffer.from('defg')] };
    const decoded = decodeRecords(recordsFrame(batch).subarray(5));
    expect(decoded.positions).toEqual([0, 100]);
    expect(decoded.records.map((r) => r.toString())).toEqual(['abc', 'defg']);
    const frame = recordsFrame(batch).subarray(5);
    expect(() => decodeRecords(frame.subarray(0, frame.length - 1))).toThrow(FrameError);
    expect(() => decodeRecords(Buffer.concat([frame, Buffer.from([0])]))).toThrow(FrameError);
    expect(() => decodeRecords(Buffer.alloc(2))).toThrow(FrameError);
  });
});
