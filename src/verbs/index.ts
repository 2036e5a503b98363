import type { Store } from '../store/index.js';
import type { AccessControl } from '../auth/index.js';
import { StreamVerbs } from './streams.js';
import { SubscriptionVerbs } from './subscription.js';

// The verbs: what a client can do, once, for every door (src/api: HTTP/1.1 and gRPC).

export { StreamVerbs, type AllRead, type AppendOutcome, type Direction } from './streams.js';
export { SubscriptionVerbs, type SubscriptionItem, type StreamStart, type AllStart } from './subscription.js';
export { AccessDeniedError, InvalidFilterError } from './errors.js';
export { makeFilter, type EventFilter } from './filter.js';
export { maxAppendBytes } from './limits.js';

export interface Verbs {
  readonly streams: StreamVerbs;
  readonly subscriptions: SubscriptionVerbs;
}

export function createVerbs(store: Store, access: AccessControl): Verbs {
  const streams = new StreamVerbs(store, access);
  return { streams, subscriptions: new SubscriptionVerbs(store, streams) };
}
