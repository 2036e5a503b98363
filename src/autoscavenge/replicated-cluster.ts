import type { Store } from '../store/index.js';
import type { ScavengeRequest } from '../scavenge/index.js';
import { MemberCallError, sameNode, type ClusterMembership, type ClusterView, type MemberScavengeResult, type NodeId } from './cluster.js';
import { recordedResult } from './single-node.js';

// The membership of a cluster node: the members as its gossip shows them (from etcd), whether it
// leads, resignation as POST /admin/node/resign does it, and each member's node scavenge called
// over the leader's replication connection to that member (no HTTP credentials between nodes:
// the link is the nodes' own, mutually authenticated with TLS). A member answers with its own
// Scavenger (memberScavengeRequest below), as POST /admin/scavenge, GET /admin/scavenge/last and
// DELETE /admin/scavenge/{id} would.

/** What the coordinator's membership needs of the cluster (src/cluster/index.ts Cluster, given by node.ts). */
export interface ClusterAccess {
  readonly clusterSize: number;
  /** This node's name in gossip. */
  selfName(): string;
  /** GET /gossip's answer. */
  gossip(): Record<string, unknown>;
  isLeader(): boolean;
  resign(): Promise<boolean>;
  /** A request to the named member's memberScavengeRequest (the leader to a follower, or a node to itself). */
  memberRequest(name: string, request: MemberScavengeRequest, timeoutMs: number): Promise<unknown>;
}

export type MemberScavengeRequest =
  | { op: 'start' }
  | { op: 'last' }
  | { op: 'stop'; scavengeId: string };

interface GossipEntry {
  nodeName: string;
  instanceId: string;
  state: string;
  isAlive: boolean;
  httpEndPointIp: string;
  httpEndPointPort: number;
  writerCheckpoint: number;
  isReadOnlyReplica: boolean;
}

/** A member call waits at most this long (the coordinator gives up sooner: its own timeout). */
const CALL_TIMEOUT_MS = 5000;

export class ReplicatedCluster implements ClusterMembership {
  constructor(private readonly store: Store, private readonly cluster: ClusterAccess) {}

  private entries(): GossipEntry[] {
    return ((this.cluster.gossip().members ?? []) as GossipEntry[]).filter((m) => m.isAlive);
  }

  view(): ClusterView {
    const entries = this.entries();
    const selfEntry = entries.find((m) => m.nodeName === this.cluster.selfName()) ?? entries[0];
    return {
      self: { address: selfEntry?.httpEndPointIp ?? '', port: selfEntry?.httpEndPointPort ?? 0 },
      clusterSize: this.cluster.clusterSize,
      members: entries.map((m) => ({
        nodeId: { address: m.httpEndPointIp, port: m.httpEndPointPort }, instanceId: m.instanceId ?? '',
        isLeader: m.state === 'Leader', isReadOnlyReplica: m.isReadOnlyReplica, writerCheckpoint: m.writerCheckpoint,
      })),
    };
  }

  isLeader(): boolean {
    return this.cluster.isLeader();
  }

  async resignLeadership(): Promise<void> {
    if (!(await this.cluster.resign())) throw new MemberCallError('this node does not lead: nothing to resign');
  }

  async startScavenge(member: NodeId): Promise<string> {
    return (await this.call(member, { op: 'start' })) as string;
  }

  async lastScavenge(member: NodeId): Promise<{ scavengeId: string; result: MemberScavengeResult }> {
    return (await this.call(member, { op: 'last' })) as { scavengeId: string; result: MemberScavengeResult };
  }

  async stopScavenge(member: NodeId, scavengeId: string): Promise<'stopped' | 'notFound'> {
    return (await this.call(member, { op: 'stop', scavengeId })) as 'stopped' | 'notFound';
  }

  recordedScavengeResult(scavengeId: string): 'Success' | 'Stopped' | 'Errored' | 'Interrupted' | undefined {
    return recordedResult(this.store, scavengeId);
  }

  private async call(member: NodeId, request: MemberScavengeRequest): Promise<unknown> {
    const entry = this.entries().find((m) => sameNode({ address: m.httpEndPointIp, port: m.httpEndPointPort }, member));
    if (!entry) throw new MemberCallError(`${member.address}:${member.port} is not in gossip`);
    try {
      return await this.cluster.memberRequest(entry.nodeName, request, CALL_TIMEOUT_MS);
    } catch (err) {
      throw new MemberCallError((err as Error).message);
    }
  }
}

/** A member's side of the calls above: its own Scavenger, as the scavenge admin API would answer. */
export async function memberScavengeRequest(scavenger: {
  start(request: ScavengeRequest): string;
  last(): { scavengeId: string; result: string } | undefined;
  stop(id: string): Promise<boolean>;
}, request: unknown): Promise<unknown> {
  const r = request as MemberScavengeRequest;
  switch (r?.op) {
    case 'start':
      return scavenger.start({ threads: 1, threshold: 0, throttlePercent: 100, syncOnly: false, startFromChunk: 0 });
    case 'last': {
      const last = scavenger.last();
      if (!last) return { scavengeId: '', result: 'Unknown' };
      return { scavengeId: last.scavengeId, result: last.result === 'Interrupted' ? 'Unknown' : last.result };
    }
    case 'stop':
      return (await scavenger.stop(r.scavengeId)) ? 'stopped' : 'notFound';
    default:
      throw new Error('unknown member request');
  }
}
