import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KurrentDBClient, NotLeaderError, jsonEvent } from '@kurrent/kurrentdb-client';
import { ADMIN } from './support/node.js';
import { startCluster, type ClusterMember, type TestCluster } from './support/cluster.js';
import { call, STREAMS, streamId } from './support/grpc.js';

// gRPC in a three-node cluster (issue 29): the leader takes writes; a follower answers a write,
// and a read that requires the leader, with not-leader naming the leader's address (the clients
// reconnect there), and serves other reads from its own copy.

let cluster: TestCluster;
let leader: ClusterMember;
let followers: ClusterMember[];

beforeAll(async () => {
  cluster = await startCluster(3);
  leader = await cluster.ready();
  followers = cluster.members.filter((m) => m !== leader);
}, 60_000);

afterAll(async () => {
  await cluster?.dispose();
});

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
});
