import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ExpectedVersion, newUuid, ReplicationMismatchError, Store, type ProposedEvent } from '../src/store/index.js';
import { commonPoint, epochHistory, writeEpoch } from '../src/cluster/epochs.js';
import { decodeRecords, FrameError, recordsFrame } from '../src/cluster/frames.js';

// The pieces of replication that need no network: a follower's store applying a leader's
// batches (same positions, same reads, idempotency known), where two logs stop agreeing
// (epochs), and the record frame codec refusing what does not parse.

const dirs: string[] = [];
const stores: Store[] = [];

async function openStore(): Promise<Store> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-repl-'));
  dirs.push(dir);
  const store = await Store.open({ dir, inMemory: false, chunkSize: 64 * 1024 });
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
