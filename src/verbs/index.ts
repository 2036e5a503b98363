import type { Store } from '../store/index.js';
import type { AccessControl, UserStore } from '../auth/index.js';
import type { ProjectionManager } from '../projections/index.js';
import type { Scavenger } from '../scavenge/index.js';
import type { SubscriptionService } from '../subscriptions/index.js';
import { StreamVerbs } from './streams.js';
import { SubscriptionVerbs } from './subscription.js';
import { PersistentVerbs } from './persistent.js';
import { ProjectionVerbs } from './projections.js';
import { UserVerbs } from './users.js';
import { OperationVerbs, type NodeOperations } from './operations.js';
import type { ClientCounters } from '../metrics/index.js';

// The verbs: what a client can do, once, for every door (src/api: HTTP/1.1 and gRPC).

export { StreamVerbs, type AllRead, type AppendOutcome, type Direction } from './streams.js';
export { SubscriptionVerbs, type SubscriptionItem, type StreamStart, type AllStart } from './subscription.js';
export {
  PersistentVerbs, ALL_SOURCE, type GroupDefinition, type GroupInfo, type PushConsumer, type NackAction, type ConnectionInfo,
} from './persistent.js';
export { AccessDeniedError, InvalidRequestError } from './errors.js';
// The doors build a read's or a subscription's filter from what the client sent (the rules are the log's: store/filter.ts).
export { makeFilter, type EventFilter } from '../store/index.js';
export { NotPermittedError, demand, demandSelf, type Right, type RightsArea } from './rights.js';
export { maxAppendBytes } from './limits.js';
export { createRight, type ProjectionVerbs, type ProjectionFigures, type ProjectionListing, type DebugRequest } from './projections.js';
export { USER_RULES, type UserVerbs, type UserChange, type ValueRule } from './users.js';
export { SCAVENGE_RULES, flattenStatistics, type OperationVerbs, type ClusterMember, type ScavengeAsk } from './operations.js';

export interface Verbs {
  readonly streams: StreamVerbs;
  /** Catch-up subscriptions. */
  readonly subscriptions: SubscriptionVerbs;
  /** Persistent subscription groups. */
  readonly persistent: PersistentVerbs;
  readonly projections: ProjectionVerbs;
  readonly users: UserVerbs;
  readonly operations: OperationVerbs;
}

/** What the verbs act on: the log, its ACLs, and the subsystems and node controls the clients reach. */
export interface VerbSubjects {
  store: Store;
  access: AccessControl;
  groups: SubscriptionService;
  projections: ProjectionManager;
  users: UserStore;
  scavenger: Scavenger;
  node: NodeOperations;
  /** Where appends and reads are counted for GET /metrics (absent: not counted). */
  counters?: ClientCounters;
}

export function createVerbs(s: VerbSubjects): Verbs {
  const streams = new StreamVerbs(s.store, s.access, s.counters);
  return {
    streams,
    subscriptions: new SubscriptionVerbs(s.store, streams),
    persistent: new PersistentVerbs(s.groups, streams),
    projections: new ProjectionVerbs(s.projections, s.store, streams),
    users: new UserVerbs(s.users),
    operations: new OperationVerbs(s.scavenger, s.node),
  };
}
