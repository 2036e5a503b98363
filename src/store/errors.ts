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
