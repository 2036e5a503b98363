import { ExpectedVersion, parseUuid, type ProposedEvent } from '../../store/index.js';
import { fail, invalidArgument, missingMetadataProperty } from './errors.js';
import type { WireProposed } from './append-codec.js';

// Reading the shared pieces of request messages (decoded by codecs.ts: 64-bit integers as
// decimal strings, bytes as Buffers, absent fields absent) and writing the shared pieces of
// answers. Anything malformed ends the call with INVALID_ARGUMENT and a message naming it.

type Message = Record<string, unknown>;

/** 2^64 - 1: the unsigned image of -1 ("end") in the clients' uint64 fields. */
export const U64_MAX = '18446744073709551615';

export function isSet(value: unknown): boolean {
  return value !== undefined && value !== null;
}

/** A uint64 field as a number; values past 2^53 (never a real revision or position here) saturate. */
export function u64(value: unknown, what: string): number {
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return value;
  if (typeof value === 'string' && /^\d{1,20}$/.test(value)) {
    const n = Number(value);
    return Number.isSafeInteger(n) ? n : Number.MAX_SAFE_INTEGER;
  }
  return fail(invalidArgument(`'${what}' is not a valid unsigned 64-bit integer`));
}

export function streamNameOf(identifier: unknown, what = 'stream_identifier'): string {
  const bytes = (identifier as Message | undefined)?.stream_name;
  if (!Buffer.isBuffer(bytes) && !(bytes instanceof Uint8Array)) return fail(invalidArgument(`'${what}' is a required argument`));
  const name = Buffer.from(bytes).toString('utf8');
  if (name === '') return fail(invalidArgument(`'${what}' must name a stream`));
  return name;
}

export function streamIdentifier(name: string): Message {
  return { stream_name: Buffer.from(name, 'utf8') };
}

/** The expected state of Append, Delete and Tombstone (`revision`) or BatchAppend (`stream_position`). */
export function expectedOf(options: Message, revisionField: 'revision' | 'stream_position'): ExpectedVersion {
  if (isSet(options[revisionField])) return ExpectedVersion.exact(u64(options[revisionField], revisionField));
  if (isSet(options.no_stream)) return ExpectedVersion.noStream;
  if (isSet(options.any)) return ExpectedVersion.any;
  if (isSet(options.stream_exists)) return ExpectedVersion.streamExists;
  return fail(invalidArgument("'expected_stream_revision' is not a valid expected stream state: none was given"));
}

/** A UUID in either form: `string` (any RFC 4122 text) or `structured` (two big-endian signed halves). */
export function uuidBytes(uuid: unknown, what: string): Buffer {
  const u = uuid as Message | undefined;
  if (typeof u?.string === 'string') {
    const parsed = parseUuid(u.string);
    if (parsed) return parsed;
  } else if (u?.structured && typeof u.structured === 'object') {
    const s = u.structured as Message;
    try {
      const out = Buffer.alloc(16);
      out.writeBigInt64BE(BigInt(String(s.most_significant_bits ?? 0)), 0);
      out.writeBigInt64BE(BigInt(String(s.least_significant_bits ?? 0)), 8);
      return out;
    } catch {
      // falls through to the refusal
    }
  }
  return fail(invalidArgument(`'${what}' is not a valid UUID`));
}

/** One proposed event (Append's and BatchAppend's ProposedMessage, as append-codec.ts reads it). */
export function proposedEvent(message: WireProposed): ProposedEvent {
  const type = message.type;
  if (type === undefined) fail(missingMetadataProperty('type'));
  const contentType = message.contentType;
  if (contentType === undefined) fail(missingMetadataProperty('content-type'));
  const isJson = contentType === 'application/json';
  const eventId = message.id;
  if (!eventId) fail(invalidArgument("'id' is not a valid UUID"));
  return { eventId, eventType: type, isJson, dataIsJson: isJson, data: message.data, metadata: message.customMetadata };
}

/**
 * Bytes an event takes against the append bound: its payload plus what holding it costs (the
 * object, its id and buffer views: ~490 bytes of heap and external memory per held tiny event,
 * measured over 100,000 with gc before and after), so a million tiny events meet the bound as a
 * few huge ones do.
 */
export const HELD_EVENT_OVERHEAD = 512;

export function proposedSize(e: ProposedEvent): number {
  return e.data.length + e.metadata.length + Buffer.byteLength(e.eventType) + HELD_EVENT_OVERHEAD;
}

export function timestampNow(): Message {
  const ms = Date.now();
  return { seconds: String(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1_000_000 };
}

export function positionMessage(position: number): Message {
  return { commit_position: String(position), prepare_position: String(position) };
}

/** Milliseconds until a Timestamp (absolute) or Duration (relative) deadline; undefined: none. */
export function deadlineMs(timestamp: unknown, duration: unknown): number | undefined {
  const t = (timestamp ?? duration) as Message | undefined;
  if (!t) return undefined;
  const ms = Number(t.seconds ?? 0) * 1000 + Number(t.nanos ?? 0) / 1_000_000;
  if (!Number.isFinite(ms)) return fail(invalidArgument("'deadline' is not a valid time"));
  return timestamp ? ms - Date.now() : ms;
}

/** The `options` every request of the management services wraps its fields in. */
export function optionsOf(request: unknown): Message {
  const options = (request as Message | undefined)?.options;
  if (!options || typeof options !== 'object') return fail(invalidArgument("'options' is a required argument"));
  return options as Message;
}

/** A JSON value as a google.protobuf.Value (whose fields protobufjs names in camelCase). */
export function protoValue(json: unknown): Message {
  if (json === null || json === undefined) return { nullValue: 'NULL_VALUE' };
  if (Array.isArray(json)) return { listValue: { values: json.map(protoValue) } };
  switch (typeof json) {
    case 'object': return { structValue: { fields: Object.fromEntries(Object.entries(json).map(([k, v]) => [k, protoValue(v)])) } };
    case 'string': return { stringValue: json };
    case 'number': return { numberValue: json };
    case 'boolean': return { boolValue: json };
    default: return { stringValue: String(json) };
  }
}

/** 100 ns ticks since the Unix epoch, as decimal text (the int64 time fields of gossip and users). */
export function ticksSinceEpoch(iso: string): string {
  const ms = Date.parse(iso);
  return Number.isFinite(ms) ? (BigInt(ms) * 10_000n).toString() : '0';
}
