import { describe, expect, it } from 'vitest';
import { KurrentDBClient, NotLeaderError, jsonEvent } from '@kurrent/kurrentdb-client';
import { ADMIN, eventually, sleep } from './support/node.js';
import { clusterForFile, type ClusterMember, type TestCluster } from './support/cluster.js';
import { call, STREAMS, streamId } from './support/grpc.js';

// gRPC in a three-node cluster (issues 29, 32): the leader takes writes; a follower answers a write,
// and a read that requires the leader, with not-leader naming the leader's address (the clients
// reconnect there), and serves other reads from its own copy. Gossip.Read on every node names the
// three members and which one leads; a client given the three addresses finds the leader by it,
// and keeps appending through a leader kill with nothing acknowledged lost (last: it kills a node).

let cluster: TestCluster;
let leader: ClusterMember;
let followers: ClusterMember[];

clusterForFile(3, (started) => ({ cluster, leader, followers } = started));

const proposed = () => ({
  proposed_message: { id: { string: crypto.randomUUID() }, metadata: { type: 'E', 'content-type': 'application/json' }, data: Buffer.from('{}') },
});
const readReq = (name: string) => ({ options: { stream: { stream_identifier: streamId(name), start: {} }, count: '10', uuid_option: { string: {} }, no_filter: {} } });

describe('gRPC in a cluster', () => {
  it('a follower refuses a write with not-leader and the leader\'s endpoint; it serves reads unless the leader is required', async () => {
    const name = `grpc-cluster-${crypto.randomUUID().slice(0, 8)}`;
    const leaderUrl = new URL(leader.url);
    const written = await call(leader.url, STREAMS, 'Append', [{ options: { stream_identifier: streamId(name), any: {} } }, proposed()], { authorization: ADMIN });
    expect(written.responses[0]).toHaveProperty('success');
    const refused = await call(followers[0].url, STREAMS, 'Append', [{ options: { stream_identifier: streamId(name), any: {} } }, proposed()], { authorization: ADMIN });
    expect(refused.status).toBe(5);
    expect(refused.trailers).toMatchObject({
      exception: 'not-leader', 'leader-endpoint-host': leaderUrl.hostname, 'leader-endpoint-port': leaderUrl.port,
    });
    let read;
    for (let i = 0; i < 50; i++) {
      read = await call(followers[1].url, STREAMS, 'Read', [readReq(name)], { authorization: ADMIN });
      if (read.responses.length === 1 && 'event' in read.responses[0]) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(read!.responses).toHaveLength(1);
    const required = await call(followers[1].url, STREAMS, 'Read', [readReq(name)], { authorization: ADMIN, 'requires-leader': 'True' });
    expect(required.trailers.exception).toBe('not-leader');
  });

  it('the official client on a follower gets NotLeaderError, then reaches the leader', async () => {
    const port = new URL(followers[0].url).port;
    const client = KurrentDBClient.connectionString(`kurrentdb://admin:changeit@127.0.0.1:${port}?tls=false`);
    try {
      const name = `grpc-cluster-client-${crypto.randomUUID().slice(0, 8)}`;
      const first = await client.appendToStream(name, jsonEvent({ type: 'E', data: {} })).catch((e) => e);
      expect(first).toBeInstanceOf(NotLeaderError);
      const second = await client.appendToStream(name, jsonEvent({ type: 'E', data: {} }));
      expect(second.success).toBe(true);
    } finally {
      await client.dispose();
    }
  });

  it('Gossip.Read on every node names the three members, alive, one Leader at the leader\'s address, the others Follower', async () => {
    for (const member of cluster.members) {
      const { status, responses } = await call(member.url, 'event_store.client.gossip.Gossip', 'Read', [{}]);
      expect(status).toBe(0);
      const members = (responses[0] as { members: { state: string; is_alive: boolean; http_end_point: { address: string; port: number } }[] }).members;
      expect(members.map((m) => m.http_end_point.port).sort()).toEqual(cluster.members.map((m) => m.httpPort).sort());
      expect(members.every((m) => m.is_alive && m.http_end_point.address === '127.0.0.1')).toBe(true);
      expect(members.filter((m) => m.state === 'Leader').map((m) => m.http_end_point.port)).toEqual([leader.httpPort]);
      expect(members.filter((m) => m.state === 'Follower')).toHaveLength(2);
    }
  });

  it('a client given the three addresses finds the leader by gossip, and keeps appending through a leader kill: nothing acknowledged is lost', async () => {
    const hosts = cluster.members.map((m) => `127.0.0.1:${m.httpPort}`).join(',');
    const client = KurrentDBClient.connectionString(`kurrentdb://admin:changeit@${hosts}?tls=false&discoveryInterval=100&maxDiscoverAttempts=100`);
    const stream = `grpc-failover-${crypto.randomUUID().slice(0, 8)}`;
    const acknowledged = new Map<string, string[]>();
    let refused = 0;
    let stop = false;
    const writer = async (w: number) => {
      const name = `${stream}-${w}`;
      acknowledged.set(name, []);
      while (!stop) {
        const id = crypto.randomUUID();
        try {
          await client.appendToStream(name, jsonEvent({ id, type: 'Tick', data: { w } }));
          acknowledged.get(name)!.push(id);
        } catch {
          refused++; // the leader died under it, or a follower answered during the election: the next one tries again
          await sleep(50);
        }
      }
    };
    const total = () => [...acknowledged.values()].reduce((n, ids) => n + ids.length, 0);
    const writers = [0, 1, 2, 3].map(writer);
    try {
      await eventually(async () => expect(total()).toBeGreaterThanOrEqual(100), 30_000);
      const killed = await cluster.ready();
      const beforeKill = total();
      await killed.kill();
      await eventually(async () => expect(total()).toBeGreaterThanOrEqual(beforeKill + 200), 60_000);
    } finally {
      stop = true;
      await Promise.all(writers);
    }
    const next = await cluster.ready();
    expect(next.name).not.toBe(leader.name);
    for (const [name, ids] of acknowledged) {
      const read = await call(next.url, STREAMS, 'Read', [{ options: { ...readReq(name).options, count: '100000' } }], { authorization: ADMIN });
      const stored = read.responses.map((r) => ((r.event as { event: { id: { string: string } } }).event.id.string));
      expect(ids.filter((id) => !stored.includes(id)), `acknowledged and lost in ${name}`).toEqual([]);
      expect(new Set(stored).size, `duplicates in ${name}`).toBe(stored.length);
    }
    process.stdout.write(`gossip failover: ${total()} appends acknowledged, ${refused} refused while the leader changed\n`);
    await client.dispose();
  }, 150_000);
});
