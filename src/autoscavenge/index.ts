// Auto-scavenge: a cron-scheduled coordinator of node scavenges across the cluster (issue 15).
export { AutoScavengeCoordinator, type Clock, type Ticker, type CoordinatorOptions, type PauseOutcome, type StatusAnswer } from './coordinator.js';
export { SingleNodeCluster } from './single-node.js';
export { AutoScavengeFailedError, AutoScavengeNotEnabledError, AutoScavengeRejectedError } from './errors.js';
export { InvalidScheduleError } from './schedule.js';
export { AUTO_SCAVENGES_STREAM } from './events.js';
export type { ClusterMembership, ClusterMember, ClusterView, NodeId, MemberScavengeResult } from './cluster.js';
export { MemberCallError } from './cluster.js';
export { ReplicatedCluster, memberScavengeRequest, type ClusterAccess, type MemberScavengeRequest } from './replicated-cluster.js';
