import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ADMIN, basic, eventually, http, OPS, softDeletedStream, startTestNode, uniq, type TestNode } from './support/node.js';

// End-to-end tests of the scavenge admin endpoints (contract: /tmp/notes/contract.md "HTTP";
// subscriptions-and-maintenance.md §2.13): who may call them, the 400s of POST /admin/scavenge
// (first failing check wins, nothing starts), the idle answers, and a scavenge started, refused
// while it runs, followed through current and last, and stopped.

const GUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const NO_SCAVENGE_ID = '00000000-0000-0000-0000-000000000000';
const JSON_TYPE = 'application/json';

const ROUTES = [
  { method: 'POST', path: '/admin/scavenge' },
  { method: 'GET', path: '/admin/scavenge/current' },
  { method: 'GET', path: '/admin/scavenge/last' },
  { method: 'GET', path: '/admin/scavenge/history' },
  { method: 'DELETE', path: '/admin/scavenge/current' },
  { method: 'POST', path: '/admin/mergeindexes' },
] as const;

async function createUser(t: TestNode, loginName: string, groups: string[]): Promise<string> {
  const res = await http(t, '/users/', {
    method: 'POST', headers: { 'Content-Type': JSON_TYPE },
    body: JSON.stringify({ loginName, fullName: loginName, groups, password: 'secret' }),
  });
  expect(res.status, await res.clone().text()).toBe(201);
  await res.arrayBuffer();
  return basic(loginName, 'secret');
}

/** POST /admin/scavenge?{query} as admin, with no body unless one is given. */
function postScavenge(t: TestNode, query = '', init: RequestInit & { authorization?: string } = {}): Promise<Response> {
  return http(t, `/admin/scavenge${query ? `?${query}` : ''}`, { method: 'POST', ...init });
}

async function startScavenge(t: TestNode, query = ''): Promise<string> {
  const res = await postScavenge(t, query, { headers: { 'Content-Type': JSON_TYPE }, body: '{}' });
  const text = await res.text();
  expect(res.status, text).toBe(200);
  const { scavengeId } = JSON.parse(text);
  expect(scavengeId).toMatch(GUID);
  return scavengeId;
}

async function getJson(t: TestNode, path: string): Promise<any> {
  const res = await http(t, path, { headers: { Accept: JSON_TYPE } });
  expect(res.status, path).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  return res.json();
}

const current = (t: TestNode) => getJson(t, '/admin/scavenge/current');
const last = (t: TestNode) => getJson(t, '/admin/scavenge/last');

function stopScavenge(t: TestNode, id: string): Promise<Response> {
  return http(t, `/admin/scavenge/${id}`, { method: 'DELETE' });
}

async function expectIdle(t: TestNode): Promise<void> {
  expect(await current(t)).toEqual({ scavengeId: '', scavengeLink: '' });
}


describe('scavenge API without a scavenge', () => {
  let t: TestNode;
  beforeAll(async () => { t = await startTestNode(); });
  afterAll(async () => { await t.dispose(); });

  it('answers 401 on every route to anonymous and to a user outside $admins and $ops', async () => {
    const plainUser = await createUser(t, uniq('plain'), []);
    for (const authorization of ['', plainUser]) {
      for (const { method, path } of ROUTES) {
        const res = await http(t, path, { method, authorization });
        expect(res.status, `${method} ${path} as ${authorization || 'anonymous'}`).toBe(401);
        await res.arrayBuffer();
      }
      // Even a query that would answer 400: who asks is checked first.
      const res = await postScavenge(t, 'threads=0', { authorization });
      expect(res.status).toBe(401);
      await res.arrayBuffer();
    }
    await expectIdle(t);
  });

  it('lets the ops account and a member of $ops in', async () => {
    const opsMember = await createUser(t, uniq('opsmember'), ['$ops']);
    for (const authorization of [OPS, opsMember, ADMIN]) {
      for (const path of ['/admin/scavenge/current', '/admin/scavenge/history']) {
        const res = await http(t, path, { authorization });
        expect(res.status, path).toBe(200);
        await res.arrayBuffer();
      }
    }
  });

  const refusals: Array<[query: string, message: string]> = [
    ['threads=0', 'threads must be a 1 or above'],
    ['threads=-1', 'threads must be a 1 or above'],
    ['threads=x', 'threads must be a 1 or above'],
    ['threads=1.5', 'threads must be a 1 or above'],
    ['threads=', 'threads must be a 1 or above'],
    ['threads=5', 'threads must be 4 or below'],
    ['threshold=1.5', 'threshold must be an integer'],
    ['threshold=x', 'threshold must be an integer'],
    ['throttlePercent=0', 'throttlePercent must be between 1 and 100 inclusive'],
    ['throttlePercent=101', 'throttlePercent must be between 1 and 100 inclusive'],
    ['throttlePercent=x', 'throttlePercent must be between 1 and 100 inclusive'],
    ['threads=2&throttlePercent=50', 'throttlePercent must be 100 for a multi-threaded scavenge'],
    ['syncOnly=yes', 'syncOnly must be a boolean'],
    ['syncOnly=1', 'syncOnly must be a boolean'],
    ['startFromChunk=-1', 'startFromChunk must be a positive integer'],
    ['startFromChunk=x', 'startFromChunk must be a positive integer'],
    // The first failing check speaks.
    ['threads=0&threshold=x&throttlePercent=0&syncOnly=yes&startFromChunk=-1', 'threads must be a 1 or above'],
    ['threads=5&throttlePercent=50', 'threads must be 4 or below'],
    ['threshold=x&throttlePercent=0&syncOnly=yes&startFromChunk=-1', 'threshold must be an integer'],
    ['throttlePercent=0&syncOnly=yes&startFromChunk=-1', 'throttlePercent must be between 1 and 100 inclusive'],
    ['threads=3&throttlePercent=99&syncOnly=yes', 'throttlePercent must be 100 for a multi-threaded scavenge'],
    ['syncOnly=yes&startFromChunk=-1', 'syncOnly must be a boolean'],
    // Names match in any case.
    ['THREADS=0', 'threads must be a 1 or above'],
    ['throttlepercent=101', 'throttlePercent must be between 1 and 100 inclusive'],
    ['SyncOnly=no', 'syncOnly must be a boolean'],
  ];
  it.each(refusals)('POST /admin/scavenge?%s answers 400 "%s" and starts nothing', async (query, message) => {
    for (const body of [undefined, '{}']) {
      const res = await postScavenge(t, query, body === undefined ? {} : { headers: { 'Content-Type': JSON_TYPE }, body });
      expect(res.status).toBe(400);
      expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
      expect(await res.text()).toBe(message);
    }
    await expectIdle(t);
    expect((await last(t)).scavengeResult).toBe('Unknown');
  });

  it('GET current when idle names no scavenge', async () => {
    await expectIdle(t);
  });

  it('GET last names the zero id and Unknown when no scavenge ran since the start', async () => {
    expect(await last(t)).toEqual({ scavengeId: NO_SCAVENGE_ID, scavengeLink: '', scavengeResult: 'Unknown' });
  });

  it('GET history is an empty list before the first scavenge (where $scavenges itself is a 404), and checks its count', async () => {
    expect(await getJson(t, '/admin/scavenge/history')).toEqual([]);
    expect((await http(t, '/streams/%24scavenges', { headers: { Accept: 'application/vnd.eventstore.atom+json' } })).status).toBe(404);
    for (const count of ['0', '1001', 'x']) {
      const res = await http(t, `/admin/scavenge/history?count=${count}`, { headers: { Accept: JSON_TYPE } });
      expect(res.status, count).toBe(400);
      expect(await res.text(), count).toMatch(/count must be an integer from 1 to 1000/);
    }
  });

  it('DELETE of an id no scavenge has answers 404', async () => {
    for (const id of [crypto.randomUUID(), 'current', 'not-an-id']) {
      const res = await stopScavenge(t, id);
      expect(res.status, id).toBe(404);
      expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
      expect(await res.text()).toBe('Scavenge Id does not exist');
    }
  });

  it('POST /admin/mergeindexes answers 200 with an id and a message', async () => {
    const ids = new Set<string>();
    for (const body of [undefined, '{}']) {
      const res = await http(t, '/admin/mergeindexes', { method: 'POST', ...(body ? { headers: { 'Content-Type': JSON_TYPE }, body } : {}) });
      expect(res.status).toBe(200);
      const answer = await res.json();
      expect(Object.keys(answer).sort()).toEqual(['mergeIndexesId', 'message']);
      expect(answer.mergeIndexesId).toMatch(GUID);
      expect(answer.message).toMatch(/^Nothing to merge/);
      ids.add(answer.mergeIndexesId);
    }
    expect(ids.size).toBe(2);
  });
});

// These need the scavenge engine (src/scavenge): until it is built, POST /admin/scavenge answers 500.
describe('scavenge API with a scavenge', () => {
  let t: TestNode;
  beforeEach(async () => { t = await startTestNode({ chunkSize: 4096 }); });
  afterEach(async () => { await t.dispose(); });

  it('a scavenge started with no body, then one with {}, each answer a new id that current and last name', async () => {
    await softDeletedStream(t, 200);
    const started: string[] = [];
    for (const init of [{}, { headers: { 'Content-Type': JSON_TYPE }, body: '{}' }]) {
      const res = await postScavenge(t, '', init);
      const text = await res.text();
      expect(res.status, text).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      const { scavengeId } = JSON.parse(text);
      expect(scavengeId).toMatch(GUID);
      started.push(scavengeId);

      const now = await current(t);
      if (now.scavengeId !== '') { // else it already finished
        expect(now.scavengeId).toBe(scavengeId);
        expect(now.scavengeLink).toBe(`/admin/scavenge/${scavengeId}`);
        expect(Object.keys(now.progress).sort()).toEqual(
          ['chunksDone', 'chunksTotal', 'eventsExamined', 'eventsRemoved', 'phase', 'restedForClientsMs', 'scavengePoint', 'spaceSaved']);
      }
      expect((await last(t)).scavengeId).toBe(scavengeId);
      await eventually(async () => expect(await last(t)).toEqual(
        { scavengeId, scavengeLink: `/admin/scavenge/${scavengeId}`, scavengeResult: 'Success' }), 20_000);
      await expectIdle(t);
    }
    expect(started[1]).not.toBe(started[0]);

    // The history: both runs, the newest first, from their started and completed events; count=1 the newest.
    const history = await getJson(t, '/admin/scavenge/history');
    expect(history.map((r: any) => r.scavengeId)).toEqual([started[1], started[0]]);
    for (const run of history) {
      expect(run).toMatchObject({ scavengeLink: `/admin/scavenge/${run.scavengeId}`, result: 'Success', error: null });
      expect(Object.keys(run)).toEqual(['scavengeId', 'scavengeLink', 'nodeEndpoint', 'started', 'completed', 'result', 'timeTaken', 'spaceSaved', 'error']);
      expect(run.nodeEndpoint).toMatch(/:\d+$/);
      expect(Date.parse(run.completed)).toBeGreaterThanOrEqual(Date.parse(run.started));
      expect(run.timeTaken).toMatch(/^\d\d:\d\d:\d\d\.\d{7}$/);
      expect(typeof run.spaceSaved).toBe('number');
    }
    expect(history[1].spaceSaved).toBeGreaterThan(0);
    expect((await getJson(t, '/admin/scavenge/history?count=1')).map((r: any) => r.scavengeId)).toEqual([started[1]]);
  });

  it('takes the largest valid values and the threshold reaches the scavenge point', async () => {
    await startScavenge(t, 'threads=4&threshold=-1&throttlePercent=100&syncOnly=FALSE&startFromChunk=0');
    await eventually(async () => expect((await last(t)).scavengeResult).toBe('Success'), 20_000);
    const res = await http(t, '/streams/%24scavengePoints/0', { headers: { Accept: JSON_TYPE } });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ threshold: -1 });
  });

  it('refuses a second scavenge while one runs, and DELETE current stops it and answers its id', async () => {
    await softDeletedStream(t, 3000);
    const scavengeId = await startScavenge(t, 'throttlePercent=1');
    expect((await current(t)).scavengeId).toBe(scavengeId);
    expect(await last(t)).toEqual({ scavengeId, scavengeLink: `/admin/scavenge/${scavengeId}`, scavengeResult: 'InProgress' });

    for (const body of [undefined, '{}']) {
      const res = await postScavenge(t, '', body === undefined ? {} : { headers: { 'Content-Type': JSON_TYPE }, body });
      expect(res.status).toBe(400);
      expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
      expect(await res.text()).toBe('Scavenge is already running');
    }
    // The query is checked before the running scavenge.
    const refused = await postScavenge(t, 'threads=0');
    expect(await refused.text()).toBe('threads must be a 1 or above');
    expect((await current(t)).scavengeId).toBe(scavengeId);

    const stopped = await stopScavenge(t, 'current');
    expect(stopped.status).toBe(200);
    expect(stopped.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(await stopped.text()).toBe(scavengeId);
    await expectIdle(t);
    expect(await last(t)).toEqual({ scavengeId, scavengeLink: `/admin/scavenge/${scavengeId}`, scavengeResult: 'Stopped' });
  });

  it('DELETE by id stops that scavenge; another id answers 404 and stops nothing', async () => {
    await softDeletedStream(t, 3000);
    const scavengeId = await startScavenge(t, 'throttlePercent=1');

    const other = await stopScavenge(t, crypto.randomUUID());
    expect(other.status).toBe(404);
    expect(await other.text()).toBe('Scavenge Id does not exist');
    expect((await current(t)).scavengeId).toBe(scavengeId);

    const stopped = await stopScavenge(t, scavengeId);
    expect(stopped.status).toBe(200);
    expect(await stopped.text()).toBe(scavengeId);
    await expectIdle(t);
    expect((await last(t)).scavengeResult).toBe('Stopped');

    const again = await stopScavenge(t, scavengeId);
    expect(again.status).toBe(404);
    await again.arrayBuffer();
  });
});
