import type { Socket } from 'node:net';
import type { ShippedBatch } from '../store/index.js';

// The replication stream between a leader and one follower: length-prefixed frames over one TCP
// (or TLS) connection the follower opens. Control frames carry JSON; record frames carry the
// records' encoded bytes as the leader stored them, never re-encoded.
//
//   u32 length of what follows   u8 type   payload
//
// A connection belongs to one leader term: the follower names the term it expects in HELLO and
// closes the connection the moment etcd shows another, so frames need not repeat it.

export const FRAME = {
  HELLO: 1, START: 2, RECORDS: 3, ACK: 4, HEARTBEAT: 5, REFUSED: 6, WRITE: 7, WRITTEN: 8, CONTROL: 9, CONTROL_REPLY: 10, COMMIT: 11,
} as const;
export type FrameType = (typeof FRAME)[keyof typeof FRAME];

/** The largest frame either side accepts: a record frame holds at most a writer batch (16 MB) plus one large event. */
export const MAX_FRAME_BYTES = 128 * 1024 * 1024;

export interface EpochMark {
  term: number;
  position: number;
}

/** Follower → leader, first frame. */
export interface Hello {
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

export const MAX_HELLO_EPOCHS = 64;

/**
 * Follower → leader: an append the follower's own services need (a node scavenge's scavenge
 * point and history); the leader appends it and answers WRITTEN with the same id.
 */
export interface WriteRequest {
  id: number;
  stream: string;
  /** The wire form of the expected version (-2 any, -1 no stream, -4 exists, N). */
  expected: number;
  events: { eventId: string; eventType: string; isJson: boolean; data: string; metadata: string }[];
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

/** Leader → follower: the outcome of a WRITE. */
export interface Written {
  id: number;
  firstEventNumber?: number;
  position?: number;
  error?: string;
}

export function encodeFrame(type: FrameType, payload: Buffer): Buffer {
  const header = Buffer.allocUnsafe(5);
  header.writeUInt32BE(payload.length + 1, 0);
  header[4] = type;
  return Buffer.concat([header, payload]);
}

export function jsonFrame(type: FrameType, value: unknown): Buffer {
  return encodeFrame(type, Buffer.from(JSON.stringify(value), 'utf8'));
}

/** ACK (follower → leader): its durable end. COMMIT (leader → follower): where its quorum holds the log. */
export function positionFrame(type: typeof FRAME.ACK | typeof FRAME.COMMIT, position: number): Buffer {
  const payload = Buffer.allocUnsafe(8);
  payload.writeDoubleBE(position, 0);
  return encodeFrame(type, payload);
}

/** RECORDS: u32 count, then per record f64 position, u32 length, bytes. */
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

/** A frame that does not parse: the connection is closed (and re-established) rather than trusted. */
export class FrameError extends Error {}

export function decodeRecords(payload: Buffer): ShippedBatch {
  if (payload.length < 4) throw new FrameError('a records frame without its count');
  const count = payload.readUInt32BE(0);
  const positions: number[] = [];
  const records: Buffer[] = [];
  let o = 4;
  for (let i = 0; i < count; i++) {
    if (o + 12 > payload.length) throw new FrameError('a records frame cut short');
    const position = payload.readDoubleBE(o);
    const length = payload.readUInt32BE(o + 8);
    if (!Number.isSafeInteger(position) || position < 0 || o + 12 + length > payload.length) throw new FrameError('a record out of its frame');
    positions.push(position);
    records.push(payload.subarray(o + 12, o + 12 + length));
    o += 12 + length;
  }
  if (o !== payload.length) throw new FrameError('bytes after the last record of a frame');
  return { positions, records };
}

/** The position of an ACK or COMMIT frame. */
export function decodePosition(payload: Buffer): number {
  if (payload.length !== 8) throw new FrameError('a position frame of the wrong size');
  const position = payload.readDoubleBE(0);
  if (!Number.isSafeInteger(position) || position < 0) throw new FrameError('a position frame with no position');
  return position;
}

export function decodeJson<T>(payload: Buffer, check: (value: Record<string, unknown>) => boolean): T {
  let value: unknown;
  try {
    value = JSON.parse(payload.toString('utf8'));
  } catch {
    throw new FrameError('a control frame that is not JSON');
  }
  if (typeof value !== 'object' || value === null || !check(value as Record<string, unknown>)) throw new FrameError('a control frame of the wrong shape');
  return value as T;
}

export function isHello(v: Record<string, unknown>): boolean {
  return typeof v.name === 'string' && typeof v.instanceId === 'string' && Number.isSafeInteger(v.term)
    && Number.isSafeInteger(v.logEnd) && Array.isArray(v.epochs) && v.epochs.length <= MAX_HELLO_EPOCHS
    && v.epochs.every((e: unknown) => typeof e === 'object' && e !== null
      && Number.isSafeInteger((e as EpochMark).term) && Number.isSafeInteger((e as EpochMark).position));
}

export function isStart(v: Record<string, unknown>): boolean {
  return Number.isSafeInteger(v.term) && Number.isSafeInteger(v.common);
}

/** Splits a socket's bytes into frames; calls `onFrame` for each; an oversized or broken frame destroys the socket. */
export function readFrames(socket: Socket, onFrame: (type: number, payload: Buffer) => void): void {
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let need = -1;
  socket.on('data', (chunk: Buffer) => {
    pending.push(chunk);
    pendingBytes += chunk.length;
    try {
      for (;;) {
        if (need < 0) {
          if (pendingBytes < 4) return;
          const head = pending.length === 1 ? pending[0] : Buffer.concat(pending);
          pending = [head];
          need = head.readUInt32BE(0);
          if (need < 1 || need > MAX_FRAME_BYTES) throw new FrameError(`a frame of ${need} bytes`);
        }
        if (pendingBytes < 4 + need) return;
        const all = pending.length === 1 ? pending[0] : Buffer.concat(pending);
        const frame = all.subarray(4, 4 + need);
        const rest = all.subarray(4 + need);
        pending = rest.length > 0 ? [rest] : [];
        pendingBytes = rest.length;
        need = -1;
        onFrame(frame[0], frame.subarray(1));
      }
    } catch (err) {
      socket.destroy(err as Error);
    }
  });
}
