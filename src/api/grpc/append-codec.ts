import type protobuf from 'protobufjs';
import { parseUuidBytes } from '../../store/index.js';
import { protoRoot, TO_OBJECT } from './codecs.js';

// The requests of Append and BatchAppend, decoded by hand: they carry the events, and decoding each
// ProposedMessage with protobufjs (a message object, then a second one from toObject, its
// metadata map as an object, its id as a string, then parsed) cost ~1.5 µs per event, more than
// the rest of an append's path in the door. Here a proposed message is read straight off the wire
// into what the door needs: the id's 16 bytes (parsed from its text, or the structured form), the
// two metadata entries an event is made of ("type" and "content-type"; other entries are skipped
// unread), and views of its data and custom metadata. Options and correlation ids (one per
// append, not per event) are still decoded by protobufjs from the same .proto files.
//
// The answer of a successful append (AppendResp and BatchAppendResp `success`) is encoded by hand
// too: protobufjs made a message object per level and a Long per uint64 from the decimal strings,
// ~7 µs of a 1-event Append's ~110 µs of node CPU.
//
// The wire rules are protobuf's: fields in any order; a field given twice, the last wins (a map
// entry: the last with its key; a missing key or value is ""); unknown fields skipped, groups
// included. A field of the wrong wire type, a length past the message's end or a varint past 10
// bytes makes the message malformed (thrown: the request reader answers INVALID_ARGUMENT).

/** One ProposedMessage as read off the wire, checked later by messages.ts (proposedEvent). */
export interface WireProposed {
  /** The id's 16 bytes (its `string` arm parsed, or its `structured` arm); undefined: no arm set, or not a UUID. */
  id: Buffer | undefined;
  /** The "type" and "content-type" metadata entries; undefined: absent. */
  type: string | undefined;
  contentType: string | undefined;
  data: Buffer;
  customMetadata: Buffer;
}

/** AppendReq: its `content` oneof. */
export interface WireAppendReq {
  options?: Record<string, unknown>;
  proposed_message?: WireProposed;
}

/** BatchAppendReq. */
export interface WireBatchAppendReq {
  correlation_id?: Record<string, unknown>;
  /** The correlation id's message as sent (a copy), echoed in the answer. */
  correlation_bytes?: Buffer;
  options?: Record<string, unknown>;
  proposed_messages: WireProposed[];
  is_final: boolean;
}

const VARINT = 0;
const FIXED64 = 1;
const LEN = 2;
const START_GROUP = 3;
const END_GROUP = 4;
const FIXED32 = 5;

/** Unknown groups nest at most this deep (protobuf's own recursion limit): a message of nested group tags fails alone, not on the stack. */
const MAX_GROUP_DEPTH = 100;

const EMPTY = Buffer.alloc(0);
const TYPE_KEY = Buffer.from('type');
const CONTENT_TYPE_KEY = Buffer.from('content-type');
const JSON_CONTENT_TYPE = 'application/json';
const JSON_CONTENT_TYPE_BYTES = Buffer.from(JSON_CONTENT_TYPE);

/** A position in one message's bytes, `end` exclusive. */
class Wire {
  /** The number of the field whose tag was read last. */
  field = 0;
  /** Where the bytes of the length-delimited field read last end. */
  spanEnd = 0;

  constructor(readonly buf: Buffer, public pos: number, readonly end: number) {}

  get more(): boolean {
    return this.pos < this.end;
  }

  /** An unsigned varint as a number (exact below 2^53; only lengths, tags and bools are read so). */
  varint(): number {
    const buf = this.buf;
    let value = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new Error('a varint runs past the end of its message');
      const b = buf[this.pos++];
      value += (b & 0x7f) * scale;
      if (b < 0x80) return value;
      scale *= 128;
    }
    throw new Error('a varint is longer than 10 bytes');
  }

  /** An int64 varint as its 8 big-endian two's-complement bytes, written at `out[at]`. */
  int64Into(out: Buffer, at: number): void {
    const buf = this.buf;
    let lo = 0;
    let hi = 0;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new Error('a varint runs past the end of its message');
      const b = buf[this.pos++] & 0xff;
      const bits = b & 0x7f;
      if (i < 4) lo |= bits << (i * 7);
      else if (i === 4) {
        lo |= bits << 28;
        hi |= bits >>> 4;
      } else hi |= bits << (i * 7 - 32);
      if (b < 0x80) {
        out.writeUInt32BE(hi >>> 0, at);
        out.writeUInt32BE(lo >>> 0, at + 4);
        return;
      }
    }
    throw new Error('a varint is longer than 10 bytes');
  }

  /** The wire type of the next field (its number in `field`); the field's value follows. */
  tag(): number {
    const t = this.varint();
    this.field = Math.floor(t / 8);
    return t & 7;
  }

  /** Field `field` of `message`, whose tag said wire type `type`, as a length-delimited field (span); any other type is malformed. */
  len(type: number, message: string, field: number): number {
    requireType(type, LEN, message, field);
    return this.span();
  }

  /** A length-delimited field: returns where its bytes start (`spanEnd`: where they end); the position moves past it. */
  span(): number {
    const length = this.varint();
    const start = this.pos;
    if (length > this.end - start) throw new Error('a length-delimited field runs past the end of its message');
    this.pos = this.spanEnd = start + length;
    return start;
  }

  /** Skips the value of a field of `type` (numbered `field`, for a group's end). */
  skip(field: number, type: number, depth = 0): void {
    switch (type) {
      case VARINT: this.varint(); return;
      case FIXED64: this.advance(8); return;
      case LEN: this.span(); return;
      case FIXED32: this.advance(4); return;
      case START_GROUP:
        if (depth >= MAX_GROUP_DEPTH) throw new Error(`groups nested deeper than ${MAX_GROUP_DEPTH}`);
        for (;;) {
          if (!this.more) throw new Error('a group runs past the end of its message');
          const innerType = this.tag();
          if (innerType === END_GROUP) {
            if (this.field !== field) throw new Error('a group ends with another field number');
            return;
          }
          this.skip(this.field, innerType, depth + 1);
        }
      default: throw new Error(`invalid wire type ${type}`);
    }
  }

  private advance(bytes: number): void {
    if (bytes > this.end - this.pos) throw new Error('a fixed-size field runs past the end of its message');
    this.pos += bytes;
  }
}

/** Refuses field `field` of message `message` unless its wire type is `wanted` (the text is made only then: this runs for every field of every event). */
function requireType(actual: number, wanted: number, message: string, field: number): void {
  if (actual !== wanted) throw new Error(`${message} field ${field} has wire type ${actual}`);
}

function sameBytes(buf: Buffer, start: number, end: number, key: Buffer): boolean {
  if (end - start !== key.length) return false;
  for (let i = 0; i < key.length; i++) if (buf[start + i] !== key[i]) return false;
  return true;
}

/** A ProposedMessage (Append's and BatchAppend's are alike) in buf[start, end). */
function proposedAt(buf: Buffer, start: number, end: number): WireProposed {
  const w = new Wire(buf, start, end);
  const out: WireProposed = { id: undefined, type: undefined, contentType: undefined, data: EMPTY, customMetadata: EMPTY };
  while (w.more) {
    const type = w.tag();
    const field = w.field;
    if (field < 1 || field > 4) {
      w.skip(field, type);
      continue;
    }
    const s = w.len(type, 'ProposedMessage', field);
    const e = w.spanEnd;
    if (field === 1) out.id = uuidAt(buf, s, e);
    else if (field === 2) metadataEntry(buf, s, e, out);
    else if (field === 3) out.customMetadata = e > s ? buf.subarray(s, e) : EMPTY;
    else out.data = e > s ? buf.subarray(s, e) : EMPTY;
  }
  return out;
}

/** A UUID message's 16 bytes: the last arm set wins; none set, or text that is no UUID, is undefined. */
function uuidAt(buf: Buffer, start: number, end: number): Buffer | undefined {
  const w = new Wire(buf, start, end);
  let id: Buffer | undefined;
  while (w.more) {
    const type = w.tag();
    const field = w.field;
    if (field === 1 || field === 2) {
      const s = w.len(type, 'UUID', field);
      id = field === 1 ? structuredAt(buf, s, w.spanEnd) : parseUuidBytes(buf, s, w.spanEnd);
    } else w.skip(field, type);
  }
  return id;
}

/** UUID.Structured: most significant bits (field 1) then least (field 2), each an int64; absent is 0. */
function structuredAt(buf: Buffer, start: number, end: number): Buffer {
  const bytes = Buffer.alloc(16);
  const w = new Wire(buf, start, end);
  while (w.more) {
    const type = w.tag();
    const field = w.field;
    if (field === 1 || field === 2) {
      requireType(type, VARINT, 'UUID.Structured', field);
      w.int64Into(bytes, field === 1 ? 0 : 8);
    } else w.skip(field, type);
  }
  return bytes;
}

/** One entry of the metadata map: only "type" and "content-type" are kept. */
function metadataEntry(buf: Buffer, start: number, end: number, out: WireProposed): void {
  const w = new Wire(buf, start, end);
  let keyStart = 0;
  let keyEnd = 0;
  let valueStart = 0;
  let valueEnd = 0;
  while (w.more) {
    const type = w.tag();
    const field = w.field;
    if (field === 1 || field === 2) {
      const s = w.len(type, 'metadata entry', field);
      if (field === 1) {
        keyStart = s;
        keyEnd = w.spanEnd;
      } else {
        valueStart = s;
        valueEnd = w.spanEnd;
      }
    } else w.skip(field, type);
  }
  if (sameBytes(buf, keyStart, keyEnd, TYPE_KEY)) out.type = typeAt(buf, valueStart, valueEnd);
  else if (sameBytes(buf, keyStart, keyEnd, CONTENT_TYPE_KEY)) {
    out.contentType = sameBytes(buf, valueStart, valueEnd, JSON_CONTENT_TYPE_BYTES) ? JSON_CONTENT_TYPE : buf.toString('utf8', valueStart, valueEnd);
  }
}

/** The last event type read, and its bytes (a copy): appends carry few types, and each string is made once in a row. */
let lastType = '';
let lastTypeBytes = EMPTY;

function typeAt(buf: Buffer, start: number, end: number): string {
  if (!sameBytes(buf, start, end, lastTypeBytes)) {
    lastType = buf.toString('utf8', start, end);
    lastTypeBytes = Buffer.from(buf.subarray(start, end));
  }
  return lastType;
}

let types: { appendOptions: protobuf.Type; batchOptions: protobuf.Type; uuid: protobuf.Type } | undefined;

function typesOf(): NonNullable<typeof types> {
  const root = protoRoot();
  return types ??= {
    appendOptions: root.lookupType('event_store.client.streams.AppendReq.Options'),
    batchOptions: root.lookupType('event_store.client.streams.BatchAppendReq.Options'),
    uuid: root.lookupType('event_store.client.UUID'),
  };
}

/** A sub-message decoded by protobufjs, as codecs.ts decodes whole messages. */
function viaProtobufjs(type: protobuf.Type, buf: Buffer, start: number, end: number): Record<string, unknown> {
  return type.toObject(type.decode(buf.subarray(start, end)), TO_OBJECT);
}

/** AppendReq: options (field 1) or one proposed message (field 2); the last given wins. */
export function decodeAppendReq(buf: Buffer): WireAppendReq {
  const w = new Wire(buf, 0, buf.length);
  let out: WireAppendReq = {};
  while (w.more) {
    const type = w.tag();
    const field = w.field;
    if (field === 1 || field === 2) {
      const s = w.len(type, 'AppendReq', field);
      const e = w.spanEnd;
      out = field === 1 ? { options: viaProtobufjs(typesOf().appendOptions, buf, s, e) } : { proposed_message: proposedAt(buf, s, e) };
    } else w.skip(field, type);
  }
  return out;
}

/** BatchAppendReq: correlation id, options (first request of a correlation), proposed messages, is_final. */
export function decodeBatchAppendReq(buf: Buffer): WireBatchAppendReq {
  const w = new Wire(buf, 0, buf.length);
  const out: WireBatchAppendReq = { proposed_messages: [], is_final: false };
  while (w.more) {
    const type = w.tag();
    const field = w.field;
    if (field === 4) {
      requireType(type, VARINT, 'BatchAppendReq', field);
      out.is_final = w.varint() !== 0;
    } else if (field >= 1 && field <= 3) {
      const s = w.len(type, 'BatchAppendReq', field);
      const e = w.spanEnd;
      if (field === 1) {
        out.correlation_id = viaProtobufjs(typesOf().uuid, buf, s, e);
        out.correlation_bytes = Buffer.from(buf.subarray(s, e));
      }
      else if (field === 2) out.options = viaProtobufjs(typesOf().batchOptions, buf, s, e);
      else out.proposed_messages.push(proposedAt(buf, s, e));
    } else w.skip(field, type);
  }
  return out;
}

/** What a successful append answers: the stream's revision after it (-1: none) and its last event's position (undefined: nothing written). */
export interface AppendSuccess {
  revision: number;
  position: number | undefined;
}

/** AppendResp { success }. */
export function encodeAppendSuccess(result: AppendSuccess): Buffer {
  const success = successSize(result);
  const out = Buffer.allocUnsafe(1 + varintSize(success) + success);
  putSuccess(out, putVarint(out, putTag(out, 0, 1), success), result);
  return out;
}

/** BatchAppendResp { correlation_id (as sent), success, stream_identifier { stream_name } }. */
export function encodeBatchAppendSuccess(correlation: Buffer, streamName: string, result: AppendSuccess): Buffer {
  const success = successSize(result);
  const name = Buffer.byteLength(streamName, 'utf8');
  const identifier = 1 + varintSize(name) + name;
  const out = Buffer.allocUnsafe(1 + varintSize(correlation.length) + correlation.length
    + 1 + varintSize(success) + success + 1 + varintSize(identifier) + identifier);
  let at = putVarint(out, putTag(out, 0, 1), correlation.length);
  at += correlation.copy(out, at);
  at = putSuccess(out, putVarint(out, putTag(out, at, 3), success), result);
  at = putVarint(out, putTag(out, putVarint(out, putTag(out, at, 4), identifier), 3), name); // StreamIdentifier.stream_name is field 3
  out.write(streamName, at, name, 'utf8');
  return out;
}

/** Success { current_revision | no_stream, position { commit, prepare } | no_position }: the same fields in both messages. */
function successSize({ revision, position }: AppendSuccess): number {
  const positionBytes = position === undefined ? 0 : 2 + 2 * varintSize(position);
  return (revision >= 0 ? 1 + varintSize(revision) : 2) + (position === undefined ? 2 : 2 + positionBytes);
}

function putSuccess(out: Buffer, at: number, { revision, position }: AppendSuccess): number {
  if (revision >= 0) at = putVarint(out, putField(out, at, 1, VARINT), revision);
  else at = putVarint(out, putTag(out, at, 2), 0); // no_stream: an empty message
  if (position === undefined) return putVarint(out, putTag(out, at, 4), 0); // no_position
  at = putVarint(out, putTag(out, at, 3), 2 + 2 * varintSize(position));
  at = putVarint(out, putField(out, at, 1, VARINT), position);
  return putVarint(out, putField(out, at, 2, VARINT), position);
}

/** A length-delimited field's tag (fields 1-15: one byte). */
function putTag(out: Buffer, at: number, field: number): number {
  return putField(out, at, field, LEN);
}

function putField(out: Buffer, at: number, field: number, type: number): number {
  out[at] = (field << 3) | type;
  return at + 1;
}

/** Bytes of a varint of a non-negative integer up to 2^53 (no 32-bit operators: positions pass 2^32). */
function varintSize(n: number): number {
  let size = 1;
  for (; n >= 128; size++) n = Math.floor(n / 128);
  return size;
}

function putVarint(out: Buffer, at: number, n: number): number {
  for (; n >= 128; n = Math.floor(n / 128)) out[at++] = (n % 128) | 128;
  out[at] = n;
  return at + 1;
}
