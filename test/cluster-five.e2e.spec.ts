import { afterAll, describe, expect, it } from 'vitest';
import { startCluster, type ClusterMember, type TestCluster } from './support/cluster.js';
import { startWriters, streamIds } from '../bench/cluster-writers.js';

// Five nodes: a quorum is three. Two of them (the leader among them) can go at once and the
// three left go on taking writes; the two catch up when they come back.

let cluster: TestCluster | undefined;

afterAll(async () => {
  await cluster?.dispose();
});

function alive(m: ClusterMember): boolean {
  return m.proc !== undefined && m.proc.child.exitCode === null && m.proc.child.signalCode === null;
}

describe('a five-node cluster', () => {
  it('goes on with three nodes when the leader and a follower are killed, and the two catch up', async () => {
    const c = cluster = await startCluster(5);
    const leader = await c.ready(60_000);
    const writers = startWriters(() => c.members.filter(alive).map((m) => m.url), 8);
    while (writers.acked < 100) await new Promise((r) => setTimeout(r, 20));
    const follower = c.members.find((m) => m !== leader)!;
    await Promise.all([leader.kill(), follower.kill()]);
    const killedAt = Date.now();
    await writers.firstAckAfter(killedAt);
    const after = writers.acked;
    while (writers.acked < after + 100) await new Promise((r) => setTimeout(r, 20));
    await Promise.all([leader.start(), follower.start()]);
    await c.ready(60_000);
    const results = await writers.stop();
    expect(results.unexpected).toEqual([]);
    for (const m of c.members) {
      for (const [stream, acked] of results.acknowledged) {
        const deadline = Date.now() + 15_000;
        let ids = await streamIds(m.url, stream);
        while (ids.length < acked.length && Date.now() < deadline) {
          await new Promise((r) => setTimeout(r, 100));
          ids = await streamIds(m.url, stream);
        }
        expect(ids, `${stream} on ${m.name}`).toEqual(acked);
      }
    }
  }, 120_000);
});
