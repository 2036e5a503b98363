import type { Store } from '../store/index.js';
import type { AccessControl } from '../auth/index.js';
import type { SubscriptionService } from '../subscriptions/index.js';
import { StreamVerbs } from './streams.js';
import { SubscriptionVerbs } from './subscription.js';
import { PersistentVerbs } from './persistent.js';

// The verbs: what a client can do, once, for every door (src/api: HTTP/1.1 and gRPC).

export { StreamVerbs, type AllRead, type AppendOutcome, type Direction } from './streams.js';
export { SubscriptionVerbs, type SubscriptionItem, type StreamStart, type AllStart } from './subscription.js';
export {
  PersistentVerbs, ALL_SOURCE, type GroupDefinition, type GroupInfo, type PushConsumer, type NackAction, type ConnectionInfo,
} from './persistent.js';
export { AccessDeniedError, InvalidFilterError, NotAuthorizedError } from './errors.js';
export { makeFilter, matchesFilter, type EventFilter } from './filter.js';
export { maxAppendBytes } from './limits.js';

export interface Verbs {
  readonly streams: StreamVerbs;
  /** Catch-up subscriptions. */
  readonly subscriptions: SubscriptionVerbs;
  /** Persistent subscription groups. */
  readonly persistent: PersistentVerbs;
}

export function createVerbs(store: Store, access: AccessControl, groups: SubscriptionService): Verbs {
  const streams = new StreamVerbs(store, access);
  return { streams, subscriptions: new SubscriptionVerbs(store, streams), persistent: new PersistentVerbs(groups, streams) };
}
