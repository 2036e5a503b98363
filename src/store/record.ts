import { strict as assert } from 'node:assert';

// The log record codec. A compact binary header followed by the raw data and metadata bytes
// exactly as received (never re-encoded):
//
//   u8  version (1)      u8  flags            f64 eventNumber      f64 created (µs since epoch)
//   16  event id         u16 stream length    u16 type length      u32 data length
//   u32 metadata length  stream bytes         type bytes           data bytes   metadata bytes

const VERSION = 1;
const HEADER = 1 + 1 + 8 + 8 + 16 + 2 + 2 + 4 + 4;

/** The type of a link event: its data is `{eventNumber}@{stream}`. */
export const LINK_EVENT_TYPE = '$>';

/**
 * JSON: the event is flagged JSON. DATA_JSON: its data bytes are valid JSON (checked when written).
 * ID_INDEXED: its id is in the event-id index (the first event of an append).
 */
export const FLAG = { JSON: 0x01, TOMBSTONE: 0x02, DATA_JSON: 0x04, ID_INDEXED: 0x08 } as const;

/** A record read back from the log. `data` and `metadata` are views into the stored bytes. */
export interface EventRecord {
  position: number;
  size: number;
  streamId: string;
  eventNumber: number;
  eventId: Buffer; // 16 bytes
  eventType: string;
  isJson: boolean;
  /** The data bytes are valid JSON. */
  dataIsJson: boolean;
  data: Buffer;
  metadata: Buffer;
  created: number; // µs since the Unix epoch
  tombstone: boolean;
  /** Its id is in the event-id index (meaningful for records written since the store kept hints). */
  idIndexed: boolean;
}

/**
 * A record as it lies in its stored bytes: encoders that write its fields out (the gRPC read
 * codec) copy them from here instead of making a string or a view per field.
 */
export interface StoredRecord extends EventRecord {
  /** The buffer the record's bytes are in (it may hold other records too), and where they start. */
  readonly bytes: Buffer;
  readonly start: number;
  readonly streamLength: number;
  readonly typeLength: number;
  readonly dataStart: number;
  readonly dataLength: number;
  readonly metadataLength: number;
}

/** Where a stored record's parts are, from its `start`: the 16 id bytes, and the stream name (the type follows it). */
export const STORED = { ID: 18, STREAM: HEADER } as const;

/** The record in its stored form: itself when it was read from bytes, else encoded now. */
export function storedFormOf(r: EventRecord): StoredRecord {
  if (r instanceof DecodedRecord) return r;
  const bytes = encodeRecord(r.streamId, r.eventNumber, r, r.created, r.tombstone, r.idIndexed);
  return new DecodedRecord(r.position, bytes, 0, bytes.length);
}

export interface RecordPayload {
  eventId: Buffer;
  eventType: string;
  isJson: boolean;
  /** Whether the data is valid JSON; defaults to isJson (an event flagged JSON for its metadata sets false). */
  dataIsJson?: boolean;
  /**
   * False for writers that never retry with the same id (projections: their checkpoint
   * transaction is atomic): the event id is then not indexed, one key less per event.
   */
  idempotent?: boolean;
  data: Buffer;
  metadata: Buffer;
}

export function encodeRecord(streamId: string, eventNumber: number, e: RecordPayload, created: number, tombstone: boolean,
  idIndexed = false): Buffer {
  const streamLength = Buffer.byteLength(streamId, 'utf8');
  const typeLength = Buffer.byteLength(e.eventType, 'utf8');
  assert(streamLength < 65536 && typeLength < 65536, 'stream name and event type are limited to 64 KiB');
  assert(e.eventId.length === 16, 'an event id is 16 bytes');
  const buf = Buffer.allocUnsafe(HEADER + streamLength + typeLength + e.data.length + e.metadata.length);
  let o = 0;
  buf[o++] = VERSION;
  const dataIsJson = (e.dataIsJson ?? e.isJson) && e.data.length > 0;
  buf[o++] = (e.isJson ? FLAG.JSON : 0) | (tombstone ? FLAG.TOMBSTONE : 0) | (dataIsJson ? FLAG.DATA_JSON : 0)
    | (idIndexed ? FLAG.ID_INDEXED : 0);
  buf.writeDoubleBE(eventNumber, o); o += 8;
  buf.writeDoubleBE(created, o); o += 8;
  e.eventId.copy(buf, o); o += 16;
  buf.writeUInt16BE(streamLength, o); o += 2;
  buf.writeUInt16BE(typeLength, o); o += 2;
  buf.writeUInt32BE(e.data.length, o); o += 4;
  buf.writeUInt32BE(e.metadata.length, o); o += 4;
  o += buf.write(streamId, o, 'utf8');
  o += buf.write(e.eventType, o, 'utf8');
  o += e.data.copy(buf, o);
  e.metadata.copy(buf, o);
  return buf;
}

/** Decodes the record at `start` of `buf` (up to `end`: a record inside a larger buffer needs no view of its own). */
export function decodeRecord(position: number, buf: Buffer, start = 0, end = buf.length): EventRecord {
  assert(buf[start] === VERSION, `unknown record version ${buf[start]} at position ${position}`);
  return new DecodedRecord(position, buf, start, end);
}

/**
 * The record just encoded (encodeRecord) into `buf`, as a reader of the log sees it, without
 * decoding the names back from the bytes: the writer passes the strings it encoded them from.
 */
export function encodedRecord(position: number, buf: Buffer, streamId: string, eventType: string): EventRecord {
  return new DecodedRecord(position, buf, 0, buf.length, streamId, eventType);
}

/**
 * A record read from its bytes. The id, data and metadata views are made when first used: a
 * reader that looks only at stream, number and type (most system projection work) allocates
 * one object per record instead of four, which keeps young-generation GC pauses short.
 */
class DecodedRecord implements StoredRecord {
  readonly size: number;
  readonly streamId: string;
  readonly eventNumber: number;
  readonly eventType: string;
  readonly isJson: boolean;
  readonly dataIsJson: boolean;
  readonly tombstone: boolean;
  readonly idIndexed: boolean;
  readonly created: number;
  readonly streamLength: number;
  readonly typeLength: number;
  readonly dataStart: number;
  readonly dataLength: number;
  readonly metadataLength: number;
  private idView: Buffer | undefined = undefined;
  private dataView: Buffer | undefined = undefined;
  private metadataView: Buffer | undefined = undefined;

  constructor(readonly position: number, readonly bytes: Buffer, readonly start: number, end: number,
    knownStreamId?: string, knownEventType?: string) {
    const flags = bytes[start + 1];
    this.size = end - start;
    this.eventNumber = bytes.readDoubleBE(start + 2);
    this.created = bytes.readDoubleBE(start + 10);
    const streamLength = (this.streamLength = bytes.readUInt16BE(start + 34));
    const typeLength = (this.typeLength = bytes.readUInt16BE(start + 36));
    this.dataLength = bytes.readUInt32BE(start + 38);
    this.metadataLength = bytes.readUInt32BE(start + 42);
    let o = start + HEADER;
    this.streamId = knownStreamId ?? internUtf8(bytes, o, o + streamLength); o += streamLength;
    this.eventType = knownEventType ?? internUtf8(bytes, o, o + typeLength); o += typeLength;
    this.dataStart = o;
    this.isJson = (flags & FLAG.JSON) !== 0;
    this.dataIsJson = (flags & FLAG.DATA_JSON) !== 0;
    this.tombstone = (flags & FLAG.TOMBSTONE) !== 0;
    this.idIndexed = (flags & FLAG.ID_INDEXED) !== 0;
  }

  get eventId(): Buffer {
    return (this.idView ??= this.bytes.subarray(this.start + 18, this.start + 34));
  }

  get data(): Buffer {
    return (this.dataView ??= this.bytes.subarray(this.dataStart, this.dataStart + this.dataLength));
  }

  get metadata(): Buffer {
    const start = this.dataStart + this.dataLength;
    return (this.metadataView ??= this.bytes.subarray(start, start + this.metadataLength));
  }
}

/** The stream and event number of the record at `start` of `buf`, read without decoding the rest; undefined for a tombstone. */
export function streamPlaceOf(buf: Buffer, start: number): { streamId: string; eventNumber: number } | undefined {
  assert(buf[start] === VERSION, `unknown record version ${buf[start]}`);
  if ((buf[start + 1] & FLAG.TOMBSTONE) !== 0) return undefined;
  const streamStart = start + HEADER;
  return { streamId: internUtf8(buf, streamStart, streamStart + buf.readUInt16BE(start + 34)), eventNumber: eventNumberAt(buf, start) };
}

/**
 * A test of a record in its stored bytes (at `start` of `buf`) that decodes nothing: false when
 * the reader certainly wants none of it. A reader of much of the log that wants few of its records
 * (a system projection catching up over other projections' checkpoints) passes one, and the
 * records it refuses are never decoded (Reader.readAllForward).
 */
export type RecordSieve = (buf: Buffer, start: number) => boolean;

/** The event number of the record at `start` of `buf`, undecoded. */
export function eventNumberAt(buf: Buffer, start: number): number {
  return buf.readDoubleBE(start + 2);
}

/** The length of the metadata of the record at `start` of `buf`, undecoded. */
export function metadataLengthAt(buf: Buffer, start: number): number {
  return buf.readUInt32BE(start + 42);
}

/** Whether the stream of the record at `start` of `buf` starts with `$` (any system stream or metastream), undecoded. */
export function inDollarStream(buf: Buffer, start: number): boolean {
  return buf.readUInt16BE(start + 34) > 0 && buf[start + HEADER] === DOLLAR;
}

/**
 * Whether the record at `start` of `buf` is in a stream a `fromAll` source skips: a system stream
 * (`$...`), but not the metastream of a user stream (`$$name`). Read from the bytes, undecoded.
 */
export function inSystemStream(buf: Buffer, start: number): boolean {
  const length = buf.readUInt16BE(start + 34);
  const s = start + HEADER;
  if (length === 0 || buf[s] !== DOLLAR) return false;
  return length < 2 || buf[s + 1] !== DOLLAR || (length > 2 && buf[s + 2] === DOLLAR);
}
const DOLLAR = 0x24;

// Stream names and event types repeat across records: decoding returns the same string for the
// same bytes from a small direct-mapped table instead of making a new one each time (fewer
// allocations when a reader decodes a million records).
const INTERN_SLOTS = 16384;
const INTERN_MAX_BYTES = 96;
const internStrings: (string | undefined)[] = new Array(INTERN_SLOTS);

/**
 * Only ASCII names are interned, each slot holding the string alone: its characters are its bytes,
 * so a lookup compares them with the bytes and a miss keeps no copy of them (a copy of the bytes
 * per miss made a miss ~1.3 µs against 0.35: the system projections decoding the first events of
 * half a million new checkpoint streams spent ~1 s of 11 in it).
 */
function internUtf8(buf: Buffer, start: number, end: number): string {
  const length = end - start;
  if (length > INTERN_MAX_BYTES) return buf.toString('utf8', start, end);
  let h = 0x811c9dc5;
  let bits = 0;
  for (let i = start; i < end; i++) {
    const b = buf[i];
    bits |= b;
    h = Math.imul(h ^ b, 0x01000193);
  }
  if (bits > 0x7f) return buf.toString('utf8', start, end);
  const slot = (h >>> 0) & (INTERN_SLOTS - 1);
  const known = internStrings[slot];
  if (known !== undefined && known.length === length) {
    let same = true;
    for (let i = 0; i < length; i++) {
      if (known.charCodeAt(i) !== buf[start + i]) {
        same = false;
        break;
      }
    }
    if (same) return known;
  }
  const text = buf.toString('latin1', start, end); // (ASCII: the same as UTF-8)
  internStrings[slot] = text;
  return text;
}
