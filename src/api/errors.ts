import { STATUS_CODES } from 'node:http';
import type { FastifyError } from 'fastify';
import {
  InvalidWriteError, NotLeaderError, ReplicationLostError, StoreClosedError, StreamDeletedError, WriteTimeoutError, WrongExpectedVersionError,
} from '../store/index.js';
import { ProjectionError } from '../projections/manager.js';
import { QuerySyntaxError } from '../projections/validate.js';
import { SettingsError } from '../subscriptions/settings.js';
import { BackupRunningError, ScavengeAlreadyRunningError } from '../scavenge/types.js';
import { BackupAlreadyRunningError, ScavengeRunningError } from '../backup/service.js';
import { BackupTargetError, type BackupTargetProblem } from '../backup/target.js';
import { BackupStoppedError } from '../store/index.js';
import { AccessDeniedError, InvalidFilterError } from '../verbs/index.js';
import { inEverySpelling } from './header-spellings.js';

// Every error the HTTP API answers with, declared once: a stable code, the status, the HTTP
// reason phrase (existing clients read it), the default text body ('' sends none) and the headers
// it carries. Routes throw ApiError; the errors of the store, the projections, the
// subscription settings and the scavenger map to an entry in DOMAIN_ERRORS; the app's error
// handler writes whatever `errorAnswer` gives and knows nothing else.

interface ErrorEntry {
  status: number;
  reason: string;
  message: string;
  headers?: Readonly<Record<string, string>>;
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
  INTERNAL: { status: 500, reason: 'Internal Server Error', message: 'Internal error.' },
  SHUTTING_DOWN: { status: 503, reason: 'Server Is Not Ready', message: 'The server is shutting down.' },
  SERVICE_UNAVAILABLE: { status: 503, reason: 'Service Unavailable', message: '' },
  /** A cluster without a leader (an election under way), or a leader still starting. */
  NOT_READY: { status: 503, reason: 'Server Is Not Ready', message: 'No cluster leader is ready; retry shortly.' },
  WRITE_TIMEOUT: { status: 500, reason: 'Write timeout', message: 'No quorum of the cluster held the write in time; it may or may not have been written.' },
} as const satisfies Record<string, ErrorEntry>;

export type ApiErrorCode = keyof typeof API_ERRORS;

/** What the error handler writes: status, reason phrase, headers, and the text body ('' for none). */
export interface ErrorAnswer {
  readonly status: number;
  readonly reason: string;
  readonly message: string;
  readonly headers: Readonly<Record<string, string>>;
}

export class ApiError extends Error implements ErrorAnswer {
  readonly status: number;
  readonly reason: string;
  readonly headers: Readonly<Record<string, string>>;

  /** `message` replaces the entry's default body; `headers` add to the entry's. */
  constructor(readonly code: ApiErrorCode, message?: string, headers: Record<string, string> = {}) {
    const entry: ErrorEntry = API_ERRORS[code];
    super(message ?? entry.message);
    this.status = entry.status;
    this.reason = entry.reason;
    this.headers = { ...entry.headers, ...headers };
  }
}

export function badRequest(message: string): ApiError {
  return new ApiError('BAD_REQUEST', message);
}

/** A domain error class and the answer it gets. */
interface DomainError {
  readonly type: new (...args: never[]) => Error;
  readonly answer: (error: Error) => ApiError;
}

function domain<E extends Error>(type: new (...args: never[]) => E, answer: (error: E) => ApiError): DomainError {
  return { type, answer: answer as (error: Error) => ApiError }; // called only for an instance of `type`
}

const PROJECTION_ERRORS = { NotFound: 'NOT_FOUND', Conflict: 'CONFLICT', BadRequest: 'BAD_REQUEST' } as const;
/** A backup directory that cannot be used: the path (400), the file system's refusal (403), no room (507). */
const BACKUP_TARGET_ERRORS = { path: 'BAD_REQUEST', permission: 'BACKUP_TARGET_REFUSED', space: 'BACKUP_TARGET_FULL' } as const satisfies Record<BackupTargetProblem, ApiErrorCode>;

const DOMAIN_ERRORS: readonly DomainError[] = [
  domain(AccessDeniedError, () => new ApiError('ACCESS_DENIED')),
  domain(InvalidFilterError, (e) => new ApiError('BAD_REQUEST', e.message)),
  domain(WrongExpectedVersionError, (e) => new ApiError('WRONG_EXPECTED_VERSION', undefined, inEverySpelling('CurrentVersion', String(e.currentVersion)))),
  domain(StreamDeletedError, () => new ApiError('STREAM_DELETED')),
  // The store's write door: too large is 413 as at the HTTP door, any other rule 400.
  domain(InvalidWriteError, (e) => new ApiError(e.rule === 'event-size' ? 'PAYLOAD_TOO_LARGE' : e.rule === 'reserved' ? 'EPOCHS_READ_ONLY' : 'BAD_REQUEST', e.message)),
  domain(StoreClosedError, (e) => new ApiError('SHUTTING_DOWN', e.message)),
  domain(NotLeaderError, (e) => new ApiError('NOT_READY', e.message)),
  domain(ReplicationLostError, (e) => new ApiError('NOT_READY', `${e.message}; the write may or may not have been written.`)),
  domain(WriteTimeoutError, () => new ApiError('WRITE_TIMEOUT')),
  domain(ProjectionError, (e) => new ApiError(PROJECTION_ERRORS[e.kind], e.message)),
  domain(QuerySyntaxError, (e) => new ApiError('BAD_REQUEST', e.message)),
  domain(SettingsError, (e) => new ApiError('BAD_REQUEST', e.message)),
  domain(ScavengeAlreadyRunningError, () => new ApiError('SCAVENGE_ALREADY_RUNNING')),
  domain(BackupRunningError, () => new ApiError('BACKUP_RUNNING')),
  domain(ScavengeRunningError, (e) => new ApiError('BACKUP_CONFLICT', e.message)),
  domain(BackupAlreadyRunningError, (e) => new ApiError('BACKUP_CONFLICT', e.message)),
  domain(BackupTargetError, (e) => new ApiError(BACKUP_TARGET_ERRORS[e.problem], e.message)),
  domain(BackupStoppedError, (e) => new ApiError('SHUTTING_DOWN', e.message)),
];

/** The answer for an error, or undefined when it is a fault of ours (the handler answers INTERNAL). */
export function errorAnswer(error: unknown): ErrorAnswer | undefined {
  if (error instanceof ApiError) return error;
  for (const { type, answer } of DOMAIN_ERRORS) {
    if (error instanceof type) return answer(error);
  }
  // Fastify's own: a body over the limit is 413 as at the write door; its other 4xx pass through.
  const { code, statusCode, message } = error as Partial<FastifyError>;
  if (code === 'FST_ERR_CTP_BODY_TOO_LARGE') return new ApiError('PAYLOAD_TOO_LARGE');
  if (statusCode && statusCode < 500) return { status: statusCode, reason: STATUS_CODES[statusCode] ?? '', message: message ?? '', headers: {} };
  return undefined;
}
