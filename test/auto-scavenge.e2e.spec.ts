import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUTO_SCAVENGES_STREAM } from '../src/autoscavenge/index.js';
import { ADMIN, basic, eventually, http, OPS, startTestNode, type TestNode } from './support/node.js';

// Auto-scavenge on one real node (issue 15): the coordinator turned on through startNode's option
// (the license check will supply it), with a clock the test sets and gossip rounds the test fires.
// The schedule fires, the node's own scavenge runs to completion, the status goes Waiting →
// InProgress → Waiting, and every step is an event in $auto-scavenges.

let t: TestNode;
let now = Date.parse('2026-01-05T10:01:00Z');
let fireRound: () => void = () => {
  throw new Error('no rounds: the coordinator did not start');
};

const jsonPost = (path: string, body: unknown, authorization = OPS) =>
  http(t, path, { method: 'POST', authorization, headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
const post = (path: string, authorization = OPS) => http(t, path, { method: 'POST', authorization });

async function status(): Promise<{ state: string; schedule: string | null; timeUntilNextCycle: string | null }> {
  const res = await http(t, '/auto-scavenge/status');
  expect(res.status).toBe(200);
  return res.json();
}

async function lastScavenge(): Promise<{ scavengeId: string; scavengeResult: string }> {
  return (await http(t, '/admin/scavenge/last')).json();
}

function eventTypes(): string[] {
  return [...t.node.store.streamRecords(AUTO_SCAVENGES_STREAM)].map((e) => e.eventType);
}

/** Fires a round and waits until the status shows `state`. */
async function roundUntil(state: string): Promise<void> {
  fireRound();
  await eventually(async () => expect((await status()).state).toBe(state), 10_000);
}

beforeAll(async () => {
  t = await startTestNode({}, {
    autoScavenge: {
      enabled: true, clock: { now: () => now },
      ticker: (_ms, round) => {
        fireRound = round;
        return () => undefined;
      },
    },
  });
}, 30_000);
afterAll(async () => {
  await t?.dispose();
});

describe('auto-scavenge on one node', () => {
  it('is enabled, runs nothing until configured, and refuses bad schedules with the parser\'s message', async () => {
    expect(await (await http(t, '/auto-scavenge/enabled')).json()).toEqual({ enabled: true });
    expect(await status()).toEqual({ state: 'NotConfigured', schedule: null, timeUntilNextCycle: null });
    const bad = await jsonPost('/auto-scavenge/configure', { schedule: '61 * * * *' });
    expect(bad.status).toBe(400);
    expect(await bad.text()).toBe('Invalid CRON expression: Constraint error, got value 61 expected range 0-59');
    const sixFields = await jsonPost('/auto-scavenge/configure', { schedule: '0 */5 * * * *' });
    expect(sixFields.status).toBe(400);
    expect(await sixFields.text()).toMatch(/^Invalid CRON expression: expected 5 fields/);
    expect((await jsonPost('/auto-scavenge/configure', { cron: '* * * * *' })).status).toBe(400);
    expect((await http(t, '/auto-scavenge/configure', { method: 'POST', authorization: OPS, headers: { 'Content-Type': 'application/json' }, body: '{' })).status).toBe(400);
    expect((await status()).state).toBe('NotConfigured');
  });

  it('fires on schedule: Waiting → InProgress (the node scavenge runs) → Waiting, recorded in $auto-scavenges', async () => {
    const configured = await jsonPost('/auto-scavenge/configure', { schedule: '*/5 * * * *' });
    expect(configured.status).toBe(200);
    expect(await configured.json()).toEqual({});
    expect(await status()).toEqual({ state: 'Waiting', schedule: '*/5 * * * *', timeUntilNextCycle: '00:04:00' });

    now = Date.parse('2026-01-05T10:04:59Z');
    fireRound();
    await eventually(async () => expect((await status()).timeUntilNextCycle).toBe('00:00:01'));
    expect(eventTypes()).toEqual([]);

    now = Date.parse('2026-01-05T10:05:00Z');
    await roundUntil('InProgress');
    expect((await status()).timeUntilNextCycle).toBe('00:00:00');
    await eventually(async () => expect((await lastScavenge()).scavengeResult).toBe('Success'), 20_000);
    await roundUntil('Waiting');
    expect(await status()).toEqual({ state: 'Waiting', schedule: '*/5 * * * *', timeUntilNextCycle: '00:05:00' });

    expect(eventTypes()).toEqual([
      '$cluster-scavenge-started', '$node-designated', '$node-scavenge-started', '$node-scavenge-completed', '$cluster-scavenge-completed',
    ]);
    const records = [...t.node.store.streamRecords(AUTO_SCAVENGES_STREAM)].map((e) => JSON.parse(e.data.toString('utf8')));
    expect(records[2].scavengeId).toBe((await lastScavenge()).scavengeId);
    expect(records[2].nodeId).toEqual({ address: '127.0.0.1', port: t.node.port });
    expect(records[3].result).toBe('Success');
    expect(records[4].completedAt).toBe('2026-01-05T10:05:00.000Z');
  }, 60_000);

  it('pauses (200 idle, 202 while a node scavenge runs) and resumes over HTTP', async () => {
    const idle = await post('/auto-scavenge/pause');
    expect(idle.status).toBe(200);
    expect(await idle.json()).toEqual({});
    expect((await status()).state).toBe('Paused');
    expect((await post('/auto-scavenge/resume')).status).toBe(200);
    expect((await status()).state).toBe('Waiting');

    now = Date.parse('2026-01-05T10:10:00Z');
    fireRound();
    const running = await post('/auto-scavenge/pause'); // queued behind the round: a node scavenge was started
    expect(running.status).toBe(202);
    expect(await running.text()).toBe('');
    await eventually(async () => expect(await status()).toEqual({ state: 'Paused', schedule: '*/5 * * * *', timeUntilNextCycle: '00:00:00' }), 20_000);
    expect(eventTypes().slice(-2)).toEqual(['$pause-requested', '$paused']);
    expect((await post('/auto-scavenge/pause')).status).toBe(200);

    const resumed = await post('/auto-scavenge/resume');
    expect(resumed.status).toBe(200);
    await roundUntil('InProgress');
    await eventually(async () => expect((await lastScavenge()).scavengeResult).toBe('Success'), 20_000);
    await roundUntil('Waiting');
    expect(eventTypes().slice(-5)).toEqual([
      '$resumed', '$node-designated', '$node-scavenge-started', '$node-scavenge-completed', '$cluster-scavenge-completed',
    ]);
  }, 60_000);

  it('answers status to any authenticated user and control commands to $admins or $ops only', async () => {
    const created = await jsonPost('/users/', { loginName: 'plain-user', password: 'plain-pw', groups: [] }, ADMIN);
    expect(created.status).toBe(201);
    const user = basic('plain-user', 'plain-pw');
    expect((await http(t, '/auto-scavenge/status', { authorization: user })).status).toBe(200);
    expect((await http(t, '/auto-scavenge/enabled', { authorization: '' })).status).toBe(401);
    expect((await http(t, '/auto-scavenge/status', { authorization: '' })).status).toBe(401);
    for (const path of ['/auto-scavenge/pause', '/auto-scavenge/resume']) {
      expect((await post(path, user)).status).toBe(401);
      expect((await post(path, '')).status).toBe(401);
    }
    expect((await jsonPost('/auto-scavenge/configure', { schedule: '0 0 * * *' }, user)).status).toBe(401);
    expect((await status()).schedule).toBe('*/5 * * * *');
    expect((await jsonPost('/auto-scavenge/configure', { schedule: '0 0 * * *' }, ADMIN)).status).toBe(200);
  });

  it('keeps its schedule across a restart', async () => {
    await t.restart();
    expect(await status()).toEqual({ state: 'Waiting', schedule: '0 0 * * *', timeUntilNextCycle: '13:50:00' });
  }, 30_000);
});

describe('auto-scavenge disabled', () => {
  it('answers /enabled with false and 503 problem+json elsewhere', async () => {
    const off = await startTestNode();
    try {
      const enabled = await http(off, '/auto-scavenge/enabled');
      expect(enabled.status).toBe(200);
      expect(await enabled.json()).toEqual({ enabled: false });
      for (const [method, path] of [['GET', '/auto-scavenge/status'], ['POST', '/auto-scavenge/configure'], ['POST', '/auto-scavenge/pause'], ['POST', '/auto-scavenge/resume']] as const) {
        const res = await http(off, path, { method, authorization: OPS, headers: { 'Content-Type': 'application/json' }, ...(method === 'POST' ? { body: '{"schedule":"0 0 * * *"}' } : {}) });
        expect(res.status, path).toBe(503);
        expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
        expect(await res.json()).toEqual({ title: 'AutoScavenge is not enabled', status: 503 });
      }
      expect((await http(off, '/auto-scavenge/pause', { method: 'POST', authorization: '' })).status).toBe(401);
      // A malformed schedule is refused as such, on or off.
      const bad = await http(off, '/auto-scavenge/configure', { method: 'POST', authorization: OPS, headers: { 'Content-Type': 'application/json' }, body: '{"schedule":"61 * * * *"}' });
      expect(bad.status).toBe(400);
    } finally {
      await off.dispose();
    }
  }, 30_000);
});
