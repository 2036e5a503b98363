import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../src/logger.js';
import { ExpectedVersion, newUuid, type ProposedEvent, type Store } from '../src/store/index.js';
import { parkedStreamOf, PersistentGroup } from '../src/subscriptions/group.js';
import { MAX_GROUPS, MAX_LEASED_MESSAGES } from '../src/subscriptions/limits.js';
import type { Message } from '../src/subscriptions/message.js';
import { streamSource } from '../src/subscriptions/source.js';
import { sleep, tempStores, until } from './support/stores.js';
import { CONFIG_EVENT_TYPE, CONFIG_STREAM, SubscriptionService } from '../src/subscriptions/service.js';
import { SubscriptionError } from '../src/subscriptions/errors.js';
import { DEFAULT_SETTINGS, toEntry, type GroupSettings } from '../src/subscriptions/settings.js';

// The memory bounds of persistent subscriptions (src/subscriptions/limits.ts) under floods: many
// thousands of parked messages replayed, a client that pulls and never acks, more groups than a
// node keeps. Each test checks the in-memory structures stay within their bound while what a
// client sees (order, counts, nothing lost, nothing twice) stays right.

const log = createLogger('silent');
const stores = tempStores('bounds');
const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup().catch(() => {});
  await sleep(20);
  await stores.closeAll();
});

const openStore = () => stores.open();
/** The floods take longer than the default wait. */
const eventually = (check: () => boolean, what: string) => until(check, what, 10_000);

function events(n: number, from: number): ProposedEvent[] {
  return Array.from({ length: n }, (_, i) => ({
    eventId: newUuid(), eventType: 'Flood', isJson: true, data: Buffer.from(JSON.stringify({ i: from + i })), metadata: Buffer.alloc(0),
  }));
}

async function appendN(store: Store, stream: string, n: number): Promise<void> {
  const from = (store.streamInfo(stream)?.lastEventNumber ?? -1) + 1;
  await store.append(stream, ExpectedVersion.any, events(n, from));
}

async function newGroup(store: Store, stream: string, overrides: Partial<GroupSettings>): Promise<PersistentGroup> {
  const group = new PersistentGroup(streamSource(store, stream), 'g', { ...DEFAULT_SETTINGS, ...overrides }, store, log);
  cleanups.push(() => group.stop(false));
  await group.load(true);
  return group;
}

const numbers = (ms: Message[]) => ms.map((m) => m.position);
const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

describe('bounds: parked messages', () => {
  it('replaying 5,000 parked messages holds at most bufferSize of them in memory; order, counts and $tb stay right', async () => {
    const PARKED = 5_000;
    const BUFFER = 100;
    const store = await openStore();
    await appendN(store, 's', PARKED);
    const group = await newGroup(store, 's', { bufferSize: BUFFER, readBatchSize: 20 });

    // Park every message, a pull of 100 at a time.
    for (;;) {
      const ms = group.take(100, 0);
      if (ms.length === 0) break;
      group.nack(ms.map((m) => m.id), 'Park', 'flood');
      expect(group.heldMessages.readBuffer).toBeLessThanOrEqual(BUFFER);
    }
    await group.parked.idle();
    expect(group.statistics.parkedMessageCount).toBe(PARKED);
    await appendN(store, 's', 10); // new events, to come after every replayed one
    group.notifyAppended(PARKED + 9);

    group.replayParked(undefined);
    expect(group.statusText).toContain('ReplayingParkedMessages');
    // Only a buffer's worth came out of the parked stream; the rest still counts as parked.
    expect(group.heldMessages.replayed).toBe(BUFFER);
    expect(group.statistics.parkedMessageCount).toBe(PARKED - BUFFER);
    group.replayParked(undefined); // ignored while a replay is under way
    expect(group.statistics.parkedMessageCount).toBe(PARKED - BUFFER);

    const delivered: number[] = [];
    const peak = { replayed: 0, replayPending: 0, retry: 0, readBuffer: 0, leased: 0 };
    for (;;) {
      const ms = group.take(50, 0);
      if (ms.length === 0) break;
      delivered.push(...numbers(ms));
      for (const key of Object.keys(peak) as (keyof typeof peak)[]) peak[key] = Math.max(peak[key], group.heldMessages[key]);
      group.ack(ms.map((m) => m.id));
    }
    expect(delivered).toEqual([...range(0, PARKED), ...range(PARKED, 10)]);
    expect(peak.replayed).toBeLessThanOrEqual(BUFFER);
    expect(peak.replayPending).toBeLessThanOrEqual(BUFFER + 50);
    expect(peak.readBuffer).toBeLessThanOrEqual(BUFFER);
    expect(peak.retry).toBe(0);
    expect(group.heldMessages).toMatchObject({ replayed: 0, replayPending: 0, leased: 0 });
    expect(group.statusText).toBe('Live');
    expect(group.statistics.parkedMessageCount).toBe(0);
    // Settled, so hidden in the log: the parked stream is the durable copy.
    await eventually(() => store.metadataOf(parkedStreamOf('s', 'g')).truncateBefore === PARKED, `$tb ${PARKED}`);
  });

  it('a replay cut short by a stop leaves the rest parked in the log, and a new group replays it', async () => {
    const PARKED = 1_000;
    const store = await openStore();
    await appendN(store, 's', PARKED);
    const group = await newGroup(store, 's', { bufferSize: 50, readBatchSize: 10 });
    for (let ms = group.take(100, 0); ms.length > 0; ms = group.take(100, 0)) group.nack(ms.map((m) => m.id), 'Park', 'flood');
    await group.parked.idle();

    group.replayParked(undefined);
    const first = group.take(30, 0);
    group.ack(first.map((m) => m.id));
    await eventually(() => store.metadataOf(parkedStreamOf('s', 'g')).truncateBefore === 30, '$tb 30');
    await group.stop(false);

    const again = new PersistentGroup(streamSource(store, 's'), 'g', { ...DEFAULT_SETTINGS, bufferSize: 50, readBatchSize: 10 }, store, log);
    cleanups.push(() => again.stop(false));
    await again.load(false);
    expect(again.statistics.parkedMessageCount).toBe(PARKED - 30);
    again.replayParked(undefined);
    const rest: number[] = [];
    for (let ms = again.take(100, 0); ms.length > 0; ms = again.take(100, 0)) {
      rest.push(...numbers(ms));
      again.ack(ms.map((m) => m.id));
    }
    expect(rest).toEqual(range(30, PARKED - 30));
  });
});

describe('bounds: leased messages', () => {
  it(`a client that pulls and never acks holds at most ${MAX_LEASED_MESSAGES.toLocaleString('en-US')} messages; settling frees room`, async () => {
    const store = await openStore();
    await appendN(store, 's', MAX_LEASED_MESSAGES + 500);
    const group = await newGroup(store, 's', { messageTimeoutMs: 1_000 });

    const leased: Message[] = [];
    for (let ms = group.take(100, 0); ms.length > 0; ms = group.take(100, 0)) leased.push(...ms);
    expect(leased).toHaveLength(MAX_LEASED_MESSAGES);
    expect(group.statistics.outstandingMessagesCount).toBe(MAX_LEASED_MESSAGES);
    expect(group.heldMessages.readBuffer).toBeLessThanOrEqual(DEFAULT_SETTINGS.bufferSize);

    // Settling some frees as many leases, for the next events.
    group.ack(leased.slice(0, 100).map((m) => m.id));
    expect(numbers(group.take(200, 0))).toEqual(range(MAX_LEASED_MESSAGES, 100));
    expect(group.take(1, 0)).toEqual([]);

    // Every lease times out: they wait as retries, still within the bound, and go out first, in order.
    group.tick(2_000);
    expect(group.heldMessages).toMatchObject({ leased: 0, retry: MAX_LEASED_MESSAGES });
    const retried = group.take(100, 2_000);
    expect(numbers(retried)).toEqual(range(100, 100));
    expect(retried.every((m) => m.retryCount === 1)).toBe(true);
    group.ack(retried.map((m) => m.id));
    expect(group.heldMessages.retry + group.heldMessages.leased).toBe(MAX_LEASED_MESSAGES - 100);
  });
});

describe('bounds: groups', () => {
  it(`a node keeps at most ${MAX_GROUPS.toLocaleString('en-US')} groups: one more is refused until one is deleted`, async () => {
    const store = await openStore();
    // The definitions as a node that has its maximum wrote them.
    const entries = range(0, MAX_GROUPS).map((i) => toEntry(`s-${i}`, 'g', DEFAULT_SETTINGS, '0'));
    await store.append(CONFIG_STREAM, ExpectedVersion.any, [{
      eventId: newUuid(), eventType: CONFIG_EVENT_TYPE, isJson: true,
      data: Buffer.from(JSON.stringify({ version: '2', updated: new Date().toISOString(), updatedBy: 'admin', entries })),
      metadata: Buffer.alloc(0),
    }]);
    const service = new SubscriptionService(store, log);
    cleanups.push(() => service.stop());
    await service.start();
    expect(service.list()).toHaveLength(MAX_GROUPS);

    const refused = await service.create('s-new', 'g', { ...DEFAULT_SETTINGS }, undefined, 'admin').catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(SubscriptionError);
    expect((refused as SubscriptionError).code).toBe('SUBSCRIPTION_LIMIT');
    expect((refused as Error).message).toContain(`${MAX_GROUPS} persistent subscription groups`);
    expect(service.list()).toHaveLength(MAX_GROUPS);

    await service.delete('s-0', 'g', 'admin');
    await service.create('s-new', 'g', { ...DEFAULT_SETTINGS }, undefined, 'admin');
    expect(service.list()).toHaveLength(MAX_GROUPS);
  });
});
