import type { NodeId } from './cluster.js';

// The coordinator's events, as the established servers name and shape them
// (subscriptions-and-maintenance.md §3.2). `$auto-scavenge-configuration` holds the schedule
// (only its last event counts); `$auto-scavenges` holds every cycle's progress, written with
// optimistic concurrency. Times are ISO-8601 strings (UTC, `Z`).

export const CONFIGURATION_STREAM = '$auto-scavenge-configuration';
export const AUTO_SCAVENGES_STREAM = '$auto-scavenges';

export type NodeScavengeResult = 'Success' | 'Stopped' | 'Errored';

export type AutoScavengeEvent =
  | { type: '$configuration-updated'; data: { schedule: string; updatedAt: string } }
  | { type: '$cluster-scavenge-started'; data: { clusterScavengeId: string; members: NodeId[]; startedAt: string } }
  | { type: '$node-designated'; data: { nodeId: NodeId; designatedAt: string } }
  | { type: '$node-scavenge-started'; data: { nodeId: NodeId; scavengeId: string; startedAt: string } }
  | { type: '$node-scavenge-completed'; data: { nodeId: NodeId; completedAt: string; result: NodeScavengeResult } }
  | { type: '$cluster-members-changed'; data: { added: NodeId[]; removed: NodeId[] } }
  | { type: '$cluster-scavenge-completed'; data: { clusterScavengeId: string; members: NodeId[]; completedAt: string } }
  | { type: '$pause-requested'; data: { requestedAt: string } }
  | { type: '$paused'; data: { pausedAt: string } }
  | { type: '$resumed'; data: { resumedAt: string } };

export type AutoScavengeEventType = AutoScavengeEvent['type'];

const KNOWN = new Set<string>([
  '$configuration-updated', '$cluster-scavenge-started', '$node-designated', '$node-scavenge-started', '$node-scavenge-completed',
  '$cluster-members-changed', '$cluster-scavenge-completed', '$pause-requested', '$paused', '$resumed',
]);

/** An event read back from a stream; undefined for a type this coordinator does not write. */
export function decodeEvent(eventType: string, data: Buffer): AutoScavengeEvent | undefined {
  if (!KNOWN.has(eventType)) return undefined;
  return { type: eventType, data: JSON.parse(data.toString('utf8')) } as AutoScavengeEvent;
}
