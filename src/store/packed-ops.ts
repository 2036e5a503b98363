import type { LoopSlices } from '../loop-slices.js';

/** One operation of a RocksDB write batch: a put (key and value) or a delete (key alone). */
export type BatchOp = readonly [key: Buffer, value: Buffer] | readonly [key: Buffer];

// The operations of one RocksDB write batch packed into a few large buffers, to hand a large
// batch to the write thread (write-thread.ts) a part at a time: tens of transfers instead of
// hundreds of thousands of small buffers. Layout of a part, op after op (each op whole in one part):
//
//   u32 key length | u32 value length (0xFFFFFFFF: a delete, no value) | key bytes | value bytes
//
// (little-endian; a key or value of one batch fits in 32 bits: an event is at most 64 MiB,
// --max-append-size).

const DELETE = 0xffffffff;
const HEADER = 8;
/** Bytes of a part (an op larger than this gets a part of its own size). */
export const PART_BYTES = 1024 * 1024;

/**
 * Packs `ops` into parts of about PART_BYTES, each a buffer of its own (transferable), handed to
 * `onPart` as it is filled; gives the event loop up between slices. Returns the number of parts.
 */
export async function packOps(ops: readonly BatchOp[], slices: LoopSlices, onPart: (part: Buffer) => void): Promise<number> {
  let part = Buffer.allocUnsafeSlow(PART_BYTES);
  let at = 0;
  let parts = 0;
  for (let i = 0; i < ops.length; i++) {
    if ((i & 255) === 0 && slices.due()) await slices.next();
    const op = ops[i];
    const key = op[0];
    const value = op.length === 2 ? op[1] : undefined;
    const size = HEADER + key.length + (value ? value.length : 0);
    if (at + size > part.length) {
      onPart(part.subarray(0, at));
      parts++;
      part = Buffer.allocUnsafeSlow(Math.max(PART_BYTES, size));
      at = 0;
    }
    part.writeUInt32LE(key.length, at);
    part.writeUInt32LE(value ? value.length : DELETE, at + 4);
    at += HEADER;
    part.set(key, at);
    at += key.length;
    if (value) {
      part.set(value, at);
      at += value.length;
    }
  }
  if (at > 0) {
    onPart(part.subarray(0, at));
    parts++;
  }
  return parts;
}

/** Calls `put` or `del` for each packed operation of a part, in order, with views into it (no copies). */
export function unpackOps(part: Buffer, put: (key: Buffer, value: Buffer) => void, del: (key: Buffer) => void): void {
  let at = 0;
  while (at < part.length) {
    const keyLength = part.readUInt32LE(at);
    const valueLength = part.readUInt32LE(at + 4);
    at += HEADER;
    const key = part.subarray(at, at + keyLength);
    at += keyLength;
    if (valueLength === DELETE) {
      del(key);
    } else {
      put(key, part.subarray(at, at + valueLength));
      at += valueLength;
    }
  }
}
