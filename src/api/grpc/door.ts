import type { Principal } from '../../auth/index.js';
import type { Verbs } from '../../verbs/index.js';
import type { CallContext } from './server.js';

// What every gRPC service of the door gets (index.ts builds it): the verbs, and who calls.

/**
 * Where a call may be served in a cluster: `leader` (writes, and what runs on the leader only:
 * projections) makes a follower answer not-leader with the leader's endpoint; `leaderIfAsked`
 * (reads) only when the client sends `requires-leader: true`; `anyNode` (the node's own
 * operations, statistics, gossip) never.
 */
export type ServedBy = 'leader' | 'leaderIfAsked' | 'anyNode';

export interface ServiceDoor {
  readonly verbs: Verbs;
  /** Who calls (authenticated from `authorization`), after the cluster rule of `servedBy`. */
  callerOf(call: CallContext, servedBy: ServedBy): Promise<Principal>;
}
