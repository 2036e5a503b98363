import { Rocks, type BatchOp } from '../store/index.js';

// The scavenge state database: its own RocksDB under `<db>/scavenging`, holding what
// accumulation learnt of the log (per-stream metadata, tombstones, discard points), the weight
// and time range of every chunk, and the checkpoint of the run in progress. Deleting the
// directory loses nothing but work: the next scavenge accumulates the whole log again.
//
//   K                    -> checkpoint (JSON)
//   N                    -> next logical chunk to accumulate (JSON number)
//   S | stream name      -> StreamData (JSON)
//   A | stream name      -> '' : the stream's discard points must be calculated again
//   W | chunk u64        -> weight f64 (≈ 2 per removable record, 1 per maybe)
//   T | chunk u64        -> oldest and newest record time (µs) f64 f64

export interface ScavengePoint {
  /** Log position of the `$scavengePoint` record: the run covers records strictly before it. */
  position: number;
  /** Its event number in `$scavengePoints`. */
  eventNumber: number;
  /** Its time (µs since the epoch): the "now" of `$maxAge`. */
  effectiveNow: number;
  threshold: number;
}

export type Stage = 'Accumulating' | 'Calculating' | 'ExecutingChunks' | 'MergingChunks' | 'ExecutingIndex' | 'Cleaning' | 'Done';

export interface Checkpoint {
  scavengeId: string;
  point: ScavengePoint;
  stage: Stage;
  /** Accumulating/ExecutingChunks: the last logical chunk done. */
  doneChunk?: number;
  /** Calculating: the last stream done. */
  doneStream?: string;
}

/** What the scavenge knows of one stream (the original stream; its `$$` metastream is described here too). */
export interface StreamData {
  tombstoned?: boolean;
  maxAge?: number;
  maxCount?: number;
  tb?: number;
  /** Number and position of the last in-order record of the metastream: every earlier one is removable. */
  metaLast?: number;
  metaLastPosition?: number;
  /** Events numbered below this are removable. */
  discardPoint: number;
  /** Events below this may be removable: their time decides ($maxAge). */
  maybeDiscardPoint: number;
  status: 'Active' | 'Archived' | 'Spent';
}

export interface StateChanges {
  streams?: Map<string, StreamData>;
  removedStreams?: Iterable<string>;
  active?: Map<string, boolean>;
  /** Weights to add per logical chunk. */
  weightDeltas?: Map<number, number>;
  /** Weights to set to zero. */
  zeroWeights?: Iterable<number>;
  ranges?: Map<number, [number, number]>;
  nextChunk?: number;
  checkpoint?: Checkpoint;
}

export interface StateOptions {
  pageSize: number;
  cacheSize: number;
  /** Streams whose data is kept in memory. */
  streamCacheCapacity: number;
}

const CHECKPOINT = Buffer.from('K');
const NEXT_CHUNK = Buffer.from('N');

function nameKey(tag: string, name: string): Buffer {
  return Buffer.concat([Buffer.from(tag), Buffer.from(name, 'utf8')]);
}

function chunkKey(tag: string, chunk: number): Buffer {
  const key = Buffer.allocUnsafe(9);
  key.write(tag, 0, 'latin1');
  key.writeUInt32BE(Math.floor(chunk / 2 ** 32), 1);
  key.writeUInt32BE(chunk >>> 0, 5);
  return key;
}

function chunkOfKey(key: Buffer): number {
  return key.readUInt32BE(1) * 2 ** 32 + key.readUInt32BE(5);
}

function f64(...values: number[]): Buffer {
  const buf = Buffer.allocUnsafe(8 * values.length);
  values.forEach((v, i) => buf.writeDoubleBE(v, i * 8));
  return buf;
}

export class ScavengeState {
  /** Stream data read or written lately (null: known to have none), bounded by streamCacheCapacity. */
  private readonly cache = new Map<string, StreamData | null>();
  /** Stream data read from disk because the cache did not hold it since the node started (in each run's last log line: raise the capacity if it climbs fast). */
  cacheMisses = 0;

  private constructor(private readonly rocks: Rocks, private readonly capacity: number) {}

  static async open(dir: string, options: StateOptions): Promise<ScavengeState> {
    const rocks = await Rocks.open(dir, false, { cacheSize: options.cacheSize, blockSize: options.pageSize });
    return new ScavengeState(rocks, options.streamCacheCapacity);
  }

  checkpoint(): Checkpoint | undefined {
    const value = this.rocks.get(CHECKPOINT);
    return value ? (JSON.parse(value.toString('utf8')) as Checkpoint) : undefined;
  }

  nextChunkToAccumulate(): number {
    const value = this.rocks.get(NEXT_CHUNK);
    return value ? Number(value.toString('utf8')) : 0;
  }

  stream(name: string): StreamData | undefined {
    const cached = this.cache.get(name);
    if (cached !== undefined) return cached ?? undefined; // (first in, first out: a hit costs one lookup)
    this.cacheMisses++;
    const value = this.rocks.get(nameKey('S', name));
    const data = value ? (JSON.parse(value.toString('utf8')) as StreamData) : null;
    this.remember(name, data);
    return data ?? undefined;
  }

  private remember(name: string, data: StreamData | null): void {
    this.cache.delete(name);
    this.cache.set(name, data);
    if (this.cache.size > this.capacity) this.cache.delete(this.cache.keys().next().value!);
  }

  weight(chunk: number): number {
    const value = this.rocks.get(chunkKey('W', chunk));
    return value ? value.readDoubleBE(0) : 0;
  }

  /** Logical chunks with a weight, in [from, to]. */
  weights(from: number, to: number): Map<number, number> {
    const { keys, values } = this.rocks.scan({ gte: chunkKey('W', from), lte: chunkKey('W', to) });
    return new Map(keys.map((k, i) => [chunkOfKey(k), values[i].readDoubleBE(0)]));
  }

  timeRange(chunk: number): [number, number] | undefined {
    const value = this.rocks.get(chunkKey('T', chunk));
    return value ? [value.readDoubleBE(0), value.readDoubleBE(8)] : undefined;
  }

  /** Streams marked for calculation, in name order, after `after`. */
  activeStreams(after: string | undefined, limit: number): string[] {
    const { keys } = this.rocks.scan({
      ...(after === undefined ? { gte: Buffer.from('A') } : { gt: nameKey('A', after) }), lt: Buffer.from('B'), limit,
    });
    return keys.map((k) => k.toString('utf8', 1));
  }

  /** Streams whose calculation found nothing left to do, in name order, after `after`. */
  spentStreams(after: string | undefined, limit: number): { names: string[]; last: string | undefined } {
    const { keys, values } = this.rocks.scan({
      ...(after === undefined ? { gte: Buffer.from('S') } : { gt: nameKey('S', after) }), lt: Buffer.from('T'), limit,
    });
    const names = keys.map((k) => k.toString('utf8', 1));
    const spent = names.filter((_, i) => (JSON.parse(values[i].toString('utf8')) as StreamData).status === 'Spent');
    return { names: spent, last: names[names.length - 1] };
  }

  /** Writes the changes in one synced batch. */
  commit(changes: StateChanges): void {
    const ops: BatchOp[] = [];
    for (const [name, data] of changes.streams ?? []) {
      ops.push([nameKey('S', name), Buffer.from(JSON.stringify(data), 'utf8')]);
      this.remember(name, data);
    }
    for (const name of changes.removedStreams ?? []) {
      ops.push([nameKey('S', name)]);
      this.remember(name, null);
    }
    for (const [name, active] of changes.active ?? []) ops.push(active ? [nameKey('A', name), Buffer.alloc(0)] : [nameKey('A', name)]);
    for (const [chunk, delta] of changes.weightDeltas ?? []) ops.push([chunkKey('W', chunk), f64(this.weight(chunk) + delta)]);
    for (const chunk of changes.zeroWeights ?? []) ops.push([chunkKey('W', chunk)]);
    for (const [chunk, [min, max]] of changes.ranges ?? []) ops.push([chunkKey('T', chunk), f64(min, max)]);
    if (changes.nextChunk !== undefined) ops.push([NEXT_CHUNK, Buffer.from(String(changes.nextChunk))]);
    if (changes.checkpoint) ops.push([CHECKPOINT, Buffer.from(JSON.stringify(changes.checkpoint), 'utf8')]);
    if (ops.length > 0) this.rocks.writeDurable(ops);
  }

  close(): Promise<void> {
    return this.rocks.close();
  }
}
