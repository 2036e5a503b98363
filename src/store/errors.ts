import { DomainError } from '../errors.js';

// The store's refusals and failures a client is told about (each door answers them by code).
// The store's own invariants are asserts where they hold, never errors a caller handles.

/** The expected version did not match; `currentVersion` is the stream's last event number (-1: none). */
export class WrongExpectedVersionError extends DomainError {
  readonly code = 'WRONG_EXPECTED_VERSION';

  constructor(readonly streamId: string, readonly currentVersion: number) {
    super(`Wrong expected version for stream ${streamId}: current version is ${currentVersion}`);
  }
}

/** The stream is hard-deleted (or soft-deleted and the operation requires it to exist). */
export class StreamDeletedError extends DomainError {
  readonly code = 'STREAM_DELETED';

  constructor(readonly streamId: string) {
    super(`Stream ${streamId} is deleted`);
  }
}

/** A server-side filter (filter.ts) that cannot be used as given. */
export class InvalidFilterError extends DomainError {
  readonly code = 'INVALID_FILTER';
}

/** The store is closed or closing; no new writes are taken. */
export class StoreClosedError extends DomainError {
  readonly code = 'STORE_CLOSED';

  constructor() {
    super('The store is shutting down');
  }
}

/** This node is a cluster follower (or not yet a leader): only the leader writes; the API forwards writes there. */
export class NotLeaderError extends DomainError {
  readonly code = 'NOT_LEADER';

  constructor(reason = 'This node is not the cluster leader') {
    super(reason);
  }
}

/** A leader lost its term (its etcd lease, or a newer leader) before a quorum held the write: it may or may not survive. */
export class ReplicationLostError extends DomainError {
  readonly code = 'REPLICATION_LOST';
}

/**
 * Records a follower got from its leader do not fit its log (a gap, an event number out of order):
 * it stops following. Not a domain error: no client request meets it, the follower's loop does.
 */
export class ReplicationMismatchError extends Error {}

/** No quorum held a leader's write in time: it may or may not survive ("500 Write timeout" in the established servers). */
export class WriteTimeoutError extends DomainError {
  readonly code = 'WRITE_TIMEOUT';
}
