import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../src/logger.js';
import { ExpectedVersion, newUuid, type ProposedEvent, type Store } from '../src/store/index.js';
import { checkpointStreamOf, PersistentGroup } from '../src/subscriptions/group.js';
import type { Message } from '../src/subscriptions/message.js';
import type { DropReason } from '../src/subscriptions/consumer.js';
import { allSource, streamSource, type GroupSource } from '../src/subscriptions/source.js';
import { DEFAULT_SETTINGS, type GroupSettings } from '../src/subscriptions/settings.js';
import { SubscriptionError } from '../src/subscriptions/errors.js';
import { makeFilter } from '../src/store/index.js';
import { sleep, tempStores, until } from './support/stores.js';

// Push consumers of a group (the gRPC door's Read calls) and `$all` groups, with the store in
// process: each consumer gets at most its capacity, the strategies share messages as the
// reference says (§1.4), a consumer that leaves gives its messages back, and a `$all` group
// delivers what its filter takes while its checkpoint moves past what it leaves out.

const log = createLogger('silent');
const stores = tempStores('push');
const groups: PersistentGroup[] = [];
const unsubscribes: (() => void)[] = [];

afterEach(async () => {
  for (const unsubscribe of unsubscribes.splice(0)) unsubscribe();
  for (const g of groups.splice(0)) await g.stop(false).catch(() => {});
  await sleep(20);
  await stores.closeAll();
});

const openStore = () => stores.open();
const eventually = until;

function event(eventType = 'Work'): ProposedEvent {
  return { eventId: newUuid(), eventType, isJson: true, data: Buffer.from('{}'), metadata: Buffer.alloc(0) };
}

async function appendN(store: Store, stream: string, n: number, eventType = 'Work'): Promise<void> {
  await store.append(stream, ExpectedVersion.any, Array.from({ length: n }, () => event(eventType)));
}

/** A group told of every commit, as the service's commit-bus listener tells it. */
async function newGroup(store: Store, source: GroupSource, overrides: Partial<GroupSettings> = {}): Promise<PersistentGroup> {
  const group = new PersistentGroup(source, 'g', { ...DEFAULT_SETTINGS, ...overrides }, store, log);
  groups.push(group);
  unsubscribes.push(store.bus.subscribe((commit) => {
    let last = -1;
    for (const r of commit.records) if (source.takes(r)) last = source.positionOf(r);
    group.notifyAppended(last);
  }, 'test group'));
  await group.load(true);
  return group;
}

/** A push consumer that keeps what it is given (and why it was let go). */
function consumer(group: PersistentGroup, capacity: number) {
  const got: Message[] = [];
  const drops: DropReason[] = [];
  const handle = group.connect({
    capacity, username: 'u', connectionName: 'c', from: '',
    deliver: (ms) => got.push(...ms.map((m) => ({ ...m }))), dropped: (reason) => drops.push(reason),
  });
  return { got, drops, handle, streams: () => got.map((m) => m.event.event!.streamId), numbers: () => got.map((m) => m.position) };
}

describe('push consumers', () => {
  it('RoundRobin: each consumer holds at most its capacity, messages alternate, acks make room', async () => {
    const store = await openStore();
    await appendN(store, 's', 6);
    const group = await newGroup(store, streamSource(store, 's'));
    const a = consumer(group, 2);
    const b = consumer(group, 2);
    await eventually(() => a.got.length + b.got.length === 4, '4 in flight');
    await sleep(20);
    expect([a.numbers(), b.numbers()]).toEqual([[0, 2], [1, 3]]);
    expect(group.info().connections.map((c) => [c.inFlightMessages, c.availableSlots])).toEqual([[2, 0], [2, 0]]);
    group.ack(a.got.map((m) => m.id));
    await eventually(() => a.got.length === 4, 'two more to a');
    expect(a.numbers()).toEqual([0, 2, 4, 5]);
    expect(b.got).toHaveLength(2);
  });

  it('DispatchToSingle fills one consumer before the next', async () => {
    const store = await openStore();
    await appendN(store, 's', 5);
    const group = await newGroup(store, streamSource(store, 's'), { namedConsumerStrategy: 'DispatchToSingle' });
    const a = consumer(group, 3);
    const b = consumer(group, 3);
    await eventually(() => a.got.length + b.got.length === 5, 'all five');
    expect([a.numbers(), b.numbers()]).toEqual([[0, 1, 2], [3, 4]]);
  });

  it('Pinned keeps a stream with one consumer; while that one is full, the other stream still flows to the other', async () => {
    const store = await openStore();
    const one = `one-${newUuid().toString('hex')}`;
    const two = `two-${newUuid().toString('hex')}`;
    const source = allSource(store, makeFilter('streamName', undefined, ['one-', 'two-']));
    const group = await newGroup(store, source, { namedConsumerStrategy: 'Pinned' });
    const a = consumer(group, 2);
    const b = consumer(group, 2);
    for (let i = 0; i < 3; i++) {
      await appendN(store, one, 1);
      await appendN(store, two, 1);
    }
    await eventually(() => a.got.length === 2 && b.got.length === 2, 'two each');
    await sleep(20);
    expect([new Set(a.streams()).size, new Set(b.streams()).size]).toEqual([1, 1]);
    expect(new Set([...a.streams(), ...b.streams()])).toEqual(new Set([one, two]));
    // Each stream's third event waits for its own consumer, not for the one with room.
    group.ack(a.got.map((m) => m.id));
    await eventually(() => a.got.length === 3, "a's third");
    await sleep(20);
    expect(new Set(a.streams()).size).toBe(1);
    expect(b.got).toHaveLength(2);
  });

  it('a consumer that leaves gives its messages back, retried to the others; maxSubscriberCount turns one too many away', async () => {
    const store = await openStore();
    await appendN(store, 's', 2);
    const group = await newGroup(store, streamSource(store, 's'), { maxSubscriberCount: 2, namedConsumerStrategy: 'DispatchToSingle' });
    const a = consumer(group, 5);
    await eventually(() => a.got.length === 2, 'both to a');
    const b = consumer(group, 5);
    expect(() => consumer(group, 5)).toThrow(SubscriptionError);
    group.disconnect(a.handle);
    await eventually(() => b.got.length === 2, 'both retried to b');
    expect(b.got.map((m) => [m.position, m.retryCount])).toEqual([[0, 1], [1, 1]]);
    await group.stop(false, 'deleted');
    expect(b.drops).toEqual(['deleted']);
  });
});

describe('a group on $all', () => {
  it('delivers what its filter takes, never its own checkpoints, and checkpoints past what it leaves out', async () => {
    const store = await openStore();
    const source = allSource(store, makeFilter('eventType', undefined, ['Wanted']));
    const group = await newGroup(store, source, { minCheckPointCount: 1, maxCheckPointCount: 1 });
    const a = consumer(group, 10);
    await appendN(store, 'x', 2, 'Wanted');
    await appendN(store, 'y', 3, 'Other');
    await eventually(() => a.got.length === 2, 'the two wanted');
    group.ack(a.got.map((m) => m.id));
    // The checkpoint moves to the last record the filter left out, written as C:/P:.
    const lastOther = store.readAllBackward(store.headPosition, 50).records.find((r) => r.streamId === 'y')!.position;
    await appendN(store, 'y', 1, 'Other');
    const written = () => {
      const found = store.readEvent(checkpointStreamOf('$all', 'g'), -1, false);
      return found.status === 'ok' ? JSON.parse(found.event.event!.data.toString('utf8')) as string : undefined;
    };
    await eventually(() => {
      const cp = /^C:(\d+)\/P:(\d+)$/.exec(written() ?? '');
      return cp !== null && Number(cp[1]) >= lastOther && cp[1] === cp[2];
    }, 'a checkpoint past the records left out');
    await sleep(50);
    expect(a.got.map((m) => m.event.event!.eventType)).toEqual(['Wanted', 'Wanted']);
  });

  it('with no filter, sees every stream but the $all groups\' own checkpoints and parked messages', async () => {
    const store = await openStore();
    const group = await newGroup(store, allSource(store, undefined), { minCheckPointCount: 1, maxCheckPointCount: 1, startFrom: -1 });
    const a = consumer(group, 100);
    await appendN(store, 's', 3);
    await eventually(() => a.got.length === 3, 'three');
    group.nack([a.got[0].id], 'Park', 'bad');
    group.ack(a.got.slice(1).map((m) => m.id));
    await sleep(200);
    expect(a.streams()).toEqual(['s', 's', 's']);
  });
});
