import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { append, eventually, http, newEvent, sleep, startTestNode, type TestNode, uniq } from './support/node.js';

// Every figure of the persistent-subscription info and listings (GET /subscriptions,
// /subscriptions/{s}, /subscriptions/{s}/{g}/info) comes from a real counter: driven over HTTP, each
// one moves off the value it has on an idle group. connectionCount counts push connections
// (subscriptions-and-maintenance.md §1.9): the node has none, so it stays 0; totalInFlightMessages
// counts the messages out with consumers, pulled ones too (issue 21). Bounds on what a client may
// ask for answer 400 (src/subscriptions/limits.ts).

const COMPETING = 'application/vnd.eventstore.competingatom+json';
const JSON_TYPE = 'application/json';

const sub = (s: string, g: string) => `/subscriptions/${s}/${g}`;

let t: TestNode;
beforeAll(async () => { t = await startTestNode(); });
afterAll(async () => { await t?.dispose(); });

async function ok(res: Response, what: string): Promise<Response> {
  expect(res.status, `${what}: ${await res.clone().text()}`).toBeLessThan(300);
  return res;
}

async function appendN(s: string, n: number): Promise<void> {
  await ok(await append(t, s, Array.from({ length: n }, (_, i) => newEvent('OrderPlaced', { i }))), `append to ${s}`);
}

async function create(s: string, g: string, settings: Record<string, unknown>): Promise<Response> {
  return http(t, sub(s, g), { method: 'PUT', headers: { 'Content-Type': JSON_TYPE }, body: JSON.stringify(settings) });
}

async function getJson(path: string): Promise<any> {
  const res = await ok(await http(t, path, { headers: { Accept: JSON_TYPE } }), `GET ${path}`);
  return res.json();
}

/** Pulls up to `n`; the entries' ack ids and event numbers, oldest first. */
async function pull(s: string, g: string, n: number): Promise<{ ids: string[]; numbers: number[] }> {
  const res = await ok(await http(t, `${sub(s, g)}/${n}`, { headers: { Accept: COMPETING } }), 'pull');
  const entries = [...(await res.json() as { entries: any[] }).entries].reverse();
  return {
    ids: entries.map((e) => decodeURIComponent(new URL(e.links.find((l: any) => l.relation === 'ack').uri).pathname.split('/').pop()!)),
    numbers: entries.map((e) => Number(String(e.title).split('@')[0])),
  };
}

async function settle(s: string, g: string, verb: 'ack' | 'nack', ids: string[], action = ''): Promise<void> {
  const q = action ? `&action=${action}` : '';
  await ok(await http(t, `${sub(s, g)}/${verb}?ids=${ids.join(',')}${q}`, { method: 'POST' }), verb);
}

/** The figures of info and of the group's entry in both listings, by name (summary ones prefixed). */
async function figures(s: string, g: string): Promise<Record<string, unknown>> {
  const info = await getJson(`${sub(s, g)}/info`);
  const inStream = (await getJson(`/subscriptions/${s}`)).find((x: any) => x.groupName === g);
  const inAll = (await getJson('/subscriptions')).find((x: any) => x.eventStreamId === s && x.groupName === g);
  const { links: _l, config: _c, connections, eventStreamId: _s, groupName: _g, parkedMessageUri: _p, getMessagesUri: _m, ...counters } = info;
  const summary = (doc: any, prefix: string) => Object.fromEntries(Object.entries(doc)
    .filter(([k]) => !['links', 'eventStreamId', 'groupName', 'parkedMessageUri', 'getMessagesUri'].includes(k))
    .map(([k, v]) => [`${prefix}.${k}`, v]));
  return { ...counters, connections: connections.length, ...summary(inStream, 'stream'), ...summary(inAll, 'all') };
}

describe('statistics over HTTP', () => {
  it('every figure of info and the listings moves off its idle value; the push-only ones stay 0', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    await ok(await create(s, g, {
      bufferSize: 11, readBatchSize: 5, messageTimeoutMilliseconds: 60_000,
      minCheckPointCount: 1, maxCheckPointCount: 1, checkPointAfterMilliseconds: 100,
    }), 'create');
    const idle = await figures(s, g);
    const moved = new Set<string>();
    const observe = async (): Promise<Record<string, unknown>> => {
      const now = await figures(s, g);
      for (const [k, v] of Object.entries(now)) if (v !== idle[k]) moved.add(k);
      return now;
    };

    // One event while live: buffered, counted live, known.
    await appendN(s, 1);
    await eventually(async () => expect((await observe()).liveBufferCount).toBe(1));
    // More than the buffer holds: the group falls behind.
    await appendN(s, 29);
    await eventually(async () => expect((await observe()).status).toBe('Behind'));

    // Pulled messages are outstanding, not in flight to a push connection.
    const first = await pull(s, g, 5);
    expect(first.numbers).toEqual([0, 1, 2, 3, 4]);
    const pulled = await observe();
    expect(pulled).toMatchObject({
      outstandingMessagesCount: 5, totalInFlightMessages: 5, 'stream.totalInFlightMessages': 5,
      'all.totalInFlightMessages': 5, 'stream.connectionCount': 0, 'all.connectionCount': 0, connections: 0,
    });
    // The per-second figures: the count since the last 1 s measurement, then the rate it gives.
    for (let i = 0; i < 5 && !moved.has('countSinceLastMeasurement'); i++) {
      await settle(s, g, 'ack', (await pull(s, g, 1)).ids);
      await observe();
    }
    await eventually(async () => expect((await observe()).averageItemsPerSecond).toBeGreaterThan(0), 3000);

    // Acks move the checkpoint; a retry waits in the retry buffer; a park counts and ages.
    await settle(s, g, 'ack', first.ids.slice(0, 2));
    await eventually(async () => expect((await observe()).lastCheckpointedEventPosition).toBe('1'));
    await settle(s, g, 'nack', [first.ids[2]], 'retry');
    expect((await observe()).retryBufferCount).toBe(1);
    await settle(s, g, 'nack', [first.ids[3]], 'park');
    await eventually(async () => expect((await observe()).parkedMessageCount).toBe(1));
    await eventually(async () => expect((await observe()).oldestParkedMessage).toBeGreaterThanOrEqual(1), 4000);

    const everyFigure = Object.keys(idle).filter((k) => !/(^|\.)connectionCount$/.test(k) && k !== 'connections');
    expect(everyFigure.filter((k) => !moved.has(k))).toEqual([]);
    expect(everyFigure).toEqual(expect.arrayContaining([
      'status', 'averageItemsPerSecond', 'totalItemsProcessed', 'countSinceLastMeasurement', 'lastProcessedEventNumber',
      'lastCheckpointedEventPosition', 'lastKnownEventNumber', 'lastKnownEventPosition', 'readBufferCount',
      'liveBufferCount', 'retryBufferCount', 'outstandingMessagesCount', 'parkedMessageCount', 'oldestParkedMessage',
      'stream.status', 'stream.totalItemsProcessed', 'all.lastCheckpointedEventPosition',
    ]));
    const last = await observe();
    expect([last['stream.connectionCount'], last['all.connectionCount'], last.connections]).toEqual([0, 0, 0]);
  });

  it('status shows ReplayingParkedMessages while a replay larger than the buffer is under way', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    await appendN(s, 25);
    await ok(await create(s, g, { bufferSize: 11, readBatchSize: 10 }), 'create');
    const parkedIds: string[] = [];
    for (let got = await pull(s, g, 100); got.ids.length > 0; got = await pull(s, g, 100)) {
      await settle(s, g, 'nack', got.ids, 'park');
      parkedIds.push(...got.ids);
    }
    expect(parkedIds).toHaveLength(25);
    await eventually(async () => expect((await getJson(`${sub(s, g)}/info`)).parkedMessageCount).toBe(25));
    expect((await getJson(`${sub(s, g)}/info`)).status).toBe('Live');

    await ok(await http(t, `${sub(s, g)}/replayParked`, { method: 'POST' }), 'replayParked');
    const replaying = await getJson(`${sub(s, g)}/info`);
    expect(replaying.status).toBe('Live, ReplayingParkedMessages');
    expect(replaying.parkedMessageCount).toBe(25 - 11); // the rest is still only in the parked stream
    expect(replaying.retryBufferCount).toBe(11);

    const replayed: number[] = [];
    for (let got = await pull(s, g, 100); got.ids.length > 0; got = await pull(s, g, 100)) {
      replayed.push(...got.numbers);
      await settle(s, g, 'ack', got.ids);
    }
    expect(replayed).toEqual(Array.from({ length: 25 }, (_, i) => i));
    const done = await getJson(`${sub(s, g)}/info`);
    expect([done.status, done.parkedMessageCount, done.retryBufferCount]).toEqual(['Live', 0, 0]);
  });
});

describe('bounds over HTTP', () => {
  it('a bufferSize above 10,000 is 400 with the bound, on create and on update, and changes nothing', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    const refused = await create(s, g, { bufferSize: 10_001 });
    expect(refused.status).toBe(400);
    expect(await refused.text()).toContain('Buffer Size (10001) must not exceed 10000');
    expect((await http(t, `${sub(s, g)}/info`)).status).toBe(404);

    await ok(await create(s, g, { bufferSize: 10_000 }), 'create at the bound');
    const update = await http(t, sub(s, g), {
      method: 'POST', headers: { 'Content-Type': JSON_TYPE }, body: JSON.stringify({ bufferSize: 20_000 }),
    });
    expect(update.status).toBe(400);
    await sleep(50);
    expect((await getJson(`${sub(s, g)}/info`)).config.bufferSize).toBe(10_000);
  });
});
