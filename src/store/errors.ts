/** The expected version did not match; `currentVersion` is the stream's last event number (-1: none). */
export class WrongExpectedVersionError extends Error {
  constructor(readonly streamId: string, readonly currentVersion: number) {
    super(`Wrong expected version for stream ${streamId}: current version is ${currentVersion}`);
  }
}

/** The stream is hard-deleted (or soft-deleted and the operation requires it to exist). */
export class StreamDeletedError extends Error {
  constructor(readonly streamId: string) {
    super(`Stream ${streamId} is deleted`);
  }
}

/** The store is closed or closing; no new writes are taken. */
export class StoreClosedError extends Error {
  constructor() {
    super('The store is shutting down');
  }
}

/** This node is a cluster follower (or not yet a leader): only the leader writes; the API forwards writes there. */
export class NotLeaderError extends Error {
  constructor(reason = 'This node is not the cluster leader') {
    super(reason);
  }
}

/** A leader lost its term (its etcd lease, or a newer leader) before a quorum held the write: it may or may not survive. */
export class ReplicationLostError extends Error {}

/** Records a follower got from its leader do not fit its log (a gap, an event number out of order): it stops following. */
export class ReplicationMismatchError extends Error {}

/** No quorum held a leader's write in time: it may or may not survive ("500 Write timeout" in the established servers). */
export class WriteTimeoutError extends Error {}
