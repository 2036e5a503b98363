import type { BatchOp, Rocks } from './rocks.js';
import { chunkTimesKey } from './keys.js';

// Each logical chunk's oldest and newest record time (µs since the epoch), stored beside the log
// (keys.ts chunkTimesKey) and widened by every batch that writes to the chunk, in the same batch:
// a scavenge weighs $maxAge by them without reading a chunk's records. The writer keeps the range
// of the chunk it writes to in memory across batches: one read when it moves to the next chunk.

export type TimeRange = [oldest: number, newest: number];

/** Widens a batch's range of the chunk by one record's time. */
export function widenRange(ranges: Map<number, TimeRange>, chunk: number, created: number): void {
  const range = ranges.get(chunk);
  if (!range) ranges.set(chunk, [created, created]);
  else {
    if (created < range[0]) range[0] = created;
    if (created > range[1]) range[1] = created;
  }
}

export function storedChunkTimes(rocks: Rocks, chunk: number): TimeRange | undefined {
  const value = rocks.get(chunkTimesKey(chunk));
  return value ? [value.readDoubleBE(0), value.readDoubleBE(8)] : undefined;
}

export class ChunkTimes {
  /** The range of the chunk last written, as stored once the last batch commits. */
  private last: { chunk: number; range: TimeRange } | undefined;

  constructor(private readonly rocks: Rocks) {}

  /**
   * The writes that widen the stored range of each chunk a batch writes to by the batch's range,
   * and what to call once the batch is written: the range kept in memory moves on only then, so a
   * batch that fails (a full disk) leaves it as stored. (A transaction rolled back may still
   * leave a range wider than its records: harmless, a weight is an estimate.)
   */
  ops(batch: ReadonlyMap<number, TimeRange>): { ops: BatchOp[]; written: () => void } {
    const ops: BatchOp[] = [];
    let last = this.last;
    for (const [chunk, [oldest, newest]] of batch) {
      const known = (last?.chunk === chunk ? last.range : undefined) ?? storedChunkTimes(this.rocks, chunk) ?? [oldest, newest];
      const range: TimeRange = [Math.min(known[0], oldest), Math.max(known[1], newest)];
      last = { chunk, range };
      const value = Buffer.allocUnsafe(16);
      value.writeDoubleBE(range[0], 0);
      value.writeDoubleBE(range[1], 8);
      ops.push([chunkTimesKey(chunk), value]);
    }
    return { ops, written: () => { this.last = last; } };
  }
}
