import {
  ExpectedVersion, StreamDeletedError, WrongExpectedVersionError, type AllPage, type AppendResult, type EventRecord, type ProposedEvent,
  type ResolvedEvent, type SingleEvent, type Store, type StreamPage,
} from '../store/index.js';
import { ALL_STREAM, type AccessControl, type Principal } from '../auth/index.js';
import type { AclOperation } from '../store/index.js';
import { AccessDeniedError } from './errors.js';
import { matchesFilter, type EventFilter } from '../store/index.js';
import type { AppendResult as CountedAppend, ClientCounters, ReadResult } from '../metrics/index.js';

// The stream verbs, one for each thing a client can do to streams whatever door it comes through
// (HTTP/1.1 or gRPC): append, delete, read a stream, read `$all`, read one event. Each verb
// checks who may do it (the stream's ACL, `$all`'s rule) and asks the store, whose write door
// holds every rule of what may be written (store/write-rules.ts). A door decodes its protocol,
// calls a verb, and encodes the answer or maps the error (store and verb errors alike). The
// verbs count appends and reads by result for GET /metrics, so both doors are counted alike.

export type Direction = 'forward' | 'backward';

export interface AppendOutcome extends AppendResult {
  /** Log position of the last event of the append (the first event's is `position`). */
  readonly lastPosition: number;
}

export class StreamVerbs {
  /** `counters` undefined: nothing is counted (the verbs' unit tests). */
  constructor(private readonly store: Store, private readonly access: AccessControl, private readonly counters?: ClientCounters) {}

  /** Throws AccessDeniedError unless `who` may do `op` on the stream (`$all`: authenticated users the ACL admits). */
  authorize(who: Principal, op: AclOperation, streamId: string): void {
    if (streamId === ALL_STREAM && op === 'r' && !who.authenticated) throw new AccessDeniedError(streamId, op);
    if (!this.access.canAccess(who, op, streamId)) throw new AccessDeniedError(streamId, op);
  }

  /** `authorize` for a door that checks before it has the events (gRPC), a refusal counted as an append's. */
  authorizeAppend(who: Principal, streamId: string): void {
    try {
      this.authorize(who, 'w', streamId);
    } catch (err) {
      this.counters?.appended('access_denied', 0);
      throw err;
    }
  }

  async append(who: Principal, streamId: string, expected: ExpectedVersion, events: ProposedEvent[]): Promise<AppendOutcome> {
    let result: AppendResult;
    try {
      this.authorize(who, 'w', streamId);
      result = await this.store.append(streamId, expected, events);
    } catch (err) {
      this.counters?.appended(appendRefusal(err), 0);
      throw err;
    }
    this.counters?.appended('success', events.length);
    const lastPosition = events.length <= 1 || result.lastEventNumber < 0
      ? result.position
      : this.store.indexPositions(streamId, [result.lastEventNumber])[0] ?? result.position;
    return { ...result, lastPosition };
  }

  /** Soft delete (the stream can be written again) or hard delete (a tombstone, forever). */
  delete(who: Principal, streamId: string, expected: ExpectedVersion, hard: boolean): Promise<{ position: number }> {
    this.authorize(who, 'd', streamId);
    return this.store.deleteStream(streamId, expected, hard);
  }

  /** A page of a stream from event number `from` (backward: -1 is the last event). */
  readStream(who: Principal, streamId: string, from: number, count: number, direction: Direction, resolveLinks: boolean): StreamPage {
    this.authorizeRead(who, streamId);
    const page = direction === 'forward'
      ? this.store.readStreamForward(streamId, from, count, resolveLinks)
      : this.store.readStreamBackward(streamId, from, count, resolveLinks);
    this.counters?.read(readResultOf(page.status), page.status === 'ok' ? page.events.length : 0);
    return page;
  }

  /** One event of a stream by number (-1: the last). */
  readEvent(who: Principal, streamId: string, eventNumber: number, resolveLinks: boolean): SingleEvent {
    this.authorizeRead(who, streamId);
    const found = this.store.readEvent(streamId, eventNumber, resolveLinks);
    this.counters?.read(readResultOf(found.status), found.status === 'ok' ? 1 : 0);
    return found;
  }

  /**
   * A page of `$all` from `position` (forward: records at or after it; backward: records that end
   * at or before it). A filtered read goes on past non-matching records until `count` match or
   * the log ends, scanning at most `scanLimit` records.
   */
  readAll(who: Principal, position: number, count: number, direction: Direction, resolveLinks: boolean,
    filter?: EventFilter, scanLimit = Number.POSITIVE_INFINITY): AllRead {
    this.authorizeRead(who, ALL_STREAM);
    const read = this.readAllPage(position, count, direction, resolveLinks, filter, scanLimit);
    this.counters?.read('ok', read.events.length);
    return read;
  }

  private readAllPage(position: number, count: number, direction: Direction, resolveLinks: boolean,
    filter: EventFilter | undefined, scanLimit: number): AllRead {
    const read = (from: number, n: number): AllPage => (direction === 'forward'
      ? this.store.readAllForward(from, n)
      : this.store.readAllBackward(from, n));
    if (!filter) {
      const page = read(position, count);
      return { events: page.records.map((r) => this.resolved(r, resolveLinks)), nextPosition: page.nextPosition, isEnd: page.isEnd };
    }
    const events: ResolvedEvent[] = [];
    let from = position;
    let scanned = 0;
    for (;;) {
      const page = read(from, Math.min(512, Math.max(count - events.length, 32)));
      for (const r of page.records) {
        scanned++;
        if (matchesFilter(filter, r)) events.push(this.resolved(r, resolveLinks));
        if (events.length === count) {
          return { events, nextPosition: direction === 'forward' ? r.position + r.size : r.position, isEnd: false };
        }
      }
      from = page.nextPosition;
      if (page.isEnd || page.records.length === 0 || scanned >= scanLimit) return { events, nextPosition: from, isEnd: page.isEnd };
    }
  }

  /** `authorize` for a read, counting a refusal. */
  private authorizeRead(who: Principal, streamId: string): void {
    try {
      this.authorize(who, 'r', streamId);
    } catch (err) {
      this.counters?.read('access_denied', 0);
      throw err;
    }
  }

  /** The position after the last record readers see. */
  get headPosition(): number {
    return this.store.headPosition;
  }

  resolved(record: EventRecord, resolveLinks: boolean): ResolvedEvent {
    return resolveLinks && record.eventType === '$>' ? this.store.resolveLink(record) : { event: record };
  }
}

export interface AllRead {
  readonly events: ResolvedEvent[];
  readonly nextPosition: number;
  readonly isEnd: boolean;
}

/** The result an append that failed is counted under. */
function appendRefusal(err: unknown): CountedAppend {
  if (err instanceof WrongExpectedVersionError) return 'wrong_expected_version';
  if (err instanceof StreamDeletedError) return 'stream_deleted';
  if (err instanceof AccessDeniedError) return 'access_denied';
  return 'other';
}

function readResultOf(status: StreamPage['status'] | SingleEvent['status']): ReadResult {
  return status === 'ok' ? 'ok' : status === 'deleted' ? 'deleted' : 'not_found';
}
