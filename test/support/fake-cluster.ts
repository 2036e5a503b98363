import {
  MemberCallError, type ClusterMembership, type ClusterView, type MemberScavengeResult, type NodeId,
} from '../../src/autoscavenge/index.js';

// A simulated cluster for the auto-scavenge coordinator: members whose node scavenges succeed at
// once, fail, run until the test finishes them ('slow'), or hang (a stop never answers); members
// can vanish from gossip, come back restarted, or be replaced. Leadership moves on resignation.

export type Behaviour = 'succeed' | 'fail' | 'slow' | 'hang';

export interface FakeMember {
  nodeId: NodeId;
  writerCheckpoint: number;
  behaviour: Behaviour;
  /** In gossip and answering. */
  present: boolean;
  last?: { scavengeId: string; result: MemberScavengeResult };
}

export class FakeCluster {
  readonly members: FakeMember[] = [];
  leader: NodeId;
  /** The node scavenges started, in order, by member name. */
  readonly started: string[] = [];
  readonly resignations: string[] = [];
  /** What each scavenge wrote in its history (the replicated `$scavenges-{id}`). */
  readonly recorded = new Map<string, 'Success' | 'Stopped' | 'Errored' | 'Interrupted'>();
  private next = 0;

  constructor(members: Array<{ name: string; writerCheckpoint: number; behaviour?: Behaviour }>, readonly clusterSize = members.length) {
    for (const m of members) this.add(m.name, m.writerCheckpoint, m.behaviour);
    this.leader = this.members[0]!.nodeId;
  }

  add(name: string, writerCheckpoint: number, behaviour: Behaviour = 'succeed'): FakeMember {
    const member: FakeMember = { nodeId: { address: name, port: 2113 }, writerCheckpoint, behaviour, present: true };
    this.members.push(member);
    return member;
  }

  member(name: string): FakeMember {
    const found = this.members.find((m) => m.nodeId.address === name);
    if (!found) throw new Error(`no member ${name}`);
    return found;
  }

  /** Ends a member's running scavenge with `result` (and records it in its history). */
  finish(name: string, result: 'Success' | 'Stopped' | 'Errored'): void {
    const m = this.member(name);
    if (m.last?.result !== 'InProgress') throw new Error(`${name} runs no scavenge`);
    m.last = { scavengeId: m.last.scavengeId, result };
    this.recorded.set(m.last.scavengeId, result);
  }

  /** The member restarts: it no longer knows its last scavenge (a running one was interrupted). */
  restart(name: string): void {
    const m = this.member(name);
    if (m.last?.result === 'InProgress') this.recorded.set(m.last.scavengeId, 'Interrupted');
    delete m.last;
  }

  membership(self: string): ClusterMembership {
    const cluster = this;
    const selfId = this.member(self).nodeId;
    const reachable = (n: NodeId): FakeMember => {
      const m = cluster.member(n.address);
      if (!m.present) throw new MemberCallError(`${n.address} is unreachable`);
      return m;
    };
    return {
      view(): ClusterView {
        return {
          self: selfId, clusterSize: cluster.clusterSize,
          members: cluster.members.filter((m) => m.present).map((m) => ({
            nodeId: m.nodeId, instanceId: `instance-${m.nodeId.address}`, isLeader: m.nodeId.address === cluster.leader.address,
            isReadOnlyReplica: false, writerCheckpoint: m.writerCheckpoint,
          })),
        };
      },
      isLeader: () => cluster.leader.address === selfId.address,
      async resignLeadership() {
        cluster.resignations.push(self);
        const other = cluster.members.find((m) => m.present && m.nodeId.address !== self);
        if (other) cluster.leader = other.nodeId;
      },
      async startScavenge(n) {
        const m = reachable(n);
        if (m.last?.result === 'InProgress') throw new MemberCallError('Scavenge is already running');
        const scavengeId = `scavenge-${++cluster.next}`;
        cluster.started.push(n.address);
        m.last = { scavengeId, result: 'InProgress' };
        if (m.behaviour === 'succeed') cluster.finish(n.address, 'Success');
        if (m.behaviour === 'fail') cluster.finish(n.address, 'Errored');
        return scavengeId;
      },
      async lastScavenge(n) {
        const m = reachable(n);
        return m.last ?? { scavengeId: '', result: 'Unknown' };
      },
      async stopScavenge(n, scavengeId) {
        const m = reachable(n);
        if (m.behaviour === 'hang') return new Promise<never>(() => undefined);
        if (m.last?.result !== 'InProgress' || (scavengeId !== 'current' && scavengeId !== m.last.scavengeId)) return 'notFound';
        cluster.finish(n.address, 'Stopped');
        return 'stopped';
      },
      recordedScavengeResult: (scavengeId) => cluster.recorded.get(scavengeId),
    };
  }
}
