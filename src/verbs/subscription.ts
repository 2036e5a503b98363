import { StreamDeletedError, type AllPage, type EventRecord, type ResolvedEvent, type Store } from '../store/index.js';
import { ALL_STREAM, type Principal } from '../auth/index.js';
import { matchesFilter, type EventFilter } from '../store/index.js';
import type { StreamVerbs } from './streams.js';

// Catch-up subscriptions, for any door: read what is there page by page, then follow the store's
// commit bus live. The door pulls items (an async generator), so a consumer that stops reading
// stops the catch-up reads: back-pressure comes from the consumer's own write buffer. Live events
// wait in a bounded queue; when it overflows the subscription drops it, says it fell behind, and
// catches up by reading again from the last event it delivered (no memory grows with the log).

export type SubscriptionItem =
  | { readonly kind: 'events'; readonly events: readonly ResolvedEvent[] }
  /** A filtered `$all` subscription has considered the log up to this record's position. */
  | { readonly kind: 'checkpoint'; readonly position: number }
  /** Caught up: live from here. `revision` (a stream) or `position` ($all) of the last event delivered, if any. */
  | { readonly kind: 'caughtUp'; readonly revision?: number; readonly position?: number }
  /** The live queue overflowed: catching up again from the last event delivered. */
  | { readonly kind: 'fellBehind'; readonly revision?: number; readonly position?: number };

export type StreamStart = { kind: 'start' } | { kind: 'end' } | { kind: 'after'; revision: number };
export type AllStart = { kind: 'start' } | { kind: 'end' } | { kind: 'after'; position: number };

export interface SubscribeOptions {
  readonly resolveLinks: boolean;
  readonly signal: AbortSignal;
  /** `$all` only. */
  readonly filter?: EventFilter;
  /** `$all` with a filter: a checkpoint after this many records considered (matching or not); 0: none. */
  readonly checkpointInterval?: number;
}

/** Records read per catch-up page. */
const PAGE = 512;
/** Live records a subscriber may have waiting before it falls behind (and their bytes). */
export const LIVE_QUEUE_RECORDS = 20_000;
export const LIVE_QUEUE_BYTES = 32 * 1024 * 1024;

/** Records committed since it opened, waiting for the subscriber; closes itself when it overflows. */
class LiveTail {
  private queue: EventRecord[] = [];
  private bytes = 0;
  overflowed = false;
  private wake: (() => void) | undefined;
  private readonly unsubscribe: () => void;

  constructor(store: Store, matches: (r: EventRecord) => boolean, private readonly signal: AbortSignal) {
    this.unsubscribe = store.bus.subscribe((commit) => {
      if (this.overflowed) return;
      for (const r of commit.records) {
        if (!matches(r)) continue;
        this.queue.push(r);
        this.bytes += r.size;
      }
      if (this.queue.length > LIVE_QUEUE_RECORDS || this.bytes > LIVE_QUEUE_BYTES) {
        this.overflowed = true;
        this.queue = [];
        this.bytes = 0;
        this.unsubscribe();
      }
      this.notify();
    }, 'a catch-up subscription');
    signal.addEventListener('abort', this.notify, { once: true });
  }

  private readonly notify = (): void => {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  };

  /** The records waiting (at least one), or none once it overflowed or the call ended. */
  async take(): Promise<EventRecord[]> {
    while (this.queue.length === 0 && !this.overflowed && !this.signal.aborted) {
      await new Promise<void>((resolve) => { this.wake = resolve; });
    }
    const taken = this.queue;
    this.queue = [];
    this.bytes = 0;
    return taken;
  }

  close(): void {
    this.unsubscribe();
    this.signal.removeEventListener('abort', this.notify);
  }
}

export class SubscriptionVerbs {
  constructor(private readonly store: Store, private readonly streams: StreamVerbs) {}

  /** Authorizes now (throws AccessDeniedError); the items follow as the consumer pulls them. */
  toStream(who: Principal, streamId: string, start: StreamStart, options: SubscribeOptions): AsyncGenerator<SubscriptionItem> {
    this.streams.authorize(who, 'r', streamId);
    return this.followStream(streamId, start, options);
  }

  toAll(who: Principal, start: AllStart, options: SubscribeOptions): AsyncGenerator<SubscriptionItem> {
    this.streams.authorize(who, 'r', ALL_STREAM);
    return this.followAll(start, options);
  }

  private async *followStream(streamId: string, start: StreamStart, options: SubscribeOptions): AsyncGenerator<SubscriptionItem> {
    const { signal, resolveLinks } = options;
    const lastNow = (): number => {
      const page = this.store.readStreamBackward(streamId, -1, 1, false);
      if (page.status === 'deleted') throw new StreamDeletedError(streamId);
      return page.status === 'ok' ? page.lastEventNumber : -1;
    };
    // `last`: the revision delivered last (or the start's); the next read starts after it.
    let last = start.kind === 'start' ? -1 : start.kind === 'after' ? start.revision : lastNow();
    const deliver = function* (events: ResolvedEvent[]): Generator<SubscriptionItem> {
      if (events.length === 0) return;
      last = (events[events.length - 1].link ?? events[events.length - 1].event)!.eventNumber;
      yield { kind: 'events', events };
    };
    const readPage = (): { events: ResolvedEvent[]; atEnd: boolean } => {
      const page = this.store.readStreamForward(streamId, last + 1, PAGE, resolveLinks);
      if (page.status === 'deleted') throw new StreamDeletedError(streamId);
      if (page.status === 'noStream') return { events: [], atEnd: true };
      // Events a read hides ($maxAge) leave gaps: the next page starts after the range read.
      const events = page.events.filter((e) => (e.link ?? e.event)!.eventNumber > last);
      const reached = Math.min(last + PAGE, page.lastEventNumber);
      if (events.length === 0 && reached > last) last = reached;
      return { events, atEnd: page.isEndOfStream };
    };
    while (!signal.aborted) {
      for (;;) {
        const { events, atEnd } = readPage();
        yield* deliver(events);
        if (atEnd || signal.aborted) break;
      }
      // Follow the bus first, then read once more: nothing committed in between is missed.
      const tail = new LiveTail(this.store, (r) => r.streamId === streamId, signal);
      try {
        const { events, atEnd } = readPage();
        yield* deliver(events);
        if (!atEnd) continue;
        yield { kind: 'caughtUp', ...(last >= 0 ? { revision: last } : {}) };
        for (;;) {
          const records = await tail.take();
          if (signal.aborted) return;
          if (tail.overflowed) {
            yield { kind: 'fellBehind', ...(last >= 0 ? { revision: last } : {}) };
            break;
          }
          if (records.some((r) => r.tombstone)) throw new StreamDeletedError(streamId);
          yield* deliver(records.filter((r) => r.eventNumber > last).map((r) => this.streams.resolved(r, resolveLinks)));
        }
      } finally {
        tail.close();
      }
    }
  }

  private async *followAll(start: AllStart, options: SubscribeOptions): AsyncGenerator<SubscriptionItem> {
    const { signal, resolveLinks, filter } = options;
    const interval = filter ? options.checkpointInterval ?? 0 : 0;
    // `next`: where the next read starts; `after`: records at or before it were delivered or skipped.
    let after = start.kind === 'after' ? start.position : -1;
    let next = start.kind === 'start' ? 0 : start.kind === 'end' ? this.store.headPosition : start.position;
    let lastDelivered: number | undefined = start.kind === 'end' ? this.store.headPosition : start.kind === 'after' ? start.position : undefined;
    let considered = 0;
    let lastCheckpoint = -1;
    const process = function* (records: readonly EventRecord[], resolve: (r: EventRecord) => ResolvedEvent): Generator<SubscriptionItem> {
      let batch: ResolvedEvent[] = [];
      for (const r of records) {
        if (r.position <= after) continue;
        after = r.position;
        if (!filter || matchesFilter(filter, r)) {
          batch.push(resolve(r));
          lastDelivered = r.position;
        }
        if (interval > 0 && ++considered >= interval) {
          considered = 0;
          if (batch.length > 0) yield { kind: 'events', events: batch };
          batch = [];
          if (r.position > lastCheckpoint) {
            lastCheckpoint = r.position;
            yield { kind: 'checkpoint', position: r.position };
          }
        }
      }
      if (batch.length > 0) yield { kind: 'events', events: batch };
    };
    const resolve = (r: EventRecord): ResolvedEvent => this.streams.resolved(r, resolveLinks);
    // The next page is read (off the event loop when it is older than the log tail) while the
    // consumer takes this one.
    let ahead: Promise<AllPage> | undefined;
    const readAhead = () => {
      const read = this.store.readAllForwardOffThread(next, PAGE);
      read.catch(() => undefined); // (awaited below, or dropped when the subscription ends)
      return read;
    };
    const readPage = async (): Promise<boolean> => {
      const page = await (ahead ?? readAhead());
      ahead = undefined;
      pageRecords = page.records;
      next = page.nextPosition;
      if (!page.isEnd) ahead = readAhead();
      return page.isEnd;
    };
    let pageRecords: readonly EventRecord[] = [];
    while (!signal.aborted) {
      for (;;) {
        const atEnd = await readPage();
        yield* process(pageRecords, resolve);
        if (atEnd || signal.aborted) break;
      }
      const tail = new LiveTail(this.store, () => true, signal);
      try {
        const atEnd = await readPage();
        yield* process(pageRecords, resolve);
        if (!atEnd) continue;
        if (filter && interval > 0 && after > lastCheckpoint) {
          lastCheckpoint = after;
          yield { kind: 'checkpoint', position: after };
        }
        yield { kind: 'caughtUp', ...(lastDelivered !== undefined ? { position: lastDelivered } : {}) };
        for (;;) {
          const records = await tail.take();
          if (signal.aborted) return;
          if (tail.overflowed) {
            next = after < 0 ? 0 : after;
            ahead = undefined;
            yield { kind: 'fellBehind', ...(lastDelivered !== undefined ? { position: lastDelivered } : {}) };
            break;
          }
          yield* process(records, resolve);
        }
      } finally {
        tail.close();
      }
    }
  }
}
