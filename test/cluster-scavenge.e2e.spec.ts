import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN } from './support/node.js';
import { startCluster, type ClusterMember, type TestCluster } from './support/cluster.js';
import { allTitlesForward } from './support/scavenge.js';

// Node scavenges in a three-node cluster: POST /admin/scavenge on a follower runs on that
// follower (it is not forwarded), removes records from its copy of the log only, and writes its
// scavenge point and history through the leader (a follower writes nothing itself), so that every
// node reads them once replicated.

let cluster: TestCluster;
let leader: ClusterMember;
let followers: ClusterMember[];

beforeAll(async () => {
  cluster = await startCluster(3, ['--chunk-size', '4096']);
  leader = await cluster.ready();
  followers = cluster.members.filter((m) => m !== leader);
}, 60_000);

afterAll(async () => {
  await cluster?.dispose();
});

async function call(url: string, path: string, init: RequestInit = {}): Promise<Response> {
  return fetch(url + path, { ...init, redirect: 'manual', headers: { authorization: ADMIN, accept: 'application/json', ...(init.headers ?? {}) } });
}

async function eventually<T>(check: () => Promise<T>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/** How many records of `stream` $all shows on `url`. */
async function inAll(url: string, stream: string): Promise<number> {
  return (await allTitlesForward({ url }, 500)).filter((t) => t.endsWith(`@${stream}`)).length;
}

async function scavenge(m: ClusterMember): Promise<string> {
  const res = await call(m.url, '/admin/scavenge', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  const text = await res.text();
  expect(res.status, text).toBe(200);
  const { scavengeId } = JSON.parse(text) as { scavengeId: string };
  await eventually(async () => {
    const last = (await (await call(m.url, '/admin/scavenge/last')).json()) as { scavengeId: string; scavengeResult: string };
    expect(last).toMatchObject({ scavengeId, scavengeResult: 'Success' });
  });
  return scavengeId;
}

describe('node scavenges in a cluster', () => {
  it('a follower\'s scavenge removes records from its copy only; its point and history are written through the leader', async () => {
    const stream = `doomed-${randomUUID()}`;
    for (let i = 0; i < 4; i++) {
      const events = Array.from({ length: 50 }, (_, n) => ({ eventId: randomUUID(), eventType: 'Filler', data: { n, pad: 'x'.repeat(64) } }));
      const res = await call(leader.url, `/streams/${stream}`, {
        method: 'POST', headers: { 'content-type': 'application/vnd.eventstore.events+json' }, body: JSON.stringify(events),
      });
      expect(res.status).toBe(201);
    }
    expect((await call(leader.url, `/streams/${stream}`, { method: 'DELETE' })).status).toBe(204);
    for (const m of cluster.members) await eventually(async () => expect(await inAll(m.url, stream), m.name).toBe(200));

    const [scavenged, other] = followers;
    const scavengeId = await scavenge(scavenged);
    // Only the scavenged follower's copy lost the records.
    expect(await inAll(scavenged.url, stream)).toBeLessThan(200);
    expect(await inAll(other.url, stream)).toBe(200);
    expect(await inAll(leader.url, stream)).toBe(200);
    // The leader did not run it: its last scavenge is none.
    const leaderLast = (await (await call(leader.url, '/admin/scavenge/last')).json()) as { scavengeId: string };
    expect(leaderLast.scavengeId).not.toBe(scavengeId);

    // Its history and the scavenge point are in the log, on every node.
    for (const m of cluster.members) {
      await eventually(async () => {
        const res = await call(m.url, `/streams/%24scavenges-${scavengeId}/0/forward/20?embed=body`,
          { headers: { accept: 'application/vnd.eventstore.atom+json' } });
        expect(res.status, m.name).toBe(200);
        const page = (await res.json()) as { entries: { eventType: string; data: string }[] };
        const types = page.entries.map((e) => e.eventType).reverse();
        expect(types[0]).toBe('$scavengeStarted');
        expect(types.at(-1)).toBe('$scavengeCompleted');
        const done = JSON.parse(page.entries[0].data) as { result: string; eventsRemoved: number; nodeEndpoint: string };
        expect(done.result).toBe('Success');
        expect(done.eventsRemoved).toBeGreaterThan(0);
        expect(done.nodeEndpoint).toMatch(new RegExp(`:${scavenged.httpPort}$`));
        const points = await call(m.url, '/streams/%24scavengePoints/head/backward/1', { headers: { accept: 'application/vnd.eventstore.atom+json' } });
        expect(points.status, m.name).toBe(200);
      });
    }

    // The other nodes' own scavenges use the replicated point and then lose the records too.
    await scavenge(other);
    expect(await inAll(other.url, stream)).toBeLessThan(200);
    expect(await inAll(leader.url, stream)).toBe(200);
    await scavenge(leader);
    expect(await inAll(leader.url, stream)).toBeLessThan(200);
  }, 120_000);
});
