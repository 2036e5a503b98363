import { formatUuid, type EventRecord, type ResolvedEvent } from '../../store/index.js';

// The hot path of reads and subscriptions: `ReadResp { event = 1: ReadEvent }` encoded straight
// from a record into one buffer, instead of building an object for the generic serializer
// (streams.proto: ReadEvent { event = 1, link = 2, commit_position = 3 }, RecordedEvent { id = 1,
// stream_identifier = 2, stream_revision = 3, prepare_position = 4, commit_position = 5,
// metadata = 6 (map), custom_metadata = 7, data = 8 }, UUID { structured = 1 | string = 2 },
// StreamIdentifier { stream_name = 3 }). A unit test decodes its output with the .proto files.

export type UuidForm = 'string' | 'structured';

const LEN = 2; // wire type: length-delimited
const VARINT = 0;
const JSON_TYPE = 'application/json';
const BINARY_TYPE = 'application/octet-stream';

function varintSize(n: number): number {
  let size = 1;
  while (n >= 128) {
    n = Math.floor(n / 128);
    size++;
  }
  return size;
}

class Writer {
  at = 0;
  constructor(readonly buf: Buffer) {}

  varint(n: number): void {
    while (n >= 128) {
      this.buf[this.at++] = (n % 128) | 128;
      n = Math.floor(n / 128);
    }
    this.buf[this.at++] = n;
  }

  /** A signed 64-bit varint (ten bytes when negative). */
  int64(n: bigint): void {
    let v = BigInt.asUintN(64, n);
    while (v >= 128n) {
      this.buf[this.at++] = Number(v & 127n) | 128;
      v >>= 7n;
    }
    this.buf[this.at++] = Number(v);
  }

  tag(field: number, wire: number): void {
    this.buf[this.at++] = (field << 3) | wire;
  }

  bytes(field: number, b: Buffer): void {
    this.tag(field, LEN);
    this.varint(b.length);
    b.copy(this.buf, this.at);
    this.at += b.length;
  }

  string(field: number, s: string, byteLength: number): void {
    this.tag(field, LEN);
    this.varint(byteLength);
    this.at += this.buf.write(s, this.at, byteLength, 'utf8');
  }
}

function int64Size(n: bigint): number {
  let v = BigInt.asUintN(64, n);
  let size = 1;
  while (v >= 128n) {
    v >>= 7n;
    size++;
  }
  return size;
}

/** 100-ns ticks since the Unix epoch, in decimal, from µs (a string: the figure passes 2^53). */
export function ticksOf(micros: number): string {
  const us = Math.trunc(micros);
  return us === 0 ? '0' : `${us}0`;
}

/** The id's two halves as the structured UUID carries them: big-endian signed 64-bit. */
function uuidHalves(id: Buffer): [bigint, bigint] {
  return [id.readBigInt64BE(0), id.readBigInt64BE(8)];
}

interface Sized {
  record: EventRecord;
  idText: string;
  halves?: [bigint, bigint];
  idSize: number;
  streamBytes: number;
  typeBytes: number;
  created: string;
  contentType: string;
  metadataSize: number;
  size: number;
}

function entrySize(keyBytes: number, valueBytes: number): number {
  const inner = 1 + varintSize(keyBytes) + keyBytes + 1 + varintSize(valueBytes) + valueBytes;
  return 1 + varintSize(inner) + inner;
}

function sizeRecord(record: EventRecord, form: UuidForm): Sized {
  let idText = '';
  let halves: [bigint, bigint] | undefined;
  let idInner: number;
  if (form === 'string') {
    idText = formatUuid(record.eventId);
    idInner = 1 + 1 + 36;
  } else {
    halves = uuidHalves(record.eventId);
    const structured = 1 + int64Size(halves[0]) + 1 + int64Size(halves[1]);
    idInner = 1 + varintSize(structured) + structured;
  }
  const streamBytes = Buffer.byteLength(record.streamId, 'utf8');
  const typeBytes = Buffer.byteLength(record.eventType, 'utf8');
  const created = ticksOf(record.created);
  const contentType = record.isJson ? JSON_TYPE : BINARY_TYPE;
  const metadataSize = entrySize(4, typeBytes) + entrySize(7, created.length) + entrySize(12, contentType.length);
  const streamInner = 1 + varintSize(streamBytes) + streamBytes;
  const size = 1 + varintSize(idInner) + idInner
    + 1 + varintSize(streamInner) + streamInner
    + 1 + varintSize(record.eventNumber)
    + 1 + varintSize(record.position)
    + 1 + varintSize(record.position)
    + metadataSize
    + 1 + varintSize(record.metadata.length) + record.metadata.length
    + 1 + varintSize(record.data.length) + record.data.length;
  return { record, idText, halves, idSize: idInner, streamBytes, typeBytes, created, contentType, metadataSize, size };
}

function writeEntry(w: Writer, key: string, value: string, valueBytes: number): void {
  const inner = 1 + varintSize(key.length) + key.length + 1 + varintSize(valueBytes) + valueBytes;
  w.tag(6, LEN);
  w.varint(inner);
  w.string(1, key, key.length);
  w.string(2, value, valueBytes);
}

function writeRecord(w: Writer, field: number, s: Sized): void {
  const r = s.record;
  w.tag(field, LEN);
  w.varint(s.size);
  w.tag(1, LEN);
  w.varint(s.idSize);
  if (s.halves) {
    const structured = 1 + int64Size(s.halves[0]) + 1 + int64Size(s.halves[1]);
    w.tag(1, LEN);
    w.varint(structured);
    w.tag(1, VARINT);
    w.int64(s.halves[0]);
    w.tag(2, VARINT);
    w.int64(s.halves[1]);
  } else {
    w.string(2, s.idText, 36);
  }
  w.tag(2, LEN);
  w.varint(1 + varintSize(s.streamBytes) + s.streamBytes);
  w.string(3, r.streamId, s.streamBytes);
  w.tag(3, VARINT);
  w.varint(r.eventNumber);
  w.tag(4, VARINT);
  w.varint(r.position);
  w.tag(5, VARINT);
  w.varint(r.position);
  writeEntry(w, 'type', r.eventType, s.typeBytes);
  writeEntry(w, 'created', s.created, s.created.length);
  writeEntry(w, 'content-type', s.contentType, s.contentType.length);
  w.bytes(7, r.metadata);
  w.bytes(8, r.data);
}

/** `ReadResp { event }` for one event: the event (a resolved link's target), the link, the original's commit position. */
export function encodeReadEvent(e: ResolvedEvent, form: UuidForm): Buffer {
  const event = e.event ? sizeRecord(e.event, form) : undefined;
  const link = e.link ? sizeRecord(e.link, form) : undefined;
  const original = (e.link ?? e.event)!;
  const inner = (event ? 1 + varintSize(event.size) + event.size : 0)
    + (link ? 1 + varintSize(link.size) + link.size : 0)
    + 1 + varintSize(original.position);
  const total = 1 + varintSize(inner) + inner;
  const w = new Writer(Buffer.allocUnsafe(total));
  w.tag(1, LEN);
  w.varint(inner);
  if (event) writeRecord(w, 1, event);
  if (link) writeRecord(w, 2, link);
  w.tag(3, VARINT);
  w.varint(original.position);
  return w.buf;
}
