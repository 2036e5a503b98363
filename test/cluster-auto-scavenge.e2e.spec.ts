import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN } from './support/node.js';
import { gossip, startCluster, type ClusterMember, type TestCluster } from './support/cluster.js';
import { TEST_PUBLIC_KEY_FILE, testLicense } from './support/license.js';
import { allTitlesForward } from './support/scavenge.js';

// Auto-scavenge in a three-node cluster of licensed nodes: the leader's coordinator scavenges the
// followers first, one at a time, then resigns; the next leader's coordinator carries the cycle on
// (rebuilt from $auto-scavenges) and scavenges the former leader last. Each node's copy loses the
// deleted stream's records.

let cluster: TestCluster;
let leader: ClusterMember;

beforeAll(async () => {
  cluster = await startCluster(3, ['--chunk-size', '4096', '--license-public-key', TEST_PUBLIC_KEY_FILE, '--license-key', testLicense()]);
  leader = await cluster.ready();
}, 60_000);

afterAll(async () => {
  await cluster?.dispose();
});

function call(url: string, path: string, init: RequestInit = {}): Promise<Response> {
  return fetch(url + path, { ...init, redirect: 'manual', headers: { authorization: ADMIN, accept: 'application/json', ...(init.headers ?? {}) } });
}

async function inAll(url: string, stream: string): Promise<number> {
  return (await allTitlesForward({ url }, 500)).filter((t) => t.endsWith(`@${stream}`)).length;
}

async function autoScavenges(url: string): Promise<{ eventType: string; data: any }[]> {
  const res = await call(url, '/streams/%24auto-scavenges/0/forward/200?embed=body', { headers: { accept: 'application/vnd.eventstore.atom+json' } });
  if (res.status !== 200) return [];
  const page = (await res.json()) as { entries: { eventType: string; data: string }[] };
  return page.entries.reverse().map((e) => ({ eventType: e.eventType, data: JSON.parse(e.data) }));
}

describe('auto-scavenge in a cluster', () => {
  it('scavenges the followers first, then the leader after it resigned', async () => {
    const stream = `doomed-${randomUUID()}`;
    const events = Array.from({ length: 200 }, (_, n) => ({ eventId: randomUUID(), eventType: 'Filler', data: { n, pad: 'x'.repeat(64) } }));
    const appended = await call(leader.url, `/streams/${stream}`, {
      method: 'POST', headers: { 'content-type': 'application/vnd.eventstore.events+json' }, body: JSON.stringify(events),
    });
    expect(appended.status).toBe(201);
    expect((await call(leader.url, `/streams/${stream}`, { method: 'DELETE' })).status).toBe(204);

    expect(await (await call(leader.url, '/auto-scavenge/enabled')).json()).toEqual({ enabled: true });
    // Configured through a follower: it forwards to the leader, where the coordinator runs.
    const follower = cluster.members.find((m) => m !== leader)!;
    // The coordinator takes commands as soon as the node leads (not only once a gossip round saw it).
    const configure = (url: string) => call(url, '/auto-scavenge/configure', {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ schedule: '* * * * *' }),
    });
    const configured = await configure(follower.url);
    expect(configured.status, await configured.text()).toBeLessThan(300);

    // The cycle: up to a minute until the schedule fires, then rounds every 5 s.
    const deadline = Date.now() + 170_000;
    let log: { eventType: string; data: any }[] = [];
    for (;;) {
      log = await autoScavenges(follower.url).catch(() => []);
      if (log.some((e) => e.eventType === '$cluster-scavenge-completed')) break;
      if (Date.now() > deadline) throw new Error(`no completed cycle: ${JSON.stringify(log.map((e) => e.eventType))}`);
      await new Promise((r) => setTimeout(r, 1000));
    }
    const designated = log.filter((e) => e.eventType === '$node-designated').map((e) => e.data.nodeId.port as number);
    const completed = log.filter((e) => e.eventType === '$node-scavenge-completed');
    const byPort = (port: number) => cluster.members.find((m) => m.httpPort === port)!.name;
    expect(completed.map((e) => e.data.result)).toEqual(['Success', 'Success', 'Success']);
    const order = completed.map((e) => byPort(e.data.nodeId.port));
    expect(new Set(designated.map(byPort)).size).toBe(3);
    // The followers first, the leader that started the cycle last.
    expect(order.slice(0, 2).sort()).toEqual(cluster.members.filter((m) => m !== leader).map((m) => m.name).sort());
    expect(order[2]).toBe(leader.name);

    // It resigned: another node leads now.
    const newLeader = await cluster.ready();
    expect(newLeader.name).not.toBe(leader.name);
    expect((await gossip(newLeader.url)).find((g) => g.state === 'Leader')?.nodeName).toBe(newLeader.name);
    const again = await configure(newLeader.url);
    expect(again.status, await again.text()).toBeLessThan(300);
    // Every node's copy lost the deleted stream's records.
    for (const m of cluster.members) expect(await inAll(m.url, stream), m.name).toBeLessThan(200);
  }, 240_000);
});
