import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import { ADMIN, eventually, OPS } from './support/node.js';
import { clusterForFile, gossip, type ClusterMember, type TestCluster } from './support/cluster.js';

// A three-node cluster on one etcd: election, gossip, writes through every node (the leader
// answers; a follower forwards, or answers 307 when the client requires the leader), reads
// of acknowledged writes on every node, and hand-overs (resign, node priority, shutdown).

let cluster: TestCluster;
let leader: ClusterMember;
let followers: ClusterMember[];
/** When a leader last resigned: it yields to equally up-to-date nodes for 5 s (RESIGN_ABSTAIN_SECONDS). */
let resignedAt = 0;

clusterForFile(3, (started) => ({ cluster, leader, followers } = started));

function append(url: string, stream: string, events: unknown[], headers: Record<string, string> = {}) {
  return fetch(`${url}/streams/${stream}`, {
    method: 'POST', redirect: 'manual',
    headers: { authorization: ADMIN, 'content-type': 'application/vnd.eventstore.events+json', ...headers },
    body: JSON.stringify(events),
  });
}

function event(type = 'tested', data: unknown = { n: 1 }) {
  return { eventId: randomUUID(), eventType: type, data };
}

/** Reads the whole stream on `url` (oldest first), waiting up to `timeoutMs` for `count` events. */
async function readAll(url: string, stream: string, count: number, timeoutMs = 10_000): Promise<{ eventNumber: number; eventId: string }[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await fetch(`${url}/streams/${stream}/0/forward/4096?embed=body`, { headers: { authorization: ADMIN, accept: 'application/vnd.eventstore.atom+json' } });
    if (res.status === 200) {
      const page = (await res.json()) as { entries: { eventNumber: number; eventId: string }[] };
      const events = page.entries.map((e) => ({ eventNumber: e.eventNumber, eventId: e.eventId })).reverse();
      if (events.length >= count || Date.now() > deadline) return events;
    } else if (Date.now() > deadline) throw new Error(`read of ${stream} on ${url}: ${res.status}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('a three-node cluster', () => {
  it('gossips every member with its state, and /info tells each node\'s role', async () => {
    for (const m of cluster.members) {
      const members = await gossip(m.url);
      expect(members.map((g) => g.nodeName).sort()).toEqual(['n1', 'n2', 'n3']);
      expect(members.filter((g) => g.state === 'Leader').map((g) => g.nodeName)).toEqual([leader.name]);
      expect(members.every((g) => g.isAlive)).toBe(true);
      const info = (await (await fetch(`${m.url}/info`)).json()) as { state: string };
      expect(info.state).toBe(m === leader ? 'leader' : 'follower');
    }
    // Members learn of each other through etcd: gossip posted by a stranger is refused (401),
    // and by an admin too, with the reason (403).
    const stranger = await fetch(`${leader.url}/gossip`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"members":[]}' });
    expect(stranger.status).toBe(401);
    const posted = await fetch(`${leader.url}/gossip`, { method: 'POST', headers: { authorization: ADMIN, 'content-type': 'application/json' }, body: '{"members":[]}' });
    expect(posted.status).toBe(403);
    expect(await posted.text()).toMatch(/through etcd/);
  });

  it('takes appends on the leader, and on a follower forwards them; every node then serves them', async () => {
    const stream = `orders-${randomUUID()}`;
    const first = await append(leader.url, stream, [event()]);
    expect(first.status).toBe(201);
    const second = await append(followers[0].url, stream, [event(), event()], { 'SVC-ExpectedVersion': '0' });
    expect(second.status).toBe(201);
    expect(second.headers.get('location')).toMatch(new RegExp(`/streams/${stream}/1$`));
    // A forwarded write is checked by the leader like any other.
    const wrong = await append(followers[1].url, stream, [event()], { 'SVC-ExpectedVersion': '0' });
    expect(wrong.status).toBe(400);
    expect(wrong.headers.get('es-currentversion')).toBe('2');
    for (const m of cluster.members) {
      const events = await readAll(m.url, stream, 3);
      expect(events.map((e) => e.eventNumber), m.name).toEqual([0, 1, 2]);
    }
    // Each node counts the records it committed, a follower its copies (the console's events/s).
    for (const m of cluster.members) {
      const stats = (await (await fetch(`${m.url}/stats`, { headers: { authorization: ADMIN, accept: 'application/json' } })).json()) as
        { svc: { writer: { recordsWritten: number } } };
      expect(stats.svc.writer.recordsWritten, m.name).toBeGreaterThanOrEqual(3);
    }
  });

  it('answers 307 with the leader\'s location on a follower when the client requires the leader', async () => {
    const stream = `redirected-${randomUUID()}`;
    for (const header of ['SVC-RequiresMaster', 'ES-RequireLeader', 'Kurrent-RequireLeader', 'ES-RequireMaster']) {
      const res = await append(followers[0].url, stream, [event()], { [header]: 'True' });
      expect(res.status, header).toBe(307);
      expect(res.headers.get('location')).toBe(`${leader.url}/streams/${stream}`);
    }
    const read = await fetch(`${followers[1].url}/streams/${stream}`, { redirect: 'manual', headers: { authorization: ADMIN, 'SVC-RequiresMaster': 'true' } });
    expect(read.status).toBe(307);
    expect(read.headers.get('location')).toBe(`${leader.url}/streams/${stream}`);
    // Nothing was written by the redirected appends.
    expect((await fetch(`${leader.url}/streams/${stream}`, { headers: { authorization: ADMIN, accept: 'application/json' } })).status).toBe(404);
    // The cluster's epoch records are the leaders' alone.
    for (const path of ['%24epochs', '$epochs', '%24%24%24epochs/metadata']) {
      const res = await fetch(`${leader.url}/streams/${path}`, {
        method: 'POST', headers: { authorization: ADMIN, 'content-type': 'application/vnd.eventstore.events+json' }, body: JSON.stringify([event()]),
      });
      expect(res.status, path).toBe(403);
    }
    // On the leader itself the header changes nothing.
    expect((await append(leader.url, stream, [event()], { 'SVC-RequiresMaster': 'true' })).status).toBe(201);
  });

  it('runs projections on the leader only: a follower forwards their endpoints', async () => {
    const viaFollower = await fetch(`${followers[0].url}/projections/any`, { headers: { authorization: ADMIN, accept: 'application/json' } });
    const onLeader = await fetch(`${leader.url}/projections/any`, { headers: { authorization: ADMIN, accept: 'application/json' } });
    expect(viaFollower.status).toBe(200);
    type Listing = { projections: { name: string; status: string; statusUrl: string }[] };
    const [relayed, direct] = [(await viaFollower.json()) as Listing, (await onLeader.json()) as Listing];
    expect(relayed.projections.map((p) => [p.name, p.status])).toEqual(direct.projections.map((p) => [p.name, p.status]));
    expect(relayed.projections.length).toBeGreaterThan(0);
    // The leader answered the request as sent to the follower: its links name the host the client used.
    expect(relayed.projections[0].statusUrl.startsWith(followers[0].url)).toBe(true);
  });

  it('a leader asked to resign gives up its term: another node leads, and it follows', async () => {
    const resigned = await fetch(`${leader.url}/admin/node/resign`, { method: 'POST', headers: { authorization: OPS } });
    resignedAt = Date.now();
    expect(resigned.status).toBe(200);
    expect(await resigned.json()).toEqual({ resigned: true });
    const next = await cluster.ready();
    expect(next).not.toBe(leader);
    // A follower has nothing to give up.
    const onFollower = await fetch(`${leader.url}/admin/node/resign`, { method: 'POST', headers: { authorization: OPS } });
    expect(await onFollower.json()).toEqual({ resigned: false });
    expect((await append(leader.url, `after-resign-${randomUUID()}`, [event()])).status).toBe(201);
    leader = next;
    followers = cluster.members.filter((m) => m !== leader);
  });

  it('a follower given a higher priority leads once the leader resigns, its log as up to date as the others\'', async () => {
    // The follower the name tie-break passes over: only its priority can make it lead.
    const chosen = [...followers].sort((a, b) => (a.name < b.name ? 1 : -1))[0];
    const set = await fetch(`${chosen.url}/admin/node/priority/10`, { method: 'POST', headers: { authorization: OPS } });
    expect([set.status, await set.text()]).toEqual([200, '']);
    // Past the last resign's abstention, with every node seeing the priority and every log ending
    // at the same place (no writes meanwhile): the up-to-date rule ties, and only the priority decides.
    await sleep(Math.max(0, resignedAt + 6500 - Date.now()));
    await eventually(async () => {
      for (const m of cluster.members) {
        const members = await gossip(m.url);
        expect(members.find((g) => g.nodeName === chosen.name)?.nodePriority, m.name).toBe(10);
        expect(new Set(members.map((g) => g.writerCheckpoint)).size, m.name).toBe(1);
      }
    }, 10_000);
    // The priority started no election.
    expect(await cluster.ready()).toBe(leader);
    const resigned = await fetch(`${leader.url}/admin/node/resign`, { method: 'POST', headers: { authorization: OPS } });
    resignedAt = Date.now();
    expect(await resigned.json()).toEqual({ resigned: true });
    const next = await cluster.ready();
    expect(next.name).toBe(chosen.name);
    leader = next;
    followers = cluster.members.filter((m) => m !== leader);
  });

  it('a leader that shuts down gives up its term at once: another node takes writes well within the lease', async () => {
    const stopped = Date.now();
    leader.proc!.child.kill('SIGTERM');
    await leader.proc!.exited;
    let status = 0;
    while (status !== 201 && Date.now() - stopped < 10_000) {
      status = await append(followers[0].url, `handover-${randomUUID()}`, [event()]).then((r) => r.status, () => 0);
      if (status !== 201) await new Promise((r) => setTimeout(r, 20));
    }
    expect(status).toBe(201);
    const elapsed = Date.now() - stopped;
    process.stdout.write(`graceful handover (leader SIGTERM → first acknowledged write): ${elapsed} ms\n`);
    expect(elapsed).toBeLessThan(2000); // the lease alone would take 2 s and more
    // Gossip still lists it, not alive.
    const members = await gossip(followers[1].url);
    expect(members.map((g) => g.nodeName).sort()).toEqual(['n1', 'n2', 'n3']);
    expect(members.find((g) => g.nodeName === leader.name)).toMatchObject({ isAlive: false });
    expect(members.filter((g) => g.isAlive)).toHaveLength(2);
  });
});
