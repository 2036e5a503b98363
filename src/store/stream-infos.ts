import type { Rocks } from './rocks.js';
import { streamKey } from './keys.js';
import { decodeStreamInfo, type StreamInfo } from './stream-state.js';

// Every stream's information (number, last event number, tombstone) lives in RocksDB, written in
// the same batch as the stream's events; this keeps the recently used ones in memory, a bounded
// number whatever the number of streams (nothing is loaded at start). Streams that do not exist
// are remembered too, so appends to new streams and reads of missing ones cost one lookup.
//
// Two generations instead of an exact LRU: a hit costs one Map lookup (a hit in the older
// generation moves the entry to the newer one), and when the newer one is full the older is
// dropped whole. Between half and all of the capacity stays cached.
//
// A cluster leader's batch is durable here before a quorum holds it: the writer plans the next
// batches on it (`get`), but readers see the stream as committed (`visible`) until the quorum
// answers (`release`). Only streams of batches in flight are held back: a few per batch.

interface Held {
  /** What readers see: the info after the last released batch (null: no such stream). */
  committed: StreamInfo | null;
  /** The info after each batch in flight that wrote the stream, oldest first. */
  pending: StreamInfo[];
}

export const DEFAULT_STREAM_INFO_CACHE = 100_000;
/** Streams missing from memory for which prefetch reads them at once (fewer: left to `get`). */
const PREFETCH_FROM = 3;

export class StreamInfos {
  private young = new Map<string, StreamInfo | null>();
  private old = new Map<string, StreamInfo | null>();
  private readonly generation: number;
  private readonly held = new Map<string, Held>();
  /** Batches in flight, oldest first: where each ends, and the streams it wrote. */
  private readonly inFlight: { end: number; names: string[] }[] = [];

  constructor(private readonly rocks: Rocks, capacity = DEFAULT_STREAM_INFO_CACHE) {
    this.generation = Math.max(1, Math.floor(capacity / 2));
  }

  get(name: string): StreamInfo | undefined {
    let cached = this.young.get(name);
    if (cached === undefined) {
      cached = this.old.get(name);
      if (cached === undefined) {
        const stored = this.rocks.get(streamKey(name));
        cached = stored ? decodeStreamInfo(stored) : null;
      }
      this.remember(name, cached);
    }
    return cached ?? undefined;
  }

  /**
   * Reads the information of every stream of `names` not in memory in one RocksDB call, and keeps
   * it, as `get` would one by one: for a batch's streams or a checkpoint's partitions, where most
   * are not in memory once there are more streams than the cache holds. A point read through the
   * binding cost ~6-7 µs, a read of many ~2-3.5 µs a key (bench: 600,000 streams, 100,000 random
   * reads); the twenty projections catching up at the scale bench's size spent 17.8 s of 115 in
   * point reads, most of them of stream informations.
   */
  prefetch(names: Iterable<string>): void {
    const missing = new Set<string>();
    for (const name of names) if (!this.young.has(name) && !this.old.has(name)) missing.add(name);
    if (missing.size < PREFETCH_FROM) return; // (one or two: `get` reads them as well)
    // (no more than a generation holds: more would push out the first of them before they are used)
    const wanted = [...missing].slice(0, this.generation);
    const stored = this.rocks.getMany(wanted.map(streamKey));
    for (let i = 0; i < wanted.length; i++) {
      const bytes = stored[i];
      this.remember(wanted[i], bytes ? decodeStreamInfo(bytes) : null);
    }
  }

  /** A committed change: what RocksDB now holds for the stream. */
  set(name: string, info: StreamInfo): void {
    this.old.delete(name);
    this.remember(name, info);
  }

  /** The stream as readers see it: as committed (see above). */
  visible(name: string): StreamInfo | undefined {
    if (this.held.size > 0) {
      const held = this.held.get(name);
      if (held) return held.committed ?? undefined;
    }
    return this.get(name);
  }

  /** Whether a batch in flight wrote the stream (`visible` and `get` differ). */
  isHeld(name: string): boolean {
    return this.held.size > 0 && this.held.has(name);
  }

  /** A batch durable here, ending at `end`, that readers see only once `release` passes it. */
  setHeld(end: number, infos: Iterable<[string, StreamInfo]>): void {
    const names: string[] = [];
    for (const [name, info] of infos) {
      let held = this.held.get(name);
      if (!held) {
        held = { committed: this.get(name) ?? null, pending: [] };
        this.held.set(name, held);
      }
      held.pending.push(info);
      names.push(name);
      this.set(name, info);
    }
    this.inFlight.push({ end, names });
  }

  /** At a restart: these streams as last committed, held until `release` passes `end` (the log's end). */
  holdAtOpen(end: number, committed: Iterable<[string, StreamInfo]>): void {
    const names: string[] = [];
    for (const [name, info] of committed) {
      const latest = this.get(name);
      if (!latest) continue;
      this.held.set(name, { committed: info, pending: [latest] });
      names.push(name);
    }
    this.inFlight.push({ end, names });
  }

  /** Batches in flight ending at or before `position` are committed: readers see them. */
  release(position: number): void {
    while (this.inFlight.length > 0 && this.inFlight[0].end <= position) {
      for (const name of this.inFlight.shift()!.names) {
        const held = this.held.get(name)!;
        held.committed = held.pending.shift()!;
        if (held.pending.length === 0) this.held.delete(name);
      }
    }
  }

  /** Entries held in memory now. */
  get cached(): number {
    return this.young.size + this.old.size;
  }

  private remember(name: string, info: StreamInfo | null): void {
    if (this.young.size >= this.generation) {
      this.old = this.young;
      this.young = new Map();
    }
    this.young.set(name, info);
  }
}
