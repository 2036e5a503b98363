import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Store } from '../src/store/index.js';
import { createLogger } from '../src/logger.js';
import {
  AUTO_SCAVENGES_STREAM, AutoScavengeCoordinator, AutoScavengeNotEnabledError, AutoScavengeRejectedError, InvalidScheduleError,
} from '../src/autoscavenge/index.js';
import { FakeCluster } from './support/fake-cluster.js';

// The coordinator's state machine on a simulated three-member cluster (support/fake-cluster.ts),
// with a fake clock and rounds run by hand: the events it writes to $auto-scavenges, the order in
// which members are scavenged, pause and resume in each phase, a lost member, a restart.

const log = createLogger('silent');
let dir: string;
let store: Store;
let now: number;
const clock = { now: () => now };
const noTicker = () => () => undefined;
const running: AutoScavengeCoordinator[] = [];

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'svc-autoscav-'));
  store = await Store.open({ dir, inMemory: false, chunkSize: 1 << 28 });
  now = Date.parse('2026-01-05T10:00:00Z');
});
afterEach(async () => {
  for (const c of running.splice(0)) await c.stop();
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

function coordinator(cluster: FakeCluster, self: string, enabled = true): AutoScavengeCoordinator {
  const c = new AutoScavengeCoordinator(store, cluster.membership(self), { enabled, clock, ticker: noTicker, memberCallTimeoutMs: 20 }, log);
  c.start();
  running.push(c);
  return c;
}

function events(): Array<{ type: string; data: any }> {
  return [...store.streamRecords(AUTO_SCAVENGES_STREAM)].map((e) => ({ type: e.eventType, data: JSON.parse(e.data.toString('utf8')) }));
}

const types = () => events().map((e) => e.type);
const designated = () => events().filter((e) => e.type === '$node-designated').map((e) => e.data.nodeId.address);

/** Three members: a leads, c is furthest behind, then b. */
function threeMembers(behaviours: Partial<Record<'a' | 'b' | 'c', 'succeed' | 'fail' | 'slow' | 'hang'>> = {}): FakeCluster {
  return new FakeCluster([
    { name: 'a', writerCheckpoint: 300, behaviour: behaviours.a }, { name: 'b', writerCheckpoint: 200, behaviour: behaviours.b },
    { name: 'c', writerCheckpoint: 100, behaviour: behaviours.c },
  ]);
}

/** Configures "0 3 * * *" at 10:00, moves to the next 03:00 and runs a round: the cycle starts. */
async function startCycle(c: AutoScavengeCoordinator): Promise<void> {
  await c.round();
  await c.configure('0 3 * * *');
  now = Date.parse('2026-01-06T03:00:00Z');
  await c.round();
}

describe('auto-scavenge coordinator', () => {
  it('waits for the schedule, scavenges followers furthest behind first, and the leader last after resigning', async () => {
    const cluster = threeMembers();
    const a = coordinator(cluster, 'a');
    const b = coordinator(cluster, 'b');
    await a.round();
    await b.round();
    expect(a.status()).toEqual({ state: 'NotConfigured', schedule: null, timeUntilNextCycle: null });
    await a.configure('0 3 * * *');
    expect(a.status()).toEqual({ state: 'Waiting', schedule: '0 3 * * *', timeUntilNextCycle: '17:00:00' });
    now = Date.parse('2026-01-06T02:59:59.500Z');
    await a.round();
    expect(types()).toEqual([]);
    expect(a.status().timeUntilNextCycle).toBe('00:00:00.5000000');

    now = Date.parse('2026-01-06T03:00:00Z');
    await a.round();
    expect(cluster.started).toEqual(['c', 'b']);
    expect(cluster.resignations).toEqual(['a']);
    expect(a.status().state).toBe('InProgress');
    expect(a.status().timeUntilNextCycle).toBe('00:00:00');

    await a.round(); // no longer the leader: it forgets the cycle
    await b.round(); // the new leader rebuilds it and starts a (now a follower) remotely
    expect(cluster.started).toEqual(['c', 'b', 'a']);
    expect(designated()).toEqual(['c', 'b', 'a']);
    expect(types()).toEqual([
      '$cluster-scavenge-started',
      '$node-designated', '$node-scavenge-started', '$node-scavenge-completed',
      '$node-designated', '$node-scavenge-started', '$node-scavenge-completed',
      '$node-designated', '$node-scavenge-started', '$node-scavenge-completed',
      '$cluster-scavenge-completed',
    ]);
    const [started] = events();
    expect(started!.data.members.map((m: { address: string }) => m.address)).toEqual(['a', 'b', 'c']);
    expect(started!.data.startedAt).toBe('2026-01-06T03:00:00.000Z');
    expect(b.status()).toEqual({ state: 'Waiting', schedule: '0 3 * * *', timeUntilNextCycle: '1.00:00:00' });
    expect(store.readStreamBackward('$auto-scavenge-configuration', -1, 1).status).toBe('ok');
  });

  it('counts failed node scavenges as done: the cycle goes on and does not retry them', async () => {
    const cluster = threeMembers({ b: 'fail' });
    cluster.leader = cluster.member('a').nodeId;
    const a = coordinator(cluster, 'a');
    await startCycle(a);
    const completed = events().filter((e) => e.type === '$node-scavenge-completed').map((e) => [e.data.nodeId.address, e.data.result]);
    expect(completed).toEqual([['c', 'Success'], ['b', 'Errored']]);
    expect(cluster.started).toEqual(['c', 'b']);
  });

  it('pauses at once (200) when no node scavenge runs, and resumes where it was', async () => {
    const cluster = threeMembers();
    const a = coordinator(cluster, 'a');
    await a.round();
    expect(await a.pause()).toBe('Paused'); // NotConfigured
    expect(a.status()).toEqual({ state: 'Paused', schedule: null, timeUntilNextCycle: null });
    await a.resume();
    expect(a.status().state).toBe('NotConfigured');

    await a.configure('0 3 * * *');
    expect(await a.pause()).toBe('Paused'); // Waiting
    expect(await a.pause()).toBe('Paused'); // already paused: no new event
    expect(types()).toEqual(['$paused', '$resumed', '$paused']);
    // A pause that spans the due time does not start a cycle on resume: the next one counts from then.
    now = Date.parse('2026-01-06T05:00:00Z');
    await a.round();
    expect(a.status()).toEqual({ state: 'Paused', schedule: '0 3 * * *', timeUntilNextCycle: '22:00:00' });
    await a.resume();
    expect(a.status()).toEqual({ state: 'Waiting', schedule: '0 3 * * *', timeUntilNextCycle: '22:00:00' });
    expect(types()).not.toContain('$cluster-scavenge-started');
  });

  it('pauses in a cycle between node scavenges (200) and resumes the cycle where it was', async () => {
    const cluster = threeMembers({ c: 'slow' });
    const a = coordinator(cluster, 'a');
    await startCycle(a);
    cluster.member('b').present = false; // unhealthy: nothing new is designated
    cluster.finish('c', 'Success');
    await a.round();
    expect(a.status()).toEqual({ state: 'InProgress', schedule: '0 3 * * *', timeUntilNextCycle: '00:00:00' });
    expect(await a.pause()).toBe('Paused');
    expect(a.status().state).toBe('Paused');
    expect(types().slice(-2)).toEqual(['$node-scavenge-completed', '$paused']);
    cluster.member('b').present = true;
    await a.round();
    expect(cluster.started).toEqual(['c']);
    await a.resume();
    await a.round();
    expect(cluster.started).toEqual(['c', 'b']);
  });

  it('pauses a running node scavenge (202), stops it, and a resume starts that node again', async () => {
    const cluster = threeMembers({ c: 'slow' });
    const a = coordinator(cluster, 'a');
    await startCycle(a);
    expect(a.status().state).toBe('InProgress');
    expect(await a.pause()).toBe('Pausing');
    await a.round();
    expect(cluster.member('c').last?.result).toBe('Stopped');
    expect(a.status()).toEqual({ state: 'Paused', schedule: '0 3 * * *', timeUntilNextCycle: '00:00:00' });
    expect(await a.pause()).toBe('Paused');
    expect(types().slice(-2)).toEqual(['$pause-requested', '$paused']);
    await a.resume();
    await a.round();
    expect(cluster.started).toEqual(['c', 'c']);
    cluster.finish('c', 'Success');
    await a.round();
    expect(cluster.started).toEqual(['c', 'c', 'b']);
  });

  it('stays Pausing while a stop does not answer (202 again; resume refused) until the stop succeeds', async () => {
    const cluster = threeMembers({ c: 'hang' });
    const a = coordinator(cluster, 'a');
    await startCycle(a);
    expect(await a.pause()).toBe('Pausing');
    await a.round();
    expect(a.status().state).toBe('Pausing');
    expect(await a.pause()).toBe('Pausing');
    await expect(a.resume()).rejects.toThrow(new AutoScavengeRejectedError('Auto scavenge process is currently pausing'));
    expect(cluster.started).toEqual(['c']);
    cluster.member('c').behaviour = 'slow';
    await a.round();
    expect(a.status().state).toBe('Paused');
    expect(cluster.started).toEqual(['c']);
  });

  it('a lost member: waits while the cluster is unhealthy, then drops it for its replacement and goes on', async () => {
    const cluster = threeMembers({ c: 'slow' });
    const a = coordinator(cluster, 'a');
    await startCycle(a);
    cluster.member('c').present = false;
    await a.round();
    expect(a.status().state).toBe('InProgress');
    expect(types()).not.toContain('$cluster-members-changed');
    cluster.add('d', 50, 'succeed');
    await a.round();
    const changed = events().find((e) => e.type === '$cluster-members-changed');
    expect(changed?.data).toEqual({ added: [{ address: 'd', port: 2113 }], removed: [{ address: 'c', port: 2113 }] });
    expect(cluster.started).toEqual(['c', 'd', 'b']);
    expect(cluster.resignations).toEqual(['a']);
  });

  it('a member that restarts mid-scavenge is designated again; the coordinator itself restarts mid-cycle from its events', async () => {
    const cluster = threeMembers({ c: 'slow' });
    const a = coordinator(cluster, 'a');
    await startCycle(a);
    await a.stop();
    cluster.restart('c');
    const again = coordinator(cluster, 'a');
    now += 3_600_000;
    await again.round();
    expect(again.status().state).toBe('InProgress');
    expect(designated()).toEqual(['c', 'c']);
    expect(cluster.started).toEqual(['c', 'c']);
    cluster.finish('c', 'Success');
    await again.round();
    expect(cluster.started).toEqual(['c', 'c', 'b']);
  });

  it('skips a schedule that fired while the node was down', async () => {
    const cluster = threeMembers();
    const a = coordinator(cluster, 'a');
    await a.round();
    await a.configure('0 3 * * *');
    await a.stop();
    now = Date.parse('2026-01-08T12:00:00Z');
    const again = coordinator(cluster, 'a');
    await again.round();
    expect(types()).toEqual([]);
    expect(again.status()).toEqual({ state: 'Waiting', schedule: '0 3 * * *', timeUntilNextCycle: '15:00:00' });
  });

  it('configures while paused: the new schedule holds, and the state stays Paused until resumed', async () => {
    const cluster = threeMembers();
    const a = coordinator(cluster, 'a');
    await a.round();
    await a.configure('0 3 * * *');
    await a.pause();
    await a.configure('30 12 * * 1-5');
    expect(a.status()).toEqual({ state: 'Paused', schedule: '30 12 * * 1-5', timeUntilNextCycle: '02:30:00' });
    await a.resume();
    expect(a.status()).toEqual({ state: 'Waiting', schedule: '30 12 * * 1-5', timeUntilNextCycle: '02:30:00' });
  });

  it('refuses schedules that are not five-field cron expressions, with the parser\'s message', async () => {
    const a = coordinator(threeMembers(), 'a');
    await a.round();
    await expect(a.configure('61 * * * *')).rejects.toThrow(/^Invalid CRON expression: Constraint error, got value 61 expected range 0-59/);
    await expect(a.configure('0 0 * * * *')).rejects.toThrow(InvalidScheduleError);
    await expect(a.configure('@daily')).rejects.toThrow(/expected 5 fields/);
    expect(a.status().state).toBe('NotConfigured');
  });

  it('a follower refuses commands; a disabled coordinator refuses everything', async () => {
    const cluster = threeMembers();
    const b = coordinator(cluster, 'b');
    await b.round();
    await expect(b.pause()).rejects.toThrow(new AutoScavengeRejectedError('Node is not the leader'));
    const off = coordinator(cluster, 'a', false);
    expect(() => off.status()).toThrow(AutoScavengeNotEnabledError);
    await expect(off.pause()).rejects.toThrow(AutoScavengeNotEnabledError);
  });
});
