import type { Store } from '../store/index.js';
import type { AccessControl } from '../auth/access.js';
import type { ProjectionManager } from '../projections/manager.js';
import { StreamVerbs } from './streams.js';
import { SubscriptionVerbs } from './subscription.js';
import { ProjectionVerbs } from './projections.js';

// The verbs: what a client can do, once, for every door (src/api: HTTP/1.1 and gRPC).

export { StreamVerbs, type AppendOutcome, type Direction } from './streams.js';
export { SubscriptionVerbs, type SubscriptionItem, type StreamStart, type AllStart } from './subscription.js';
export { AccessDeniedError, InvalidFilterError } from './errors.js';
export { NotPermittedError, demand, permits, type Right } from './rights.js';
export { makeFilter, matchesFilter, type EventFilter } from './filter.js';
export { maxAppendBytes } from './limits.js';
export type { ProjectionVerbs } from './projections.js';

export interface Verbs {
  readonly streams: StreamVerbs;
  readonly subscriptions: SubscriptionVerbs;
  readonly projections: ProjectionVerbs;
}

/** What the verbs act on: the log, its ACLs, and the subsystems the clients reach. */
export interface VerbSubjects {
  store: Store;
  access: AccessControl;
  projections: ProjectionManager;
}

export function createVerbs(s: VerbSubjects): Verbs {
  const streams = new StreamVerbs(s.store, s.access);
  return {
    streams,
    subscriptions: new SubscriptionVerbs(s.store, streams),
    projections: new ProjectionVerbs(s.projections),
  };
}
