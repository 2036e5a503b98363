// The domain errors: the refusals and failures a client can be told about, each with a stable
// code. A subsystem declares its errors as classes extending DomainError with one of these
// codes; every door answers by code from its one table (src/api/errors.ts for HTTP,
// src/api/grpc/errors.ts for gRPC), and a code without an answer there does not compile.
// A fault of ours (a broken invariant, a bug) is not a domain error: it is a plain Error or a
// failed assert, answered 500 and logged. Nor are errors no client request meets: start-up and
// command-line errors (main and the CLIs print them), and signals inside one subsystem (a
// scavenge stopped, a member call failed, a query's definition that faults its projection, a
// follower's mismatch, a frame that does not parse). This file imports nothing: every layer uses it.

/** What a write or read of the log can meet, through any door (OUT_OF_SPACE: the data directory's file system is full). */
export type LogErrorCode =
  | 'WRONG_EXPECTED_VERSION' | 'STREAM_DELETED' | 'INVALID_WRITE'
  | 'STORE_CLOSED' | 'NOT_LEADER' | 'REPLICATION_LOST' | 'WRITE_TIMEOUT' | 'OUT_OF_SPACE' | 'INVALID_FILTER';

/** The verbs' own refusals (src/verbs). */
export type VerbErrorCode = 'ACCESS_DENIED' | 'NOT_PERMITTED' | 'INVALID_REQUEST';

/** PROJECTION_BUSY: the node runs as many debug runs as it takes (POST /projections/debug). */
export type ProjectionErrorCode = 'PROJECTION_NOT_FOUND' | 'PROJECTION_EXISTS' | 'PROJECTION_REFUSED' | 'PROJECTION_BUSY' | 'QUERY_SYNTAX';

export type SubscriptionErrorCode =
  | 'SUBSCRIPTION_NOT_FOUND' | 'SUBSCRIPTION_EXISTS' | 'SUBSCRIPTION_LIMIT' | 'SUBSCRIPTION_SETTINGS' | 'SUBSCRIPTION_FULL'
  | 'SUBSCRIPTION_DROPPED' | 'SUBSCRIPTIONS_NOT_READY';

/** Scavenge and backup refuse each other (one runs at a time), and a backup stops with the node. */
export type MaintenanceErrorCode =
  | 'SCAVENGE_ALREADY_RUNNING' | 'SCAVENGE_NOT_FOUND' | 'BACKUP_RUNNING' | 'SCAVENGE_RUNNING' | 'BACKUP_ALREADY_RUNNING' | 'BACKUP_TARGET' | 'BACKUP_STOPPED';

export type AutoScavengeErrorCode = 'AUTO_SCAVENGE_NOT_ENABLED' | 'AUTO_SCAVENGE_REJECTED' | 'AUTO_SCAVENGE_FAILED' | 'INVALID_SCHEDULE';

export type DomainErrorCode =
  | LogErrorCode | VerbErrorCode | ProjectionErrorCode | SubscriptionErrorCode | MaintenanceErrorCode | AutoScavengeErrorCode;

/** A refusal or failure a client is told about; `code` names it in the doors' tables (a code belongs to one class). */
export abstract class DomainError extends Error {
  abstract readonly code: DomainErrorCode;
}
