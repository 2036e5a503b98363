import { sameNode, type NodeId } from './cluster.js';
import type { AutoScavengeEvent } from './events.js';

// The coordinator's state and the one function that applies an event to it (reference §3.3).
// Pure: the coordinator persists an event first, then applies it here; a new leader rebuilds the
// same state by applying the stored events oldest first.

export type Status =
  | 'NotConfigured' | 'Waiting' | 'PausedWhileIdle'
  | 'ContinuingClusterScavenge' | 'StartingNodeScavenge' | 'MonitoringNodeScavenge' | 'Pausing' | 'PausedWhileScavengingCluster';

export interface CoordinatorState {
  status: Status;
  /** Empty: no cycle. */
  clusterScavengeId: string;
  clusterMembers: NodeId[];
  scavengedNodes: NodeId[];
  designatedNode?: NodeId;
  nodeScavengeId: string;
  /** The next cycle is the schedule's first occurrence after this (ms); moved by completion, resume and election. */
  anchor?: number;
  schedule?: string;
  /** Set once configured. */
  startingPoint?: number;
}

export function initialState(): CoordinatorState {
  return { status: 'NotConfigured', clusterScavengeId: '', clusterMembers: [], scavengedNodes: [], nodeScavengeId: '' };
}

export function configured(s: CoordinatorState): boolean {
  return s.startingPoint !== undefined;
}

export function inCycle(s: CoordinatorState): boolean {
  return s.clusterScavengeId !== '';
}

const without = (nodes: NodeId[], gone: readonly NodeId[]) => nodes.filter((n) => !gone.some((g) => sameNode(g, n)));

/** The state after `event` (a new object; `s` is left as it was). */
export function apply(s: CoordinatorState, event: AutoScavengeEvent): CoordinatorState {
  const next: CoordinatorState = { ...s, clusterMembers: [...s.clusterMembers], scavengedNodes: [...s.scavengedNodes] };
  const clearDesignation = () => {
    delete next.designatedNode;
    next.nodeScavengeId = '';
  };
  switch (event.type) {
    case '$configuration-updated':
      next.schedule = event.data.schedule;
      next.startingPoint = Date.parse(event.data.updatedAt);
      next.anchor = next.startingPoint;
      if (s.status === 'NotConfigured') next.status = 'Waiting';
      return next;
    case '$cluster-scavenge-started':
      next.clusterScavengeId = event.data.clusterScavengeId;
      next.clusterMembers = [...event.data.members];
      next.scavengedNodes = [];
      next.status = 'ContinuingClusterScavenge';
      return next;
    case '$node-designated':
      next.designatedNode = event.data.nodeId;
      next.nodeScavengeId = '';
      next.status = 'StartingNodeScavenge';
      return next;
    case '$node-scavenge-started':
      if (!s.designatedNode || !sameNode(s.designatedNode, event.data.nodeId)) return s;
      next.nodeScavengeId = event.data.scavengeId;
      next.status = 'MonitoringNodeScavenge';
      return next;
    case '$node-scavenge-completed':
      if (!s.designatedNode || !sameNode(s.designatedNode, event.data.nodeId)) return s;
      clearDesignation();
      next.scavengedNodes.push(event.data.nodeId);
      next.status = 'ContinuingClusterScavenge';
      return next;
    case '$cluster-scavenge-completed':
      if (event.data.clusterScavengeId !== s.clusterScavengeId) return s;
      next.clusterMembers = [...event.data.members];
      next.anchor = Date.parse(event.data.completedAt);
      next.clusterScavengeId = '';
      next.scavengedNodes = [];
      clearDesignation();
      next.status = 'Waiting';
      return next;
    case '$cluster-members-changed': {
      next.clusterMembers = [...without(next.clusterMembers, event.data.removed), ...event.data.added];
      next.scavengedNodes = without(next.scavengedNodes, event.data.removed);
      if (s.designatedNode && event.data.removed.some((r) => sameNode(r, s.designatedNode!))) {
        clearDesignation();
        if (s.status !== 'Pausing') next.status = 'ContinuingClusterScavenge';
      }
      return next;
    }
    case '$pause-requested':
      next.status = 'Pausing';
      return next;
    case '$paused':
      clearDesignation();
      next.status = inCycle(s) ? 'PausedWhileScavengingCluster' : 'PausedWhileIdle';
      return next;
    case '$resumed':
      next.status = inCycle(s) ? 'ContinuingClusterScavenge' : configured(s) ? 'Waiting' : 'NotConfigured';
      if (configured(s)) next.anchor = Date.parse(event.data.resumedAt);
      return next;
  }
}

/** What a newly elected leader applies after replaying: missed cycles are skipped (the anchor is now). */
export function initialized(s: CoordinatorState, now: number): CoordinatorState {
  return configured(s) ? { ...s, anchor: now } : s;
}
