// The tail of the log, kept in memory as the encoded record bytes of the latest commits. Reads
// of recent data (projections following or catching up, subscriptions, feeds of hot streams)
// decode from here instead of going through RocksDB, whose binding costs ~3 µs per row read.
// Filled only after a commit is durable; bounded in bytes, oldest records dropped first. Records
// are packed into slabs of 1 MiB (one buffer and two typed arrays each), whatever the size of the
// commits: a node taking single-event appends made one segment of five objects per commit, tens
// of thousands of them alive, each promoted and later dropped by the GC's major collections
// (measured: a third of them and most of the append latency's p99 at half load).
// The newest records are also kept decoded: every projection and subscription following the
// log reads the same records, and decoding each one once per reader was the largest cost with
// 25 projections live (measured: 1.8 s of 11 s in readAllForward at 1,000 appends/s).
// It also knows where each stream's cached events are: they are the stream's newest, so a stream
// read within them needs no index scan in RocksDB (20 index rows cost ~50 µs there, about a fifth
// of a 20-event page read in bench (c)). A scavenge drops the slabs holding records it removed
// (forgetThrough), their places in the stream tails with them.

import { strict as assert } from 'node:assert';
import { decodeRecord, streamPlaceOf, type EventRecord } from './record.js';

interface Slab {
  /** Position of each record, ascending (the first `count` entries). */
  positions: Float64Array;
  /** Byte offset of each record in `bytes`, and the end of the last. */
  offsets: Uint32Array;
  bytes: Buffer;
  count: number;
  /** The stream tail each record is in (undefined for tombstones), to forget it when the slab goes. */
  tails: (StreamTail | undefined)[];
  /** Records decoded so far (only while the slab is among the newest). */
  decoded?: (EventRecord | undefined)[];
}

/**
 * The cached events of one stream: the newest ones, so a run of event numbers without a gap.
 * positions[i] is the position of event number first + i; those before `head` are evicted.
 */
interface StreamTail {
  streamId: string;
  first: number;
  positions: number[];
  head: number;
}

/** Bytes of a slab: a 16th of the cache, from 1 KiB to 1 MiB (a larger record gets a slab of its own size). */
const SLAB_BYTES = 1024 * 1024;
const MIN_SLAB_BYTES = 1024;
const SLAB_OVERHEAD = 256;
/** Bytes counted per record: its position and offset. */
const RECORD_OVERHEAD = 12;
const STREAM_TAIL_OVERHEAD = 128;
/** Slabs kept decoded (the newest): enough for readers following the tail, few enough for the GC. */
const DECODED_SLABS = 2;

export class LogTailCache {
  private slabs: Slab[] = [];
  private first = 0; // index of the oldest live slab
  private size = 0;
  private readonly streams = new Map<string, StreamTail>();

  private readonly slabBytes: number;
  /** Records a new slab's arrays have room for (they double as needed). */
  private readonly slabRecords: number;

  constructor(private readonly capacityBytes: number) {
    this.slabBytes = Math.max(MIN_SLAB_BYTES, Math.min(SLAB_BYTES, Math.floor(capacityBytes / 16)));
    this.slabRecords = Math.max(16, this.slabBytes >>> 7);
  }

  /** Adds one commit's records (ascending positions, all after what is cached). */
  add(positions: readonly number[], records: readonly Buffer[]): void {
    if (this.capacityBytes <= 0 || positions.length === 0) return;
    for (let i = 0; i < records.length; i++) {
      const slab = this.slabFor(records[i].length);
      const at = slab.count++;
      const start = slab.offsets[at];
      records[i].copy(slab.bytes, start);
      slab.positions[at] = positions[i];
      slab.offsets[at + 1] = start + records[i].length;
      slab.tails.push(this.indexRecord(positions[i], slab.bytes, start));
    }
    while (this.size > this.capacityBytes && this.first < this.slabs.length - 1) this.evictOldest();
    if (this.first > 1024 && this.first * 2 > this.slabs.length) {
      this.slabs = this.slabs.slice(this.first);
      this.first = 0;
    }
  }

  /** The newest slab if `bytes` more fit in it (its arrays grown if need be), else a new one. */
  private slabFor(bytes: number): Slab {
    let slab = this.first < this.slabs.length ? this.slabs[this.slabs.length - 1] : undefined;
    if (slab && slab.offsets[slab.count] + bytes <= slab.bytes.length) {
      if (slab.count === slab.positions.length) {
        const positions = new Float64Array(slab.positions.length * 2);
        positions.set(slab.positions);
        const offsets = new Uint32Array(positions.length + 1);
        offsets.set(slab.offsets);
        this.size += slab.positions.length * RECORD_OVERHEAD;
        slab.positions = positions;
        slab.offsets = offsets;
      }
      return slab;
    }
    slab = {
      positions: new Float64Array(this.slabRecords), offsets: new Uint32Array(this.slabRecords + 1),
      bytes: Buffer.allocUnsafeSlow(Math.max(this.slabBytes, bytes)), count: 0, tails: [],
    };
    this.slabs.push(slab);
    this.size += slab.bytes.length + this.slabRecords * RECORD_OVERHEAD + SLAB_OVERHEAD;
    // Only the newest slabs stay decoded.
    const old = this.slabs.length - 1 - DECODED_SLABS;
    if (old >= this.first) this.slabs[old].decoded = undefined;
    return slab;
  }

  private evictOldest(): void {
    const old = this.slabs[this.first];
    this.size -= old.bytes.length + old.positions.length * RECORD_OVERHEAD + SLAB_OVERHEAD;
    this.forgetRecords(old);
    this.slabs[this.first] = EVICTED; // let the GC have it now
    this.first++;
  }

  /** Adds a record to its stream's tail; a gap in the numbers (scavenged events) starts the tail again. */
  private indexRecord(position: number, bytes: Buffer, start: number): StreamTail | undefined {
    const place = streamPlaceOf(bytes, start);
    if (!place) return undefined;
    const tail = this.streams.get(place.streamId);
    if (tail && place.eventNumber === tail.first + tail.positions.length) {
      tail.positions.push(position);
      return tail;
    }
    const fresh: StreamTail = { streamId: place.streamId, first: place.eventNumber, positions: [position], head: 0 };
    if (!tail) this.size += STREAM_TAIL_OVERHEAD;
    this.streams.set(place.streamId, fresh);
    return fresh;
  }

  /** An evicted slab's records are the oldest of their streams' tails: drop them from the front. */
  private forgetRecords(slab: Slab): void {
    for (let i = 0; i < slab.count; i++) {
      const tail = slab.tails[i];
      if (!tail || tail.positions[tail.head] !== slab.positions[i]) continue; // a gap already dropped it
      tail.head++;
      if (tail.head === tail.positions.length) {
        if (this.streams.get(tail.streamId) === tail) {
          this.streams.delete(tail.streamId);
          this.size -= STREAM_TAIL_OVERHEAD;
        }
      } else if (tail.head > 64 && tail.head * 2 > tail.positions.length) {
        tail.positions = tail.positions.slice(tail.head);
        tail.first += tail.head;
        tail.head = 0;
      }
    }
  }

  /** Events `start`..`end` of the stream, oldest first, when every one of them is cached; else undefined. */
  streamEvents(streamId: string, start: number, end: number): EventRecord[] | undefined {
    const tail = this.streams.get(streamId);
    if (!tail || start < tail.first + tail.head || end >= tail.first + tail.positions.length) return undefined;
    const records: EventRecord[] = [];
    for (let n = start; n <= end; n++) {
      const record = this.get(tail.positions[n - tail.first]);
      assert(record, `stream tail of ${streamId} points at an evicted record (event ${n})`);
      records.push(record);
    }
    return records;
  }

  /**
   * Forgets every cached record at or before `position`: a scavenge removed records there, and
   * reads must go to RocksDB, which no longer has them. (Whole slabs from the oldest: the cache
   * keeps no holes; what it drops is read from RocksDB until newer commits fill it again.)
   */
  forgetThrough(position: number): void {
    while (this.first < this.slabs.length && this.slabs[this.first].count > 0 && this.slabs[this.first].positions[0] <= position) {
      this.evictOldest();
    }
  }

  /** The oldest cached position, or undefined when nothing is cached. */
  get start(): number | undefined {
    return this.first < this.slabs.length && this.slabs[this.first].count > 0 ? this.slabs[this.first].positions[0] : undefined;
  }

  /** [slab index, record index] of the first cached record at or after `position`; undefined when before the cache. */
  private locate(position: number): [number, number] | undefined {
    const start = this.start;
    if (start === undefined || position < start) return undefined;
    let lo = this.first;
    let hi = this.slabs.length - 1;
    while (lo < hi) { // the last slab whose first position is <= position
      const mid = (lo + hi + 1) >>> 1;
      if (this.slabs[mid].count > 0 && this.slabs[mid].positions[0] <= position) lo = mid;
      else hi = mid - 1;
    }
    const { positions, count } = this.slabs[lo];
    let a = 0;
    let b = count;
    while (a < b) { // the first of the slab's records at or after `position`
      const mid = (a + b) >>> 1;
      if (positions[mid] < position) a = mid + 1;
      else b = mid;
    }
    return a < count ? [lo, a] : [lo + 1, 0];
  }

  /** The record; kept decoded when its slab is among the newest (readers following the tail share it). */
  private record(s: number, i: number): EventRecord {
    const slab = this.slabs[s];
    let decoded = slab.decoded;
    if (!decoded && s >= this.slabs.length - DECODED_SLABS) decoded = slab.decoded = [];
    const cached = decoded?.[i];
    if (cached) return cached;
    const record = decodeRecord(slab.positions[i], slab.bytes, slab.offsets[i], slab.offsets[i + 1]);
    if (decoded) decoded[i] = record;
    return record;
  }

  /** Up to `count` records from `position` on, or undefined when `position` is older than the cache. */
  forward(position: number, count: number): EventRecord[] | undefined {
    const at = this.locate(position);
    if (!at) return undefined;
    const records: EventRecord[] = [];
    for (let s = at[0], i = at[1]; s < this.slabs.length && records.length < count; s++, i = 0) {
      const n = this.slabs[s].count;
      for (; i < n && records.length < count; i++) records.push(this.record(s, i));
    }
    return records;
  }

  /** The record at exactly `position`, if cached. */
  get(position: number): EventRecord | undefined {
    const at = this.locate(position);
    if (!at || at[0] >= this.slabs.length) return undefined;
    const slab = this.slabs[at[0]];
    return at[1] < slab.count && slab.positions[at[1]] === position ? this.record(at[0], at[1]) : undefined;
  }
}

const EVICTED: Slab = { positions: new Float64Array(0), offsets: new Uint32Array(1), bytes: Buffer.alloc(0), count: 0, tails: [] };
