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

  it('a new leader takes no running scavenge for interrupted; a killed node records its own when it follows again', async () => {
    // Enough chunks that a run at 1% outlasts a failover by far.
    for (let i = 0; i < 10; i++) {
      const events = Array.from({ length: 100 }, (_, n) => ({ eventId: randomUUID(), eventType: 'Filler', data: { n, pad: 'x'.repeat(64) } }));
      const res = await call(leader.url, `/streams/filler-${i}`, {
        method: 'POST', headers: { 'content-type': 'application/vnd.eventstore.events+json' }, body: JSON.stringify(events),
      });
      expect(res.status).toBe(201);
    }
    await cluster.ready();
    const runs = new Map<ClusterMember, string>();
    for (const m of cluster.members) {
      const res = await call(m.url, '/admin/scavenge?throttlePercent=1', { method: 'POST' });
      expect(res.status).toBe(200);
      runs.set(m, ((await res.json()) as { scavengeId: string }).scavengeId);
    }
    for (const id of runs.values()) await eventually(async () => expect(await historyOf(leader.url, id)).toContain('$scavengeStarted'));

    const outputBefore = new Map(followers.map((f) => [f, f.proc!.output().length]));
    await leader.kill();
    const next = await cluster.ready();
    // Leading, the new leader recorded the scavenges it left unfinished: none (it did not restart to lead).
    await eventually(async () => expect(next.proc!.output().slice(outputBefore.get(next))).toContain('0 unfinished scavenges recorded as Interrupted'));
    // The killed leader's run is its own to record, and the followers' ones go on.
    for (const [m, id] of runs) expect(await resultOf(next.url, id), `${m.name}: ${m.proc?.output().split('\n').filter((l) => /SCAVENG/.test(l)).slice(-3).join(' | ')}`).toBeUndefined();
    for (const f of followers) {
      const current = (await (await call(f.url, '/admin/scavenge/current')).json()) as { scavengeId?: string };
      expect(current.scavengeId, f.name).toBe(runs.get(f));
    }

    // Back, the old leader follows and records its own run as Interrupted, once.
    await leader.start();
    await cluster.ready();
    await eventually(async () => expect(await resultOf(next.url, runs.get(leader)!)).toBe('Interrupted'));
    expect((await historyOf(next.url, runs.get(leader)!)).filter((t) => t === '$scavengeCompleted')).toHaveLength(1);
    // Stopped now, the followers' runs each have one result: their own.
    for (const f of followers) {
      const id = runs.get(f)!;
      expect((await call(f.url, `/admin/scavenge/${id}`, { method: 'DELETE' })).status).toBe(200);
      await eventually(async () => expect(await resultOf(next.url, id)).toBe('Stopped'));
      expect((await historyOf(next.url, id)).filter((t) => t === '$scavengeCompleted')).toHaveLength(1);
    }
  }, 120_000);
});

/** The event types of one run's history, oldest first, as `url` reads them. */
async function historyOf(url: string, scavengeId: string): Promise<string[]> {
  const res = await call(url, `/streams/%24scavenges-${scavengeId}/0/forward/100?embed=body`, { headers: { accept: 'application/vnd.eventstore.atom+json' } });
  if (res.status === 404) return [];
  expect(res.status).toBe(200);
  return ((await res.json()) as { entries: { eventType: string }[] }).entries.map((e) => e.eventType).reverse();
}

/** The result its $scavengeCompleted event records, if it has one yet. */
async function resultOf(url: string, scavengeId: string): Promise<string | undefined> {
  const res = await call(url, `/streams/%24scavenges-${scavengeId}/head/backward/1?embed=body`, { headers: { accept: 'application/vnd.eventstore.atom+json' } });
  if (res.status === 404) return undefined;
  const [last] = ((await res.json()) as { entries: { eventType: string; data: string }[] }).entries;
  return last?.eventType === '$scavengeCompleted' ? (JSON.parse(last.data) as { result: string }).result : undefined;
}
