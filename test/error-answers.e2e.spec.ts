import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { AutoScavengeCoordinator, AutoScavengeFailedError, AutoScavengeRejectedError } from '../src/autoscavenge/index.js';
import { loadConfig, type Config } from '../src/config/index.js';
import { startNode, type RunningNode } from '../src/node.js';
import { SubscriptionService } from '../src/subscriptions/service.js';
import { ADMIN, uniq } from './support/node.js';

// What a client sees for the domain errors that routes once answered by hand (auto-scavenge,
// persistent subscription changes), now answered by the one error table (issue 30, errors one
// way): the same status, reason phrase, content type and body byte for byte. And the two faults
// of ours: an unexpected error answers 500 "Internal error." and is logged once; a commit
// follower that throws is logged with its name.

/** The node's bound on persistent subscription groups, made small for the test of a create beyond it. */
const GROUP_BOUND = 4;
vi.mock('../src/subscriptions/limits.js', async (original) => ({ ...await original<object>(), MAX_GROUPS: 4 }));

interface LogLine { level: number; msg: string; subscriber?: string; err?: { message: string } }

const lines: LogLine[] = [];
let node: RunningNode;
let dir: string;
let enabled: RunningNode;
let enabledDir: string;

async function start(autoScavengeEnabled: boolean): Promise<{ node: RunningNode; dir: string }> {
  const d = mkdtempSync(join(tmpdir(), 'svc-test-'));
  const config: Config = { ...loadConfig([]).config, db: d, httpPort: 0, logLevel: 'info', startStandardProjections: false };
  const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as LogLine) });
  const n = await startNode(config, {
    log, autoScavenge: { enabled: autoScavengeEnabled, clock: { now: () => Date.now() }, ticker: () => () => undefined },
  });
  return { node: n, dir: d };
}

function http(n: RunningNode, path: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  headers.set('Authorization', ADMIN);
  return fetch(n.url + path, { ...init, headers, redirect: 'manual' });
}

/** Status, reason phrase, content type and body as a client reads them. */
async function seen(res: Response): Promise<{ status: number; reason: string; type: string | null; body: string }> {
  return { status: res.status, reason: res.statusText, type: res.headers.get('content-type'), body: await res.text() };
}

beforeAll(async () => {
  ({ node, dir } = await start(false));
  ({ node: enabled, dir: enabledDir } = await start(true));
}, 30_000);
afterAll(async () => {
  await node?.close();
  await enabled?.close();
  rmSync(dir, { recursive: true, force: true });
  rmSync(enabledDir, { recursive: true, force: true });
});
afterEach(() => {
  vi.restoreAllMocks();
});

describe('auto-scavenge refusals', () => {
  const problem = (title: string, status: number) => JSON.stringify({ title, status });

  it('answers 503 problem+json on every control endpoint while the feature is off', async () => {
    const off = { status: 503, reason: 'Service Unavailable', type: 'application/problem+json; charset=utf-8', body: problem('AutoScavenge is not enabled', 503) };
    expect(await seen(await http(node, '/auto-scavenge/status'))).toEqual(off);
    expect(await seen(await http(node, '/auto-scavenge/pause', { method: 'POST' }))).toEqual(off);
    expect(await seen(await http(node, '/auto-scavenge/resume', { method: 'POST' }))).toEqual(off);
    const configure = await http(node, '/auto-scavenge/configure', {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ schedule: '0 3 * * *' }),
    });
    expect(await seen(configure)).toEqual(off);
  });

  it('answers a bad schedule 400 in plain text with the parser\'s message, on or off', async () => {
    for (const n of [node, enabled]) {
      const res = await http(n, '/auto-scavenge/configure', {
        method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ schedule: '* * * *' }),
      });
      expect(await seen(res)).toEqual({
        status: 400, reason: 'Bad Request', type: 'text/plain; charset=utf-8',
        body: 'Invalid CRON expression: expected 5 fields (minute hour day-of-month month day-of-week), got 4',
      });
    }
  });

  it('answers a command the state refuses 400 with the reason as a JSON string', async () => {
    vi.spyOn(AutoScavengeCoordinator.prototype, 'resume').mockRejectedValue(new AutoScavengeRejectedError('Auto scavenge process is currently pausing'));
    expect(await seen(await http(enabled, '/auto-scavenge/resume', { method: 'POST' }))).toEqual({
      status: 400, reason: 'Bad Request', type: 'application/json; charset=utf-8', body: '"Auto scavenge process is currently pausing"',
    });
  });

  it('answers a coordinator that cannot take the command 500 problem+json, without logging it as a fault', async () => {
    vi.spyOn(AutoScavengeCoordinator.prototype, 'pause').mockRejectedValue(new AutoScavengeFailedError('The auto-scavenge coordinator has stopped'));
    const before = lines.length;
    expect(await seen(await http(enabled, '/auto-scavenge/pause', { method: 'POST' }))).toEqual({
      status: 500, reason: 'Internal Server Error', type: 'application/problem+json; charset=utf-8',
      body: problem('The auto-scavenge coordinator has stopped', 500),
    });
    expect(lines.slice(before).filter((l) => l.msg === 'request failed')).toEqual([]);
  });
});

describe('persistent subscription changes refused', () => {
  const settings = { headers: { 'Content-Type': 'application/json' }, body: '{}' };
  const path = (s: string, g: string) => `/subscriptions/${s}/${g}`;
  /** The outcome body, its correlation id checked and left out. */
  async function outcome(res: Response): Promise<{ status: number; reason: string; type: string | null; location: string | null; body: unknown }> {
    const text = await res.text();
    const body = JSON.parse(text) as Record<string, unknown>;
    expect(text).toBe(JSON.stringify(body, null, 2));
    expect(body.correlationId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    const { correlationId: _id, ...rest } = body;
    return { status: res.status, reason: res.statusText, type: res.headers.get('content-type'), location: res.headers.get('location'), body: rest };
  }

  it('answers creating an existing group 409 AlreadyExists, with the Location of the group', async () => {
    const s = uniq('orders');
    expect((await http(node, path(s, 'g'), { method: 'PUT', ...settings })).status).toBe(200);
    expect(await outcome(await http(node, path(s, 'g'), { method: 'PUT', ...settings }))).toEqual({
      status: 409, reason: 'Conflict', type: 'application/json; charset=utf-8', location: `${node.url}${path(s, 'g')}`,
      body: { reason: "Group 'g' already exists.", result: 'AlreadyExists' },
    });
  });

  it('answers updating or deleting a missing group 404 DoesNotExist', async () => {
    const s = uniq('orders');
    expect(await outcome(await http(node, path(s, 'g'), { method: 'POST', ...settings }))).toEqual({
      status: 404, reason: 'Not Found', type: 'application/json; charset=utf-8', location: `${node.url}${path(s, 'g')}`,
      body: { reason: "Group 'g' does not exist.", result: 'DoesNotExist' },
    });
    expect(await outcome(await http(node, path(s, 'g'), { method: 'DELETE' }))).toEqual({
      status: 404, reason: 'Not Found', type: 'application/json; charset=utf-8', location: null,
      body: { reason: "Group 'g' does not exist.", result: 'DoesNotExist' },
    });
  });

  it('answers a create beyond the node\'s bound 400 Fail', async () => {
    const s = uniq('orders');
    let res: Response;
    let n = 0;
    while ((res = await http(node, path(s, `g${n}`), { method: 'PUT', ...settings })).status === 200) n++;
    expect(n).toBeLessThanOrEqual(GROUP_BOUND);
    expect(await outcome(res)).toEqual({
      status: 400, reason: 'Bad Request', type: 'application/json; charset=utf-8', location: `${node.url}${path(s, `g${n}`)}`,
      body: { reason: `The node has ${GROUP_BOUND} persistent subscription groups, the most it keeps; delete one first.`, result: 'Fail' },
    });
  });

  it('answers a look-up of a missing group 404 with no body', async () => {
    const s = uniq('orders');
    for (const [method, suffix] of [['GET', '/info'], ['GET', ''], ['GET', '/5'], ['POST', '/replayParked'], ['POST', `/ack?ids=${crypto.randomUUID()}`]]) {
      const res = await http(node, path(s, 'g') + suffix, { method });
      expect(await seen(res), `${method} ${suffix}`).toEqual({ status: 404, reason: 'Not Found', type: null, body: '' });
    }
  });
});

describe('faults of ours', () => {
  it('answers an unexpected error 500 "Internal error." and logs it once', async () => {
    vi.spyOn(SubscriptionService.prototype, 'list').mockImplementation(() => { throw new Error('a broken listing'); });
    const before = lines.length;
    expect(await seen(await http(node, '/subscriptions'))).toEqual({
      status: 500, reason: 'Internal Server Error', type: 'text/plain; charset=utf-8', body: 'Internal error.',
    });
    const logged = lines.slice(before).filter((l) => l.err?.message === 'a broken listing');
    expect(logged.map((l) => l.msg)).toEqual(['request failed']);
  });

  it('logs a commit follower that throws with its name, and the write still succeeds', async () => {
    const unsubscribe = node.store.bus.subscribe(() => { throw new Error('a broken follower'); }, 'the test follower');
    try {
      const res = await http(node, `/streams/${uniq('s')}`, {
        method: 'POST', headers: { 'Content-Type': 'application/json', 'ES-EventType': 't', 'ES-EventId': crypto.randomUUID() }, body: '{}',
      });
      expect(res.status).toBe(201);
      const logged = lines.filter((l) => l.err?.message === 'a broken follower');
      expect(logged).toHaveLength(1);
      expect(logged[0]).toMatchObject({ level: 50, subscriber: 'the test follower' });
    } finally {
      unsubscribe();
    }
  });
});
