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

export const DEFAULT_STREAM_INFO_CACHE = 100_000;

export class StreamInfos {
  private young = new Map<string, StreamInfo | null>();
  private old = new Map<string, StreamInfo | null>();
  private readonly generation: number;

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

  /** A committed change: what RocksDB now holds for the stream. */
  set(name: string, info: StreamInfo): void {
    this.old.delete(name);
    this.remember(name, info);
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
