import { randomBytes, randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  decodeAppendReq, decodeBatchAppendReq, encodeAppendSuccess, encodeBatchAppendSuccess, type WireProposed,
} from '../src/api/grpc/append-codec.js';
import { decodeMessage, protoRoot } from '../src/api/grpc/codecs.js';
import { parseUuid } from '../src/store/index.js';

// The hand-written decoder of Append's and BatchAppend's requests against protobufjs, which
// decodes every other message of the door from the same .proto files: for any message both read,
// the same events; for a message cut short anywhere, both refuse it or both read the same prefix.

const APPEND = 'event_store.client.streams.AppendReq';
const BATCH = 'event_store.client.streams.BatchAppendReq';

function encode(typeName: string, value: Record<string, unknown>): Buffer {
  const type = protoRoot().lookupType(typeName);
  return Buffer.from(type.encode(type.fromObject(value)).finish());
}

/** What protobufjs makes of a ProposedMessage, in the decoder's terms. */
function expectedProposed(m: Record<string, any> | undefined): WireProposed {
  const id = m?.id?.string !== undefined ? parseUuid(m.id.string as string)
    : m?.id?.structured ? structuredBytes(m.id.structured) : undefined;
  const metadata = (m?.metadata ?? {}) as Record<string, string>;
  return {
    id,
    type: metadata.type,
    contentType: metadata['content-type'],
    data: m?.data ? Buffer.from(m.data) : Buffer.alloc(0),
    customMetadata: m?.custom_metadata ? Buffer.from(m.custom_metadata) : Buffer.alloc(0),
  };
}

function structuredBytes(s: Record<string, string | undefined>): Buffer {
  const out = Buffer.alloc(16);
  out.writeBigInt64BE(BigInt(s.most_significant_bits ?? 0), 0);
  out.writeBigInt64BE(BigInt(s.least_significant_bits ?? 0), 8);
  return out;
}

/** Plain values, so Buffers and views compare by content. */
function plain(p: WireProposed): unknown {
  return { ...p, id: p.id?.toString('hex'), data: p.data.toString('hex'), customMetadata: p.customMetadata.toString('hex') };
}

let seed = 7;
function rand(n: number): number {
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return seed % n;
}

function randomInt64(): string {
  const picks = ['0', '-1', '1', '9223372036854775807', '-9223372036854775808', '4294967296', '-4294967297', '127', '128', '16384'];
  if (rand(3) === 0) return picks[rand(picks.length)];
  return BigInt.asIntN(64, BigInt(`0x${randomBytes(8).toString('hex')}`)).toString();
}

/** A ProposedMessage as a protobufjs object: each part present or not, metadata with extra entries. */
function randomProposed(): Record<string, unknown> {
  const m: Record<string, unknown> = {};
  const idKind = rand(4);
  if (idKind === 0) m.id = { string: randomUUID() };
  else if (idKind === 1) m.id = { structured: { most_significant_bits: randomInt64(), least_significant_bits: randomInt64() } };
  else if (idKind === 2) m.id = { string: ['not a uuid', '', '00000000-0000-0000-0000-000000000000', randomUUID().toUpperCase(), `{${randomUUID()}}`, randomUUID().replace('-', 'g')][rand(6)] };
  const metadata: Record<string, string> = {};
  if (rand(5) > 0) metadata.type = rand(4) ? `Type-${rand(100)}` : 'é ✓ 型';
  if (rand(5) > 0) metadata['content-type'] = rand(2) ? 'application/json' : 'application/octet-stream';
  for (let i = rand(3); i > 0; i--) metadata[`extra-${rand(10)}`] = 'x'.repeat(rand(40));
  if (rand(6) === 0) metadata.typ = 'near miss';
  m.metadata = metadata;
  if (rand(4) > 0) m.data = randomBytes(rand(300));
  if (rand(3) > 0) m.custom_metadata = randomBytes(rand(50));
  return m;
}

describe('Append and BatchAppend requests decoded by hand', () => {
  it('reads every ProposedMessage as protobufjs does: ids of both forms, the two metadata entries, data and custom metadata', () => {
    for (let i = 0; i < 2000; i++) {
      const m = randomProposed();
      const bytes = encode(APPEND, { proposed_message: m });
      const reference = decodeMessage(APPEND, bytes).proposed_message as Record<string, unknown>;
      expect(plain(decodeAppendReq(bytes).proposed_message!)).toEqual(plain(expectedProposed(reference)));
    }
  });

  it('reads a BatchAppendReq as protobufjs does: correlation id, options with expected position and deadline, events, is_final', () => {
    for (let i = 0; i < 300; i++) {
      const options = rand(2) ? {
        stream_identifier: { stream_name: Buffer.from(`s-${i}`) },
        ...[{ stream_position: String(rand(1000)) }, { no_stream: {} }, { any: {} }, { stream_exists: {} }][rand(4)],
        ...(rand(2) ? { deadline: { seconds: String(rand(60)), nanos: rand(1000) } } : { deadline_21_10_0: { seconds: '1700000000' } }),
      } : undefined;
      const value = {
        correlation_id: rand(2) ? { string: randomUUID() } : { structured: { most_significant_bits: randomInt64(), least_significant_bits: randomInt64() } },
        ...(options ? { options } : {}),
        proposed_messages: Array.from({ length: rand(5) }, randomProposed),
        is_final: rand(2) === 1,
      };
      const bytes = encode(BATCH, value);
      const reference = decodeMessage(BATCH, bytes) as Record<string, any>;
      const decoded = decodeBatchAppendReq(bytes);
      expect(decoded.correlation_id).toEqual(reference.correlation_id);
      expect(decoded.options).toEqual(reference.options);
      expect(decoded.is_final).toBe(reference.is_final ?? false);
      expect(decoded.proposed_messages.map(plain)).toEqual(((reference.proposed_messages ?? []) as Record<string, unknown>[]).map((m) => plain(expectedProposed(m))));
    }
  });

  it('reads AppendReq options as protobufjs does', () => {
    const options = { stream_identifier: { stream_name: Buffer.from('orders') }, revision: '18446744073709551615' };
    const bytes = encode(APPEND, { options });
    expect(decodeAppendReq(bytes)).toEqual({ options: decodeMessage(APPEND, bytes).options });
  });

  it('skips unknown fields of every wire type, groups included, at every level', () => {
    const unknown = Buffer.concat([
      Buffer.from([0x78, 0x96, 0x01]), // field 15, varint 150
      Buffer.from([0x79, 1, 2, 3, 4, 5, 6, 7, 8]), // field 15, fixed64
      Buffer.from([0x7a, 0x03, 0x61, 0x62, 0x63]), // field 15, length 3
      Buffer.from([0x7d, 1, 2, 3, 4]), // field 15, fixed32
      Buffer.from([0x7b, 0x08, 0x01, 0x7b, 0x7c, 0x7c]), // group 15 { varint 1, group 15 {} }
    ]);
    const id = randomUUID();
    const entry = (k: string, v: string) => withLength(0x12, Buffer.concat([withLength(0x0a, Buffer.from(k)), unknown, withLength(0x12, Buffer.from(v))]));
    const uuid = withLength(0x0a, Buffer.concat([unknown, withLength(0x12, Buffer.from(id))]));
    const proposed = Buffer.concat([unknown, uuid, entry('type', 'Ordered'), unknown, entry('content-type', 'application/json'), withLength(0x22, Buffer.from('{"a":1}'))]);
    const bytes = Buffer.concat([unknown, withLength(0x12, proposed), unknown]);
    const reference = decodeMessage(APPEND, bytes).proposed_message as Record<string, unknown>;
    const decoded = decodeAppendReq(bytes).proposed_message!;
    expect(plain(decoded)).toEqual(plain(expectedProposed(reference)));
    expect(decoded).toMatchObject({ type: 'Ordered', contentType: 'application/json' });
    expect(decoded.id?.toString('hex')).toBe(id.replace(/-/g, ''));
    expect(decoded.data.toString()).toBe('{"a":1}');
  });

  const LAST_ID = '{0A1B2C3D-4E5F-6071-8293-A4B5C6D7E8F9}';
  it('takes the last of a field given twice, the last entry of a key, and "" for an entry missing its value', () => {
    const entry = (k: string | undefined, v: string | undefined) => withLength(0x12, Buffer.concat([
      ...(k === undefined ? [] : [withLength(0x0a, Buffer.from(k))]), ...(v === undefined ? [] : [withLength(0x12, Buffer.from(v))]),
    ]));
    const proposed = Buffer.concat([
      withLength(0x22, Buffer.from('first')), entry('type', 'A'), entry('type', 'B'), entry('content-type', undefined),
      entry(undefined, 'keyless'), withLength(0x22, Buffer.from('second')), withLength(0x0a, withLength(0x12, Buffer.from('x'))),
      withLength(0x0a, withLength(0x12, Buffer.from(LAST_ID))),
    ]);
    const bytes = withLength(0x12, proposed);
    const decoded = decodeAppendReq(bytes).proposed_message!;
    expect(plain(decoded)).toEqual(plain(expectedProposed(decodeMessage(APPEND, bytes).proposed_message as Record<string, unknown>)));
    expect(decoded).toMatchObject({ type: 'B', contentType: '' });
    expect(decoded.id?.toString('hex')).toBe(LAST_ID.replace(/[-{}]/g, '').toLowerCase());
    expect(decoded.data.toString()).toBe('second');
  });

  it('refuses a message cut short anywhere exactly where protobufjs does, and otherwise reads the same', () => {
    const value = {
      correlation_id: { string: randomUUID() },
      options: { stream_identifier: { stream_name: Buffer.from('cut') }, any: {} },
      proposed_messages: [randomProposed(), { id: { structured: { most_significant_bits: '-5', least_significant_bits: '77' } }, metadata: { type: 'T', 'content-type': 'x' }, data: randomBytes(40) }],
      is_final: true,
    };
    const bytes = encode(BATCH, value);
    let refused = 0;
    for (let end = 0; end <= bytes.length; end++) {
      const prefix = bytes.subarray(0, end);
      let reference: Record<string, any> | undefined;
      try {
        reference = decodeMessage(BATCH, prefix);
      } catch {
        reference = undefined;
      }
      if (reference === undefined) {
        expect(() => decodeBatchAppendReq(prefix), `prefix of ${end}`).toThrow();
        refused++;
        continue;
      }
      const decoded = decodeBatchAppendReq(prefix);
      expect(decoded.proposed_messages.map(plain), `prefix of ${end}`)
        .toEqual(((reference.proposed_messages ?? []) as Record<string, unknown>[]).map((m) => plain(expectedProposed(m))));
    }
    expect(refused).toBeGreaterThan(bytes.length / 2);
  });

  it('refuses a known field of the wrong wire type, an invalid wire type, an unclosed group, groups nested past 100 and a varint past 10 bytes', () => {
    expect(() => decodeAppendReq(Buffer.from([0x10, 0x01]))).toThrow(/AppendReq field 2 has wire type 0/);
    expect(() => decodeAppendReq(withLength(0x12, Buffer.from([0x20, 0x05])))).toThrow(/ProposedMessage field 4 has wire type 0/);
    expect(() => decodeBatchAppendReq(Buffer.from([0x22, 0x00]))).toThrow(/BatchAppendReq field 4 has wire type 2/);
    expect(() => decodeAppendReq(Buffer.from([0x7e]))).toThrow(/invalid wire type 6/);
    expect(() => decodeAppendReq(Buffer.from([0x7b, 0x08, 0x01]))).toThrow(/group runs past/);
    expect(() => decodeAppendReq(Buffer.from([0x7b, 0x84, 0x01]))).toThrow(/group ends with another field number/);
    expect(() => decodeAppendReq(Buffer.from([0x78, ...Array(10).fill(0xff), 0x01]))).toThrow(/longer than 10 bytes/);
    const nested = (depth: number) => Buffer.concat([Buffer.alloc(depth, 0x7b), Buffer.alloc(depth, 0x7c)]);
    expect(decodeAppendReq(nested(100))).toEqual({});
    expect(() => decodeAppendReq(nested(101))).toThrow(/groups nested deeper than 100/);
    expect(() => decodeAppendReq(Buffer.alloc(4 * 1024 * 1024, 0x7b))).toThrow(/groups nested deeper than 100/);
    expect(() => decodeAppendReq(Buffer.from([0x12, 0x05, 0x00]))).toThrow(/runs past the end/);
  });

  it('keeps data and custom metadata as views of the request, not copies', () => {
    const bytes = encode(APPEND, { proposed_message: { id: { string: randomUUID() }, metadata: { type: 'T', 'content-type': 'application/json' }, data: Buffer.from('{}'), custom_metadata: Buffer.from('m') } });
    const decoded = decodeAppendReq(bytes).proposed_message!;
    expect(decoded.data.buffer).toBe(bytes.buffer);
    expect(decoded.customMetadata.buffer).toBe(bytes.buffer);
  });
});

describe('the answers of a successful append encoded by hand', () => {
  // Revisions and positions at every varint length, up to the largest a JS number holds exactly.
  const numbers = [0, 1, 127, 128, 16_383, 16_384, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1, 2 ** 32 + 5, 2 ** 40 + 3, Number.MAX_SAFE_INTEGER];

  /** The success message the door made with protobufjs before: revision or no_stream, position or no_position. */
  function success(revision: number, position: number | undefined): Record<string, unknown> {
    return {
      ...(revision >= 0 ? { current_revision: String(revision) } : { no_stream: {} }),
      ...(position !== undefined ? { position: { commit_position: String(position), prepare_position: String(position) } } : { no_position: {} }),
    };
  }

  it('AppendResp: protobufjs reads what it would have written, for every revision and position', () => {
    for (const revision of [-1, ...numbers]) {
      for (const position of [undefined, ...numbers]) {
        const bytes = encodeAppendSuccess({ revision, position });
        const before = encode('event_store.client.streams.AppendResp', { success: success(revision, position) });
        expect(decodeMessage('event_store.client.streams.AppendResp', bytes)).toEqual(decodeMessage('event_store.client.streams.AppendResp', before));
        expect(bytes).toEqual(before);
      }
    }
  });

  it('BatchAppendResp: the correlation id as sent (either form), the success and the stream, as protobufjs reads them', () => {
    const uuid = 'event_store.client.UUID';
    const correlations = [
      { string: randomUUID() },
      { structured: { most_significant_bits: '-4611686018427387904', least_significant_bits: '81985529216486895' } },
    ];
    for (const correlation of correlations) {
      for (const name of ['orders-1', 'ünïcödé-stream', 'x'.repeat(300)]) {
        for (const [revision, position] of [[-1, undefined], [0, 0], [41, 2 ** 32 + 7], [Number.MAX_SAFE_INTEGER, 128]] as const) {
          const bytes = encodeBatchAppendSuccess(encode(uuid, correlation), name, { revision, position });
          const before = encode('event_store.client.streams.BatchAppendResp', {
            correlation_id: correlation, success: success(revision, position), stream_identifier: { stream_name: Buffer.from(name) },
          });
          expect(decodeMessage('event_store.client.streams.BatchAppendResp', bytes)).toEqual(decodeMessage('event_store.client.streams.BatchAppendResp', before));
          expect(bytes).toEqual(before);
        }
      }
    }
  });

  it('a BatchAppendReq keeps its correlation id as sent, a copy of it', () => {
    const correlation = encode('event_store.client.UUID', { string: randomUUID() });
    const bytes = withLength(0x0a, correlation);
    const decoded = decodeBatchAppendReq(bytes);
    expect(decoded.correlation_bytes).toEqual(correlation);
    bytes.fill(0); // the request's buffer used again: the answer still echoes what was sent
    expect(decoded.correlation_bytes).toEqual(correlation);
  });
});

/** A length-delimited field: its tag byte, the length as a varint, the bytes. */
function withLength(tag: number, body: Buffer): Buffer {
  const length: number[] = [];
  let n = body.length;
  do {
    length.push((n & 0x7f) | (n >= 0x80 ? 0x80 : 0));
    n >>>= 7;
  } while (n > 0);
  return Buffer.concat([Buffer.from([tag, ...length]), body]);
}
