import { DomainError, type LogErrorCode, type MaintenanceErrorCode, type ProjectionErrorCode, type SubscriptionErrorCode, type VerbErrorCode } from '../../errors.js';
import { ExpectedVersion } from '../../store/index.js';
import type { KnownDomainError, WithCode } from '../errors.js';
import { GrpcStatus, StatusError, type Status } from './status.js';

// Every error the gRPC door answers with, as the established server sends it: a status code and
// message plus string trailers, `exception` naming the kind and its keys (grpc.md §4), which the
// official clients turn into their typed errors. The domain errors the door can meet map here by
// code (GRPC_ANSWERS); the HTTP door maps the same codes in api/errors.ts.

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

/** The persistent-subscription refusals name the group (`<g>`) and its source (`<s>`: a stream, or `$all`) in message and trailers. */
function groupStatus(code: Status['code'], exception: string, message: string, stream: string, group: string, more: Record<string, string> = {}): Status {
  return { code, message, trailers: { exception, 'stream-name': stream, 'group-name': group, ...more } };
}

export function subscriptionNotFound(stream: string, group: string): Status {
  return groupStatus(GrpcStatus.NOT_FOUND, 'persistent-subscription-does-not-exist',
    `Subscription group ${group} on stream ${stream} does not exist.`, stream, group);
}

export function subscriptionFailed(stream: string, group: string, reason: string): Status {
  return groupStatus(GrpcStatus.INTERNAL, 'persistent-subscription-failed',
    `Subscription group ${group} on stream ${stream} failed: '${reason}'`, stream, group, { reason });
}

export function userNotFound(login: string): Status {
  return { code: GrpcStatus.NOT_FOUND, message: `User '${login}' is not found.`, trailers: { exception: 'user-not-found', 'login-name': login } };
}

export function userConflict(login: string): Status {
  return { code: GrpcStatus.FAILED_PRECONDITION, message: 'Conflict.', trailers: { exception: 'user-conflict', 'login-name': login } };
}

export function scavengeNotFound(scavengeId: string): Status {
  return { code: GrpcStatus.NOT_FOUND, message: 'Scavenge id was invalid.', trailers: { exception: 'scavenge-not-found', 'scavenge-id': scavengeId } };
}

export function fail(status: Status): never {
  throw new StatusError(status);
}

/**
 * The domain errors the gRPC door can meet: the log's, the verbs' own, the persistent
 * subscriptions', the projections' and a scavenge's. A method that reaches another subsystem
 * widens this, and its codes then need an answer below to compile.
 */
type GrpcDoorCode = LogErrorCode | VerbErrorCode | SubscriptionErrorCode | ProjectionErrorCode
  | Extract<MaintenanceErrorCode, 'SCAVENGE_ALREADY_RUNNING' | 'SCAVENGE_NOT_FOUND' | 'BACKUP_RUNNING'>;

const NOT_READY: Status = { code: GrpcStatus.UNAVAILABLE, message: 'Server Is Not Ready' };

/** The status of each domain error the door can meet, by code; undefined: a fault of ours (INTERNAL, logged). */
const GRPC_ANSWERS: { readonly [C in GrpcDoorCode]: (error: WithCode<KnownDomainError, C>, maxAppendSize: number) => Status | undefined } = {
  // Each method answers it in its own shape (an append in its response, a delete with the expected
  // version it was given: streams.ts); one that leaves it here has no expected version to name.
  WRONG_EXPECTED_VERSION: () => undefined,
  STREAM_DELETED: (e) => streamDeleted(e.streamId),
  INVALID_WRITE: (e, maxAppendSize) => (e.rule === 'event-size' ? maximumAppendSizeExceeded(maxAppendSize) : invalidArgument(e.message)),
  STORE_CLOSED: () => NOT_READY,
  NOT_LEADER: () => NOT_READY,
  REPLICATION_LOST: (e) => ({ code: GrpcStatus.UNAVAILABLE, message: `Server Is Not Ready: ${e.message}; the write may or may not have been written.` }),
  WRITE_TIMEOUT: () => ({
    code: GrpcStatus.ABORTED, message: 'Operation timed out: no quorum of the cluster held the write in time; it may or may not have been written.',
  }),
  // As over HTTP (507): the message says which file and when writes resume.
  OUT_OF_SPACE: (e) => ({ code: GrpcStatus.RESOURCE_EXHAUSTED, message: e.message }),
  ACCESS_DENIED: () => accessDenied(),
  INVALID_FILTER: (e) => invalidArgument(e.message),
  SUBSCRIPTION_NOT_FOUND: (e) => subscriptionNotFound(e.stream, e.group),
  SUBSCRIPTION_EXISTS: (e) => groupStatus(GrpcStatus.ALREADY_EXISTS, 'persistent-subscription-exists',
    `Subscription group ${e.group} on stream ${e.stream} exists.`, e.stream, e.group),
  SUBSCRIPTION_FULL: (e) => groupStatus(GrpcStatus.FAILED_PRECONDITION, 'maximum-subscribers-reached',
    `Maximum subscriptions reached for subscription group ${e.group} on stream ${e.stream}.`, e.stream, e.group),
  SUBSCRIPTION_DROPPED: (e) => groupStatus(GrpcStatus.CANCELLED, 'persistent-subscription-dropped',
    `Subscription group ${e.group} on stream ${e.stream} was dropped.`, e.stream, e.group),
  // The established server answers a refused definition (and a restart in the wrong state) as a failure with the reason.
  SUBSCRIPTION_SETTINGS: (e) => subscriptionFailed(e.stream, e.group, e.message),
  SUBSCRIPTION_LIMIT: (e) => subscriptionFailed(e.stream, e.group, e.message),
  SUBSCRIPTIONS_NOT_READY: (e) => subscriptionFailed(e.stream, e.group, e.message),
  NOT_PERMITTED: () => accessDenied(),
  INVALID_REQUEST: (e) => invalidArgument(e.message),
  // The Node clients (24.6+) take NOT_FOUND without an exception key as their NotFoundError.
  PROJECTION_NOT_FOUND: (e) => ({ code: GrpcStatus.NOT_FOUND, message: `Projection '${e.projection ?? ''}' not found` }),
  PROJECTION_EXISTS: (e) => ({ code: GrpcStatus.ALREADY_EXISTS, message: e.message }),
  PROJECTION_REFUSED: (e) => ({ code: GrpcStatus.FAILED_PRECONDITION, message: e.message }),
  PROJECTION_BUSY: (e) => ({ code: GrpcStatus.UNAVAILABLE, message: e.message }),
  QUERY_SYNTAX: (e) => invalidArgument(e.message),
  // StartScavenge answers it as InProgress with the running scavenge's id (operations.ts).
  SCAVENGE_ALREADY_RUNNING: (e) => ({ code: GrpcStatus.FAILED_PRECONDITION, message: e.message }),
  SCAVENGE_NOT_FOUND: (e) => scavengeNotFound(e.scavengeId),
  BACKUP_RUNNING: (e) => ({ code: GrpcStatus.FAILED_PRECONDITION, message: `${e.message}: a scavenge starts once it has finished` }),
};

/** The status of a verb's or the store's error; undefined for a fault of ours (answered INTERNAL and logged). */
export function grpcStatusOf(error: unknown, maxAppendSize: number): Status | undefined {
  if (error instanceof StatusError) return error.status;
  if (!(error instanceof DomainError) || !Object.hasOwn(GRPC_ANSWERS, error.code)) return undefined;
  return (GRPC_ANSWERS[error.code as GrpcDoorCode] as (e: DomainError, max: number) => Status | undefined)(error, maxAppendSize);
}
