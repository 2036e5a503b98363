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

/** What the queue reports to /stats (svc.feedPages): the stats collector declares its shape. */
export type SendFigures = FeedPageFigures;

export class SendQueue {
  private readonly pages = new Set<PageInFlight>();
  private readonly queue: (() => void)[] = [];
  private scheduled = false;
  private recheck: NodeJS.Timeout | undefined;
  private closedNotReading = 0;

  constructor(readonly limitBytes: number, readonly timeoutMs: number, private readonly log?: Logger) {}

  /** What the pages hold now, measured on their sockets. */
  get bufferedBytes(): number {
    let n = 0;
    for (const page of this.pages) n += page.bufferedBytes;
    return n;
  }

  add(page: PageInFlight): void {
    this.pages.add(page);
  }

  remove(page: PageInFlight): void {
    if (this.pages.delete(page)) this.kick();
  }

  /** Makes a part (`make`) in its turn, once the pages hold less than the budget. */
  request(make: () => void): void {
    this.queue.push(make);
    this.kick();
  }

  /** Runs `work` in its turn; resolves with what it returns. */
  call<T>(work: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => this.request(() => {
      try {
        resolve(work());
      } catch (err) {
        reject(err);
      }
    }));
  }

  /** Runs work for a page of `entries` entries: a small page's now, a big page's in its turn. */
  forPage<T>(entries: number, work: () => T): T | Promise<T> {
    return entries <= INLINE_ENTRIES ? work() : this.call(work);
  }

  /** Something was taken or let go: parts waiting for room may go. */
  kick(): void {
    if (this.scheduled || this.queue.length === 0) return;
    this.scheduled = true;
    setImmediate(this.run);
  }

  private readonly run = (): void => {
    this.scheduled = false;
    const until = performance.now() + SLICE_MS;
    do {
      if (this.bufferedBytes >= this.limitBytes) {
        this.recheck ??= setInterval(() => this.kick(), RECHECK_MS).unref();
        return;
      }
      this.queue.shift()!();
    } while (this.queue.length > 0 && performance.now() < until);
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
      waiting: this.queue.length, closedNotReading: this.closedNotReading,
    };
  }
}
