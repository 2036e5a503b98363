import type { Rocks } from './rocks.js';
import { metaKey, readU64, streamKey, writeU64 } from './keys.js';

/** What the writer needs to know of a stream: persisted with every write, the recent ones cached (stream-infos.ts). */
export interface StreamInfo {
  readonly streamNumber: number;
  /** Last event number written (-1: none). A soft delete keeps it; numbering continues after it. */
  readonly lastEventNumber: number;
  /** Hard-deleted: every later read and append answers "deleted". */
  readonly tombstoned: boolean;
}

/** Event number of the tombstone record a hard delete writes. */
export const TOMBSTONE_EVENT_NUMBER = Number.MAX_SAFE_INTEGER;

export function encodeStreamInfo(info: StreamInfo): Buffer {
  const buf = Buffer.allocUnsafe(17);
  writeU64(buf, info.streamNumber, 0);
  buf.writeDoubleBE(info.lastEventNumber, 8);
  buf[16] = info.tombstoned ? 1 : 0;
  return buf;
}

export function decodeStreamInfo(buf: Buffer): StreamInfo {
  return { streamNumber: readU64(buf, 0), lastEventNumber: buf.readDoubleBE(8), tombstoned: buf[16] === 1 };
}

/** Where the log ends: persisted in the same batch as every write. */
export interface WriterCheckpoint {
  nextPosition: number;
  nextStreamNumber: number;
  recordCount: number;
}

export const WRITER_CHECKPOINT_KEY = metaKey('writer');
/** A cluster node's commit position as last known (u64): reads after a restart show the log up to there only (commit-horizon.ts). */
export const COMMIT_KEY = metaKey('commit');

export function encodeWriterCheckpoint(c: WriterCheckpoint): Buffer {
  const buf = Buffer.allocUnsafe(24);
  writeU64(buf, c.nextPosition, 0);
  writeU64(buf, c.nextStreamNumber, 8);
  writeU64(buf, c.recordCount, 16);
  return buf;
}

export function loadWriterCheckpoint(rocks: Rocks): WriterCheckpoint {
  const buf = rocks.get(WRITER_CHECKPOINT_KEY);
  if (!buf) return { nextPosition: 0, nextStreamNumber: 1, recordCount: 0 };
  return { nextPosition: readU64(buf, 0), nextStreamNumber: readU64(buf, 8), recordCount: readU64(buf, 16) };
}

export function streamInfoOp(name: string, info: StreamInfo): readonly [Buffer, Buffer] {
  return [streamKey(name), encodeStreamInfo(info)];
}
