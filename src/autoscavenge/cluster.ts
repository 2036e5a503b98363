// What the auto-scavenge coordinator needs from the cluster: the members as gossip shows them,
// whether this node leads, a way to resign, and each member's scavenge admin API
// (POST /admin/scavenge, GET /admin/scavenge/last, DELETE /admin/scavenge/{id}). The coordinator
// knows nothing else about the cluster, so the real membership (the cluster issue) plugs in here
// without touching it; until then SingleNodeCluster (single-node.ts) is the node itself.

/** A member as the coordinator names it in its events: the member's internal HTTP end point. */
export interface NodeId {
  address: string;
  port: number;
}

export function sameNode(a: NodeId, b: NodeId): boolean {
  return a.address === b.address && a.port === b.port;
}

export function nodeName(n: NodeId): string {
  return `${n.address}:${n.port}`;
}

/** One member as the latest gossip shows it. */
export interface ClusterMember {
  nodeId: NodeId;
  /** Empty while the member is still joining: it does not count towards a healthy cluster. */
  instanceId: string;
  isLeader: boolean;
  isReadOnlyReplica: boolean;
  /** How far its log goes: the furthest behind is scavenged first. */
  writerCheckpoint: number;
}

export interface ClusterView {
  /** This node. */
  self: NodeId;
  /** The configured number of voting members: the cluster is healthy when gossip shows that many. */
  clusterSize: number;
  members: readonly ClusterMember[];
}

/** What GET /admin/scavenge/last answers. */
export type MemberScavengeResult = 'Unknown' | 'InProgress' | 'Success' | 'Stopped' | 'Errored';

/** A member's scavenge API failed (unreachable, timed out, or refused): the coordinator retries at the next round. */
export class MemberCallError extends Error {}

export interface ClusterMembership {
  /** The latest gossip. */
  view(): ClusterView;
  /** Whether this node leads now (only the leader drives the coordinator). */
  isLeader(): boolean;
  /** Asks this node to give up leadership (before the leader's own node scavenge). */
  resignLeadership(): Promise<void>;
  /** POST /admin/scavenge on the member (no parameters); resolves the new scavenge id. */
  startScavenge(member: NodeId): Promise<string>;
  /** GET /admin/scavenge/last on the member. */
  lastScavenge(member: NodeId): Promise<{ scavengeId: string; result: MemberScavengeResult }>;
  /** DELETE /admin/scavenge/{id}; resolves once stopped, 'notFound' for a 404 (nothing of that id runs). */
  stopScavenge(member: NodeId, scavengeId: string): Promise<'stopped' | 'notFound'>;
  /**
   * The result a scavenge wrote in its history stream (`$scavenges-{id}`, replicated to every
   * member), for a member that restarted and no longer knows it; undefined when none was written.
   */
  recordedScavengeResult(scavengeId: string): 'Success' | 'Stopped' | 'Errored' | 'Interrupted' | undefined;
}
