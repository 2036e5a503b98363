import { describe, expect, it } from 'vitest';
import { errorAnswer, errorBody } from '../src/api/errors.js';
import { grpcStatusOf } from '../src/api/grpc/errors.js';
import { AutoScavengeFailedError, AutoScavengeNotEnabledError, AutoScavengeRejectedError, InvalidScheduleError } from '../src/autoscavenge/index.js';
import { BackupAlreadyRunningError, ScavengeRunningError } from '../src/backup/service.js';
import { BackupTargetError } from '../src/backup/target.js';
import { DomainError, type DomainErrorCode } from '../src/errors.js';
import { ProjectionError } from '../src/projections/manager.js';
import { QuerySyntaxError } from '../src/projections/validate.js';
import { BackupRunningError, ScavengeAlreadyRunningError, ScavengeNotFoundError } from '../src/scavenge/types.js';
import {
  BackupStoppedError, InvalidWriteError, NotLeaderError, OutOfSpaceError, ReplicationLostError, ReplicationMismatchError, StoreClosedError, StreamDeletedError,
  WriteTimeoutError, WrongExpectedVersionError,
} from '../src/store/index.js';
import { SettingsError, SubscriptionError } from '../src/subscriptions/errors.js';
import { AccessDeniedError, InvalidRequestError, NotPermittedError } from '../src/verbs/index.js';
import { InvalidFilterError } from '../src/store/index.js';

// The two doors' error tables (issue 30, errors one way): every domain error shares one base
// and is answered by its code, over HTTP with the status, reason phrase, headers and body the
// clients of the established servers read, over gRPC with the status and trailers of grpc.md §4.
// Faults of ours (plain errors, and a domain error a door cannot meet) get no answer: the
// doors answer them INTERNAL and log them.

const ONE_OF_EACH: { [C in DomainErrorCode]: DomainError } = {
  WRONG_EXPECTED_VERSION: new WrongExpectedVersionError('s', 4),
  STREAM_DELETED: new StreamDeletedError('s'),
  INVALID_WRITE: new InvalidWriteError('s', 'stream-name', 'a bad name'),
  STORE_CLOSED: new StoreClosedError(),
  NOT_LEADER: new NotLeaderError(),
  REPLICATION_LOST: new ReplicationLostError('the term ended'),
  WRITE_TIMEOUT: new WriteTimeoutError('no quorum'),
  OUT_OF_SPACE: new OutOfSpaceError('While appending to file: /data/000004.log', 64 * 1024 * 1024),
  ACCESS_DENIED: new AccessDeniedError('s', 'r'),
  INVALID_FILTER: new InvalidFilterError('a bad filter'),
  NOT_PERMITTED: new NotPermittedError('users', 'admin'),
  INVALID_REQUEST: new InvalidRequestError('threads must be 4 or below'),
  PROJECTION_NOT_FOUND: new ProjectionError('PROJECTION_NOT_FOUND', 'Projection p not found', 'p'),
  PROJECTION_EXISTS: new ProjectionError('PROJECTION_EXISTS', 'Duplicate projection names : p', 'p'),
  PROJECTION_REFUSED: new ProjectionError('PROJECTION_REFUSED', 'Projection name is required'),
  QUERY_SYNTAX: new QuerySyntaxError('Unexpected token at line 1, column 2', 1, 2),
  SUBSCRIPTION_NOT_FOUND: new SubscriptionError('SUBSCRIPTION_NOT_FOUND', "Group 'g' does not exist.", 's', 'g'),
  SUBSCRIPTION_EXISTS: new SubscriptionError('SUBSCRIPTION_EXISTS', "Group 'g' already exists.", 's', 'g'),
  SUBSCRIPTION_LIMIT: new SubscriptionError('SUBSCRIPTION_LIMIT', 'no more groups', 's', 'g'),
  SUBSCRIPTION_SETTINGS: new SettingsError('a bad setting', 's', 'g'),
  SUBSCRIPTION_FULL: new SubscriptionError('SUBSCRIPTION_FULL', 'The group has 2 consumers, its maxSubscriberCount.', 's', 'g'),
  SUBSCRIPTION_DROPPED: new SubscriptionError('SUBSCRIPTION_DROPPED', 'The group g on s let its consumers go', 's', 'g'),
  SUBSCRIPTIONS_NOT_READY: new SubscriptionError('SUBSCRIPTIONS_NOT_READY', 'Persistent Subscriptions cannot be restarted as it is in the wrong state.'),
  SCAVENGE_ALREADY_RUNNING: new ScavengeAlreadyRunningError('id1'),
  SCAVENGE_NOT_FOUND: new ScavengeNotFoundError('id3'),
  BACKUP_RUNNING: new BackupRunningError(),
  SCAVENGE_RUNNING: new ScavengeRunningError('id2'),
  BACKUP_ALREADY_RUNNING: new BackupAlreadyRunningError('/backups'),
  BACKUP_TARGET: new BackupTargetError('path', 'not a directory'),
  BACKUP_STOPPED: new BackupStoppedError(),
  AUTO_SCAVENGE_NOT_ENABLED: new AutoScavengeNotEnabledError(),
  AUTO_SCAVENGE_REJECTED: new AutoScavengeRejectedError('Node is not the leader'),
  AUTO_SCAVENGE_FAILED: new AutoScavengeFailedError('the loop died'),
  INVALID_SCHEDULE: new InvalidScheduleError('Invalid CRON expression'),
};

const TEXT = 'text/plain; charset=utf-8';
const NO_SPACE = 'No space left on device: While appending to file: /data/000004.log. The write was refused; writes resume by themselves '
  + 'once the data directory\'s file system has 64 MiB free (retry with the same event ids then).';
const JSON_TYPE = 'application/json; charset=utf-8';
const PROBLEM = 'application/problem+json; charset=utf-8';

/** [status, reason, content type (null: no body), body, headers] as a client reads them. */
type Seen = [number, string, string | null, string, Record<string, string>?];

const HTTP: { [C in DomainErrorCode]: Seen } = {
  WRONG_EXPECTED_VERSION: [400, 'Wrong expected EventNumber', null, '', { 'SVC-CurrentVersion': '4', 'Kurrent-CurrentVersion': '4', 'ES-CurrentVersion': '4' }],
  STREAM_DELETED: [410, 'Stream deleted', null, ''],
  INVALID_WRITE: [400, 'Bad Request', TEXT, 'a bad name'],
  STORE_CLOSED: [503, 'Server Is Not Ready', TEXT, 'The store is shutting down'],
  NOT_LEADER: [503, 'Server Is Not Ready', TEXT, 'This node is not the cluster leader'],
  REPLICATION_LOST: [503, 'Server Is Not Ready', TEXT, 'the term ended; the write may or may not have been written.'],
  WRITE_TIMEOUT: [500, 'Write timeout', TEXT, 'No quorum of the cluster held the write in time; it may or may not have been written.'],
  OUT_OF_SPACE: [507, 'Insufficient Storage', TEXT, NO_SPACE],
  ACCESS_DENIED: [401, 'Unauthorized', null, '', { 'WWW-Authenticate': 'BasicCustom realm="SVC"' }],
  INVALID_FILTER: [400, 'Bad Request', TEXT, 'a bad filter'],
  NOT_PERMITTED: [401, 'Unauthorized', null, ''],
  INVALID_REQUEST: [400, 'Bad Request', TEXT, 'threads must be 4 or below'],
  PROJECTION_NOT_FOUND: [404, 'Not Found', TEXT, 'Projection p not found'],
  PROJECTION_EXISTS: [409, 'Conflict', TEXT, 'Duplicate projection names : p'],
  PROJECTION_REFUSED: [400, 'Bad Request', TEXT, 'Projection name is required'],
  QUERY_SYNTAX: [400, 'Bad Request', TEXT, 'Unexpected token at line 1, column 2'],
  SUBSCRIPTION_NOT_FOUND: [404, 'Not Found', JSON_TYPE, 'DoesNotExist:Group \'g\' does not exist.'],
  SUBSCRIPTION_EXISTS: [409, 'Conflict', JSON_TYPE, 'AlreadyExists:Group \'g\' already exists.'],
  SUBSCRIPTION_LIMIT: [400, 'Bad Request', JSON_TYPE, 'Fail:no more groups'],
  SUBSCRIPTION_SETTINGS: [400, 'Bad Request', TEXT, 'a bad setting'],
  SUBSCRIPTION_FULL: [409, 'Conflict', TEXT, 'The group has 2 consumers, its maxSubscriberCount.'],
  SUBSCRIPTION_DROPPED: [503, 'Service Unavailable', TEXT, 'The group g on s let its consumers go'],
  SUBSCRIPTIONS_NOT_READY: [503, 'Server Is Not Ready', TEXT, 'Persistent Subscriptions cannot be restarted as it is in the wrong state.'],
  SCAVENGE_ALREADY_RUNNING: [400, 'Bad Request', TEXT, 'Scavenge is already running'],
  SCAVENGE_NOT_FOUND: [404, 'Not Found', TEXT, 'Scavenge Id does not exist'],
  BACKUP_RUNNING: [400, 'Bad Request', TEXT, 'A backup is running'],
  SCAVENGE_RUNNING: [409, 'Conflict', TEXT, 'A scavenge is running (id2): stop it with DELETE /admin/scavenge/id2, back up, then start it again with POST /admin/scavenge (it resumes where it stopped).'],
  BACKUP_ALREADY_RUNNING: [409, 'Conflict', TEXT, 'A backup is already running (to /backups); one backup runs at a time.'],
  BACKUP_TARGET: [400, 'Bad Request', TEXT, 'not a directory'],
  BACKUP_STOPPED: [503, 'Server Is Not Ready', TEXT, 'The backup was stopped: the node is shutting down'],
  AUTO_SCAVENGE_NOT_ENABLED: [503, 'Service Unavailable', PROBLEM, '{"title":"AutoScavenge is not enabled","status":503}'],
  AUTO_SCAVENGE_REJECTED: [400, 'Bad Request', JSON_TYPE, '"Node is not the leader"'],
  AUTO_SCAVENGE_FAILED: [500, 'Internal Server Error', PROBLEM, '{"title":"the loop died","status":500}'],
  INVALID_SCHEDULE: [400, 'Bad Request', TEXT, 'Invalid CRON expression'],
};

/** What the HTTP door writes for `error`; an outcome body as `result:reason` (its correlation id is checked apart). */
function httpSeen(error: unknown): Seen | undefined {
  const answer = errorAnswer(error);
  if (!answer) return undefined;
  const body = errorBody(answer);
  let text = body?.text ?? '';
  if (typeof answer.body === 'object') {
    const outcome = JSON.parse(text) as { correlationId: string; reason: string; result: string };
    expect(Object.keys(outcome)).toEqual(['correlationId', 'reason', 'result']);
    expect(outcome.correlationId).toMatch(/^[0-9a-f-]{36}$/);
    text = `${outcome.result}:${outcome.reason}`;
  }
  const seen: Seen = [answer.status, answer.reason, body?.type ?? null, text];
  if (Object.keys(answer.headers).length > 0) seen.push({ ...answer.headers });
  return seen;
}

describe('the domain errors', () => {
  it.each(Object.entries(ONE_OF_EACH))('%s shares the base and carries its code', (code, error) => {
    expect(error).toBeInstanceOf(DomainError);
    expect(error.code).toBe(code);
  });

  it('leave out what no client request meets: a follower\'s mismatch is a plain error', () => {
    expect(new ReplicationMismatchError('a gap')).not.toBeInstanceOf(DomainError);
  });
});

describe('the HTTP table', () => {
  it.each(Object.entries(ONE_OF_EACH))('answers %s as the established servers do', (code, error) => {
    expect(httpSeen(error)).toEqual(HTTP[code as DomainErrorCode]);
  });

  it('answers the write door\'s size rule 413 and its reserved streams 403', () => {
    expect(httpSeen(new InvalidWriteError('s', 'event-size', 'too large'))).toEqual([413, 'Payload Too Large', TEXT, 'too large']);
    expect(httpSeen(new InvalidWriteError('$epochs', 'reserved', 'written by leaders only'))).toEqual([403, 'Forbidden', TEXT, 'written by leaders only']);
  });

  it('answers a missing right as the route families of the established servers do', () => {
    expect(httpSeen(new NotPermittedError('projections', 'ops'))).toEqual([401, 'Unauthorized', TEXT, 'Not Authorized']);
    expect(httpSeen(new NotPermittedError('users', 'self'))).toEqual([401, 'Unauthorized', null, '']);
    expect(httpSeen(new NotPermittedError('node', 'authenticated'))).toEqual(HTTP.ACCESS_DENIED);
  });

  it('has no answer for a fault of ours', () => {
    expect(errorAnswer(new Error('a bug'))).toBeUndefined();
    expect(errorAnswer(new ReplicationMismatchError('a gap'))).toBeUndefined();
    expect(errorAnswer('not even an error')).toBeUndefined();
  });
});

describe('the gRPC table', () => {
  const NOT_READY = { code: 14, message: 'Server Is Not Ready' };
  /** A persistent-subscription refusal of group g on stream s: the group's names in the trailers. */
  const ofGroup = (code: number, exception: string, message: string, more: Record<string, string> = {}) =>
    ({ code, message, trailers: { exception, 'stream-name': 's', 'group-name': 'g', ...more } });
  const GRPC: Partial<Record<DomainErrorCode, unknown>> = {
    STREAM_DELETED: { code: 9, message: "Event stream 's' is deleted.", trailers: { exception: 'stream-deleted', 'stream-name': 's' } },
    INVALID_WRITE: { code: 3, message: 'a bad name' },
    STORE_CLOSED: NOT_READY,
    NOT_LEADER: NOT_READY,
    REPLICATION_LOST: { code: 14, message: 'Server Is Not Ready: the term ended; the write may or may not have been written.' },
    WRITE_TIMEOUT: { code: 10, message: 'Operation timed out: no quorum of the cluster held the write in time; it may or may not have been written.' },
    OUT_OF_SPACE: { code: 8, message: NO_SPACE },
    ACCESS_DENIED: { code: 7, message: 'Access Denied', trailers: { exception: 'access-denied' } },
    INVALID_FILTER: { code: 3, message: 'a bad filter' },
    SUBSCRIPTION_NOT_FOUND: ofGroup(5, 'persistent-subscription-does-not-exist', 'Subscription group g on stream s does not exist.'),
    SUBSCRIPTION_EXISTS: ofGroup(6, 'persistent-subscription-exists', 'Subscription group g on stream s exists.'),
    SUBSCRIPTION_LIMIT: ofGroup(13, 'persistent-subscription-failed', "Subscription group g on stream s failed: 'no more groups'", { reason: 'no more groups' }),
    SUBSCRIPTION_SETTINGS: ofGroup(13, 'persistent-subscription-failed', "Subscription group g on stream s failed: 'a bad setting'", { reason: 'a bad setting' }),
    SUBSCRIPTION_FULL: ofGroup(9, 'maximum-subscribers-reached', 'Maximum subscriptions reached for subscription group g on stream s.'),
    SUBSCRIPTION_DROPPED: ofGroup(1, 'persistent-subscription-dropped', 'Subscription group g on stream s was dropped.'),
    // The restart in the wrong state, word for word (grpc.md §5.6): no group, so empty names.
    SUBSCRIPTIONS_NOT_READY: {
      code: 13, message: "Subscription group  on stream  failed: 'Persistent Subscriptions cannot be restarted as it is in the wrong state.'",
      trailers: {
        exception: 'persistent-subscription-failed', 'stream-name': '', 'group-name': '',
        reason: 'Persistent Subscriptions cannot be restarted as it is in the wrong state.',
      },
    },
    NOT_PERMITTED: { code: 7, message: 'Access Denied', trailers: { exception: 'access-denied' } },
    INVALID_REQUEST: { code: 3, message: 'threads must be 4 or below' },
    // NOT_FOUND without an exception key: the Node clients (24.6+) take it as their NotFoundError.
    PROJECTION_NOT_FOUND: { code: 5, message: "Projection 'p' not found" },
    PROJECTION_EXISTS: { code: 6, message: 'Duplicate projection names : p' },
    PROJECTION_REFUSED: { code: 9, message: 'Projection name is required' },
    QUERY_SYNTAX: { code: 3, message: 'Unexpected token at line 1, column 2' },
    SCAVENGE_ALREADY_RUNNING: { code: 9, message: 'Scavenge is already running' },
    SCAVENGE_NOT_FOUND: { code: 5, message: 'Scavenge id was invalid.', trailers: { exception: 'scavenge-not-found', 'scavenge-id': 'id3' } },
    BACKUP_RUNNING: { code: 9, message: 'A backup is running: a scavenge starts once it has finished' },
  };

  it.each(Object.entries(GRPC))('answers %s as the established server does', (code, status) => {
    expect(grpcStatusOf(ONE_OF_EACH[code as DomainErrorCode], 1000)).toEqual(status);
  });

  it('answers the write door\'s size rule with the append bound', () => {
    expect(grpcStatusOf(new InvalidWriteError('s', 'event-size', 'too large'), 1000)).toEqual({
      code: 3, message: 'Maximum Append Size of 1000 Exceeded.',
      trailers: { exception: 'maximum-append-size-exceeded', 'maximum-append-size': '1000' },
    });
  });

  it('leaves a wrong expected version to the method, and has no answer for what its door cannot meet', () => {
    expect(grpcStatusOf(ONE_OF_EACH.WRONG_EXPECTED_VERSION, 1000)).toBeUndefined();
    const elsewhere = Object.keys(ONE_OF_EACH).filter((code) => !(code in GRPC) && code !== 'WRONG_EXPECTED_VERSION') as DomainErrorCode[];
    expect(elsewhere).toContain('SCAVENGE_RUNNING');
    for (const code of elsewhere) expect(grpcStatusOf(ONE_OF_EACH[code], 1000), code).toBeUndefined();
    expect(grpcStatusOf(new Error('a bug'), 1000)).toBeUndefined();
  });
});
