import type { Socket } from 'node:net';
import type { ShippedBatch } from '../store/index.js';

// The replication stream between a leader and one follower: length-prefixed frames over one TCP
// (or TLS) connection the follower opens. Control frames carry JSON; record frames carry the
// records' encoded bytes as the leader stored them, never re-encoded.
//
//   every frame      u32 length of what follows (1 .. MAX_FRAME_BYTES)   u8 type   payload
//
//   HELLO          f → l   JSON Hello: `version` is read first, and another version is refused
//   START          l → f   JSON Start
//   RECORDS        l → f   u32 count, then per record: f64 position, u32 length, the record's bytes
//   ACK            f → l   f64 the follower's durable log end
//   HEARTBEAT      l → f   f64 the leader's log end
//   REFUSED        l → f   JSON { message }; the sender closes the connection
//   WRITE          f → l   JSON WriteRequest
//   WRITTEN        l → f   JSON Written
//   CONTROL        l → f   JSON Control
//   CONTROL_REPLY  f → l   JSON ControlReply
//   COMMIT         l → f   f64 the leader's commit position
//
// Every frame is read through the one checked decoder of its type (decodeFrame): lengths are
// checked before any read and JSON fields by type, so what a peer sends is either a typed frame
// or a FrameError that closes its connection (readFrames), never an exception out of a socket
// handler nor a value that reaches an assert further in.
//
// A connection belongs to one leader term: the follower names the term it expects in HELLO and
// closes the connection the moment etcd shows another, so frames need not repeat it.

/**
 * The version of this protocol, said in HELLO. Every node of a cluster speaks the same one: a
 * HELLO of another version (or of none: a build from before versions) is refused. Raise it with
 * any change to a frame's layout or meaning.
 */
export const PROTOCOL_VERSION = 1;

export const FRAME = {
  HELLO: 1, START: 2, RECORDS: 3, ACK: 4, HEARTBEAT: 5, REFUSED: 6, WRITE: 7, WRITTEN: 8, CONTROL: 9, CONTROL_REPLY: 10, COMMIT: 11,
} as const;
export type FrameType = (typeof FRAME)[keyof typeof FRAME];

/** The largest frame either side accepts: a record frame holds at most a writer batch (16 MB) plus one large event. */
export const MAX_FRAME_BYTES = 128 * 1024 * 1024;

export const MAX_HELLO_EPOCHS = 64;

export interface EpochMark {
  term: number;
  position: number;
}

/** Follower → leader, first frame. */
export interface Hello {
  version: typeof PROTOCOL_VERSION;
  name: string;
  instanceId: string;
  /** The leader's term the follower expects (from etcd). */
  term: number;
  /** Its newest epochs, newest first (at most MAX_HELLO_EPOCHS). */
  epochs: EpochMark[];
  logEnd: number;
}

/** Leader → follower, answer to HELLO: the logs agree below `common`; records from the follower's end follow. */
export interface Start {
  term: number;
  common: number;
}

/** Leader → follower (or any node → a connecting one): why it takes no replication connection now. */
export interface Refused {
  message: string;
}

/** An event of a WRITE, its bytes in base64. */
export interface WireEvent {
  eventId: string;
  eventType: string;
  isJson: boolean;
  data: string;
  metadata: string;
}

/**
 * Follower → leader: an append the follower's own services need (a node scavenge's scavenge
 * point and history); the leader appends it and answers WRITTEN with the same id.
 */
export interface WriteRequest {
  id: number;
  stream: string;
  /** The wire form of the expected version (-2 any, -1 no stream, -4 exists, N). */
  expected: number;
  events: WireEvent[];
}

/** Leader → follower: the outcome of a WRITE. */
export interface Written {
  id: number;
  firstEventNumber?: number;
  position?: number;
  error?: string;
}

/** Leader → follower: a request to the follower's own services (the auto-scavenge coordinator's node scavenge calls). */
export interface Control {
  id: number;
  request: unknown;
}

/** Follower → leader: the answer to a CONTROL. */
export interface ControlReply {
  id: number;
  answer?: unknown;
  error?: string;
}

/** What each frame type carries, decoded. ACK, HEARTBEAT and COMMIT carry a log position. */
export interface FrameBodies {
  [FRAME.HELLO]: Hello;
  [FRAME.START]: Start;
  [FRAME.RECORDS]: ShippedBatch;
  [FRAME.ACK]: number;
  [FRAME.HEARTBEAT]: number;
  [FRAME.REFUSED]: Refused;
  [FRAME.WRITE]: WriteRequest;
  [FRAME.WRITTEN]: Written;
  [FRAME.CONTROL]: Control;
  [FRAME.CONTROL_REPLY]: ControlReply;
  [FRAME.COMMIT]: number;
}

/** A decoded frame: its type and what it carries. */
export type Frame = { [T in FrameType]: { type: T; body: FrameBodies[T] } }[FrameType];

/** A frame that does not parse: the connection is closed (and re-established) rather than trusted. */
export class FrameError extends Error {}

/** A HELLO of another protocol version. */
export class ProtocolVersionError extends FrameError {
  /** The version the HELLO says (undefined: none, or not an integer). */
  readonly theirs: number | undefined;

  constructor(theirs: unknown, readonly ours: number) {
    const said = theirs === undefined ? 'a HELLO without a replication protocol version (a build from before versions)'
      : Number.isSafeInteger(theirs) ? `a HELLO of replication protocol version ${theirs as number}`
        : 'a HELLO whose replication protocol version is not an integer';
    super(`${said} refused by a node of version ${ours}: the nodes of a cluster must speak the same version`);
    this.theirs = Number.isSafeInteger(theirs) ? theirs as number : undefined;
  }
}

// ---- the checked shapes of the JSON frames -------------------------------------------------

type Check<T> = (value: unknown) => value is T;
type Shape<T> = { [K in keyof T]-?: Check<T[K]> };

const integer = (v: unknown): v is number => Number.isSafeInteger(v);
const position = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;
const string = (v: unknown): v is string => typeof v === 'string';
const boolean = (v: unknown): v is boolean => typeof v === 'boolean';
const anything = (_v: unknown): _v is unknown => true;
const optional = <T>(check: Check<T>) => (v: unknown): v is T | undefined => v === undefined || check(v);
const listOf = <T>(check: Check<T>, max = Number.MAX_SAFE_INTEGER) => (v: unknown): v is T[] => Array.isArray(v) && v.length <= max && v.every(check);
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const objectOf = <T>(shape: Shape<T>) => (v: unknown): v is T => isObject(v) && Object.keys(shape).every((k) => shape[k as keyof T](v[k]));

const EPOCH: Shape<EpochMark> = { term: integer, position };
const HELLO: Shape<Omit<Hello, 'version'>> = {
  name: string, instanceId: string, term: integer, epochs: listOf(objectOf(EPOCH), MAX_HELLO_EPOCHS), logEnd: position,
};
const START: Shape<Start> = { term: integer, common: position };
const REFUSED: Shape<Refused> = { message: string };
const WIRE_EVENT: Shape<WireEvent> = { eventId: string, eventType: string, isJson: boolean, data: string, metadata: string };
const WRITE: Shape<WriteRequest> = { id: integer, stream: string, expected: integer, events: listOf(objectOf(WIRE_EVENT)) };
const WRITTEN: Shape<Written> = { id: integer, firstEventNumber: optional(integer), position: optional(integer), error: optional(string) };
const CONTROL: Shape<Control> = { id: integer, request: anything };
const CONTROL_REPLY: Shape<ControlReply> = { id: integer, answer: anything, error: optional(string) };

function parseObject(payload: Buffer, frame: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(payload.toString('utf8'));
  } catch {
    throw new FrameError(`a ${frame} frame that is not JSON`);
  }
  if (!isObject(value)) throw new FrameError(`a ${frame} frame that is not a JSON object`);
  return value;
}

/** The fields `shape` names (and only those), each checked; a FrameError names the first that is wrong. */
function shaped<T>(value: Record<string, unknown>, frame: string, shape: Shape<T>): T {
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(shape)) {
    if (!shape[key as keyof T](value[key])) throw new FrameError(`a ${frame} frame whose ${key} is missing or of the wrong type`);
    if (value[key] !== undefined) out[key] = value[key];
  }
  return out as T;
}

function helloOf(value: Record<string, unknown>): Hello {
  // Before the shape: another version's HELLO may have another shape.
  if (value.version !== PROTOCOL_VERSION) throw new ProtocolVersionError(value.version, PROTOCOL_VERSION);
  return { version: PROTOCOL_VERSION, ...shaped(value, 'HELLO', HELLO) };
}

/** RECORDS: u32 count, then per record f64 position, u32 length, bytes. */
export function decodeRecords(payload: Buffer): ShippedBatch {
  if (payload.length < 4) throw new FrameError('a records frame without its count');
  const count = payload.readUInt32BE(0);
  const positions: number[] = [];
  const records: Buffer[] = [];
  let o = 4;
  for (let i = 0; i < count; i++) {
    if (o + 12 > payload.length) throw new FrameError('a records frame cut short');
    const at = payload.readDoubleBE(o);
    const length = payload.readUInt32BE(o + 8);
    if (!position(at) || o + 12 + length > payload.length) throw new FrameError('a record out of its frame');
    positions.push(at);
    records.push(payload.subarray(o + 12, o + 12 + length));
    o += 12 + length;
  }
  if (o !== payload.length) throw new FrameError('bytes after the last record of a frame');
  return { positions, records };
}

/** The position an ACK, HEARTBEAT or COMMIT frame carries. */
function decodePosition(payload: Buffer, frame: string): number {
  if (payload.length !== 8) throw new FrameError(`a ${frame} frame of ${payload.length} bytes, not 8`);
  const at = payload.readDoubleBE(0);
  if (!position(at)) throw new FrameError(`a ${frame} frame with no position`);
  return at;
}

// ---- encoding and decoding, one codec per type ---------------------------------------------

interface Codec<T extends FrameType> {
  name: string;
  encode(body: FrameBodies[T]): Buffer;
  decode(payload: Buffer): FrameBodies[T];
}

function jsonCodec<T extends FrameType>(name: string, decode: (value: Record<string, unknown>) => FrameBodies[T]): Codec<T> {
  return { name, encode: (body) => Buffer.from(JSON.stringify(body), 'utf8'), decode: (payload) => decode(parseObject(payload, name)) };
}

/** A JSON frame read through its shape. */
function shapedCodec<T extends FrameType>(name: string, shape: Shape<FrameBodies[T]>): Codec<T> {
  return jsonCodec(name, (value) => shaped(value, name, shape));
}

function positionCodec<T extends typeof FRAME.ACK | typeof FRAME.HEARTBEAT | typeof FRAME.COMMIT>(name: string): Codec<T> {
  return {
    name,
    encode: (at) => {
      const payload = Buffer.allocUnsafe(8);
      payload.writeDoubleBE(at as number, 0);
      return payload;
    },
    decode: (payload) => decodePosition(payload, name) as FrameBodies[T],
  };
}

const CODECS: { [T in FrameType]: Codec<T> } = {
  [FRAME.HELLO]: jsonCodec('HELLO', helloOf),
  [FRAME.START]: shapedCodec('START', START),
  [FRAME.RECORDS]: { name: 'RECORDS', encode: (batch) => recordsFrame(batch).subarray(5), decode: decodeRecords },
  [FRAME.ACK]: positionCodec('ACK'),
  [FRAME.HEARTBEAT]: positionCodec('HEARTBEAT'),
  [FRAME.REFUSED]: shapedCodec('REFUSED', REFUSED),
  [FRAME.WRITE]: shapedCodec('WRITE', WRITE),
  [FRAME.WRITTEN]: shapedCodec('WRITTEN', WRITTEN),
  [FRAME.CONTROL]: shapedCodec('CONTROL', CONTROL),
  [FRAME.CONTROL_REPLY]: shapedCodec('CONTROL_REPLY', CONTROL_REPLY),
  [FRAME.COMMIT]: positionCodec('COMMIT'),
};

function isFrameType(type: number): type is FrameType {
  return Object.hasOwn(CODECS, type);
}

/** The frame's name, for messages. */
export function frameName(type: FrameType): string {
  return CODECS[type].name;
}

/** A whole frame (length, type, payload) of `type` carrying `body`. */
export function encodeFrame<T extends FrameType>(type: T, body: FrameBodies[T]): Buffer {
  if (type === FRAME.RECORDS) return recordsFrame(body as ShippedBatch); // written in place: no second copy
  const payload = (CODECS[type] as Codec<T>).encode(body);
  const header = Buffer.allocUnsafe(5);
  header.writeUInt32BE(payload.length + 1, 0);
  header[4] = type;
  return Buffer.concat([header, payload]);
}

/** RECORDS, built in one buffer (the hot path of replication). */
export function recordsFrame(batch: ShippedBatch): Buffer {
  let size = 5 + 4;
  for (const r of batch.records) size += 12 + r.length;
  const out = Buffer.allocUnsafe(size);
  out.writeUInt32BE(size - 4, 0);
  out[4] = FRAME.RECORDS;
  out.writeUInt32BE(batch.records.length, 5);
  let o = 9;
  for (let i = 0; i < batch.records.length; i++) {
    out.writeDoubleBE(batch.positions[i], o);
    out.writeUInt32BE(batch.records[i].length, o + 8);
    batch.records[i].copy(out, o + 12);
    o += 12 + batch.records[i].length;
  }
  return out;
}

/** The frame of `type` whose payload is `payload`, checked against its type's shape; a FrameError when it does not fit. */
export function decodeFrame(type: number, payload: Buffer): Frame {
  if (!isFrameType(type)) throw new FrameError(`a frame of unknown type ${type}`);
  return { type, body: (CODECS[type] as Codec<typeof type>).decode(payload) } as Frame;
}

// ---- reading a connection -------------------------------------------------------------------

/** Cuts a byte stream into decoded frames; the length prefix is checked before a frame is waited for. */
export class FrameSplitter {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  /** The length of the frame being waited for (-1: its prefix is not read yet). */
  private need = -1;

  push(chunk: Buffer): void {
    this.pending.push(chunk);
    this.pendingBytes += chunk.length;
  }

  /** The next whole frame, or undefined until more bytes arrive; a FrameError for one that is oversized or does not decode. */
  next(): Frame | undefined {
    if (this.need < 0) {
      if (this.pendingBytes < 4) return undefined;
      const head = this.joined();
      this.need = head.readUInt32BE(0);
      if (this.need < 1 || this.need > MAX_FRAME_BYTES) throw new FrameError(`a frame of ${this.need} bytes (at most ${MAX_FRAME_BYTES})`);
    }
    if (this.pendingBytes < 4 + this.need) return undefined;
    const all = this.joined();
    const frame = all.subarray(4, 4 + this.need);
    const rest = all.subarray(4 + this.need);
    this.pending = rest.length > 0 ? [rest] : [];
    this.pendingBytes = rest.length;
    this.need = -1;
    return decodeFrame(frame[0], frame.subarray(1));
  }

  private joined(): Buffer {
    const all = this.pending.length === 1 ? this.pending[0] : Buffer.concat(this.pending);
    this.pending = [all];
    return all;
  }
}

/**
 * Calls `onFrame` for each frame the socket brings, until the socket is closed or ended. A frame
 * that is oversized or does not decode, or a handler that throws, stops the reading: `onBroken`
 * hears why (to log it, or to end the socket with a last frame), then the socket is destroyed
 * unless `onBroken` ended it.
 */
export function readFrames(socket: Socket, onFrame: (frame: Frame) => void, onBroken: (err: Error) => void): void {
  const splitter = new FrameSplitter();
  socket.on('data', (chunk: Buffer) => {
    if (socket.destroyed || socket.writableEnded) return;
    splitter.push(chunk);
    try {
      for (let frame = splitter.next(); frame; frame = splitter.next()) {
        onFrame(frame);
        if (socket.destroyed || socket.writableEnded) return;
      }
    } catch (err) {
      onBroken(err instanceof Error ? err : new Error(String(err)));
      if (!socket.writableEnded) socket.destroy();
    }
  });
}
