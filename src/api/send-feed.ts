import { Readable } from 'node:stream';
import type { ServerResponse } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { originalOf, PackedPlaces, type ResolvedEvent } from '../store/index.js';
import { feedPieces, parseEmbed, type FeedHead, type FeedPieces, type Lease } from './atom.js';
import type { SendQueue } from './send-queue.js';
import type { ApiContext } from './context.js';

// Sends a feed page. A page that fits in one part goes out in one piece with its Content-Length,
// as ever. A bigger one is written in parts (chunked transfer encoding): each part is made in its
// turn (send-queue.ts: the pages share ~1 ms of each turn of the event loop) and only once the
// socket has taken the part before, so a page costs the event loop one part at a time, and a
// client that stops reading holds one part until the timeout closes its connection. A page read
// from the store is held as the places of its records in the log (packed: ~9 bytes an entry), and its
// entries are read back a part's worth at a time. The bytes are those of the one-piece document:
// atom.ts makes both from the same pieces.

/**
 * Characters of a part: ~0.3-1 ms of the event loop to make (a 1,000-entry page of 5 KB events
 * at embed=body, 10 MB of JSON, took 110-380 ms in one piece on a busy 2-core machine), and
 * small beside the kernel's buffers of a socket.
 */
export const PART_CHARS = 64 * 1024;

/** The entries of a page, newest first, taken a few at a time. */
export interface EntrySource {
  readonly remaining: number;
  /** The next `n` entries or fewer (fewer where their records are gone); none only when none remain. */
  take(n: number): ResolvedEvent[];
  /** The page turned out big: entries not taken yet need not be held in memory any more. */
  letGo(): void;
}

/** Entries held in memory (a subscription's messages: held by its group anyway). */
export function entriesInMemory(entries: readonly ResolvedEvent[]): EntrySource {
  let next = 0;
  return {
    get remaining() { return entries.length - next; },
    take: (n) => entries.slice(next, (next = Math.min(next + n, entries.length))),
    letGo: () => undefined,
  };
}

/** Reads entries `from` to `to` (exclusive) of a page back, as entries (those whose records a scavenge removed since are left out). */
export type EntryReader = (from: number, to: number) => ResolvedEvent[];

/**
 * A store page's entries as the places of their records (an entry's own record: the link, when
 * the read resolved it), with the first entries as read (`loaded`, for the first part); those
 * not taken when the page is let go are read back from their places.
 */
export class StoredEntries implements EntrySource {
  private next = 0;

  constructor(private readonly count: number, private readonly reread: EntryReader, private loaded: readonly ResolvedEvent[] = []) {}

  get remaining(): number {
    return this.count - this.next;
  }

  take(n: number): ResolvedEvent[] {
    const from = this.next;
    this.next = Math.min(from + n, this.count);
    if (this.next <= this.loaded.length) return this.loaded.slice(from, this.next);
    const held = this.loaded.slice(from);
    return held.concat(this.reread(from + held.length, this.next));
  }

  letGo(): void {
    this.loaded = [];
  }
}

/** A store page read: its entries (newest first) held as packed places, with those as read. */
export function storedPage(ctx: Pick<ApiContext, 'store' | 'verbs'>, entries: readonly ResolvedEvent[], resolveLinks: boolean): StoredEntries {
  const places = new PackedPlaces(entries.length);
  for (const e of entries) places.push(originalOf(e));
  return new StoredEntries(places.length, rereadFromStore(ctx, places, resolveLinks), entries);
}

/** Reads a store page's entries back from their places as the read showed them: the record, with its link's target when the read resolved links. */
export function rereadFromStore(ctx: Pick<ApiContext, 'store' | 'verbs'>, places: PackedPlaces, resolveLinks: boolean): EntryReader {
  return (from, to) => ctx.store.recordsAtPacked(places, from, to).flatMap((r) => (r ? [ctx.verbs.streams.resolved(r, resolveLinks)] : []));
}

/** Sends a feed page in the negotiated representation (`?embed=` picks how much of each entry the JSON carries). */
export async function sendFeed(reply: FastifyReply, req: FastifyRequest, base: string, mediaType: string, head: FeedHead,
  entries: EntrySource, options: { sends: SendQueue; leases?: readonly Lease[] }): Promise<FastifyReply> {
  const embed = parseEmbed((req.query as Record<string, string | undefined>).embed);
  const parts = new FeedParts(feedPieces(base, mediaType, head, embed), entries, options.leases);
  const first = await options.sends.forPage(entries.remaining, () => parts.next());
  reply.type(`${mediaType}; charset=utf-8`);
  if (parts.done) return reply.send(first);
  entries.letGo();
  if (req.method === 'HEAD') return reply.send(Readable.from([]));
  return reply.send(new PageBody(first, parts, options.sends, reply.raw));
}

/** The parts of one feed document, made on demand. */
class FeedParts {
  private batch: ResolvedEvent[] = [];
  private inBatch = 0;
  private written = 0;
  private opened = false;
  /**
   * Characters an entry takes: the rest of a part's worth of entries is read at a time (a guess
   * of 8 KiB until one is written: entries taken and not written are held while a client waits).
   */
  private charsPerEntry = 8 * 1024;
  done = false;

  constructor(private readonly pieces: FeedPieces, private readonly entries: EntrySource, private readonly leases?: readonly Lease[]) {}

  /** The next part: at least one entry (or the rest), about PART_CHARS characters. */
  next(): string {
    let text = '';
    if (!this.opened) {
      text = this.pieces.opening;
      this.opened = true;
    }
    const start = text.length;
    let count = 0;
    while (text.length < PART_CHARS || count === 0) {
      const e = this.take(text.length);
      if (e === undefined) break;
      if (this.written > 0) text += this.pieces.separator;
      text += this.pieces.entry(e, this.leases?.[this.written]);
      this.written++;
      count++;
      this.charsPerEntry = (text.length - start) / count;
    }
    if (this.inBatch === this.batch.length && this.entries.remaining === 0) {
      text += this.pieces.closing;
      this.done = true;
    }
    return text;
  }

  private take(partChars: number): ResolvedEvent | undefined {
    while (this.inBatch === this.batch.length) {
      if (this.entries.remaining === 0) return undefined;
      this.batch = this.entries.take(Math.max(1, Math.ceil((PART_CHARS - partChars) / this.charsPerEntry)));
      this.inBatch = 0;
    }
    return this.batch[this.inBatch++];
  }
}

/**
 * The body of a page written in parts. Its high-water mark of 0 makes a part only when the
 * response asks for one: at the start, and after the socket took the part before (a paused pipe
 * asks nothing). A part left untaken for the queue's timeout closes the connection.
 */
class PageBody extends Readable {
  private pending: string | undefined;
  private stall: NodeJS.Timeout | undefined;
  private finished = false;

  constructor(first: string, private readonly parts: FeedParts, private readonly sends: SendQueue, private readonly res: ServerResponse) {
    super({ highWaterMark: 0 });
    this.pending = first;
    sends.add(this, res);
    // The page counts until the response is done: its last part may still sit in the socket.
    const done = () => this.finish();
    res.once('finish', done);
    res.once('close', done);
  }

  get bufferedBytes(): number {
    return this.readableLength + (this.res.socket?.writableLength ?? 0);
  }

  override _read(): void {
    clearTimeout(this.stall);
    this.sends.request(this.make, true);
  }

  private readonly make = (): void => {
    if (this.destroyed || this.finished) return;
    let text: string;
    try {
      text = this.pending ?? this.parts.next();
    } catch (err) {
      this.sends.failed(err as Error);
      this.destroy(err as Error);
      return;
    }
    this.pending = undefined;
    this.push(Buffer.from(text, 'utf8'));
    if (this.parts.done) this.push(null);
    this.stall = setTimeout(() => this.notReading(), this.sends.timeoutMs);
  };

  private notReading(): void {
    if (this.finished) return;
    this.sends.countClosedNotReading();
    this.res.destroy();
  }

  private finish(): void {
    if (this.finished) return;
    this.finished = true;
    clearTimeout(this.stall);
    this.sends.remove(this);
  }

  override _destroy(err: Error | null, callback: (error?: Error | null) => void): void {
    this.finish();
    callback(err);
  }
}
