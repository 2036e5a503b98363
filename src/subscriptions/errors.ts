import { DomainError } from '../errors.js';

// What the persistent subscriptions refuse, naming the group (its source, a stream or `$all`,
// and its name) where there is one: the gRPC door puts both in its trailers, the HTTP door
// answers with the message (api/errors.ts, api/grpc/errors.ts).

export type SubscriptionRefusal =
  /** Create: the group exists already. */
  | 'SUBSCRIPTION_EXISTS'
  /** The group does not exist (or was deleted while a consumer was connected). */
  | 'SUBSCRIPTION_NOT_FOUND'
  /** Create: the node keeps no more groups (limits.ts). */
  | 'SUBSCRIPTION_LIMIT'
  /** Connect: the group has its maxSubscriberCount of consumers. */
  | 'SUBSCRIPTION_FULL'
  /** A connected consumer was let go: the group was updated, or the subsystem restarted or stopped. */
  | 'SUBSCRIPTION_DROPPED'
  /** The subsystem is not running here (a follower, or a node starting or stopping). */
  | 'SUBSCRIPTIONS_NOT_READY';

export class SubscriptionError extends DomainError {
  /**
   * `lookUp`: the request looked the group up (to read, consume or replay it) rather than change
   * the definitions; the established servers' HTTP API answers a missing one with a bare 404.
   */
  constructor(readonly code: SubscriptionRefusal, message: string, readonly stream = '', readonly group = '', readonly lookUp = false) {
    super(message);
  }
}

/** A group's settings a client sent that cannot be used (the message says which and why). */
export class SettingsError extends DomainError {
  readonly code = 'SUBSCRIPTION_SETTINGS';

  constructor(message: string, readonly stream = '', readonly group = '') {
    super(message);
  }

  /** The same refusal, naming the group it was for. */
  about(stream: string, group: string): SettingsError {
    return new SettingsError(this.message, stream, group);
  }
}
