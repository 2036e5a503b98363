import { decodeRecord, inSystemStream, type EventRecord, type RecordSieve } from './record.js';
import type { LogSpaces } from './log-spaces.js';
import type { ForwardRead, PackedRows } from './log-read-thread.js';

// The log read once for many readers. Projections catching up read the same records: twenty of
// them near the same place in the log each scanned RocksDB (~3 µs a row through the binding) and
// decoded every record again, which was most of the time twenty projections took to catch up
// together. This keeps aligned blocks of positions for every reader, as the records' bytes in one
// buffer (decoding is cheap next to a RocksDB read, and decoded records kept long would cost the
// GC and twice the memory): a reader at any position inside a block takes its records from
// there, whoever read it first. A
// block is kept only once the log has passed its end, so it cannot grow any more; a scavenge
// drops the blocks it removed records from (forgetThrough). Bounded in bytes
// (--shared-read-cache-size).
// Readers drift apart (a counter over $all runs many times faster than a query with 100,000
// partitions, and twenty of them on two cores get uneven shares), and once they are further apart
// than the cache holds, each reads every block on its own again (measured: the log read 10-20
// times over, whichever block went first). So they move as a convoy: the block that goes to make
// room is the one whose next reader is furthest behind it (a block every reader has passed goes
// first), and a reader that others follow waits (mustWait) while that block would be needed by
// the slowest reader sooner than the one it is about to read; the slowest never waits. A reader
// that has not read for a while (stopped, stuck) is not waited for. The convoy ends as fast as its
// slowest member: when the catch-up of all of them would end anyway, with the log read once
// (measured, 20 projections over 100,000 events: the log read ~6 times over and 21 s without the
// convoy, once and 11 s with it).
// Readers that skip system streams (queries over $all) read blocks of the user records only
// (log-spaces.ts); the others, blocks of the whole log. The two kinds are cached side by side,
// and a reader waits only for slower readers of its own kind.
// Reading ahead: a block read from RocksDB on the event loop cost a projection catching up after a
// restart ~40% of the loop's time (~3.7 µs an event of ~9; bench/projections.ts, over HTTP). So
// once a reader reads inside a block, the blocks after it are read on the log-read thread
// (log-read-thread.ts), while the loop hands out this one and the sandbox runs; a reader about to
// need a block in flight waits for it (landing) rather than reading it a second time. A block read
// ahead is kept like any other, only where there is room or a block every reader has passed.

/** Log bytes per block: ~3,000 records of ~170 bytes, one RocksDB scan of a few ms. */
export const BLOCK_BYTES = 512 * 1024;
/** Bytes counted per record beyond its encoded size: its position and offset in the block. */
const RECORD_OVERHEAD = 12;
/** A reader this close to the end of the log is live, not catching up, and waits for nobody. */
const LIVE_BYTES = 16 * BLOCK_BYTES;
/** A reader that has not read for this long (stopped, stuck) no longer keeps blocks for itself. */
const INACTIVE_MS = 5000;
/** Bytes counted per block whatever it holds (an empty block, where the log jumped a chunk boundary, costs its entry). */
const BLOCK_OVERHEAD = 256;

interface Block {
  /** Position of each record, ascending. */
  positions: Float64Array;
  /** Offset of each record in `data`, and the end. */
  offsets: Uint32Array;
  /** 1 where the record is in a stream a `fromAll` source skips (inSystemStream): in LOG, only below the split. */
  system: Uint8Array;
  data: Buffer;
  bytes: number;
}

/** Blocks a reader inside block b has read for it ahead of time, at most: b+1 .. b+READ_AHEAD. */
const READ_AHEAD = 2;

/** Where blocks are read ahead (the log-read thread); undefined: read them on the event loop. */
export interface BlockReadAhead {
  forward(read: ForwardRead): Promise<PackedRows | undefined> | undefined;
}

/** A shared read: the records, and where the next read starts. */
export interface SharedRead {
  records: EventRecord[];
  /**
   * With `skipSystem`: the log bytes of the records left out just before each record (gaps[i]
   * before records[i]), and after the last one (the last element).
   */
  gaps: number[] | undefined;
  /** With a sieve: the records it left out just before each record, and after the last (the last element). */
  sieved: number[] | undefined;
  /** Records covered, those left out included. */
  scanned: number;
  nextPosition: number;
}

export interface SharedBlockCounters {
  /** Records handed out of blocks (those left out by skipSystem included). */
  hits: number;
  /** Records read from RocksDB into a block. */
  reads: number;
  /** Of those, records read ahead on the log-read thread. */
  readAhead: number;
}

export class SharedBlocks {
  /** Block key (blockKey: number and kind) -> block. */
  private readonly blocks = new Map<number, Block>();
  private bytes = 0;
  /** Each reader: the position it reads next, when it last read (performance.now()), and its kind of block. */
  private readonly readers = new Map<object, { position: number; at: number; userOnly: boolean }>();
  /** Readers waiting in the convoy, woken when a reader moves to another block or leaves. */
  private waiters: (() => void)[] = [];
  readonly counters: SharedBlockCounters = { hits: 0, reads: 0, readAhead: 0 };
  /** Blocks being read ahead (block key -> done, whether or not it was kept). */
  private readonly landing = new Map<number, Promise<void>>();
  /** Moves on with every forgetThrough: a block read ahead before it may hold removed records, and is dropped. */
  private generation = 0;
  private ahead: BlockReadAhead | undefined;

  constructor(private readonly spaces: LogSpaces, private readonly capacityBytes: number) {}

  /** Reads blocks ahead of their readers on `ahead` (the log-read thread) from now on. */
  readAheadOn(ahead: BlockReadAhead): void {
    this.ahead = ahead;
  }

  /**
   * Resolves once the block holding `position`, or the next (a page read reaches into it), lands,
   * if it is being read ahead now; undefined otherwise.
   */
  landingAt(position: number, skipSystem = false): Promise<void> | undefined {
    const b = Math.floor(Math.max(0, position) / BLOCK_BYTES);
    return this.landing.get(blockKey(b, skipSystem)) ?? this.landing.get(blockKey(b + 1, skipSystem));
  }

  /** Whether the block holding `position` is in memory, or on its way from the log-read thread. */
  holds(position: number, skipSystem = false): boolean {
    const key = blockKey(Math.floor(Math.max(0, position) / BLOCK_BYTES), skipSystem);
    return this.blocks.has(key) || this.landing.has(key);
  }

  /**
   * Up to `count` records from `position` on, from the blocks that end at or below `head` (the
   * end of the durable log): fewer when the read reaches the block the log is still writing.
   * `reader` identifies a reader that reads on from here: the blocks ahead of it are kept for it.
   * `keep`: the read ends after this many records kept (the sieve's passed; the rest are scanned).
   */
  read(position: number, count: number, head: number, reader?: object, skipSystem = false, sieve?: RecordSieve, keep = Infinity): SharedRead {
    const out: EventRecord[] = [];
    const gaps: number[] | undefined = skipSystem || sieve ? [] : undefined;
    const sieved: number[] | undefined = sieve ? [] : undefined;
    const result: SharedRead = { records: out, gaps, sieved, scanned: 0, nextPosition: position };
    if (this.capacityBytes <= 0) return result;
    if (reader) this.register(reader, position, performance.now(), skipSystem);
    // The end of the last record handed out (or the start): a gap is what lies between two.
    let end = Math.max(0, position);
    let scanned = 0;
    let left = 0;
    for (let b = Math.floor(Math.max(0, position) / BLOCK_BYTES); scanned < count && out.length < keep && (b + 1) * BLOCK_BYTES <= head; b++) {
      const block = this.block(b, skipSystem);
      let i = firstAtOrAfter(block.positions, result.nextPosition);
      const { positions, offsets, data, system } = block;
      for (; i < positions.length && scanned < count && out.length < keep; i++) {
        scanned++;
        result.nextPosition = positions[i] + offsets[i + 1] - offsets[i];
        // A reader that skips system streams never decodes their records, nor one its sieve refuses.
        if (skipSystem && system[i] === 1) continue;
        if (sieve && !sieve(data, offsets[i])) {
          left++;
          continue;
        }
        if (gaps) gaps.push(positions[i] - end);
        if (sieved) {
          sieved.push(left);
          left = 0;
        }
        end = result.nextPosition;
        out.push(decodeRecord(positions[i], data, offsets[i], offsets[i + 1]));
      }
      // A block read to its end: the next read starts at the next block (or after a record
      // reaching into it); a block of user records may hold none, where only system records are.
      if (i === positions.length) result.nextPosition = Math.max(result.nextPosition, (b + 1) * BLOCK_BYTES);
    }
    sieved?.push(left);
    gaps?.push(Math.max(0, result.nextPosition - end));
    result.scanned = scanned;
    this.counters.hits += scanned;
    if (reader && scanned > 0) {
      const next = Math.floor(result.nextPosition / BLOCK_BYTES);
      for (let b = next; b <= next + READ_AHEAD; b++) this.readAhead(b, skipSystem, head);
    }
    return result;
  }

  /**
   * Starts reading block `b` on the log-read thread, unless it is cached or on its way, the log
   * has not passed its end yet, or there is no room for it without pushing out a block some
   * reader still needs.
   */
  private readAhead(b: number, userOnly: boolean, head: number): void {
    const key = blockKey(b, userOnly);
    if (!this.ahead || this.blocks.has(key) || this.landing.has(key) || (b + 1) * BLOCK_BYTES > head) return;
    if (this.bytes + BLOCK_BYTES > this.capacityBytes && this.victim(key)?.distance !== Infinity) return;
    const reading = this.ahead.forward({ from: b * BLOCK_BYTES, limit: undefined, to: (b + 1) * BLOCK_BYTES, userOnly });
    if (!reading) return;
    const generation = this.generation;
    this.landing.set(key, reading.then((rows) => {
      this.landing.delete(key);
      if (!rows || generation !== this.generation || this.blocks.has(key)) return;
      const { count, positions, offsets, bytes } = rows;
      const system = new Uint8Array(count);
      for (let i = 0; i < count; i++) system[i] = inSystemStream(bytes, offsets[i]) ? 1 : 0;
      this.counters.reads += count;
      this.counters.readAhead += count;
      this.keep(key, { positions, offsets, data: bytes, system, bytes: BLOCK_OVERHEAD + offsets[count] + count * (RECORD_OVERHEAD + 1) });
    }));
  }

  /**
   * Whether `reader`, about to read at `position`, should wait for slower readers: the block there
   * (or the next, which a page read reaches into) is complete and not cached, the cache is full,
   * another reader is in an earlier block, and the block that would go to make room is one the
   * slowest of those needs sooner than this one. Readers in the lowest block never wait, nor do
   * readers near the head.
   */
  mustWait(reader: object, position: number, head: number, skipSystem = false): boolean {
    const now = performance.now();
    this.register(reader, position, now, skipSystem);
    if (this.capacityBytes <= 0) return false;
    // Near the head a reader follows the live log: it never waits for one catching up behind it.
    if (head - position < LIVE_BYTES) return false;
    // A read of a page (a few thousand records) reaches into the next block at most.
    const current = Math.floor(Math.max(0, position) / BLOCK_BYTES);
    let b = current;
    if (this.blocks.has(blockKey(b, skipSystem))) b++;
    if (this.blocks.has(blockKey(b, skipSystem)) || (b + 1) * BLOCK_BYTES > head || this.bytes + BLOCK_BYTES <= this.capacityBytes) return false;
    let slowest = Infinity;
    for (const [other, { position: at, at: when, userOnly }] of this.readers) {
      if (other !== reader && userOnly === skipSystem && now - when < INACTIVE_MS && at < current * BLOCK_BYTES && at < slowest) slowest = at;
    }
    if (slowest === Infinity) return false; // nobody behind: the slowest reader never waits
    // The block that would make room goes if the slowest reader needs it later than this one (or
    // never: every reader has passed it); if it needs it sooner, reading on would push out a block
    // it is about to read, and this reader waits.
    const victim = this.victim(blockKey(b, skipSystem));
    return victim !== undefined && victim.distance <= b * BLOCK_BYTES - slowest;
  }

  /**
   * Resolves once some reader has moved to another block or left (what a waiting reader waits
   * for), or after `ms` at most.
   */
  progress(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.waiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /** The reader no longer reads in order (stopped, or reading the live end of the log). */
  leave(reader: object): void {
    if (this.readers.delete(reader)) this.wake();
  }

  private register(reader: object, position: number, now: number, userOnly: boolean): void {
    const known = this.readers.get(reader);
    this.readers.set(reader, { position, at: now, userOnly });
    if (known === undefined || Math.floor(known.position / BLOCK_BYTES) !== Math.floor(position / BLOCK_BYTES)) this.wake();
  }

  private wake(): void {
    if (this.waiters.length === 0) return;
    const waiting = this.waiters;
    this.waiters = [];
    for (const resume of waiting) resume();
  }

  /** Drops the blocks holding positions up to `position` (a scavenge removed records there). */
  forgetThrough(position: number): void {
    this.generation++;
    for (const [key, block] of this.blocks) {
      if (blockNumber(key) * BLOCK_BYTES > position) continue;
      this.blocks.delete(key);
      this.bytes -= block.bytes;
    }
  }

  /**
   * The cached block (other than `keep`) read next furthest in the future, and how far behind it
   * the nearest active reader is, in bytes (Infinity: every reader has passed it).
   */
  private victim(keep: number): { block: number; distance: number } | undefined {
    const now = performance.now();
    for (const [reader, { at }] of this.readers) if (now - at > INACTIVE_MS) this.readers.delete(reader);
    let victim: number | undefined;
    let furthest = -1;
    for (const key of this.blocks.keys()) {
      if (key === keep) continue;
      const start = blockNumber(key) * BLOCK_BYTES;
      const userOnly = isUserBlock(key);
      let distance = Infinity;
      for (const { position, userOnly: kind } of this.readers.values()) {
        if (kind === userOnly && position < start + BLOCK_BYTES) distance = Math.min(distance, Math.max(0, start - position));
      }
      if (distance > furthest) {
        furthest = distance;
        victim = key;
        if (distance === Infinity) break; // a block every reader has passed: none goes later
      }
    }
    return victim === undefined ? undefined : { block: victim, distance: furthest };
  }

  /** Block `b` of the user records (`userOnly`) or of the whole log, read if not cached. */
  private block(b: number, userOnly: boolean): Block {
    const key = blockKey(b, userOnly);
    const cached = this.blocks.get(key);
    if (cached) return cached;
    const { positions: found, values } = this.spaces.forward(b * BLOCK_BYTES, undefined, (b + 1) * BLOCK_BYTES, userOnly);
    const positions = Float64Array.from(found);
    const offsets = new Uint32Array(found.length + 1);
    const system = new Uint8Array(found.length);
    let end = 0;
    for (let i = 0; i < found.length; i++) {
      offsets[i] = end;
      end += values[i].length;
      system[i] = inSystemStream(values[i], 0) ? 1 : 0;
    }
    offsets[found.length] = end;
    const data = Buffer.concat(values, end);
    this.counters.reads += found.length;
    const block = { positions, offsets, data, system, bytes: BLOCK_OVERHEAD + end + found.length * (RECORD_OVERHEAD + 1) };
    this.keep(key, block);
    return block;
  }

  /** Caches a block read, pushing out others (victim) while over capacity. */
  private keep(key: number, block: Block): void {
    this.blocks.set(key, block);
    this.bytes += block.bytes;
    while (this.bytes > this.capacityBytes) {
      const victim = this.victim(key);
      if (victim === undefined) break;
      this.bytes -= this.blocks.get(victim.block)!.bytes;
      this.blocks.delete(victim.block);
    }
  }
}

/** The cache key of block `b` of the user records or of the whole log. */
function blockKey(b: number, userOnly: boolean): number {
  return b * 2 + (userOnly ? 0 : 1);
}

function blockNumber(key: number): number {
  return Math.floor(key / 2);
}

function isUserBlock(key: number): boolean {
  return key % 2 === 0;
}

/** Index of the first of ascending `positions` at or after `position` (binary search). */
export function firstAtOrAfter(positions: Float64Array, position: number): number {
  let lo = 0;
  let hi = positions.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (positions[mid] < position) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
