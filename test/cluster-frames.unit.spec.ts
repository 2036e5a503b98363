import { describe, expect, it } from 'vitest';
import {
  decodeFrame, encodeFrame, FRAME, FrameError, FrameSplitter, MAX_FRAME_BYTES, MAX_HELLO_EPOCHS, PROTOCOL_VERSION, ProtocolVersionError,
  type Frame, type FrameBodies, type FrameType,
} from '../src/cluster/frames.js';

// The replication frame codec (src/cluster/frames.ts): every frame type survives a round trip
// through the byte stream, and whatever does not fit its type's shape (cut short, a field of the
// wrong type, another protocol version, a length out of bounds) is a FrameError, never a value.

const SAMPLES: { [T in FrameType]: FrameBodies[T] } = {
  [FRAME.HELLO]: {
    version: PROTOCOL_VERSION, name: 'node-2', instanceId: 'i-2', term: 7, epochs: [{ term: 7, position: 4096 }, { term: 3, position: 0 }], logEnd: 5000,
  },
  [FRAME.START]: { term: 7, common: 4096 },
  [FRAME.RECORDS]: { positions: [0, 100, 2 ** 40], records: [Buffer.from('abc'), Buffer.alloc(0), Buffer.from('defg')] },
  [FRAME.ACK]: 5000,
  [FRAME.HEARTBEAT]: 2 ** 40,
  [FRAME.REFUSED]: { message: 'this node does not lead' },
  [FRAME.WRITE]: {
    id: 3, stream: '$scavenges', expected: -2,
    events: [{ eventId: Buffer.alloc(16, 1).toString('base64'), eventType: 'T', isJson: true, data: 'e30=', metadata: '' }],
  },
  [FRAME.WRITTEN]: { id: 3, firstEventNumber: 0, position: 8192 },
  [FRAME.CONTROL]: { id: 9, request: { kind: 'start', options: [1, 'two', null] } },
  [FRAME.CONTROL_REPLY]: { id: 9, error: 'no scavenge runs' },
  [FRAME.COMMIT]: 0,
};
const TYPES = Object.values(FRAME);

function framesOf(...chunks: Buffer[]): Frame[] {
  const splitter = new FrameSplitter();
  const out: Frame[] = [];
  for (const chunk of chunks) {
    splitter.push(chunk);
    for (let f = splitter.next(); f; f = splitter.next()) out.push(f);
  }
  return out;
}

/** A frame of `type` whose payload is `payload` as given (no codec). */
function rawFrame(type: number, payload: Buffer | string): Buffer {
  const body = Buffer.isBuffer(payload) ? payload : Buffer.from(payload, 'utf8');
  const header = Buffer.alloc(5);
  header.writeUInt32BE(body.length + 1, 0);
  header[4] = type;
  return Buffer.concat([header, body]);
}

function payloadOf(type: FrameType): Buffer {
  return encodeFrame(type, SAMPLES[type] as never).subarray(5);
}

function decodeJson(type: FrameType, value: unknown): Frame {
  return decodeFrame(type, Buffer.from(JSON.stringify(value), 'utf8'));
}

describe('replication frames', () => {
  it('has a sample for every frame type (a new type needs one)', () => {
    expect(Object.keys(SAMPLES).map(Number).sort((a, b) => a - b)).toEqual([...TYPES].sort((a, b) => a - b));
  });

  it('round-trips every frame type, whole or a byte at a time, and many in one chunk', () => {
    const wire = TYPES.map((type) => encodeFrame(type, SAMPLES[type] as never));
    const expected = TYPES.map((type) => ({ type, body: SAMPLES[type] }));
    expect(framesOf(...wire)).toEqual(expected);
    const all = Buffer.concat(wire);
    expect(framesOf(all)).toEqual(expected);
    expect(framesOf(...[...all].map((b) => Buffer.from([b])))).toEqual(expected);
  });

  it('keeps only the fields of a shape (an optional one may be absent)', () => {
    expect(decodeJson(FRAME.START, { term: 1, common: 2, extra: 'x' })).toEqual({ type: FRAME.START, body: { term: 1, common: 2 } });
    expect(decodeJson(FRAME.WRITTEN, { id: 1, error: 'no' })).toEqual({ type: FRAME.WRITTEN, body: { id: 1, error: 'no' } });
    expect(decodeJson(FRAME.WRITTEN, { id: 1, position: -1, firstEventNumber: 0 }).body).toEqual({ id: 1, position: -1, firstEventNumber: 0 });
  });

  it('refuses every frame type cut short, or empty', () => {
    for (const type of TYPES) {
      const payload = payloadOf(type);
      expect(() => decodeFrame(type, payload.subarray(0, payload.length - 1)), `type ${type}`).toThrow(FrameError);
      expect(() => decodeFrame(type, Buffer.alloc(0)), `type ${type}`).toThrow(FrameError);
    }
  });

  it('refuses bytes after the end of a position or records frame', () => {
    for (const type of [FRAME.ACK, FRAME.HEARTBEAT, FRAME.COMMIT, FRAME.RECORDS]) {
      expect(() => decodeFrame(type, Buffer.concat([payloadOf(type), Buffer.from([0])])), `type ${type}`).toThrow(FrameError);
    }
  });

  it('refuses fields of the wrong type, naming the field', () => {
    const hello = SAMPLES[FRAME.HELLO];
    const wrong: [FrameType, unknown, RegExp][] = [
      [FRAME.HELLO, { ...hello, term: '7' }, /term/],
      [FRAME.HELLO, { ...hello, name: 5 }, /name/],
      [FRAME.HELLO, { ...hello, logEnd: -1 }, /logEnd/],
      [FRAME.HELLO, { ...hello, epochs: {} }, /epochs/],
      [FRAME.HELLO, { ...hello, epochs: [{ term: 1, position: 1.5 }] }, /epochs/],
      [FRAME.HELLO, { ...hello, epochs: Array.from({ length: MAX_HELLO_EPOCHS + 1 }, () => ({ term: 1, position: 0 })) }, /epochs/],
      [FRAME.START, { term: 7 }, /common/],
      [FRAME.START, { term: 7, common: 2 ** 53 }, /common/],
      [FRAME.REFUSED, { message: 1 }, /message/],
      [FRAME.WRITE, { ...SAMPLES[FRAME.WRITE], id: 1.5 }, /id/],
      [FRAME.WRITE, { ...SAMPLES[FRAME.WRITE], events: [{ ...SAMPLES[FRAME.WRITE].events[0], isJson: 'yes' }] }, /events/],
      [FRAME.WRITE, { ...SAMPLES[FRAME.WRITE], events: 'none' }, /events/],
      [FRAME.WRITTEN, { id: 3, position: '8192' }, /position/],
      [FRAME.CONTROL, { request: {} }, /id/],
      [FRAME.CONTROL_REPLY, { id: 9, error: { message: 'x' } }, /error/],
    ];
    for (const [type, value, field] of wrong) expect(() => decodeJson(type, value), JSON.stringify(value).slice(0, 80)).toThrow(field);
    for (const type of [FRAME.START, FRAME.REFUSED, FRAME.WRITE, FRAME.WRITTEN, FRAME.CONTROL, FRAME.CONTROL_REPLY]) {
      for (const notAnObject of [null, [], 7, 'text']) expect(() => decodeJson(type, notAnObject)).toThrow(FrameError);
      expect(() => decodeFrame(type, Buffer.from('{"id":', 'utf8'))).toThrow(/not JSON/);
    }
  });

  it('refuses a position frame whose number is not a log position', () => {
    for (const type of [FRAME.ACK, FRAME.HEARTBEAT, FRAME.COMMIT]) {
      for (const bad of [-1, 0.5, NaN, Infinity, 2 ** 53]) {
        const payload = Buffer.alloc(8);
        payload.writeDoubleBE(bad, 0);
        expect(() => decodeFrame(type, payload), `type ${type}: ${bad}`).toThrow(FrameError);
      }
    }
  });

  it('refuses a HELLO of another protocol version, or of none, naming both versions, before reading its shape', () => {
    const other = PROTOCOL_VERSION + 1;
    const refusal = (value: unknown) => {
      try {
        decodeJson(FRAME.HELLO, value);
      } catch (err) {
        return err;
      }
      throw new Error('decoded');
    };
    const newer = refusal({ ...SAMPLES[FRAME.HELLO], version: other }) as ProtocolVersionError;
    expect(newer).toBeInstanceOf(ProtocolVersionError);
    expect(newer).toBeInstanceOf(FrameError);
    expect([newer.theirs, newer.ours]).toEqual([other, PROTOCOL_VERSION]);
    expect(newer.message).toContain(`version ${other}`);
    expect(newer.message).toContain(`version ${PROTOCOL_VERSION}`);
    // Another version may have another shape: the version alone decides.
    expect(refusal({ version: other, epochs: 'whatever' })).toBeInstanceOf(ProtocolVersionError);
    const { version: _, ...unversioned } = SAMPLES[FRAME.HELLO];
    const old = refusal(unversioned) as ProtocolVersionError;
    expect(old).toBeInstanceOf(ProtocolVersionError);
    expect(old.theirs).toBeUndefined();
    expect(old.message).toMatch(/without a replication protocol version.*version 1/);
    expect(refusal({ ...SAMPLES[FRAME.HELLO], version: '1' })).toBeInstanceOf(ProtocolVersionError);
  });

  it('refuses a length prefix out of bounds before waiting for its bytes, and an unknown frame type', () => {
    const oversized = Buffer.alloc(5);
    oversized.writeUInt32BE(MAX_FRAME_BYTES + 1, 0);
    expect(() => framesOf(oversized)).toThrow(/frame of 134217729 bytes/);
    expect(() => framesOf(Buffer.alloc(4))).toThrow(/frame of 0 bytes/);
    expect(() => framesOf(rawFrame(200, '{}'))).toThrow(/unknown type 200/);
    expect(() => framesOf(rawFrame(0, ''))).toThrow(FrameError);
    // A length within bounds is waited for: nothing yet, and no error.
    const partial = Buffer.alloc(5);
    partial.writeUInt32BE(1000, 0);
    expect(framesOf(partial)).toEqual([]);
  });

  it('refuses a records frame whose record or count claims more bytes than the frame has', () => {
    const count = Buffer.alloc(4);
    count.writeUInt32BE(0xffffffff, 0);
    expect(() => decodeFrame(FRAME.RECORDS, count)).toThrow(/cut short/);
    const record = Buffer.alloc(4 + 12 + 3);
    record.writeUInt32BE(1, 0);
    record.writeDoubleBE(0, 4);
    record.writeUInt32BE(0xffffffff, 12);
    expect(() => decodeFrame(FRAME.RECORDS, record)).toThrow(/out of its frame/);
    record.writeUInt32BE(3, 12);
    record.writeDoubleBE(-8, 4);
    expect(() => decodeFrame(FRAME.RECORDS, record)).toThrow(/out of its frame/);
    record.writeDoubleBE(8, 4);
    expect(decodeFrame(FRAME.RECORDS, record).body).toEqual({ positions: [8], records: [Buffer.alloc(3)] });
  });
});
