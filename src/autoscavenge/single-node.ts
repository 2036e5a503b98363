import type { Store } from '../store/index.js';
import { scavengeStream, type Scavenger } from '../scavenge/index.js';
import { MemberCallError, type ClusterMembership, type ClusterView, type MemberScavengeResult, type NodeId } from './cluster.js';

/** How far back a scavenge history is searched for its completion (as the established servers read it). */
const HISTORY_LOOKBACK = 20;

// The membership of a node that runs alone: it is the only member and always the leader, and its
// "admin API" is its own Scavenger, called in process. The cluster issue replaces this with gossip
// and HTTP calls to the other members.

export class SingleNodeCluster implements ClusterMembership {
  constructor(private readonly store: Store, private readonly scavenger: Scavenger,
    private readonly self: () => NodeId, private readonly instanceId: string) {}

  view(): ClusterView {
    return {
      self: this.self(), clusterSize: 1,
      members: [{ nodeId: this.self(), instanceId: this.instanceId, isLeader: true, isReadOnlyReplica: false, writerCheckpoint: this.store.headPosition }],
    };
  }

  isLeader(): boolean {
    return true;
  }

  async resignLeadership(): Promise<void> {
    throw new MemberCallError('a single node cannot resign');
  }

  async startScavenge(): Promise<string> {
    try {
      return this.scavenger.start({ threads: 1, threshold: 0, throttlePercent: 100, syncOnly: false, startFromChunk: 0 });
    } catch (err) {
      throw new MemberCallError((err as Error).message);
    }
  }

  async lastScavenge(): Promise<{ scavengeId: string; result: MemberScavengeResult }> {
    const last = this.scavenger.last();
    if (!last) return { scavengeId: '', result: 'Unknown' };
    // An interrupted scavenge ended with a process: as after a restart, its history decides.
    return { scavengeId: last.scavengeId, result: last.result === 'Interrupted' ? 'Unknown' : last.result };
  }

  async stopScavenge(_member: NodeId, scavengeId: string): Promise<'stopped' | 'notFound'> {
    return (await this.scavenger.stop(scavengeId)) ? 'stopped' : 'notFound';
  }

  recordedScavengeResult(scavengeId: string): 'Success' | 'Stopped' | 'Errored' | 'Interrupted' | undefined {
    return recordedResult(this.store, scavengeId);
  }
}

/** The result of `$scavengeCompleted` among the last events of `$scavenges-{id}`. */
export function recordedResult(store: Store, scavengeId: string): 'Success' | 'Stopped' | 'Errored' | 'Interrupted' | undefined {
  const page = store.readStreamBackward(scavengeStream(scavengeId), -1, HISTORY_LOOKBACK);
  if (page.status !== 'ok') return undefined;
  for (const { event } of page.events) {
    if (event?.eventType !== '$scavengeCompleted') continue;
    const result = (JSON.parse(event.data.toString('utf8')) as { result?: string }).result;
    if (result === 'Success' || result === 'Stopped' || result === 'Errored' || result === 'Interrupted') return result;
  }
  return undefined;
}
