import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../src/logger.js';
import { ExpectedVersion, newUuid, type EventRecord, type ProposedEvent, type Store } from '../src/store/index.js';
import { checkpointStreamOf, parkedStreamOf, PersistentGroup } from '../src/subscriptions/group.js';
import type { Message } from '../src/subscriptions/message.js';
import { streamSource } from '../src/subscriptions/source.js';
import { sleep, tempStores, until } from './support/stores.js';
import { DEFAULT_SETTINGS, type GroupSettings } from '../src/subscriptions/settings.js';

// Unit tests of the persistent-subscription group state machine (reference §1.4–1.7): time is
// driven explicitly through take(n, now) / tick(now), so timeouts need no sleeping.

const log = createLogger('silent');
const stores = tempStores('group');
const groups: PersistentGroup[] = [];

afterEach(async () => {
  for (const g of groups.splice(0)) await g.stop(false).catch(() => {});
  // Let checkpoint / metadata writes started just before the stop reach the writer.
  await sleep(20);
  await stores.closeAll();
});

const openStore = () => stores.open();
const eventually = until;

function jsonEvent(data: unknown = {}, metadata?: unknown, eventType = 'TestEvent'): ProposedEvent {
  return {
    eventId: newUuid(), eventType, isJson: true, data: Buffer.from(JSON.stringify(data)),
    metadata: metadata === undefined ? Buffer.alloc(0) : Buffer.from(JSON.stringify(metadata)),
  };
}

function linkEvent(target: string): ProposedEvent {
  return { eventId: newUuid(), eventType: '$>', isJson: false, data: Buffer.from(target), metadata: Buffer.alloc(0) };
}

async function appendN(store: Store, stream: string, n: number): Promise<void> {
  const base = (store.streamInfo(stream)?.lastEventNumber ?? -1) + 1;
  await store.append(stream, ExpectedVersion.any, Array.from({ length: n }, (_, i) => jsonEvent({ i: base + i })));
}

async function newGroup(store: Store, stream: string, overrides: Partial<GroupSettings> = {}, isNew = true): Promise<PersistentGroup> {
  const group = new PersistentGroup(streamSource(store, stream), 'g', { ...DEFAULT_SETTINGS, ...overrides }, store, log);
  groups.push(group);
  await group.load(isNew);
  return group;
}

async function stopGroup(group: PersistentGroup): Promise<void> {
  const i = groups.indexOf(group);
  if (i >= 0) groups.splice(i, 1);
  await group.stop(false);
}

/** The last checkpoint written (the JSON string literal's value), or undefined when there is none. */
function checkpointOf(store: Store, stream: string): string | undefined {
  const found = store.readEvent(checkpointStreamOf(stream, 'g'), -1, false);
  if (found.status !== 'ok' || !found.event.event) return undefined;
  expect(found.event.event.eventType).toBe('$SubscriptionCheckpoint');
  return JSON.parse(found.event.event.data.toString('utf8')) as string;
}

function checkpointWrites(store: Store, stream: string): number {
  return (store.streamInfo(checkpointStreamOf(stream, 'g'))?.lastEventNumber ?? -1) + 1;
}

function parkedLinks(store: Store, stream: string): EventRecord[] {
  const page = store.readStreamForward(parkedStreamOf(stream, 'g'), 0, 100, false);
  if (page.status !== 'ok') return [];
  return page.events.map((e) => e.event!);
}

const numbers = (ms: Message[]) => ms.map((m) => m.position);

/** Appends to the group's stream and tells the group, as the service's commit-bus listener does. */
async function appendAndNotify(store: Store, group: PersistentGroup, events: ProposedEvent[]): Promise<void> {
  const result = await store.append(group.stream, ExpectedVersion.any, events);
  group.notifyAppended(result.firstEventNumber + events.length - 1);
  await new Promise((r) => setImmediate(r));
  await new Promise((r) => setImmediate(r));
}

describe('PersistentGroup: hand-out order', () => {
  it('take() hands out events in order; retries go first, ordered by event number', async () => {
    const store = await openStore();
    await appendN(store, 's', 6);
    const group = await newGroup(store, 's');

    const first = group.take(3, 0);
    expect(numbers(first)).toEqual([0, 1, 2]);
    expect(first.map((m) => m.retryCount)).toEqual([0, 0, 0]);

    // Retried out of order: the retry list is still ordered by event number.
    group.nack([first[2].id], 'Retry', 'later');
    group.nack([first[0].id], 'Retry', 'later');
    const second = group.take(3, 0);
    expect(numbers(second)).toEqual([0, 2, 3]);
    expect(second.map((m) => m.retryCount)).toEqual([1, 1, 0]);
    expect(numbers(group.take(10, 0))).toEqual([4, 5]);
    expect(group.take(10, 0)).toEqual([]);
  });

  it('nack Unknown is treated as Retry', async () => {
    const store = await openStore();
    await appendN(store, 's', 3);
    const group = await newGroup(store, 's');
    const [m0] = group.take(1, 0);
    group.nack([m0.id], 'Unknown', 'dunno');
    const again = group.take(2, 0);
    expect(numbers(again)).toEqual([0, 1]);
    expect(again[0].retryCount).toBe(1);
  });

  it('message ids are the hex of the event id', async () => {
    const store = await openStore();
    await appendN(store, 's', 1);
    const group = await newGroup(store, 's');
    const [m] = group.take(1, 0);
    expect(m.id).toBe(m.event.event!.eventId.toString('hex'));
    expect(m.id).toMatch(/^[0-9a-f]{32}$/);
  });
});

describe('PersistentGroup: message timeout and retry count', () => {
  it('a timed-out message is retried; past maxRetryCount it is parked and never delivered again', async () => {
    const store = await openStore();
    await appendN(store, 's', 1);
    const group = await newGroup(store, 's', { messageTimeoutMs: 1000, maxRetryCount: 2 });

    const deliveries: number[] = [];
    const take = (now: number) => {
      const out = group.take(1, now);
      for (const m of out) deliveries.push(m.retryCount);
      return out;
    };

    expect(numbers(take(0))).toEqual([0]);
    group.tick(999);
    expect(take(999)).toEqual([]); // not expired yet, nothing else to give
    group.tick(1000);
    const retried = take(1000);
    expect(numbers(retried)).toEqual([0]);
    expect(retried[0].retryCount).toBe(1);
    group.tick(2000);
    expect(numbers(take(2000))).toEqual([0]);
    // retryCount 2 = maxRetryCount: the next timeout parks it (at most maxRetryCount + 1 deliveries).
    group.tick(3000);
    expect(take(3000)).toEqual([]);
    expect(deliveries).toEqual([0, 1, 2]);

    await eventually(() => parkedLinks(store, 's').length === 1, 'the park link');
    const [link] = parkedLinks(store, 's');
    expect(link.eventType).toBe('$>');
    expect(link.data.toString('utf8')).toBe('0@s');
    const meta = JSON.parse(link.metadata.toString('utf8')) as Record<string, unknown>;
    expect(meta.reason).toBe('Reached retry count of 2');
    expect(meta.subscriptionEventNumber).toBe(0);
    expect(typeof meta.added).toBe('string');

    await eventually(() => group.statistics.parkedMessageCount === 1, 'parkedMessageCount 1');
    group.tick(100_000);
    expect(take(100_000)).toEqual([]);
    expect(group.statistics.outstandingMessagesCount).toBe(0);
    expect(group.statistics.retryBufferCount).toBe(0);
  });
});

describe('PersistentGroup: checkpoints', () => {
  it('checkpoints the last event with everything before it handled (min 1, max 1)', async () => {
    const store = await openStore();
    await appendN(store, 's', 5);
    const group = await newGroup(store, 's', { minCheckPointCount: 1, maxCheckPointCount: 1 });
    const ms = group.take(5, 0);
    expect(numbers(ms)).toEqual([0, 1, 2, 3, 4]);

    group.ack([ms[0].id, ms[1].id, ms[2].id]);
    await eventually(() => checkpointOf(store, 's') === '2', 'checkpoint "2"');
    await sleep(50);
    expect(checkpointOf(store, 's')).toBe('2');

    // 3 is still unhandled: acking 4 cannot move the checkpoint past it.
    const writes = checkpointWrites(store, 's');
    group.ack([ms[4].id]);
    await sleep(100);
    expect(checkpointOf(store, 's')).toBe('2');
    expect(checkpointWrites(store, 's')).toBe(writes);

    group.ack([ms[3].id]);
    await eventually(() => checkpointOf(store, 's') === '4', 'checkpoint "4"');
    expect(group.statistics.lastCheckpointed).toBe(4);
  });

  it('after a restart, take() resumes at the event after the checkpoint', async () => {
    const store = await openStore();
    await appendN(store, 's', 5);
    const group = await newGroup(store, 's', { minCheckPointCount: 1, maxCheckPointCount: 1 });
    const ms = group.take(5, 0);
    group.ack(ms.map((m) => m.id));
    await eventually(() => checkpointOf(store, 's') === '4', 'checkpoint "4"');
    await sleep(20);
    await stopGroup(group);

    await appendN(store, 's', 2);
    const reloaded = await newGroup(store, 's', { minCheckPointCount: 1, maxCheckPointCount: 1 }, false);
    expect(numbers(reloaded.take(10, 0))).toEqual([5, 6]);
  });

  it('after a restart, everything after the checkpoint is delivered again, acked or not (at-least-once)', async () => {
    const store = await openStore();
    await appendN(store, 's', 5);
    const group = await newGroup(store, 's', { minCheckPointCount: 1, maxCheckPointCount: 1 });
    const ms = group.take(5, 0);
    group.ack([ms[0].id, ms[1].id, ms[2].id, ms[4].id]);
    await eventually(() => checkpointOf(store, 's') === '2', 'checkpoint "2"');
    await sleep(50);
    await stopGroup(group);

    const reloaded = await newGroup(store, 's', {}, false);
    expect(numbers(reloaded.take(10, 0))).toEqual([3, 4]);
  });

  it('writes a checkpoint by time on the tick once checkPointAfterMs has elapsed and minCheckPointCount is reached', async () => {
    const store = await openStore();
    await appendN(store, 's', 5);
    const group = await newGroup(store, 's', { maxCheckPointCount: 100, minCheckPointCount: 2, checkPointAfterMs: 1000 });
    const base = Date.now();
    const ms = group.take(3, base);
    group.ack(ms.map((m) => m.id));
    await sleep(50);
    expect(checkpointOf(store, 's')).toBeUndefined(); // 3 < maxCheckPointCount: no count checkpoint

    group.tick(base + 1000);
    await eventually(() => checkpointOf(store, 's') === '2', 'timer checkpoint "2"');
  });

  it('does not write a timer checkpoint below minCheckPointCount', async () => {
    const store = await openStore();
    await appendN(store, 's', 5);
    const group = await newGroup(store, 's', { maxCheckPointCount: 100, minCheckPointCount: 2, checkPointAfterMs: 1000 });
    const base = Date.now();
    const [m0] = group.take(1, base);
    group.ack([m0.id]);
    group.tick(base + 5000);
    await sleep(100);
    expect(checkpointOf(store, 's')).toBeUndefined();
  });

  it('with checkPointAfterMs 0 never writes a checkpoint by time', async () => {
    const store = await openStore();
    await appendN(store, 's', 5);
    const group = await newGroup(store, 's', { maxCheckPointCount: 100, minCheckPointCount: 1, checkPointAfterMs: 0 });
    const base = Date.now();
    const ms = group.take(3, base);
    group.ack(ms.map((m) => m.id));
    group.tick(base + 1000);
    group.tick(base + 60_000);
    await sleep(100);
    expect(checkpointOf(store, 's')).toBeUndefined();
  });
});

describe('PersistentGroup: checkpoints (parks and graceful stop)', () => {
  it('a parked message holds the checkpoint until the park is written, then counts as handled', async () => {
    const store = await openStore();
    await appendN(store, 's', 3);
    const group = await newGroup(store, 's', { minCheckPointCount: 1, maxCheckPointCount: 1 });
    const ms = group.take(2, 0);
    group.nack([ms[0].id], 'Park', 'poison');
    group.ack([ms[1].id]);
    await eventually(() => parkedLinks(store, 's').length === 1, 'the park link');
    await eventually(() => checkpointOf(store, 's') === '1', 'checkpoint "1"');
  });

  it('stop(true) on a running group writes the checkpoint before stopping', async () => {
    const store = await openStore();
    await appendN(store, 's', 5);
    const group = await newGroup(store, 's');
    const ms = group.take(4, 0);
    group.ack([ms[0].id, ms[1].id, ms[3].id]);
    const i = groups.indexOf(group);
    groups.splice(i, 1);
    await group.stop(true);
    expect(checkpointOf(store, 's')).toBe('1'); // 2 is unhandled
  });
});

describe('PersistentGroup: startFrom -1 (live)', () => {
  it('delivers only events appended after load', async () => {
    const store = await openStore();
    await appendN(store, 's', 3);
    const group = await newGroup(store, 's', { startFrom: -1 });
    expect(group.take(10, 0)).toEqual([]);
    await appendN(store, 's', 2);
    expect(numbers(group.take(10, 0))).toEqual([3, 4]);
  });

  it('writes a checkpoint at creation, so a reload delivers events appended in between', async () => {
    const store = await openStore();
    await appendN(store, 's', 3);
    const group = await newGroup(store, 's', { startFrom: -1 });
    expect(checkpointOf(store, 's')).toBe('2');
    await stopGroup(group);

    await appendN(store, 's', 2); // while the group is down
    const reloaded = await newGroup(store, 's', { startFrom: -1 }, false);
    expect(numbers(reloaded.take(10, 0))).toEqual([3, 4]);
  });
});

describe('PersistentGroup: nack Skip and Stop', () => {
  it('skipped and stopped messages are never delivered again and the checkpoint moves past them', async () => {
    const store = await openStore();
    await appendN(store, 's', 5);
    const group = await newGroup(store, 's', { minCheckPointCount: 1, maxCheckPointCount: 1, messageTimeoutMs: 1000 });
    const ms = group.take(3, 0);
    group.nack([ms[0].id], 'Skip', 'skip it');
    group.nack([ms[1].id], 'Stop', 'stop it');
    group.ack([ms[2].id]);
    await eventually(() => checkpointOf(store, 's') === '2', 'checkpoint "2"');

    const rest = group.take(10, 0);
    expect(numbers(rest)).toEqual([3, 4]);
    group.ack(rest.map((m) => m.id));
    group.tick(100_000);
    expect(group.take(10, 100_000)).toEqual([]);
    await eventually(() => checkpointOf(store, 's') === '4', 'checkpoint "4"');
    expect(parkedLinks(store, 's')).toEqual([]);
    expect(group.statistics.retryBufferCount).toBe(0);
  });
});

describe('PersistentGroup: parked messages', () => {
  async function parkTwo(store: Store, group: PersistentGroup): Promise<Message[]> {
    const ms = group.take(2, 0);
    expect(numbers(ms)).toEqual([0, 1]);
    // One at a time, so parked number 0 is event 0 and parked number 1 is event 1.
    group.nack([ms[0].id], 'Park', 'bad 0');
    await eventually(() => parkedLinks(store, 's').length === 1, 'first park');
    group.nack([ms[1].id], 'Park', 'bad 1');
    await eventually(() => parkedLinks(store, 's').length === 2, 'second park');
    await eventually(() => group.statistics.parkedMessageCount === 2, 'parkedMessageCount 2');
    return ms;
  }

  it('nack Park writes a link with the client reason', async () => {
    const store = await openStore();
    await appendN(store, 's', 4);
    const group = await newGroup(store, 's');
    await parkTwo(store, group);
    const links = parkedLinks(store, 's');
    expect(links.map((l) => l.data.toString('utf8'))).toEqual(['0@s', '1@s']);
    const meta = JSON.parse(links[0].metadata.toString('utf8')) as Record<string, unknown>;
    expect(meta.reason).toBe("Client explicitly NAK'ed message.\nbad 0");
    expect(meta.subscriptionEventNumber).toBe(0);
    expect(numbers(group.take(10, 0))).toEqual([2, 3]); // not redelivered
  });

  it('replayParked(undefined) puts all parked messages back before new events', async () => {
    const store = await openStore();
    await appendN(store, 's', 4);
    const group = await newGroup(store, 's');
    await parkTwo(store, group);

    group.replayParked(undefined);
    expect(group.statistics.parkedMessageCount).toBe(0);
    const replayed = group.take(10, 0);
    expect(numbers(replayed)).toEqual([0, 1, 2, 3]);
    expect(replayed.slice(0, 2).map((m) => m.retryCount)).toEqual([0, 0]);
    // Replayed messages carry the target event.
    expect(replayed.slice(0, 2).map((m) => m.event.event!.eventNumber)).toEqual([0, 1]);

    // Handling the replayed ones hides them in the parked stream ($tb).
    group.ack(replayed.map((m) => m.id));
    await eventually(() => store.metadataOf(parkedStreamOf('s', 'g')).truncateBefore === 2, '$tb 2 on the parked stream');
    expect(group.statistics.parkedMessageCount).toBe(0);
  });

  it('replayParked(1) replays only the parked messages numbered below 1', async () => {
    const store = await openStore();
    await appendN(store, 's', 4);
    const group = await newGroup(store, 's');
    await parkTwo(store, group);

    group.replayParked(1);
    expect(group.statistics.parkedMessageCount).toBe(1);
    expect(numbers(group.take(10, 0))).toEqual([0, 2, 3]);
  });
});

describe('PersistentGroup: statistics', () => {
  it('buffer, retry, outstanding and total counters reflect what happened', async () => {
    const store = await openStore();
    await appendN(store, 's', 10);
    const group = await newGroup(store, 's');
    let stats = group.statistics;
    expect(stats).toMatchObject({
      readBufferCount: 10, retryBufferCount: 0, outstandingMessagesCount: 0, totalItems: 0,
      lastKnown: 9, lastProcessed: -1, liveBufferCount: 0, parkedMessageCount: 0,
    });

    const ms = group.take(3, 0);
    stats = group.statistics;
    expect(stats).toMatchObject({
      readBufferCount: 7, retryBufferCount: 0, outstandingMessagesCount: 3, totalItems: 3, lastProcessed: 2,
    });

    group.nack([ms[1].id], 'Retry', 'again');
    stats = group.statistics;
    expect(stats).toMatchObject({ readBufferCount: 7, retryBufferCount: 1, outstandingMessagesCount: 2, totalItems: 3 });

    const retried = group.take(1, 0);
    expect(numbers(retried)).toEqual([1]);
    stats = group.statistics;
    // totalItems counts hand-outs, retries included.
    expect(stats).toMatchObject({ readBufferCount: 7, retryBufferCount: 0, outstandingMessagesCount: 3, totalItems: 4 });

    group.ack([ms[0].id, ms[2].id, retried[0].id]);
    stats = group.statistics;
    expect(stats).toMatchObject({ readBufferCount: 7, retryBufferCount: 0, outstandingMessagesCount: 0, totalItems: 4 });

    expect(numbers(group.take(7, 0))).toEqual([3, 4, 5, 6, 7, 8, 9]);
    stats = group.statistics;
    expect(stats).toMatchObject({ readBufferCount: 0, outstandingMessagesCount: 7, totalItems: 11, lastProcessed: 9 });
  });

  it('an event committed while the group is live counts in liveBufferCount until handed out', async () => {
    const store = await openStore();
    await appendN(store, 's', 3);
    const group = await newGroup(store, 's');
    expect(numbers(group.take(10, 0))).toEqual([0, 1, 2]); // caught up
    expect(group.statusText).toBe('Live');
    // Committed and announced as the service's commit-bus listener does. (Fails at the time of writing:
    // notifyAppended raises lastKnown before fill() samples isLive, so the event is not marked live.)
    await appendAndNotify(store, group, [jsonEvent({ i: 3 })]);
    const stats = group.statistics;
    expect(stats).toMatchObject({ readBufferCount: 1, lastKnown: 3 });
    expect(stats.liveBufferCount).toBe(1);
  });
});
