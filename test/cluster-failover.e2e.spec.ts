import { afterEach, describe, expect, it } from 'vitest';
import { startCluster, type ClusterMember, type TestCluster } from './support/cluster.js';
import { allRecords, startWriters as writersOn, streamIds, type WriterResults } from '../bench/cluster-writers.js';
import { ADMIN } from './support/node.js';

// Failover: the leader killed (SIGKILL) under 32 concurrent writers, five times in a row; the
// leader frozen (SIGSTOP) with writes it could not replicate; the whole cluster restarted. After
// each, every acknowledged event is on every node exactly once, in order, and the nodes' logs
// are the same record for record.

let cluster: TestCluster | undefined;

afterEach(async () => {
  await cluster?.dispose();
  cluster = undefined;
});

function running(c: TestCluster): ClusterMember[] {
  return c.members.filter((m) => m.proc && m.proc.child.exitCode === null && m.proc.child.signalCode === null);
}

/** Writers through the running nodes (a frozen one is left out once frozen: its requests in flight time out). */
function startWriters(c: TestCluster, count: number) {
  return writersOn(() => running(c).filter((m) => !m.frozen).map((m) => m.url), count);
}

/** Every writer's stream holds exactly its acknowledged events on every node, and the nodes' $all are identical. */
async function verify(c: TestCluster, results: WriterResults): Promise<void> {
  expect(results.unexpected).toEqual([]);
  let total = 0;
  for (const m of c.members) {
    for (const [stream, acked] of results.acknowledged) {
      expect(await streamIds(m.url, stream), `${stream} on ${m.name}`).toEqual(acked);
      total += acked.length;
    }
  }
  expect(total).toBeGreaterThan(0);
  const [first, ...others] = await Promise.all(c.members.map((m) => allRecords(m.url)));
  for (const other of others) expect(other).toEqual(first);
}

/** Waits until every node's log ends where the leader's does (the followers caught up). */
async function caughtUp(c: TestCluster): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const ends = await Promise.all(c.members.map(async (m) => {
      const g = (await (await fetch(`${m.url}/gossip`)).json()) as { members: { nodeName: string; writerCheckpoint: number }[] };
      return g.members.find((x) => x.nodeName === m.name)!.writerCheckpoint;
    })).catch(() => [-1, -2]); // a node restarting in place: not yet
    if (ends.every((e) => e === ends[0])) return;
    if (Date.now() > deadline) {
      throw new Error(`the nodes' logs end at ${ends.join(', ')}\n${c.members.map((m) => `--- ${m.name}\n${m.proc?.output().slice(-2500)}`).join('\n')}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('cluster failover', () => {
  it('loses and duplicates nothing acknowledged when the leader is killed, five times, under 32 writers', async () => {
    const c = cluster = await startCluster(3);
    await c.ready();
    const writers = startWriters(c, 32);
    const failovers: number[] = [];
    for (let cycle = 0; cycle < 5; cycle++) {
      const leader = await c.ready();
      const before = writers.acked;
      while (writers.acked < before + 200) await new Promise((r) => setTimeout(r, 20));
      const killedAt = Date.now();
      await leader.kill();
      failovers.push(await writers.firstAckAfter(killedAt) - killedAt);
      await c.ready();
      await leader.start(); // rejoins: catches up (truncating an unreplicated tail first, if any)
    }
    await c.ready();
    const results = await writers.stop();
    await caughtUp(c);
    await verify(c, results);
    process.stdout.write(`failover (leader SIGKILL → first acknowledged write): ${failovers.join(', ')} ms; `
      + `${results.ackTimes.length} events acknowledged\n`);
    for (const ms of failovers) expect(ms).toBeLessThan(10_000);
  }, 180_000);

  it('a frozen leader acknowledges nothing it could not replicate, and truncates that tail when it wakes', async () => {
    const c = cluster = await startCluster(3);
    const leader = await c.ready();
    const followers = c.members.filter((m) => m !== leader);
    const stream = 'partitioned';
    const append = (url: string, id: string) => fetch(`${url}/streams/${stream}`, {
      method: 'POST', headers: { authorization: ADMIN, 'content-type': 'application/vnd.eventstore.events+json' },
      body: JSON.stringify([{ eventId: id, eventType: 'written', data: {} }]),
    }).then((r) => r.status, () => 0);
    expect(await append(leader.url, '00000000-0000-0000-0000-000000000001')).toBe(201);
    // The followers go away: the leader writes what no quorum will hold. A write waits for a
    // quorum 10 s, then answers 500 Write timeout (it may or may not survive: here it will not).
    for (const f of followers) await f.kill();
    const started = Date.now();
    const waiting = fetch(`${leader.url}/streams/${stream}`, {
      method: 'POST', headers: { authorization: ADMIN, 'content-type': 'application/vnd.eventstore.events+json' },
      body: JSON.stringify([{ eventId: '00000000-0000-0000-0000-000000000005', eventType: 'written', data: {} }]),
    });
    // Durable on the leader, held by no quorum: its reads do not show it (a failover could take it back).
    await new Promise((r) => setTimeout(r, 1_000));
    const headBefore = await allRecords(leader.url);
    expect(await streamIds(leader.url, stream)).toEqual(['00000000-0000-0000-0000-000000000001']);
    const timedOut = await waiting;
    expect(await allRecords(leader.url)).toEqual(headBefore);
    expect(timedOut.status).toBe(500);
    expect(timedOut.statusText).toBe('Write timeout');
    expect(Date.now() - started).toBeGreaterThanOrEqual(9_000);
    const stranded = ['00000000-0000-0000-0000-000000000002', '00000000-0000-0000-0000-000000000003'].map((id) => append(leader.url, id));
    await new Promise((r) => setTimeout(r, 500));
    leader.proc!.child.kill('SIGSTOP');
    leader.frozen = true;
    try {
      // The followers come back and elect one of themselves once the frozen leader's lease runs out.
      await Promise.all(followers.map((f) => f.start()));
      const next = await c.ready();
      expect(followers).toContain(next);
      expect(await append(next.url, '00000000-0000-0000-0000-000000000004')).toBe(201);
    } finally {
      leader.proc!.child.kill('SIGCONT');
      leader.frozen = false;
    }
    // Woken, it learns its term is over: what it held for a quorum fails, never 201.
    expect((await Promise.all(stranded)).filter((s) => s === 201)).toEqual([]);
    await c.ready();
    await caughtUp(c);
    expect(leader.proc!.output()).toContain('truncating');
    for (const m of c.members) {
      expect(await streamIds(m.url, stream), m.name).toEqual(['00000000-0000-0000-0000-000000000001', '00000000-0000-0000-0000-000000000004']);
    }
    const [first, ...others] = await Promise.all(c.members.map((m) => allRecords(m.url)));
    for (const other of others) expect(other).toEqual(first);
  }, 120_000);

  it('writes go on while the leader is frozen under 16 writers; woken, it acknowledged nothing more and follows', async () => {
    const c = cluster = await startCluster(3);
    const leader = await c.ready();
    const writers = startWriters(c, 16);
    while (writers.acked < 300) await new Promise((r) => setTimeout(r, 20));
    const frozenAt = Date.now();
    leader.proc!.child.kill('SIGSTOP');
    leader.frozen = true;
    // Appends sent to the frozen leader wait in its socket; it reads them when it wakes, after its lease ran out.
    const toFrozen = Array.from({ length: 4 }, () => fetch(`${leader.url}/streams/sent-to-frozen`, {
      method: 'POST', headers: { authorization: ADMIN, 'content-type': 'application/vnd.eventstore.events+json' },
      body: JSON.stringify([{ eventId: crypto.randomUUID(), eventType: 'written', data: {} }]),
    }).then((r) => r.status, () => 0));
    try {
      const failover = await writers.firstAckAfter(frozenAt) - frozenAt;
      process.stdout.write(`failover (leader SIGSTOP → first acknowledged write): ${failover} ms\n`);
      const during = writers.acked;
      while (writers.acked < during + 200) await new Promise((r) => setTimeout(r, 20));
    } finally {
      leader.proc!.child.kill('SIGCONT');
      leader.frozen = false;
    }
    expect((await Promise.all(toFrozen)).filter((status) => status === 201)).toEqual([]);
    await c.ready(); // the old leader restarted as a follower (truncating what it wrote alone, if anything)
    const more = writers.acked;
    while (writers.acked < more + 100) await new Promise((r) => setTimeout(r, 20));
    const results = await writers.stop();
    await caughtUp(c);
    // Had it acknowledged a write after its lease ran out, that write would be missing here.
    await verify(c, results);
    for (const m of c.members) expect(await streamIds(m.url, 'sent-to-frozen')).toEqual([]);
  }, 120_000);

  it('stops acknowledging while etcd is down, and recovers with nothing lost once it is back', async () => {
    const c = cluster = await startCluster(3);
    await c.ready();
    const writers = startWriters(c, 8);
    while (writers.acked < 200) await new Promise((r) => setTimeout(r, 20));
    await c.etcd.kill();
    await new Promise((r) => setTimeout(r, 5000)); // every lease has run out by the nodes' clocks
    const during = writers.acked;
    await new Promise((r) => setTimeout(r, 1000));
    // No leader can be sure of its term: nothing is acknowledged now.
    expect(writers.acked).toBe(during);
    await c.etcd.restart();
    await c.ready(60_000);
    while (writers.acked < during + 200) await new Promise((r) => setTimeout(r, 20));
    const results = await writers.stop();
    await c.ready(60_000);
    await caughtUp(c);
    await verify(c, results);
  }, 120_000);

  it('comes back whole after every node is killed and started again', async () => {
    const c = cluster = await startCluster(3);
    await c.ready();
    const writers = startWriters(c, 8);
    while (writers.acked < 100) await new Promise((r) => setTimeout(r, 20));
    const results = await writers.stop();
    await Promise.all(c.members.map((m) => m.kill()));
    await Promise.all(c.members.map((m) => m.start()));
    await c.ready();
    await caughtUp(c);
    await verify(c, results);
    // And it takes writes again.
    const more = startWriters(c, 4);
    while (more.acked < 20) await new Promise((r) => setTimeout(r, 20));
    await verify(c, await more.stop());
    expect(running(c)).toHaveLength(3);
  }, 120_000);

  it('a new leader carries on with the projections from their checkpoints', async () => {
    const c = cluster = await startCluster(3);
    const leader = await c.ready();
    const headers = { authorization: ADMIN, 'content-type': 'application/json' };
    const query = "fromStream('counted').when({ $init: () => ({ n: 0 }), $any: (s) => { s.n++; return s; } })";
    const created = await fetch(`${c.members.find((m) => m !== leader)!.url}/projections/continuous?name=counter&enabled=yes`, {
      method: 'POST', headers, body: query,
    });
    expect(created.status).toBe(201); // forwarded to the leader by a follower
    const appendTo = async (url: string, n: number) => {
      for (let i = 0; i < n; i++) {
        const res = await fetch(`${url}/streams/counted`, {
          method: 'POST', headers: { authorization: ADMIN, 'content-type': 'application/vnd.eventstore.events+json' },
          body: JSON.stringify([{ eventId: crypto.randomUUID(), eventType: 'counted', data: {} }]),
        });
        expect(res.status).toBe(201);
      }
    };
    const state = async (url: string, n: number) => {
      const deadline = Date.now() + 20_000;
      let last: unknown;
      for (;;) {
        const res = await fetch(`${url}/projection/counter/state`, { headers: { authorization: ADMIN } });
        last = res.status === 200 ? await res.json() : res.status;
        if ((last as { n?: number }).n === n) return;
        if (Date.now() > deadline) throw new Error(`the projection's state is ${JSON.stringify(last)}, not n=${n}`);
        await new Promise((r) => setTimeout(r, 200));
      }
    };
    await appendTo(leader.url, 10);
    await state(leader.url, 10);
    await leader.kill();
    const next = await c.ready();
    await appendTo(next.url, 5);
    // Each event counted once: the new leader resumed from the replicated checkpoint.
    await state(next.url, 15);
    await leader.start();
    await c.ready();
    await state(leader.url, 15); // asked of the old leader, now a follower: forwarded
  }, 120_000);
});
