import { chunkKey, readU64, SPACE, spaceEnd, writeU64 } from './keys.js';

// Chunks: the log's positions cut in fixed ranges of `chunkSize` bytes (logical chunk n holds
// positions [n·size, (n+1)·size)). A physical chunk is one or more adjacent logical chunks
// that a scavenge weighs and executes as a unit, with a version each execution increments:
// `chunk-X.Y` names it in logs, history and backups as the established servers name their files.
// Only chunks a scavenge executed or merged have an entry (key: the first logical chunk); any
// other logical chunk is its own physical chunk at version 0. No bytes move: records keep their
// positions, and a scavenge deletes what it removes from the one RocksDB in place.

export interface PhysicalChunk {
  /** First and last logical chunk (inclusive). */
  readonly start: number;
  readonly end: number;
  readonly version: number;
  /** Bytes of the records left after the last execution; undefined for a chunk never executed. */
  readonly liveBytes?: number;
}

export function chunkName(c: PhysicalChunk): string {
  return `chunk-${String(c.start).padStart(6, '0')}.${String(c.version).padStart(6, '0')}`;
}

export function encodeChunk(c: PhysicalChunk): readonly [Buffer, Buffer] {
  const value = Buffer.allocUnsafe(20);
  writeU64(value, c.end, 0);
  value.writeUInt32BE(c.version, 8);
  value.writeDoubleBE(c.liveBytes ?? -1, 12);
  return [chunkKey(c.start), value];
}

/** The op that drops a physical chunk's entry: a merge keeps the first of the chunks it joins and drops the others'. */
export function dropChunkEntry(start: number): readonly [Buffer] {
  return [chunkKey(start)];
}

export function decodeChunk(key: Buffer, value: Buffer): PhysicalChunk {
  const liveBytes = value.readDoubleBE(12);
  return { start: readU64(key, 1), end: readU64(value, 0), version: value.readUInt32BE(8), ...(liveBytes >= 0 ? { liveBytes } : {}) };
}

export const CHUNK_SPACE = { gte: chunkKey(0), lt: spaceEnd(SPACE.CHUNK) };
