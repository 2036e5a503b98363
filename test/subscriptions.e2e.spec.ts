import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN, append, basic, eventually, http, newEvent, OPS, readFeed, sleep, startTestNode, type TestNode, uniq,
} from './support/node.js';

// Persistent subscriptions over HTTP, end to end: creating / updating / deleting groups (settings,
// defaults, validation, permissions), the listings and the info document, pulling messages in the
// competing-consumers feed, ack / nack with every action, message timeouts, retries and parking,
// replaying parked messages, checkpoints (and delivery resuming from them after a restart), several
// pullers competing on one group, and groups on link streams resolving their targets.
// (http-wire.md §7 and subscriptions-and-maintenance.md §1; where the product contract differs from
// the reference it wins: create answers 200, ack / nack answer 200, a malformed body is a 400.)

const COMPETING = 'application/vnd.eventstore.competingatom+json';
const JSON_TYPE = 'application/json';
const GUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

// ---------------------------------------------------------------------------------------------
// helpers

interface Appended { eventId: string; eventType: string; data: unknown }

const sub = (s: string, g: string) => `/subscriptions/${s}/${g}`;
const parkedPath = (s: string, g: string) => `/streams/%24persistentsubscription-${s}::${g}-parked`;
const checkpointPath = (s: string, g: string) => `/streams/%24persistentsubscription-${s}::${g}-checkpoint`;

/** Appends `n` events of type `type` (data {i}) to `stream`; answers them in order. */
async function appendN(t: TestNode, stream: string, n: number, type = 'OrderPlaced'): Promise<Appended[]> {
  const events = Array.from({ length: n }, (_, i) => newEvent(type, { i }));
  const res = await append(t, stream, events);
  expect(res.status, `append to ${stream}`).toBe(201);
  return events;
}

/** PUT (create) a group; `body` an object (JSON-encoded), a raw string, or undefined for no body at all. */
function create(t: TestNode, s: string, g: string, body?: unknown, authorization: string = ADMIN): Promise<Response> {
  if (body === undefined) return http(t, sub(s, g), { method: 'PUT', authorization });
  return http(t, sub(s, g), {
    method: 'PUT', authorization, headers: { 'Content-Type': JSON_TYPE },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

async function createOk(t: TestNode, s: string, g: string, settings: Record<string, unknown> = {}): Promise<void> {
  const res = await create(t, s, g, settings);
  expect(res.status, `create ${s}/${g}: ${await res.clone().text()}`).toBe(200);
  await res.arrayBuffer();
}

function update(t: TestNode, s: string, g: string, body: unknown, authorization: string = ADMIN): Promise<Response> {
  return http(t, sub(s, g), {
    method: 'POST', authorization, headers: { 'Content-Type': JSON_TYPE },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

function remove(t: TestNode, s: string, g: string, authorization: string = ADMIN): Promise<Response> {
  return http(t, sub(s, g), { method: 'DELETE', authorization });
}

/** GET …/info as admin; the status and parsed body (undefined when not JSON). */
async function infoRes(t: TestNode, s: string, g: string): Promise<{ status: number; body: any }> {
  const res = await http(t, `${sub(s, g)}/info`, { headers: { Accept: JSON_TYPE } });
  const text = await res.text();
  let body: any;
  try { body = JSON.parse(text); } catch { body = undefined; }
  return { status: res.status, body };
}

async function info(t: TestNode, s: string, g: string): Promise<any> {
  const r = await infoRes(t, s, g);
  expect(r.status, `info of ${s}/${g}`).toBe(200);
  return r.body;
}

/** The checkpointed event number in an info / summary document; -1 when there is none yet. */
function checkpointOf(doc: any): number {
  const v = doc.lastCheckpointedEventPosition;
  if (v === null || v === undefined || v === '') return -1;
  return Number(v);
}

async function waitCheckpoint(t: TestNode, s: string, g: string, n: number, timeoutMs = 6000): Promise<void> {
  await eventually(async () => expect(checkpointOf(await info(t, s, g))).toBe(n), timeoutMs);
}

/** Pulls up to `n` messages (n undefined: the single-message URL); the parsed feed. */
async function pull(t: TestNode, s: string, g: string, n?: number, query = '', authorization: string = ADMIN): Promise<any> {
  const path = `${sub(s, g)}${n === undefined ? '' : `/${n}`}${query}`;
  const res = await http(t, path, { authorization, headers: { Accept: COMPETING } });
  expect(res.status, `GET ${path}: ${await res.clone().text()}`).toBe(200);
  return res.json();
}

/** Ack ids of a feed's entries (the last path segment of each entry's ack link), in the feed's order. */
function ids(feed: any): string[] {
  return ackIds(feed.entries);
}

function ackIds(entries: any[]): string[] {
  return entries.map((e: any) => {
    const link = e.links.find((l: any) => l.relation === 'ack');
    return decodeURIComponent(new URL(link.uri).pathname.split('/').pop()!);
  });
}

/** Event numbers of a feed's entries, oldest first (the feed lists them newest first). */
function numbers(feed: any): number[] {
  return [...feed.entries].reverse().map((e: any) => Number(String(e.title).split('@')[0]));
}

function ack(t: TestNode, s: string, g: string, list: string[], authorization: string = ADMIN): Promise<Response> {
  return http(t, `${sub(s, g)}/ack?ids=${list.join(',')}`, { method: 'POST', authorization });
}

async function ackOk(t: TestNode, s: string, g: string, list: string[]): Promise<void> {
  const res = await ack(t, s, g, list);
  expect(res.status, `ack ${list.join(',')}`).toBe(200);
  await res.arrayBuffer();
}

function nack(t: TestNode, s: string, g: string, list: string[], action?: string, authorization: string = ADMIN): Promise<Response> {
  const q = action === undefined ? '' : `&action=${action}`;
  return http(t, `${sub(s, g)}/nack?ids=${list.join(',')}${q}`, { method: 'POST', authorization });
}

async function nackOk(t: TestNode, s: string, g: string, list: string[], action?: string): Promise<void> {
  const res = await nack(t, s, g, list, action);
  expect(res.status, `nack ${list.join(',')} action=${action}`).toBe(200);
  await res.arrayBuffer();
}

/**
 * Pulls (`batch` at a time) and acks until `expected` messages were received (or `timeoutMs` passed);
 * answers the received entries in delivery order (each feed read oldest first).
 */
async function collect(t: TestNode, s: string, g: string, expected: number, batch = 10, timeoutMs = 10_000): Promise<any[]> {
  const got: any[] = [];
  const deadline = Date.now() + timeoutMs;
  while (got.length < expected && Date.now() < deadline) {
    const feed = await pull(t, s, g, batch);
    const entries = [...feed.entries].reverse();
    if (entries.length === 0) { await sleep(25); continue; }
    got.push(...entries);
    await ackOk(t, s, g, ackIds(entries));
  }
  return got;
}

const entryNumbers = (entries: any[]) => entries.map((e) => Number(String(e.title).split('@')[0]));

async function expectDrained(t: TestNode, s: string, g: string): Promise<void> {
  expect((await pull(t, s, g, 100)).entries).toEqual([]);
}

/** A plain authenticated user (not in $admins or $ops); answers its Authorization header. */
async function plainUser(t: TestNode): Promise<{ login: string; auth: string }> {
  const login = uniq('plain');
  const res = await http(t, '/users/', {
    method: 'POST', headers: { 'Content-Type': JSON_TYPE },
    body: JSON.stringify({ loginName: login, fullName: login, groups: [], password: 'pw' }),
  });
  expect(res.status).toBe(201);
  await res.arrayBuffer();
  return { login, auth: basic(login, 'pw') };
}

/** The parked stream (links resolved, bodies embedded), oldest first. */
async function parked(t: TestNode, s: string, g: string): Promise<any[]> {
  const feed = await readFeed(t, `${parkedPath(s, g)}?embed=body`);
  return [...feed.entries].reverse();
}

const DEFAULTS = {
  resolveLinktos: false, startFrom: 0, messageTimeoutMilliseconds: 10000, maxRetryCount: 10, liveBufferSize: 500,
  bufferSize: 500, readBatchSize: 20, checkPointAfterMilliseconds: 1000, minCheckPointCount: 10,
  maxCheckPointCount: 500, maxSubscriberCount: 10, namedConsumerStrategy: 'RoundRobin', extraStatistics: false,
  preferRoundRobin: true,
};

/** Settings under which every ack is followed by a checkpoint. */
const IMMEDIATE_CHECKPOINTS = { minCheckPointCount: 1, maxCheckPointCount: 1, checkPointAfterMilliseconds: 100 };

// ---------------------------------------------------------------------------------------------

describe('creating, updating and deleting groups', () => {
  let t: TestNode;
  let plain: string;
  beforeAll(async () => {
    t = await startTestNode();
    plain = (await plainUser(t)).auth;
  });
  afterAll(async () => { await t?.dispose(); });

  it('PUT creates a group: 200, absolute Location, body {correlationId, reason, result: Success}', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    const res = await create(t, s, g, {});
    expect(res.status).toBe(200);
    expect(res.headers.get('location')).toBe(`${t.url}/subscriptions/${s}/${g}`);
    const body = await res.json();
    expect(body.result).toBe('Success');
    expect(typeof body.correlationId).toBe('string');
    expect(typeof body.reason).toBe('string');
    expect((await infoRes(t, s, g)).status).toBe(200);
  });

  it('creating an existing group is 409 AlreadyExists and keeps its settings', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    await createOk(t, s, g, { maxRetryCount: 3 });
    const res = await create(t, s, g, { maxRetryCount: 7 });
    expect(res.status).toBe(409);
    expect((await res.json()).result).toBe('AlreadyExists');
    expect((await info(t, s, g)).config.maxRetryCount).toBe(3);
  });

  it('the same group name on another stream is a different group', async () => {
    const g = uniq('g');
    const s1 = uniq('orders');
    const s2 = uniq('orders');
    await createOk(t, s1, g);
    await createOk(t, s2, g);
    expect((await info(t, s2, g)).eventStreamId).toBe(s2);
  });

  it('anonymous create is 401 and creates nothing', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    const res = await create(t, s, g, {}, '');
    expect(res.status).toBe(401);
    expect((await infoRes(t, s, g)).status).toBe(404);
  });

  it('a plain authenticated user (not $admins / $ops) gets 401 and creates nothing', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    const res = await create(t, s, g, {}, plain);
    expect(res.status).toBe(401);
    expect((await infoRes(t, s, g)).status).toBe(404);
  });

  it('a member of $ops may create', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    const res = await create(t, s, g, {}, OPS);
    expect(res.status, await res.clone().text()).toBe(200);
    expect((await infoRes(t, s, g)).status).toBe(200);
  });

  it('without a body every setting takes its default (echoed in info.config)', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    const res = await create(t, s, g);
    expect(res.status, await res.clone().text()).toBe(200);
    expect((await info(t, s, g)).config).toMatchObject(DEFAULTS);
  });

  it('an empty body with Content-Type application/json also takes the defaults', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    const res = await create(t, s, g, '');
    expect(res.status, await res.clone().text()).toBe(200);
    expect((await info(t, s, g)).config).toMatchObject(DEFAULTS);
  });

  it('an empty JSON object takes the defaults', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    await createOk(t, s, g, {});
    expect((await info(t, s, g)).config).toMatchObject(DEFAULTS);
  });

  it('settings are stored as given, field names case-insensitive', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    await createOk(t, s, g, {
      ResolveLinkTos: true, STARTFROM: 3, messagetimeoutmilliseconds: 1234, MaxRetryCount: 4, liveBUFFERsize: 50,
      BufferSize: 60, readBatchSize: 7, CheckPointAfterMilliseconds: 2500, minCheckpointCount: 2,
      MaxCheckpointCount: 9, maxsubscribercount: 3, NamedConsumerStrategy: 'DispatchToSingle', ExtraStatistics: true,
    });
    expect((await info(t, s, g)).config).toMatchObject({
      resolveLinktos: true, startFrom: 3, messageTimeoutMilliseconds: 1234, maxRetryCount: 4, liveBufferSize: 50,
      bufferSize: 60, readBatchSize: 7, checkPointAfterMilliseconds: 2500, minCheckPointCount: 2,
      maxCheckPointCount: 9, maxSubscriberCount: 3, namedConsumerStrategy: 'DispatchToSingle', extraStatistics: true,
    });
  });

  it.each(['RoundRobin', 'DispatchToSingle', 'Pinned', 'PinnedByCorrelation'])(
    'the consumer strategy %s is accepted',
    async (strategy) => {
      const s = uniq('orders');
      const g = uniq('g');
      await createOk(t, s, g, { namedConsumerStrategy: strategy });
      expect((await info(t, s, g)).config.namedConsumerStrategy).toBe(strategy);
    },
  );

  it.each<[string, unknown, string | undefined]>([
    ['bufferSize 0', { bufferSize: 0 }, 'Buffer Size (0) must be positive'],
    ['bufferSize negative', { bufferSize: -5 }, 'Buffer Size (-5) must be positive'],
    ['liveBufferSize 0', { liveBufferSize: 0 }, undefined],
    ['liveBufferSize negative', { liveBufferSize: -1 }, undefined],
    ['readBatchSize 0', { readBatchSize: 0 }, undefined],
    ['readBatchSize negative', { readBatchSize: -3 }, undefined],
    ['bufferSize equal to readBatchSize', { bufferSize: 20, readBatchSize: 20 }, 'BufferSize (20) must be larger than ReadBatchSize (20)'],
    ['bufferSize below readBatchSize', { bufferSize: 10, readBatchSize: 30 }, 'BufferSize (10) must be larger than ReadBatchSize (30)'],
    ['bufferSize below the default readBatchSize', { bufferSize: 15 }, 'BufferSize (15) must be larger than ReadBatchSize (20)'],
    ['an unknown consumer strategy', { namedConsumerStrategy: 'Bogus' }, 'Consumer strategy Bogus does not exist.'],
    ['a negative maxRetryCount', { maxRetryCount: -1 }, undefined],
    ['a negative messageTimeoutMilliseconds', { messageTimeoutMilliseconds: -1 }, undefined],
    ['startFrom below -1', { startFrom: -2 }, undefined],
    ['a malformed JSON body', '{"bufferSize": ', undefined],
  ])('%s: 400 with a message, nothing created', async (_name, body, message) => {
    const s = uniq('orders');
    const g = uniq('g');
    const res = await create(t, s, g, body);
    expect(res.status).toBe(400);
    const text = await res.text();
    expect(text.length).toBeGreaterThan(0);
    if (message) expect(text).toContain(message);
    expect((await infoRes(t, s, g)).status).toBe(404);
  });

  it('POST updates the settings: 200 Success', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    await createOk(t, s, g, { maxRetryCount: 3 });
    const res = await update(t, s, g, { maxRetryCount: 5, messageTimeoutMilliseconds: 2000 });
    expect(res.status, await res.clone().text()).toBe(200);
    expect((await res.json()).result).toBe('Success');
    expect((await info(t, s, g)).config).toMatchObject({ maxRetryCount: 5, messageTimeoutMilliseconds: 2000 });
  });

  it('updating a missing group is 404 and creates nothing', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    const res = await update(t, s, g, { maxRetryCount: 5 });
    expect(res.status).toBe(404);
    expect((await infoRes(t, s, g)).status).toBe(404);
  });

  it('an update with invalid settings is 400 and keeps the old settings', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    await createOk(t, s, g, { bufferSize: 100 });
    const res = await update(t, s, g, { bufferSize: 0 });
    expect(res.status).toBe(400);
    expect(await res.text()).toContain('Buffer Size (0) must be positive');
    expect((await info(t, s, g)).config.bufferSize).toBe(100);
  });

  it('an update keeps the checkpoint and redelivers messages that were in flight', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    await appendN(t, s, 5);
    await createOk(t, s, g, IMMEDIATE_CHECKPOINTS);
    const first = await pull(t, s, g, 3);
    expect(numbers(first)).toEqual([0, 1, 2]);
    const [id0, id1] = [...ids(first)].reverse();
    await ackOk(t, s, g, [id0, id1]);
    await waitCheckpoint(t, s, g, 1);
    const res = await update(t, s, g, { ...IMMEDIATE_CHECKPOINTS, messageTimeoutMilliseconds: 20000 });
    expect(res.status).toBe(200);
    // 0 and 1 were acked (and checkpointed), 2 was in flight and comes back, then the rest
    const rest = await collect(t, s, g, 3);
    expect(entryNumbers(rest)).toEqual([2, 3, 4]);
    await expectDrained(t, s, g);
  });

  it('DELETE removes the group: 200, then info 404, a second DELETE 404', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    await createOk(t, s, g);
    const res = await remove(t, s, g);
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    expect((await infoRes(t, s, g)).status).toBe(404);
    expect((await remove(t, s, g)).status).toBe(404);
  });

  it('deleting a missing group is 404', async () => {
    expect((await remove(t, uniq('orders'), uniq('g'))).status).toBe(404);
  });

  it('a deleted group can be recreated and starts fresh', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    await appendN(t, s, 4);
    await createOk(t, s, g, { ...IMMEDIATE_CHECKPOINTS, maxRetryCount: 2 });
    await ackOk(t, s, g, ids(await pull(t, s, g, 2)));
    await waitCheckpoint(t, s, g, 1);
    expect((await remove(t, s, g)).status).toBe(200);
    await createOk(t, s, g);
    const doc = await info(t, s, g);
    expect(doc.config.maxRetryCount).toBe(10);
    const all = await collect(t, s, g, 4);
    expect(entryNumbers(all)).toEqual([0, 1, 2, 3]);
  });
});

// ---------------------------------------------------------------------------------------------

describe('listings and info', () => {
  let t: TestNode;
  let plain: string;
  beforeAll(async () => {
    t = await startTestNode();
    plain = (await plainUser(t)).auth;
  });
  afterAll(async () => { await t?.dispose(); });

  const SUMMARY_KEYS = [
    'links', 'eventStreamId', 'groupName', 'parkedMessageUri', 'getMessagesUri', 'status', 'averageItemsPerSecond',
    'totalItemsProcessed', 'lastProcessedEventNumber', 'lastCheckpointedEventPosition', 'lastKnownEventNumber',
    'lastKnownEventPosition', 'connectionCount', 'totalInFlightMessages',
  ];

  async function list(path = '/subscriptions', authorization: string = ADMIN): Promise<any> {
    const res = await http(t, path, { authorization, headers: { Accept: JSON_TYPE } });
    expect(res.status, `GET ${path}`).toBe(200);
    return res.json();
  }

  it('GET /subscriptions lists a summary of every group', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    await createOk(t, s, g);
    const all = await list();
    expect(Array.isArray(all)).toBe(true);
    const mine = all.find((x: any) => x.eventStreamId === s && x.groupName === g);
    expect(mine).toBeDefined();
    expect(Object.keys(mine)).toEqual(expect.arrayContaining(SUMMARY_KEYS));
    expect(mine.links).toEqual([{ href: `${t.url}/subscriptions/${s}/${g}/info`, rel: 'detail' }]);
    expect(mine.parkedMessageUri).toBe(`${t.url}/streams/%24persistentsubscription-${s}::${g}-parked`);
    expect(mine.getMessagesUri).toBe(`${t.url}/subscriptions/${s}/${g}/1`);
    expect(typeof mine.status).toBe('string');
    expect(typeof mine.totalItemsProcessed).toBe('number');
    expect(typeof mine.connectionCount).toBe('number');
  });

  it('a plain authenticated user may list', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    await createOk(t, s, g);
    const all = await list('/subscriptions', plain);
    expect(all.some((x: any) => x.eventStreamId === s && x.groupName === g)).toBe(true);
  });

  it('a deleted group leaves the listing', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    await createOk(t, s, g);
    expect((await remove(t, s, g)).status).toBe(200);
    expect((await list()).some((x: any) => x.eventStreamId === s && x.groupName === g)).toBe(false);
  });

  it('?offset=0&count=1 answers a page object', async () => {
    await createOk(t, uniq('orders'), uniq('g'));
    const page = await list('/subscriptions?offset=0&count=1');
    expect(Array.isArray(page)).toBe(false);
    expect(page).toMatchObject({ offset: 0, count: 1 });
    expect(Array.isArray(page.links)).toBe(true);
    expect(typeof page.total).toBe('number');
    expect(page.total).toBeGreaterThanOrEqual(1);
    expect(Array.isArray(page.subscriptions)).toBe(true);
    expect(page.subscriptions.length).toBeGreaterThanOrEqual(1);
    expect(Object.keys(page.subscriptions[0])).toEqual(expect.arrayContaining(SUMMARY_KEYS));
  });

  it.each(['?offset=0&count=0', '?offset=-1&count=1'])('GET /subscriptions%s is 400', async (q) => {
    const res = await http(t, `/subscriptions${q}`, { headers: { Accept: JSON_TYPE } });
    expect(res.status).toBe(400);
  });

  it('GET /subscriptions/{stream} lists that stream\'s groups only', async () => {
    const s = uniq('orders');
    const other = uniq('orders');
    const g1 = uniq('g');
    const g2 = uniq('g');
    await createOk(t, s, g1);
    await createOk(t, s, g2);
    await createOk(t, other, uniq('g'));
    const groups = await list(`/subscriptions/${s}`);
    expect(Array.isArray(groups)).toBe(true);
    expect(groups.map((x: any) => x.groupName).sort()).toEqual([g1, g2].sort());
    expect(groups.every((x: any) => x.eventStreamId === s)).toBe(true);
    expect(Object.keys(groups[0])).toEqual(expect.arrayContaining(SUMMARY_KEYS));
  });

  it('GET /subscriptions/{stream} is 404 for a stream without groups', async () => {
    const s = uniq('orders');
    await appendN(t, s, 1);
    const res = await http(t, `/subscriptions/${s}`, { headers: { Accept: JSON_TYPE } });
    expect(res.status).toBe(404);
  });

  it('info describes the group: summary fields, two links, config, counters, no connections', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    await createOk(t, s, g, { maxRetryCount: 4 });
    const doc = await info(t, s, g);
    expect(doc.eventStreamId).toBe(s);
    expect(doc.groupName).toBe(g);
    expect(doc.links).toEqual([
      { href: `${t.url}/subscriptions/${s}/${g}/info`, rel: 'detail' },
      { href: `${t.url}/subscriptions/${s}/${g}/replayParked`, rel: 'replayParked' },
    ]);
    expect(doc.parkedMessageUri).toBe(`${t.url}/streams/%24persistentsubscription-${s}::${g}-parked`);
    expect(doc.getMessagesUri).toBe(`${t.url}/subscriptions/${s}/${g}/1`);
    expect(Object.keys(doc)).toEqual(expect.arrayContaining([
      ...SUMMARY_KEYS.filter((k) => k !== 'connectionCount'), 'config', 'readBufferCount', 'liveBufferCount',
      'retryBufferCount', 'outstandingMessagesCount', 'parkedMessageCount', 'connections',
    ]));
    expect(doc).not.toHaveProperty('connectionCount');
    expect(doc.config).toMatchObject({ ...DEFAULTS, maxRetryCount: 4 });
    expect(doc.connections).toEqual([]);
    expect(doc.outstandingMessagesCount).toBe(0);
    expect(doc.parkedMessageCount).toBe(0);
  });

  it('info of an unknown group is 404', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    await createOk(t, s, g);
    expect((await infoRes(t, s, uniq('g'))).status).toBe(404);
    expect((await infoRes(t, uniq('orders'), g)).status).toBe(404);
  });

  it('after pulling 3 and acking 1, 2 messages are outstanding and 3 were processed', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    await appendN(t, s, 5);
    await createOk(t, s, g);
    const feed = await pull(t, s, g, 3);
    expect(feed.entries).toHaveLength(3);
    await ackOk(t, s, g, [ids(feed)[0]]);
    await eventually(async () => {
      const doc = await info(t, s, g);
      expect(doc.outstandingMessagesCount).toBe(2);
      expect(doc.totalItemsProcessed).toBe(3);
      expect(doc.lastKnownEventNumber).toBe(4);
    });
  });

  it('totalItemsProcessed counts a retried message again', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    await appendN(t, s, 2);
    await createOk(t, s, g);
    const feed = await pull(t, s, g, 1);
    await nackOk(t, s, g, ids(feed), 'retry');
    const again = await pull(t, s, g, 1);
    expect(ids(again)).toEqual(ids(feed));
    await eventually(async () => expect((await info(t, s, g)).totalItemsProcessed).toBe(2));
  });

  it('lastKnownEventNumber follows events appended later', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    await appendN(t, s, 2);
    await createOk(t, s, g);
    await eventually(async () => expect((await info(t, s, g)).lastKnownEventNumber).toBe(1));
    await appendN(t, s, 3);
    await eventually(async () => expect((await info(t, s, g)).lastKnownEventNumber).toBe(4));
  });

  it('the listing summary shows the same counters as info', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    await appendN(t, s, 3);
    await createOk(t, s, g);
    await pull(t, s, g, 2);
    await eventually(async () => {
      const [mine] = (await list(`/subscriptions/${s}`)).filter((x: any) => x.groupName === g);
      expect(mine.totalItemsProcessed).toBe(2);
      expect(mine.lastKnownEventNumber).toBe(2);
    });
  });
});

// ---------------------------------------------------------------------------------------------

describe('pulling messages', () => {
  let t: TestNode;
  beforeAll(async () => { t = await startTestNode(); });
  afterAll(async () => { await t?.dispose(); });

  it('with SVC-LongPoll an empty pull waits for the next event instead of answering empty', async () => {
    const s = uniq('polled');
    const g = uniq('g');
    await createOk(t, s, g, { startFrom: -1 });
    const started = Date.now();
    const pending = http(t, `${sub(s, g)}/1`, { headers: { Accept: COMPETING, 'SVC-LongPoll': '5' } });
    await sleep(300);
    const [appended] = await appendN(t, s, 1, 'Late');
    const res = await pending;
    expect(res.status).toBe(200);
    const feed = await res.json() as any;
    expect(feed.entries.map((e: any) => e.summary)).toEqual(['Late']);
    expect(feed.entries[0].links[2].uri).toMatch(new RegExp(`/ack/${appended.eventId}$`));
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
    expect(Date.now() - started).toBeLessThan(4000);
  });

  it('with SVC-LongPoll and nothing new, the pull answers an empty feed when the time is up', async () => {
    const s = uniq('quiet');
    const g = uniq('g');
    await createOk(t, s, g);
    const started = Date.now();
    const res = await http(t, `${sub(s, g)}/1`, { headers: { Accept: COMPETING, 'SVC-LongPoll': '1' } });
    expect(res.status).toBe(200);
    expect(((await res.json()) as any).entries).toEqual([]);
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
  });

  it('the feed: title, ackAll / nackAll / previous / self links, entries newest first with ack and nack links', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    const events = await appendN(t, s, 3);
    await createOk(t, s, g);
    const feed = await pull(t, s, g, 2);
    const S = `${t.url}/subscriptions/${s}/${g}`;
    const E = `${t.url}/streams/${s}`;
    expect(feed.title).toBe(`Messages for '${s}/${g}'`);

    const links = feed.links.map((l: any) => [l.relation, l.uri]);
    expect(links.map((l: any) => l[0])).toEqual(['ackAll', 'nackAll', 'previous', 'self']);
    expect(links[2]).toEqual(['previous', `${S}/2`]);
    expect(links[3]).toEqual(['self', S]);
    const expectedIds = [events[0].eventId, events[1].eventId].sort();
    for (const [rel, verb] of [['ackAll', 'ack'], ['nackAll', 'nack']]) {
      const uri: string = links.find((l: any) => l[0] === rel)[1];
      expect(uri.startsWith(`${S}/${verb}?ids=`), uri).toBe(true);
      expect(uri.slice(`${S}/${verb}?ids=`.length).split(',').sort()).toEqual(expectedIds);
    }

    expect(feed.entries.map((e: any) => e.title)).toEqual([`1@${s}`, `0@${s}`]);
    const [e1, e0] = feed.entries;
    expect(e1).toMatchObject({ id: `${E}/1`, summary: 'OrderPlaced', retryCount: 0 });
    expect(e0).toMatchObject({ id: `${E}/0`, summary: 'OrderPlaced', retryCount: 0 });
    expect(e1.links.map((l: any) => [l.relation, l.uri])).toEqual([
      ['edit', `${E}/1`], ['alternate', `${E}/1`],
      ['ack', `${S}/ack/${events[1].eventId}`], ['nack', `${S}/nack/${events[1].eventId}`],
    ]);
  });

  it('message ids are the event ids given at append time', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    const events = await appendN(t, s, 4);
    await createOk(t, s, g);
    const feed = await pull(t, s, g, 4);
    expect([...ids(feed)].reverse()).toEqual(events.map((e) => e.eventId));
    expect(ids(feed).every((id) => GUID.test(id))).toBe(true);
  });

  it('the single-message URL hands out one message', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    await appendN(t, s, 3);
    await createOk(t, s, g);
    const feed = await pull(t, s, g);
    expect(feed.entries.map((e: any) => e.title)).toEqual([`0@${s}`]);
    const S = `${t.url}/subscriptions/${s}/${g}`;
    const links = feed.links.map((l: any) => [l.relation, l.uri]);
    expect(links.find((l: any) => l[0] === 'previous')).toEqual(['previous', `${S}/1`]);
    expect(links.find((l: any) => l[0] === 'self')).toEqual(['self', S]);
  });

  it('?embed=body adds the event itself to each entry', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    const events = [newEvent('OrderPlaced', { total: 12 }), newEvent('OrderPaid', { total: 12, card: 'x' })];
    expect((await append(t, s, events)).status).toBe(201);
    await createOk(t, s, g);
    const feed = await pull(t, s, g, 2, '?embed=body');
    const entries = [...feed.entries].reverse();
    expect(entries.map((e: any) => [e.eventId, e.eventType])).toEqual(events.map((e) => [e.eventId, e.eventType]));
    const data = entries.map((e: any) => (typeof e.data === 'string' ? JSON.parse(e.data) : e.data));
    expect(data).toEqual(events.map((e) => e.data));
  });

  it('an empty group answers 200 with no entries and no ackAll / nackAll links', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    await createOk(t, s, g);
    const feed = await pull(t, s, g, 5);
    expect(feed.title).toBe(`Messages for '${s}/${g}'`);
    expect(feed.entries).toEqual([]);
    const rels = feed.links.map((l: any) => l.relation);
    expect(rels).not.toContain('ackAll');
    expect(rels).not.toContain('nackAll');
    expect(rels).toEqual(expect.arrayContaining(['previous', 'self']));
  });

  it('each pull leases its messages: the next pull gets the following ones', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    await appendN(t, s, 5);
    await createOk(t, s, g);
    expect(numbers(await pull(t, s, g, 2))).toEqual([0, 1]);
    expect(numbers(await pull(t, s, g, 2))).toEqual([2, 3]);
    expect(numbers(await pull(t, s, g, 2))).toEqual([4]);
    expect((await pull(t, s, g, 2)).entries).toEqual([]);
  });

  it('at most count messages come back; 100 is allowed', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    await appendN(t, s, 120);
    await createOk(t, s, g);
    const feed = await eventually(async () => {
      const f = await pull(t, s, g, 100);
      expect(f.entries.length).toBeGreaterThan(0);
      return f;
    });
    expect(feed.entries.length).toBeLessThanOrEqual(100);
    const got = numbers(feed);
    expect(got[0]).toBe(0);
    const rest = await collect(t, s, g, 120 - got.length, 100);
    expect([...got, ...entryNumbers(rest)]).toEqual(Array.from({ length: 120 }, (_, i) => i));
  });

  it.each(['0', '101', 'abc', '-1'])('a count of %s is 400', async (count) => {
    const s = uniq('orders');
    const g = uniq('g');
    await createOk(t, s, g);
    const res = await http(t, `${sub(s, g)}/${count}`, { headers: { Accept: COMPETING } });
    expect(res.status).toBe(400);
  });

  it('Accept application/json is 406', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    await appendN(t, s, 1);
    await createOk(t, s, g);
    const res = await http(t, `${sub(s, g)}/1`, { headers: { Accept: JSON_TYPE } });
    expect(res.status).toBe(406);
    // nothing was leased by the refused request
    expect(numbers(await pull(t, s, g, 1))).toEqual([0]);
  });

  it('the kurrent competingatom+json type is accepted', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    await appendN(t, s, 1);
    await createOk(t, s, g);
    const res = await http(t, `${sub(s, g)}/1`, { headers: { Accept: 'application/vnd.kurrent.competingatom+json' } });
    expect(res.status).toBe(200);
    expect((await res.json()).entries.map((e: any) => e.title)).toEqual([`0@${s}`]);
  });

  it('the competingatom+xml type is accepted and answers XML', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    await appendN(t, s, 1);
    await createOk(t, s, g);
    const res = await http(t, `${sub(s, g)}/1`, { headers: { Accept: 'application/vnd.eventstore.competingatom+xml' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type') ?? '').toContain('xml');
    const text = await res.text();
    expect(text).toContain(`0@${s}`);
  });

  it('pulling from an unknown group is 404', async () => {
    const s = uniq('orders');
    await appendN(t, s, 1);
    await createOk(t, s, uniq('g'));
    const res = await http(t, `${sub(s, uniq('g'))}/1`, { headers: { Accept: COMPETING } });
    expect(res.status).toBe(404);
    const single = await http(t, sub(uniq('orders'), uniq('g')), { headers: { Accept: COMPETING } });
    expect(single.status).toBe(404);
  });

  it('startFrom 0 (the default) starts at the beginning of the stream', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    await appendN(t, s, 3);
    await createOk(t, s, g, { startFrom: 0 });
    expect(entryNumbers(await collect(t, s, g, 3))).toEqual([0, 1, 2]);
  });

  it('startFrom -1 delivers only events appended after the group was created', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    await appendN(t, s, 3);
    await createOk(t, s, g, { startFrom: -1 });
    await appendN(t, s, 2, 'Later');
    const got = await collect(t, s, g, 2);
    expect(entryNumbers(got)).toEqual([3, 4]);
    expect(got.map((e) => e.summary)).toEqual(['Later', 'Later']);
    await expectDrained(t, s, g);
  });

  it('startFrom n starts at event number n', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    await appendN(t, s, 5);
    await createOk(t, s, g, { startFrom: 2 });
    expect(entryNumbers(await collect(t, s, g, 3))).toEqual([2, 3, 4]);
    await expectDrained(t, s, g);
  });

  it('a group on a stream that does not exist yet gets its events once written', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    await createOk(t, s, g);
    expect((await pull(t, s, g, 5)).entries).toEqual([]);
    const events = await appendN(t, s, 2);
    const got = await collect(t, s, g, 2);
    expect(ackIds(got)).toEqual(events.map((e) => e.eventId));
  });

  it('events appended after the group caught up are delivered too, in order', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    await appendN(t, s, 3);
    await createOk(t, s, g);
    expect(entryNumbers(await collect(t, s, g, 3))).toEqual([0, 1, 2]);
    await appendN(t, s, 1);
    await appendN(t, s, 2);
    expect(entryNumbers(await collect(t, s, g, 3))).toEqual([3, 4, 5]);
    await expectDrained(t, s, g);
  });
});

// ---------------------------------------------------------------------------------------------

describe('ack and nack', () => {
  let t: TestNode;
  let user: { login: string; auth: string };
  beforeAll(async () => {
    t = await startTestNode();
    user = await plainUser(t);
  });
  afterAll(async () => { await t?.dispose(); });

  /** A group over `n` fresh events. */
  async function setup(n: number, settings: Record<string, unknown> = {}): Promise<{ s: string; g: string; events: Appended[] }> {
    const s = uniq('orders');
    const g = uniq('g');
    const events = await appendN(t, s, n);
    await createOk(t, s, g, settings);
    return { s, g, events };
  }

  it('POST …/ack/{id} answers 200 with an empty body and the message is no longer outstanding', async () => {
    const { s, g } = await setup(2);
    const [id] = ids(await pull(t, s, g, 1));
    const res = await http(t, `${sub(s, g)}/ack/${id}`, { method: 'POST' });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('');
    await eventually(async () => expect((await info(t, s, g)).outstandingMessagesCount).toBe(0));
  });

  it('POST …/ack?ids=a,b acks several', async () => {
    const { s, g } = await setup(3);
    const feed = await pull(t, s, g, 3);
    const res = await ack(t, s, g, ids(feed).slice(0, 2));
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('');
    await eventually(async () => expect((await info(t, s, g)).outstandingMessagesCount).toBe(1));
  });

  it('the ackAll link of a feed acks all its messages', async () => {
    const { s, g } = await setup(3);
    const feed = await pull(t, s, g, 3);
    const ackAll = feed.links.find((l: any) => l.relation === 'ackAll').uri as string;
    const u = new URL(ackAll);
    const res = await http(t, u.pathname + u.search, { method: 'POST' });
    expect(res.status).toBe(200);
    await eventually(async () => expect((await info(t, s, g)).outstandingMessagesCount).toBe(0));
  });

  it('an acked message never comes back; an unacked one does after its timeout', async () => {
    const { s, g } = await setup(2, { messageTimeoutMilliseconds: 500 });
    const feed = await pull(t, s, g, 2);
    const [id0, id1] = [...ids(feed)].reverse();
    await ackOk(t, s, g, [id0]);
    const back = await eventually(async () => {
      const f = await pull(t, s, g, 10);
      expect(f.entries).toHaveLength(1);
      return f;
    }, 5000);
    expect(ids(back)).toEqual([id1]);
    expect(back.entries[0].retryCount).toBe(1);
  });

  it('unknown (well-formed) ids are ignored: 200', async () => {
    const { s, g } = await setup(1);
    await pull(t, s, g, 1);
    const unknown = crypto.randomUUID();
    const one = await http(t, `${sub(s, g)}/ack/${unknown}`, { method: 'POST' });
    expect(one.status).toBe(200);
    expect((await nack(t, s, g, [unknown, crypto.randomUUID()], 'park')).status).toBe(200);
    const doc = await info(t, s, g);
    expect(doc.outstandingMessagesCount).toBe(1);
    expect(doc.parkedMessageCount).toBe(0);
  });

  it.each([
    ['ack/{id}', (s: string, g: string, _id: string) => `${sub(s, g)}/ack/not-a-guid`],
    ['ack?ids= (one malformed among good ones)', (s: string, g: string, id: string) => `${sub(s, g)}/ack?ids=${id},not-a-guid`],
    ['nack/{id}', (s: string, g: string, _id: string) => `${sub(s, g)}/nack/not-a-guid?action=park`],
    ['nack?ids= (one malformed among good ones)', (s: string, g: string, id: string) => `${sub(s, g)}/nack?ids=${id},not-a-guid&action=park`],
  ])('a malformed id on %s is 400 and changes nothing', async (_name, path) => {
    const { s, g } = await setup(1);
    const [id] = ids(await pull(t, s, g, 1));
    const res = await http(t, path(s, g, id), { method: 'POST' });
    expect(res.status).toBe(400);
    await sleep(100);
    const doc = await info(t, s, g);
    expect(doc.outstandingMessagesCount).toBe(1);
    expect(doc.parkedMessageCount).toBe(0);
  });

  it('nack retry: redelivered with retryCount 1 before newer, never-delivered messages', async () => {
    const { s, g, events } = await setup(5);
    const feed = await pull(t, s, g, 2);
    expect(numbers(feed)).toEqual([0, 1]);
    await nackOk(t, s, g, [events[0].eventId], 'retry');
    const again = await pull(t, s, g, 1);
    expect(again.entries.map((e: any) => [e.title, e.retryCount])).toEqual([[`0@${s}`, 1]]);
    expect(ids(again)).toEqual([events[0].eventId]);
    expect(numbers(await pull(t, s, g, 1))).toEqual([2]);
  });

  it('POST …/nack/{id}?action=retry works on the single-id URL', async () => {
    const { s, g, events } = await setup(3);
    await pull(t, s, g, 1);
    const res = await http(t, `${sub(s, g)}/nack/${events[0].eventId}?action=retry`, { method: 'POST' });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('');
    const again = await pull(t, s, g, 1);
    expect(again.entries.map((e: any) => [e.title, e.retryCount])).toEqual([[`0@${s}`, 1]]);
  });

  it.each([
    ['no action', undefined], ['RETRY', 'RETRY'], ['Retry', 'Retry'], ['the misspelling Retyr', 'Retyr'],
    ['an unknown action', 'bogus'],
  ])('nack with %s retries', async (_name, action) => {
    const { s, g, events } = await setup(3);
    await pull(t, s, g, 1);
    await nackOk(t, s, g, [events[0].eventId], action);
    const again = await pull(t, s, g, 1);
    expect(again.entries.map((e: any) => [e.title, e.retryCount])).toEqual([[`0@${s}`, 1]]);
    expect((await info(t, s, g)).parkedMessageCount).toBe(0);
  });

  it('a message retried twice carries retryCount 2', async () => {
    const { s, g, events } = await setup(2);
    await pull(t, s, g, 1);
    await nackOk(t, s, g, [events[0].eventId], 'retry');
    await pull(t, s, g, 1);
    await nackOk(t, s, g, [events[0].eventId], 'retry');
    const again = await pull(t, s, g, 1);
    expect(again.entries.map((e: any) => [e.title, e.retryCount])).toEqual([[`0@${s}`, 2]]);
  });

  it.each(['skip', 'STOP'])('nack %s: the message is never delivered again, nor parked', async (action) => {
    const { s, g, events } = await setup(3, { messageTimeoutMilliseconds: 500 });
    await pull(t, s, g, 1);
    await nackOk(t, s, g, [events[0].eventId], action);
    await eventually(async () => expect((await info(t, s, g)).outstandingMessagesCount).toBe(0));
    const rest = await collect(t, s, g, 2);
    expect(entryNumbers(rest)).toEqual([1, 2]);
    // beyond the message timeout nothing comes back
    await sleep(1600);
    await expectDrained(t, s, g);
    expect((await info(t, s, g)).parkedMessageCount).toBe(0);
  });

  it.each(['park', 'PARK', 'Park'])('nack %s parks the message: a link in the parked stream, counted, not redelivered', async (action) => {
    const { s, g, events } = await setup(2);
    await pull(t, s, g, 1);
    await nackOk(t, s, g, [events[0].eventId], action);
    await eventually(async () => expect((await info(t, s, g)).parkedMessageCount).toBe(1));
    const links = await parked(t, s, g);
    expect(links.map((e) => e.summary)).toEqual(['$>']);
    expect(links.map((e) => [e.title, e.streamId, e.eventNumber, e.eventId])).toEqual([[`0@${s}`, s, 0, events[0].eventId]]);
    expect(numbers(await pull(t, s, g, 10))).toEqual([1]);
    expect((await info(t, s, g)).outstandingMessagesCount).toBe(1);
  });

  it('the nackAll link with action=park parks every message of the feed', async () => {
    const { s, g, events } = await setup(2);
    const feed = await pull(t, s, g, 2);
    const nackAll = new URL(feed.links.find((l: any) => l.relation === 'nackAll').uri as string);
    const res = await http(t, `${nackAll.pathname}${nackAll.search}&action=park`, { method: 'POST' });
    expect(res.status).toBe(200);
    await eventually(async () => expect((await info(t, s, g)).parkedMessageCount).toBe(2));
    const links = await parked(t, s, g);
    expect(links.map((e) => e.eventId).sort()).toEqual(events.map((e) => e.eventId).sort());
    expect((await pull(t, s, g, 10)).entries).toEqual([]);
  });

  async function restrict(stream: string, readers: string[]): Promise<void> {
    const res = await http(t, `/streams/${stream}/metadata`, {
      method: 'POST', headers: { 'Content-Type': 'application/vnd.eventstore.events+json' },
      body: JSON.stringify([newEvent('$metadata', { $acl: { $r: readers } })]),
    });
    expect(res.status).toBe(201);
  }

  it('a user without read access to the stream cannot pull (401), admin can', async () => {
    const { s, g } = await setup(2);
    await restrict(s, ['$admins']);
    const res = await http(t, `${sub(s, g)}/1`, { authorization: user.auth, headers: { Accept: COMPETING } });
    expect(res.status).toBe(401);
    expect((await http(t, `${sub(s, g)}/1`, { authorization: '', headers: { Accept: COMPETING } })).status).toBe(401);
    expect(numbers(await pull(t, s, g, 1))).toEqual([0]);
  });

  it('a user without read access cannot ack or nack (401) and nothing changes', async () => {
    const { s, g } = await setup(2);
    await restrict(s, ['$admins']);
    const [id] = ids(await pull(t, s, g, 1));
    expect((await ack(t, s, g, [id], user.auth)).status).toBe(401);
    expect((await nack(t, s, g, [id], 'park', user.auth)).status).toBe(401);
    await sleep(100);
    const doc = await info(t, s, g);
    expect(doc.outstandingMessagesCount).toBe(1);
    expect(doc.parkedMessageCount).toBe(0);
  });

  it('a user with read access can pull and ack', async () => {
    const { s, g } = await setup(2);
    await restrict(s, [user.login]);
    const feed = await pull(t, s, g, 2, '', user.auth);
    expect(numbers(feed)).toEqual([0, 1]);
    expect((await ack(t, s, g, ids(feed), user.auth)).status).toBe(200);
    await eventually(async () => expect((await info(t, s, g)).outstandingMessagesCount).toBe(0));
  });
});

// ---------------------------------------------------------------------------------------------

describe('timeouts, parking and replay', () => {
  let t: TestNode;
  let plain: string;
  beforeAll(async () => {
    t = await startTestNode();
    plain = (await plainUser(t)).auth;
  });
  afterAll(async () => { await t?.dispose(); });

  it('an unacked message comes back after about messageTimeoutMilliseconds, retryCount incremented', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    const [event] = await appendN(t, s, 1);
    await createOk(t, s, g, { messageTimeoutMilliseconds: 700 });
    const first = await pull(t, s, g, 1);
    const pulledAt = Date.now();
    expect(first.entries[0].retryCount).toBe(0);
    expect((await pull(t, s, g, 1)).entries).toEqual([]); // leased
    const again = await eventually(async () => {
      const f = await pull(t, s, g, 1);
      expect(f.entries).toHaveLength(1);
      return f;
    }, 5000);
    const elapsed = Date.now() - pulledAt;
    expect(elapsed).toBeGreaterThanOrEqual(600);
    expect(elapsed).toBeLessThan(3000);
    expect(ids(again)).toEqual([event.eventId]);
    expect(again.entries[0].retryCount).toBe(1);
  });

  it('after maxRetryCount retries a message is parked and no longer delivered', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    const [event] = await appendN(t, s, 1);
    await createOk(t, s, g, { messageTimeoutMilliseconds: 500, maxRetryCount: 1 });
    const deliveries: number[] = [];
    const deadline = Date.now() + 10_000;
    for (;;) {
      const f = await pull(t, s, g, 1);
      for (const e of f.entries) deliveries.push(e.retryCount);
      if ((await info(t, s, g)).parkedMessageCount === 1) break;
      expect(Date.now(), `deliveries so far: ${deliveries}`).toBeLessThan(deadline);
      await sleep(50);
    }
    expect(deliveries).toEqual([0, 1]);
    expect((await pull(t, s, g, 10)).entries).toEqual([]);
    const links = await parked(t, s, g);
    expect(links.map((e) => [e.summary, e.title, e.eventId])).toEqual([['$>', `0@${s}`, event.eventId]]);
  });

  it('with maxRetryCount 0 the first timeout parks the message', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    await appendN(t, s, 1);
    await createOk(t, s, g, { messageTimeoutMilliseconds: 500, maxRetryCount: 0 });
    await pull(t, s, g, 1);
    await eventually(async () => expect((await info(t, s, g)).parkedMessageCount).toBe(1), 5000);
    expect((await pull(t, s, g, 10)).entries).toEqual([]);
    expect((await info(t, s, g)).outstandingMessagesCount).toBe(0);
  });

  /** A group whose first `n` messages (of `total`) are parked, one at a time, in event order. */
  async function parkFirst(n: number, total: number): Promise<{ s: string; g: string; events: Appended[] }> {
    const s = uniq('orders');
    const g = uniq('g');
    const events = await appendN(t, s, total);
    await createOk(t, s, g);
    const feed = await pull(t, s, g, n);
    expect(numbers(feed)).toEqual(Array.from({ length: n }, (_, i) => i));
    for (let i = 0; i < n; i++) {
      await nackOk(t, s, g, [events[i].eventId], 'park');
      await eventually(async () => expect((await info(t, s, g)).parkedMessageCount).toBe(i + 1));
    }
    return { s, g, events };
  }

  it('replayParked: 200 Success; the parked messages are delivered again before new ones; parkedMessageCount 0', async () => {
    const { s, g, events } = await parkFirst(2, 4);
    const res = await http(t, `${sub(s, g)}/replayParked`, { method: 'POST' });
    expect(res.status, await res.clone().text()).toBe(200);
    expect((await res.json()).result).toBe('Success');
    await eventually(async () => expect((await info(t, s, g)).parkedMessageCount).toBe(0));
    // replayed messages come from the parked stream's links: they point at the original events (their
    // ack ids are the parked links' ids, as for any resolved link)
    const replayed = await pull(t, s, g, 2, '?embed=body');
    expect(numbers(replayed).sort()).toEqual([0, 1]);
    expect(replayed.entries.map((e: any) => e.eventId).sort()).toEqual([events[0].eventId, events[1].eventId].sort());
    await ackOk(t, s, g, ids(replayed));
    expect(entryNumbers(await collect(t, s, g, 2))).toEqual([2, 3]);
    await expectDrained(t, s, g);
  });

  it('replayParked?stopAt=n replays only parked events numbered below n', async () => {
    const { s, g } = await parkFirst(3, 3);
    const res = await http(t, `${sub(s, g)}/replayParked?stopAt=2`, { method: 'POST' });
    expect(res.status, await res.clone().text()).toBe(200);
    await eventually(async () => expect((await info(t, s, g)).parkedMessageCount).toBe(1));
    const got = await collect(t, s, g, 2);
    expect(entryNumbers(got).sort()).toEqual([0, 1]);
    await expectDrained(t, s, g);
    expect((await info(t, s, g)).parkedMessageCount).toBe(1);
  });

  it('a replayed message is parked again when nacked with park', async () => {
    const { s, g, events } = await parkFirst(1, 1);
    expect((await http(t, `${sub(s, g)}/replayParked`, { method: 'POST' })).status).toBe(200);
    await eventually(async () => expect((await info(t, s, g)).parkedMessageCount).toBe(0));
    const again = await pull(t, s, g, 1, '?embed=body');
    expect(again.entries.map((e: any) => [e.title, e.eventId])).toEqual([[`0@${s}`, events[0].eventId]]);
    await nackOk(t, s, g, ids(again), 'park');
    await eventually(async () => expect((await info(t, s, g)).parkedMessageCount).toBe(1));
  });

  it('replayParked on an unknown group is 404', async () => {
    const s = uniq('orders');
    await createOk(t, s, uniq('g'));
    expect((await http(t, `${sub(s, uniq('g'))}/replayParked`, { method: 'POST' })).status).toBe(404);
  });

  it('replayParked by a plain user or anonymously is 401 and replays nothing', async () => {
    const { s, g } = await parkFirst(1, 1);
    expect((await http(t, `${sub(s, g)}/replayParked`, { method: 'POST', authorization: plain })).status).toBe(401);
    expect((await http(t, `${sub(s, g)}/replayParked`, { method: 'POST', authorization: '' })).status).toBe(401);
    await sleep(200);
    expect((await info(t, s, g)).parkedMessageCount).toBe(1);
    expect((await pull(t, s, g, 10)).entries).toEqual([]);
  });

  it('replayParked by $ops is allowed', async () => {
    const { s, g } = await parkFirst(1, 1);
    expect((await http(t, `${sub(s, g)}/replayParked`, { method: 'POST', authorization: OPS })).status).toBe(200);
    await eventually(async () => expect((await info(t, s, g)).parkedMessageCount).toBe(0));
  });

  it.each(['-1', 'x'])('replayParked?stopAt=%s is 400 and replays nothing', async (stopAt) => {
    const { s, g } = await parkFirst(1, 1);
    expect((await http(t, `${sub(s, g)}/replayParked?stopAt=${stopAt}`, { method: 'POST' })).status).toBe(400);
    await sleep(200);
    expect((await info(t, s, g)).parkedMessageCount).toBe(1);
    expect((await pull(t, s, g, 10)).entries).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------

describe('checkpoints and restart', () => {
  let t: TestNode;
  beforeAll(async () => { t = await startTestNode(); });
  afterAll(async () => { await t?.dispose(); });

  it('acks advance the checkpoint: info and the checkpoint stream ($SubscriptionCheckpoint, data "n")', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    await appendN(t, s, 5);
    await createOk(t, s, g, IMMEDIATE_CHECKPOINTS);
    const feed = await pull(t, s, g, 3);
    for (const id of [...ids(feed)].reverse()) await ackOk(t, s, g, [id]);
    await waitCheckpoint(t, s, g, 2);
    const cp = await readFeed(t, `${checkpointPath(s, g)}?embed=body`);
    const last = cp.entries[0];
    expect(last.eventType ?? last.summary).toBe('$SubscriptionCheckpoint');
    expect(JSON.parse(last.data)).toBe('2');
  });

  it('the checkpoint never passes an unacked message', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    await appendN(t, s, 4);
    await createOk(t, s, g, IMMEDIATE_CHECKPOINTS);
    const [id0, id1, id2] = [...ids(await pull(t, s, g, 3))].reverse();
    await ackOk(t, s, g, [id0]);
    await ackOk(t, s, g, [id2]);
    await waitCheckpoint(t, s, g, 0);
    await sleep(1300); // a timer tick or more
    expect(checkpointOf(await info(t, s, g))).toBe(0);
    await ackOk(t, s, g, [id1]);
    await waitCheckpoint(t, s, g, 2);
  });

  it('group definitions survive a restart; a deleted group stays deleted; delivery resumes after the checkpoint', async () => {
    const kept = { s: uniq('orders'), g: uniq('g') };
    const gone = { s: uniq('orders'), g: uniq('g') };
    const resumed = { s: uniq('orders'), g: uniq('g') };
    await createOk(t, kept.s, kept.g, { maxRetryCount: 3, messageTimeoutMilliseconds: 4321, namedConsumerStrategy: 'Pinned' });
    await createOk(t, gone.s, gone.g);
    expect((await remove(t, gone.s, gone.g)).status).toBe(200);

    const { s, g } = resumed;
    const events = await appendN(t, s, 12);
    await createOk(t, s, g, IMMEDIATE_CHECKPOINTS);
    const k = 5;
    const first = [...(await pull(t, s, g, k)).entries].reverse();
    expect(entryNumbers(first)).toEqual([0, 1, 2, 3, 4]);
    for (const id of ackIds(first)) await ackOk(t, s, g, [id]);
    await waitCheckpoint(t, s, g, k - 1);

    await t.restart();

    const doc = await eventually(() => info(t, kept.s, kept.g));
    expect(doc.config).toMatchObject({ maxRetryCount: 3, messageTimeoutMilliseconds: 4321, namedConsumerStrategy: 'Pinned' });
    expect((await infoRes(t, gone.s, gone.g)).status).toBe(404);

    const rest = await collect(t, s, g, events.length - k, 3);
    expect(ackIds(rest)).toEqual(events.slice(k).map((e) => e.eventId));
    expect(entryNumbers(rest)).toEqual([5, 6, 7, 8, 9, 10, 11]);
    await expectDrained(t, s, g);
  });
});

// ---------------------------------------------------------------------------------------------

describe('competing pullers', () => {
  let t: TestNode;
  beforeAll(async () => { t = await startTestNode(); });
  afterAll(async () => { await t?.dispose(); });

  it('4 concurrent pullers get pairwise-distinct messages and together every event exactly once', async () => {
    const s = uniq('orders');
    const g = uniq('g');
    const events = await appendN(t, s, 200);
    await createOk(t, s, g);
    const total = events.length;
    let seen = 0;
    const deadline = Date.now() + 20_000;
    const puller = async (): Promise<string[]> => {
      const mine: string[] = [];
      while (seen < total && Date.now() < deadline) {
        const feed = await pull(t, s, g, 10);
        const got = ids(feed);
        if (got.length === 0) { await sleep(10); continue; }
        mine.push(...got);
        seen += got.length;
        await ackOk(t, s, g, got);
      }
      return mine;
    };
    const results = await Promise.all([puller(), puller(), puller(), puller()]);
    for (let a = 0; a < results.length; a++) {
      for (let b = a + 1; b < results.length; b++) {
        const overlap = results[a].filter((id) => results[b].includes(id));
        expect(overlap, `pullers ${a} and ${b}`).toEqual([]);
      }
    }
    const all = results.flat();
    expect(all).toHaveLength(total);
    expect(new Set(all).size).toBe(total);
    expect([...all].sort()).toEqual(events.map((e) => e.eventId).sort());
    await expectDrained(t, s, g);
  });
});

// ---------------------------------------------------------------------------------------------

describe('groups on link streams', () => {
  let t: TestNode;
  let target: string;
  let links: string;
  let targets: Appended[];
  let linkEvents: Appended[];
  beforeAll(async () => {
    t = await startTestNode();
    target = uniq('orders');
    links = uniq('links');
    targets = [newEvent('OrderPlaced', { n: 0 }), newEvent('OrderPaid', { n: 1 })];
    expect((await append(t, target, targets)).status).toBe(201);
    linkEvents = [newEvent('$>', `1@${target}`), newEvent('$>', `0@${target}`)];
    expect((await append(t, links, linkEvents)).status).toBe(201);
  });
  afterAll(async () => { await t?.dispose(); });

  it('with resolveLinktos true the target events are delivered (title and id of the target), acked by the link events\' ids', async () => {
    const g = uniq('g');
    await createOk(t, links, g, { resolveLinktos: true });
    const feed = await pull(t, links, g, 2);
    const entries = [...feed.entries].reverse();
    expect(entries.map((e: any) => e.title)).toEqual([`1@${target}`, `0@${target}`]);
    expect(entries.map((e: any) => e.id)).toEqual([`${t.url}/streams/${target}/1`, `${t.url}/streams/${target}/0`]);
    expect(ackIds(entries)).toEqual(linkEvents.map((e) => e.eventId));
    await ackOk(t, links, g, ackIds(entries));
    await eventually(async () => expect((await info(t, links, g)).outstandingMessagesCount).toBe(0));
  });

  it('with resolveLinktos true an entry is titled by its target and summarised as a link, as on stream feeds', async () => {
    // The established servers build these entries like resolved entries of a stream feed: summary "$>".
    const g = uniq('g');
    await createOk(t, links, g, { resolveLinktos: true });
    const feed = await pull(t, links, g, 2);
    expect([...feed.entries].reverse().map((e: any) => [e.title, e.summary])).toEqual([
      [`1@${target}`, '$>'], [`0@${target}`, '$>'],
    ]);
  });

  it('with resolveLinktos true, embed=body shows the target event', async () => {
    const g = uniq('g');
    await createOk(t, links, g, { resolveLinktos: true });
    const feed = await pull(t, links, g, 1, '?embed=body');
    const [e] = feed.entries;
    expect(e.eventType).toBe('OrderPaid');
    expect(typeof e.data === 'string' ? JSON.parse(e.data) : e.data).toEqual({ n: 1 });
  });

  it('with resolveLinktos false (the default) the link events themselves are delivered', async () => {
    const g = uniq('g');
    await createOk(t, links, g);
    const feed = await pull(t, links, g, 2);
    const entries = [...feed.entries].reverse();
    expect(entries.map((e: any) => [e.title, e.summary])).toEqual([[`0@${links}`, '$>'], [`1@${links}`, '$>']]);
    expect(ackIds(entries)).toEqual(linkEvents.map((e) => e.eventId));
  });
});

describe('the stream description document', () => {
  let t: TestNode;
  beforeAll(async () => { t = await startTestNode(); });
  afterAll(async () => { await t.dispose(); });

  const describeDoc = async (s: string) => {
    const res = await http(t, `/streams/${s}`, { headers: { Accept: 'application/vnd.eventstore.streamdesc+json' } });
    expect(res.status).toBe(200);
    return res.json() as Promise<any>;
  };

  it('links the stream\'s subscription groups once there are any', async () => {
    const s = uniq('described');
    await appendN(t, s, 1);
    expect((await describeDoc(s))._links.streamSubscription).toBeUndefined();
    await createOk(t, s, 'g1');
    const doc = await describeDoc(s);
    expect(doc._links.streamSubscription).toEqual([{
      href: `/subscriptions/${s}/g1`,
      supportedContentTypes: [
        'application/vnd.eventstore.competingatom+xml', 'application/vnd.kurrent.competingatom+json', COMPETING,
      ],
    }]);
  });
});
