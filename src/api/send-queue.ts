import type { Logger } from 'pino';
import type { FeedPageFigures } from '../stats/index.js';

// How big feed pages (send-feed.ts) share the event loop and memory. Every big page asks this
// queue for each slice of its read and each part it writes; the queue runs them in turn, for
// ~1 ms of a turn of the event loop at most, so requests of other clients wait for at most about
// one part however many pages are being read and written. Memory: a page asks for a part only
// once its socket has taken the one before, so a connection holds about one part; the queue
// bounds the sum (--http-send-buffer-size): while the bytes made and not yet taken by the kernel
// reach it, nothing is made until some are taken or their connections close (first come, first
// served). A connection that leaves a part untaken for --http-send-timeout is closed
// (send-feed.ts), which frees what it held: clients that never read cannot hold the budget for
// longer than that.
//
// Big pages stand back for other clients. While pages are read as fast as their clients take
// them the event loop is always busy, and the operating system makes it wait on a busy machine
// like any other busy thread: 50 clients reading 1,000-event pages at full speed on two cores held
// appends' p99 at 2.1-3.1x its quiet figure, with turns of ~1 ms (bench/big-reads.ts). So the
// queue has two lanes: a page's first part (or its first slice) goes first, and the later work
// of big pages after it; while a request that was not a big page was answered in the last
// OTHERS_RECENT_MS, each turn of later work is followed by a rest three times its length (the
// big pages take at most a quarter of the event loop; measured: 1.28-1.57x in 30-s phases, 19 of
// 22 runs under 2x in all, the readers still getting 79-127 MB/s). With no other client, big
// pages go at full speed. /stats svc.feedPages.yieldedMs adds up the time they stood back.

/**
 * Pages of at most this many entries (the default page is 20) are read and written in their
 * request's own turn, as they cost about what a part costs; bigger ones take turns here.
 */
export const INLINE_ENTRIES = 32;

/** A page being written: the bytes it has made that its client has not taken yet. */
export interface PageInFlight {
  readonly bufferedBytes: number;
}

/**
 * Parts are made for this long in one turn of the event loop (at least one part): a part of
 * 64 KiB takes ~0.3-1 ms, so the queue adds ~1 ms plus a part to what another request waits.
 */
const SLICE_MS = 1;
/**
 * While the budget is full, the queue looks again this often as well as when a page ends or takes
 * a step: bytes leave a socket's buffer without an event when its write did not ask for a drain.
 */
const RECHECK_MS = 20;
/**
 * Other requests answered this recently make pages stand back: clients that keep asking (an
 * appender, a poller) are protected, and one request a second (a dashboard's /stats) holds a big
 * page back for a fifth of the time, not all of it.
 */
const OTHERS_RECENT_MS = 200;
/** While they do, a turn of parts is followed by a rest this many times its length (pages take at most 1/(1+3) of the event loop). */
const REST_PER_TURN = 3;
/** A rest lasts at most this long (a part that took long is not followed by a long stall). */
const MAX_REST_MS = 20;

/** What the queue reports to /stats (svc.feedPages): the stats collector declares its shape. */
export type SendFigures = FeedPageFigures;

export class SendQueue {
  private readonly pages = new Set<PageInFlight>();
  /** The responses pages are written to (their answer is not another client's). */
  private readonly pageResponses = new WeakSet<object>();
  /** Work for a page's request: its first slice or its one part (a small page waits on it). */
  private readonly first: (() => void)[] = [];
  /** The later work of big pages: their slices after the first, and their parts after the first. */
  private readonly later: (() => void)[] = [];
  private immediate = false;
  private timer: NodeJS.Timeout | undefined;
  /** When the rest being waited out by `timer` began. */
  private restingSince: number | undefined;
  private recheck: NodeJS.Timeout | undefined;
  private closedNotReading = 0;
  /** When a request that is not a big page was last answered (noteAnswered). */
  private otherAnsweredAt = Number.NEGATIVE_INFINITY;
  /** No `later` work before this time (performance.now()): the rest after the last turn of it. */
  private restUntil = 0;
  private yieldedMs = 0;

  constructor(readonly limitBytes: number, readonly timeoutMs: number, private readonly log?: Logger) {}

  /** What the pages hold now, measured on their sockets. */
  get bufferedBytes(): number {
    let n = 0;
    for (const page of this.pages) n += page.bufferedBytes;
    return n;
  }

  /** A page is being written to `response`. */
  add(page: PageInFlight, response: object): void {
    this.pages.add(page);
    this.pageResponses.add(response);
  }

  /** A request was answered on `response`: unless it was a big page, big pages stand back for a while (see above). */
  noteAnswered(response?: object): void {
    if (response === undefined || !this.pageResponses.has(response)) this.otherAnsweredAt = performance.now();
  }

  remove(page: PageInFlight): void {
    if (this.pages.delete(page)) this.kick();
  }

  /** Makes a part (`make`) in its turn, once the pages hold less than the budget; `more`: a big page's later part. */
  request(make: () => void, more = false): void {
    (more ? this.later : this.first).push(make);
    this.kick();
  }

  /** Runs `work` in its turn; resolves with what it returns. */
  call<T>(work: () => T, more = false): Promise<T> {
    return new Promise<T>((resolve, reject) => this.request(() => {
      try {
        resolve(work());
      } catch (err) {
        reject(err);
      }
    }, more));
  }

  /** Runs work for a page of `entries` entries: a small page's now, a big page's in its turn. */
  forPage<T>(entries: number, work: () => T): T | Promise<T> {
    return entries <= INLINE_ENTRIES ? work() : this.call(work);
  }

  /** Something was taken or let go: parts waiting for room may go. */
  kick(): void {
    if (this.immediate) return;
    const wait = this.first.length > 0 ? 0 : this.later.length > 0 ? this.restUntil - performance.now() : undefined;
    if (wait === undefined) return;
    if (wait > 0) {
      if (this.timer) return;
      this.restingSince = performance.now();
      this.timer = setTimeout(this.run, wait);
      return;
    }
    this.stopTimer();
    this.immediate = true;
    setImmediate(this.run);
  }

  private stopTimer(): void {
    if (this.restingSince !== undefined) this.yieldedMs += performance.now() - this.restingSince;
    this.restingSince = undefined;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private readonly run = (): void => {
    this.immediate = false;
    this.stopTimer();
    const started = performance.now();
    const until = started + SLICE_MS;
    let laterUsed = 0;
    for (;;) {
      if (this.bufferedBytes >= this.limitBytes) {
        this.recheck ??= setInterval(() => this.kick(), RECHECK_MS).unref();
        return;
      }
      const now = performance.now();
      if (now >= until) break;
      const work = this.first.shift();
      if (work) {
        work();
        continue;
      }
      if (this.later.length === 0 || now < this.restUntil) break;
      this.later.shift()!();
      laterUsed += performance.now() - now;
    }
    if (laterUsed > 0 && performance.now() - this.otherAnsweredAt < OTHERS_RECENT_MS) {
      this.restUntil = performance.now() + Math.min(MAX_REST_MS, laterUsed * REST_PER_TURN);
    }
    if (this.recheck) {
      clearInterval(this.recheck);
      this.recheck = undefined;
    }
    this.kick();
  };

  countClosedNotReading(): void {
    this.closedNotReading++;
  }

  /** A page could not make its next part (its response is cut off: its headers are sent). */
  failed(err: Error): void {
    this.log?.error({ err }, 'a feed page could not be written to its end; its connection is closed');
  }

  figures(): SendFigures {
    return {
      pages: this.pages.size, bufferedBytes: this.bufferedBytes, limitBytes: this.limitBytes,
      waiting: this.first.length + this.later.length, closedNotReading: this.closedNotReading, yieldedMs: Math.round(this.yieldedMs),
    };
  }
}
