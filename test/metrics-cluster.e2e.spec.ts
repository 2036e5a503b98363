import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ADMIN, eventually } from './support/node.js';
import { clusterForFile, type ClusterMember, type TestCluster } from './support/cluster.js';
import { parseExposition, valueOf, type MetricFamily } from './support/prometheus.js';

// GET /metrics on a three-node cluster (issue 34, item 4): each node reports its own role, and
// a follower how far it is behind the leader's log, which closes once what the leader wrote is
// replicated (the follower's writer counts the replicated records as written).

let cluster: TestCluster;
let leader: ClusterMember;
let followers: ClusterMember[];

clusterForFile(3, (started) => ({ cluster, leader, followers } = started));

async function scrape(member: ClusterMember): Promise<Map<string, MetricFamily>> {
  const res = await fetch(`${member.url}/metrics`, { headers: { authorization: ADMIN } });
  expect(res.status).toBe(200);
  return parseExposition(await res.text());
}

describe('a cluster\'s metrics', () => {
  it('each node its role; followers their replication lag, which closes once a write is replicated', async () => {
    const led = await scrape(leader);
    expect(valueOf(led, 'svc_node_role', { role: 'Leader' })).toBe(1);
    expect(led.get('svc_node_role')!.series).toHaveLength(1);
    expect(led.get('svc_replication_lag_bytes')!.series).toHaveLength(0);
    const before = await Promise.all(followers.map(scrape));
    for (const m of before) expect(valueOf(m, 'svc_node_role', { role: 'Follower' })).toBe(1);

    const events = Array.from({ length: 50 }, (_, n) => ({ eventId: randomUUID(), eventType: 'Replicated', data: { n, pad: 'x'.repeat(200) } }));
    const res = await fetch(`${leader.url}/streams/replicated-${randomUUID()}`, {
      method: 'POST', headers: { authorization: ADMIN, 'content-type': 'application/vnd.eventstore.events+json' }, body: JSON.stringify(events),
    });
    expect(res.status).toBe(201);
    await eventually(async () => {
      const head = valueOf(await scrape(leader), 'svc_log_position_bytes')!;
      for (const [i, follower] of followers.entries()) {
        const m = await scrape(follower);
        expect(valueOf(m, 'svc_replication_lag_bytes')).toBe(0);
        expect(valueOf(m, 'svc_log_position_bytes')).toBe(head);
        expect(valueOf(m, 'svc_events_written_total')! - valueOf(before[i], 'svc_events_written_total')!).toBeGreaterThanOrEqual(50);
      }
    }, 10_000);
  });
});
