import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { FastifyError } from 'fastify';
import { DomainError, type DomainErrorCode } from '../errors.js';
import type {
  BackupStoppedError, InvalidWriteError, NotLeaderError, OutOfSpaceError, ReplicationLostError, StoreClosedError, StreamDeletedError,
  WriteTimeoutError, WrongExpectedVersionError, InvalidFilterError,
} from '../store/index.js';
import type { ProjectionError, QuerySyntaxError } from '../projections/index.js';
import type { SettingsError, SubscriptionError } from '../subscriptions/index.js';
import type { BackupRunningError, ScavengeAlreadyRunningError, ScavengeNotFoundError } from '../scavenge/index.js';
import type { BackupAlreadyRunningError, BackupTargetError, BackupTargetProblem, ScavengeRunningError } from '../backup/index.js';
import type {
  AutoScavengeFailedError, AutoScavengeNotEnabledError, AutoScavengeRejectedError, InvalidScheduleError,
} from '../autoscavenge/index.js';
import type { AccessDeniedError, InvalidRequestError, NotPermittedError } from '../verbs/index.js';
import { inEverySpelling } from './header-spellings.js';

// Every error the HTTP API answers with, declared once: a stable code, the status, the HTTP
// reason phrase (existing clients read it), the default message ('' sends none), the body it
// travels in and the headers it carries. Routes throw ApiError; a domain error (src/errors.ts)
// is answered by its code in DOMAIN_ANSWERS, which must name every code to compile; the app's
// error handler writes whatever `errorAnswer` gives and knows nothing else.

/**
 * How the message travels. `text`: as text/plain ('' for no body). The rest are the bodies the
 * established servers write on a few routes, which their clients read: `problem`, problem+json
 * `{title, status}` (auto-scavenge); `json`, the message as a JSON string (auto-scavenge);
 * `{ outcome }`, the result body of a subscription change `{correlationId, reason, result}`.
 */
export type ErrorBody = 'text' | 'problem' | 'json' | { readonly outcome: string };

interface ErrorEntry {
  status: number;
  reason: string;
  message: string;
  headers?: Readonly<Record<string, string>>;
  body?: ErrorBody;
}

export const API_ERRORS = {
  BAD_REQUEST: { status: 400, reason: 'Bad Request', message: 'Bad request.' },
  SCAVENGE_ALREADY_RUNNING: { status: 400, reason: 'Bad Request', message: 'Scavenge is already running' },
  /** POST /admin/scavenge while a backup runs. */
  BACKUP_RUNNING: { status: 400, reason: 'Bad Request', message: 'A backup is running' },
  /** POST /admin/backup while a scavenge or another backup runs (the message names which, and what to do). */
  BACKUP_CONFLICT: { status: 409, reason: 'Conflict', message: 'A scavenge or another backup is running.' },
  WRONG_EXPECTED_VERSION: { status: 400, reason: 'Wrong expected EventNumber', message: '' },
  /** The Authorization header names no user with that password. */
  BAD_CREDENTIALS: { status: 401, reason: 'Unauthorized', message: '', headers: { 'WWW-Authenticate': 'X-Basic realm="SVC"' } },
  /** A stream's ACL refuses the principal, or the route takes authenticated users only. */
  ACCESS_DENIED: { status: 401, reason: 'Unauthorized', message: '', headers: { 'WWW-Authenticate': 'BasicCustom realm="SVC"' } },
  /** The route takes a role (ops, admin) or the account's own user only. */
  UNAUTHORIZED: { status: 401, reason: 'Unauthorized', message: '' },
  /** The projections API refuses a role in words. */
  NOT_AUTHORIZED: { status: 401, reason: 'Unauthorized', message: 'Not Authorized' },
  /** POST /admin/backup: the file system will not let the node write there (EACCES, EPERM: immutable, EROFS). */
  BACKUP_TARGET_REFUSED: { status: 403, reason: 'Forbidden', message: 'The file system refuses the backup directory.' },
  GOSSIP_REFUSED: { status: 403, reason: 'Forbidden', message: 'This node runs alone (cluster size 1): it takes gossip from no node.' },
  EPOCHS_READ_ONLY: { status: 403, reason: 'Forbidden', message: 'The $epochs stream is written by cluster leaders only.' },
  NOT_FOUND: { status: 404, reason: 'Not Found', message: '' },
  /** DELETE /admin/scavenge/{id}: no scavenge with that id runs. */
  SCAVENGE_NOT_FOUND: { status: 404, reason: 'Not Found', message: 'Scavenge Id does not exist' },
  NOT_ACCEPTABLE: { status: 406, reason: 'Requested URI is not available in requested format', message: '' },
  CONFLICT: { status: 409, reason: 'Conflict', message: '' },
  /** A write or delete met a deleted stream. */
  STREAM_DELETED: { status: 410, reason: 'Stream deleted', message: '' },
  /** A read met a deleted stream. */
  DELETED: { status: 410, reason: 'Deleted', message: '' },
  PAYLOAD_TOO_LARGE: { status: 413, reason: 'Payload Too Large', message: 'Too large events received.' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, reason: 'Invalid or missing Content-Type', message: '' },
  /** POST /admin/backup: the backup directory's file system is full (ENOSPC, EDQUOT, EFBIG). */
  BACKUP_TARGET_FULL: { status: 507, reason: 'Insufficient Storage', message: 'No space left for the backup.' },
  /** Any write while the data directory's file system is full: "No space left on device: ..." with the file and when writes resume. */
  OUT_OF_SPACE: { status: 507, reason: 'Insufficient Storage', message: 'No space left on device.' },
  INTERNAL: { status: 500, reason: 'Internal Server Error', message: 'Internal error.' },
  SHUTTING_DOWN: { status: 503, reason: 'Server Is Not Ready', message: 'The server is shutting down.' },
  SERVICE_UNAVAILABLE: { status: 503, reason: 'Service Unavailable', message: '' },
  /** A cluster without a leader (an election under way), or a leader still starting. */
  NOT_READY: { status: 503, reason: 'Server Is Not Ready', message: 'No cluster leader is ready; retry shortly.' },
  WRITE_TIMEOUT: { status: 500, reason: 'Write timeout', message: 'No quorum of the cluster held the write in time; it may or may not have been written.' },
  /** A persistent subscription change refused: the group exists, does not exist, or the node keeps no more. */
  SUBSCRIPTION_EXISTS: { status: 409, reason: 'Conflict', message: '', body: { outcome: 'AlreadyExists' } },
  SUBSCRIPTION_NOT_FOUND: { status: 404, reason: 'Not Found', message: '', body: { outcome: 'DoesNotExist' } },
  SUBSCRIPTION_REFUSED: { status: 400, reason: 'Bad Request', message: '', body: { outcome: 'Fail' } },
  /** The auto-scavenge control endpoints with the feature off. */
  AUTO_SCAVENGE_OFF: { status: 503, reason: 'Service Unavailable', message: 'AutoScavenge is not enabled', body: 'problem' },
  /** A command the auto-scavenge state refuses, with the reason. */
  AUTO_SCAVENGE_REJECTED: { status: 400, reason: 'Bad Request', message: '', body: 'json' },
  /** The auto-scavenge coordinator cannot take the command (its loop died, it stopped, its queue is full). */
  AUTO_SCAVENGE_FAILED: { status: 500, reason: 'Internal Server Error', message: '', body: 'problem' },
} as const satisfies Record<string, ErrorEntry>;

export type ApiErrorCode = keyof typeof API_ERRORS;

/** What the error handler writes: status, reason phrase, headers, and the message in its body format. */
export interface ErrorAnswer {
  readonly status: number;
  readonly reason: string;
  readonly message: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: ErrorBody;
}

export class ApiError extends Error implements ErrorAnswer {
  readonly status: number;
  readonly reason: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: ErrorBody;

  /** `message` replaces the entry's default; `headers` add to the entry's. */
  constructor(readonly code: ApiErrorCode, message?: string, headers: Record<string, string> = {}) {
    const entry: ErrorEntry = API_ERRORS[code];
    super(message ?? entry.message);
    this.status = entry.status;
    this.reason = entry.reason;
    this.headers = { ...entry.headers, ...headers };
    this.body = entry.body ?? 'text';
  }
}

export function badRequest(message: string): ApiError {
  return new ApiError('BAD_REQUEST', message);
}

/** Every domain error class, for the tables' types: a new class goes here, or its code fails the check below. */
export type KnownDomainError =
  | WrongExpectedVersionError | StreamDeletedError | InvalidWriteError | StoreClosedError | NotLeaderError | ReplicationLostError
  | WriteTimeoutError | OutOfSpaceError | AccessDeniedError | InvalidFilterError | NotPermittedError | InvalidRequestError | ProjectionError
  | QuerySyntaxError | SubscriptionError | SettingsError
  | ScavengeAlreadyRunningError | ScavengeNotFoundError | BackupRunningError | ScavengeRunningError | BackupAlreadyRunningError | BackupTargetError
  | BackupStoppedError | AutoScavengeNotEnabledError | AutoScavengeRejectedError | AutoScavengeFailedError | InvalidScheduleError;

/** The class of KnownDomainError `E` that carries code `C`. */
export type WithCode<E, C extends DomainErrorCode> = E extends { readonly code: infer K } ? (C extends K ? E : never) : never;

/** A backup directory that cannot be used: the path (400), the file system's refusal (403), no room (507). */
const BACKUP_TARGET_ERRORS = { path: 'BAD_REQUEST', permission: 'BACKUP_TARGET_REFUSED', space: 'BACKUP_TARGET_FULL' } as const satisfies Record<BackupTargetProblem, ApiErrorCode>;

// Compiles only when every code has its class in KnownDomainError (else the type names the codes without one).
true satisfies [Exclude<DomainErrorCode, KnownDomainError['code']>] extends [never] ? true : Exclude<DomainErrorCode, KnownDomainError['code']>;

/** The HTTP answer of each domain error, by code: a code without one does not compile. */
const DOMAIN_ANSWERS: { readonly [C in DomainErrorCode]: (error: WithCode<KnownDomainError, C>) => ApiError } = {
  WRONG_EXPECTED_VERSION: (e) => new ApiError('WRONG_EXPECTED_VERSION', undefined, inEverySpelling('CurrentVersion', String(e.currentVersion))),
  STREAM_DELETED: () => new ApiError('STREAM_DELETED'),
  // The store's write door: too large is 413 as at the HTTP door, any other rule 400.
  INVALID_WRITE: (e) => new ApiError(e.rule === 'event-size' ? 'PAYLOAD_TOO_LARGE' : e.rule === 'reserved' ? 'EPOCHS_READ_ONLY' : 'BAD_REQUEST', e.message),
  STORE_CLOSED: (e) => new ApiError('SHUTTING_DOWN', e.message),
  NOT_LEADER: (e) => new ApiError('NOT_READY', e.message),
  REPLICATION_LOST: (e) => new ApiError('NOT_READY', `${e.message}; the write may or may not have been written.`),
  WRITE_TIMEOUT: () => new ApiError('WRITE_TIMEOUT'),
  OUT_OF_SPACE: (e) => new ApiError('OUT_OF_SPACE', e.message),
  ACCESS_DENIED: () => new ApiError('ACCESS_DENIED'),
  // A route for authenticated users challenges for credentials; one that takes a role refuses without.
  INVALID_FILTER: (e) => new ApiError('BAD_REQUEST', e.message),
  // Authentication asks for credentials (a challenge); a role or another's account is refused without a body, but the projections API refuses in words.
  NOT_PERMITTED: (e) => new ApiError(e.right === 'authenticated' ? 'ACCESS_DENIED' : e.area === 'projections' ? 'NOT_AUTHORIZED' : 'UNAUTHORIZED'),
  INVALID_REQUEST: (e) => new ApiError('BAD_REQUEST', e.message),
  PROJECTION_NOT_FOUND: (e) => new ApiError('NOT_FOUND', e.message),
  PROJECTION_EXISTS: (e) => new ApiError('CONFLICT', e.message),
  PROJECTION_REFUSED: (e) => new ApiError('BAD_REQUEST', e.message),
  PROJECTION_BUSY: (e) => new ApiError('SERVICE_UNAVAILABLE', e.message),
  QUERY_SYNTAX: (e) => new ApiError('BAD_REQUEST', e.message),
  SUBSCRIPTION_NOT_FOUND: (e) => (e.lookUp ? new ApiError('NOT_FOUND') : new ApiError('SUBSCRIPTION_NOT_FOUND', e.message)),
  SUBSCRIPTION_EXISTS: (e) => new ApiError('SUBSCRIPTION_EXISTS', e.message),
  SUBSCRIPTION_LIMIT: (e) => new ApiError('SUBSCRIPTION_REFUSED', e.message),
  SUBSCRIPTION_SETTINGS: (e) => new ApiError('BAD_REQUEST', e.message),
  // Met by push consumers (gRPC) only: an HTTP pull takes no slot and holds no connection.
  SUBSCRIPTION_FULL: (e) => new ApiError('CONFLICT', e.message),
  SUBSCRIPTION_DROPPED: (e) => new ApiError('SERVICE_UNAVAILABLE', e.message),
  SUBSCRIPTIONS_NOT_READY: (e) => new ApiError('NOT_READY', e.message),
  SCAVENGE_ALREADY_RUNNING: () => new ApiError('SCAVENGE_ALREADY_RUNNING'),
  SCAVENGE_NOT_FOUND: () => new ApiError('SCAVENGE_NOT_FOUND'),
  BACKUP_RUNNING: () => new ApiError('BACKUP_RUNNING'),
  SCAVENGE_RUNNING: (e) => new ApiError('BACKUP_CONFLICT', e.message),
  BACKUP_ALREADY_RUNNING: (e) => new ApiError('BACKUP_CONFLICT', e.message),
  BACKUP_TARGET: (e) => new ApiError(BACKUP_TARGET_ERRORS[e.problem], e.message),
  BACKUP_STOPPED: (e) => new ApiError('SHUTTING_DOWN', e.message),
  AUTO_SCAVENGE_NOT_ENABLED: (e) => new ApiError('AUTO_SCAVENGE_OFF', e.message),
  AUTO_SCAVENGE_REJECTED: (e) => new ApiError('AUTO_SCAVENGE_REJECTED', e.message),
  AUTO_SCAVENGE_FAILED: (e) => new ApiError('AUTO_SCAVENGE_FAILED', e.message),
  INVALID_SCHEDULE: (e) => new ApiError('BAD_REQUEST', e.message),
};

/** The answer for an error, or undefined when it is a fault of ours (the handler answers INTERNAL). */
export function errorAnswer(error: unknown): ErrorAnswer | undefined {
  if (error instanceof ApiError) return error;
  if (error instanceof DomainError) return (DOMAIN_ANSWERS[error.code] as (e: DomainError) => ApiError)(error);
  // Fastify's own: a body over the limit is 413 as at the write door; its other 4xx pass through.
  const { code, statusCode, message } = error as Partial<FastifyError>;
  if (code === 'FST_ERR_CTP_BODY_TOO_LARGE') return new ApiError('PAYLOAD_TOO_LARGE');
  if (statusCode && statusCode < 500) return { status: statusCode, reason: STATUS_CODES[statusCode] ?? '', message: message ?? '', headers: {}, body: 'text' };
  return undefined;
}

/** The body of an answer as it goes on the wire, or undefined for none. */
export function errorBody(answer: ErrorAnswer): { type: string; text: string } | undefined {
  const { body, message, status } = answer;
  if (body === 'problem') return { type: 'application/problem+json; charset=utf-8', text: JSON.stringify({ title: message, status }) };
  // Indented by two spaces, as every JSON body of this API (api/reply.ts).
  if (body === 'json') return { type: 'application/json; charset=utf-8', text: JSON.stringify(message, null, 2) };
  if (body !== 'text') {
    return { type: 'application/json; charset=utf-8', text: JSON.stringify({ correlationId: randomUUID(), reason: message, result: body.outcome }, null, 2) };
  }
  return message ? { type: 'text/plain; charset=utf-8', text: message } : undefined;
}
