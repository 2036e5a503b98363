// Binary key spaces of the one RocksDB instance. Numbers are big-endian so that RocksDB's
// bytewise key order is numeric order; every key starts with a one-byte space tag.
//
//   LOG      0x01 | position u64                  -> record (see record.ts)
//   INDEX    0x02 | stream u64 | eventNumber u64  -> position u64
//   STREAM   0x03 | stream name (utf8)            -> stream info (see stream-info.ts)
//   EVENT_ID 0x04 | stream u64 | event id (16)    -> eventNumber u64 (idempotent retries)
//   META     0x05 | name (ascii)                  -> subsystem checkpoint (writer state)
//   CHUNK    0x06 | first logical chunk u64        -> physical chunk (see chunks.ts): only for chunks a
//                                                     scavenge executed or merged
//   HINT     0x07 | position u64                   -> '' : the record there is a metastream record or a
//                                                     tombstone (what a scavenge's accumulation reads)
//   TIMES    0x08 | logical chunk u64              -> oldest and newest record time (µs) f64 f64
//   SYSLOG   0x09 | position u64                   -> record of a system stream, from the split on
//                                                     (log-spaces.ts); LOG holds the others

export const SPACE = { LOG: 0x01, INDEX: 0x02, STREAM: 0x03, EVENT_ID: 0x04, META: 0x05, CHUNK: 0x06, HINT: 0x07, TIMES: 0x08, SYSLOG: 0x09 } as const;

const TWO_32 = 2 ** 32;

export function writeU64(buf: Buffer, value: number, offset: number): void {
  buf.writeUInt32BE(Math.floor(value / TWO_32), offset);
  buf.writeUInt32BE(value >>> 0, offset + 4);
}

export function readU64(buf: Buffer, offset: number): number {
  return buf.readUInt32BE(offset) * TWO_32 + buf.readUInt32BE(offset + 4);
}

/** A key of a space keyed by one number (log, chunk, hint, chunk times). */
function numberKey(space: number, value: number): Buffer {
  const key = Buffer.allocUnsafe(9);
  key[0] = space;
  writeU64(key, value, 1);
  return key;
}

export function logKey(position: number): Buffer {
  return numberKey(SPACE.LOG, position);
}

/** The key of a record of a system stream written since the log was split (log-spaces.ts). */
export function systemLogKey(position: number): Buffer {
  return numberKey(SPACE.SYSLOG, position);
}

/** The position in a LOG or SYSLOG key. */
export function positionOfLogKey(key: Buffer): number {
  return readU64(key, 1);
}

export function indexKey(streamNumber: number, eventNumber: number): Buffer {
  const key = Buffer.allocUnsafe(17);
  key[0] = SPACE.INDEX;
  writeU64(key, streamNumber, 1);
  writeU64(key, eventNumber, 9);
  return key;
}

export function streamKey(name: string): Buffer {
  const nameBytes = Buffer.from(name, 'utf8');
  const key = Buffer.allocUnsafe(1 + nameBytes.length);
  key[0] = SPACE.STREAM;
  nameBytes.copy(key, 1);
  return key;
}

export function eventIdKey(streamNumber: number, eventId: Buffer): Buffer {
  const key = Buffer.allocUnsafe(25);
  key[0] = SPACE.EVENT_ID;
  writeU64(key, streamNumber, 1);
  eventId.copy(key, 9);
  return key;
}

export function chunkKey(chunkNumber: number): Buffer {
  return numberKey(SPACE.CHUNK, chunkNumber);
}

export function hintKey(position: number): Buffer {
  return numberKey(SPACE.HINT, position);
}

export function chunkTimesKey(chunkNumber: number): Buffer {
  return numberKey(SPACE.TIMES, chunkNumber);
}

export function metaKey(name: string): Buffer {
  return Buffer.concat([Buffer.of(SPACE.META), Buffer.from(name, 'ascii')]);
}

/** The first key after a space (the space's keys all start with its byte). */
export function spaceEnd(space: number): Buffer {
  return Buffer.of(space + 1);
}

export function u64Value(value: number): Buffer {
  const buf = Buffer.allocUnsafe(8);
  writeU64(buf, value, 0);
  return buf;
}
