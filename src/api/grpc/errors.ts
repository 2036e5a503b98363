import {
  ExpectedVersion, InvalidWriteError, NotLeaderError, ReplicationLostError, StoreClosedError, StreamDeletedError, WriteTimeoutError,
} from '../../store/index.js';
import { AccessDeniedError, InvalidFilterError } from '../../verbs/errors.js';
import { GrpcStatus, StatusError, type Status } from './status.js';

// Every error the gRPC door answers with, as the established server sends it: a status code and
// message plus string trailers, `exception` naming the kind and its keys (grpc.md §4), which the
// official clients turn into their typed errors. The verbs' and the store's errors map here;
// the HTTP door maps the same errors in api/errors.ts.

export function accessDenied(): Status {
  return { code: GrpcStatus.PERMISSION_DENIED, message: 'Access Denied', trailers: { exception: 'access-denied' } };
}

export function unauthenticated(): Status {
  return { code: GrpcStatus.UNAUTHENTICATED, message: 'Unauthenticated' };
}

export function streamDeleted(streamId: string): Status {
  return {
    code: GrpcStatus.FAILED_PRECONDITION, message: `Event stream '${streamId}' is deleted.`,
    trailers: { exception: 'stream-deleted', 'stream-name': streamId },
  };
}

export function maximumAppendSizeExceeded(maxAppendSize: number): Status {
  return {
    code: GrpcStatus.INVALID_ARGUMENT, message: `Maximum Append Size of ${maxAppendSize} Exceeded.`,
    trailers: { exception: 'maximum-append-size-exceeded', 'maximum-append-size': String(maxAppendSize) },
  };
}

export function invalidArgument(message: string): Status {
  return { code: GrpcStatus.INVALID_ARGUMENT, message };
}

export function missingMetadataProperty(key: string): Status {
  return {
    code: GrpcStatus.INVALID_ARGUMENT, message: `Required Metadata Property '${key}' is missing`,
    trailers: { exception: 'missing-required-metadata-property', 'required-metadata-properties': 'type,content-type' },
  };
}

/** A delete or tombstone whose expected version did not match (appends answer it in their response). */
export function deleteWrongExpectedVersion(streamId: string, expected: ExpectedVersion, current: number): Status {
  const e = ExpectedVersion.toNumber(expected);
  return {
    code: GrpcStatus.FAILED_PRECONDITION,
    message: `Delete failed due to WrongExpectedVersion. Stream: ${streamId}, Expected version: ${e}, Actual version: ${current}`,
    trailers: {
      exception: 'wrong-expected-version', 'stream-name': streamId, 'expected-version': String(e),
      'actual-version': current < 0 ? '' : String(current),
    },
  };
}

export function notLeader(host: string, port: number): Status {
  return {
    code: GrpcStatus.NOT_FOUND, message: 'Leader info available',
    trailers: { exception: 'not-leader', 'leader-endpoint-host': host, 'leader-endpoint-port': String(port) },
  };
}

export function fail(status: Status): never {
  throw new StatusError(status);
}

/** The status of a verb's or the store's error; undefined for a fault of ours (answered INTERNAL and logged). */
export function grpcStatusOf(error: unknown, maxAppendSize: number): Status | undefined {
  if (error instanceof StatusError) return error.status;
  if (error instanceof AccessDeniedError) return accessDenied();
  if (error instanceof StreamDeletedError) return streamDeleted(error.streamId);
  if (error instanceof InvalidFilterError) return invalidArgument(error.message);
  if (error instanceof InvalidWriteError) {
    return error.rule === 'event-size' ? maximumAppendSizeExceeded(maxAppendSize) : invalidArgument(error.message);
  }
  if (error instanceof StoreClosedError) return { code: GrpcStatus.UNAVAILABLE, message: 'Server Is Not Ready' };
  if (error instanceof NotLeaderError) return { code: GrpcStatus.UNAVAILABLE, message: 'Server Is Not Ready' };
  if (error instanceof ReplicationLostError) return { code: GrpcStatus.UNAVAILABLE, message: `Server Is Not Ready: ${error.message}; the write may or may not have been written.` };
  if (error instanceof WriteTimeoutError) return { code: GrpcStatus.ABORTED, message: 'Operation timed out: no quorum of the cluster held the write in time; it may or may not have been written.' };
  return undefined;
}
