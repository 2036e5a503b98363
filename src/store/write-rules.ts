// The one write door: the rules every write obeys before it reaches the log, whoever sends it
// (an HTTP append, a metadata write, a delete, a projection's emits, links and checkpoints, a
// subscription's checkpoint or parked message, a user record). The writer checks each operation
// against them as it takes it into a batch, and refuses only that operation, with an
// InvalidWriteError naming the stream and the rule. Asserts further down are for the store's
// own invariants: input never reaches them.

import { LINK_EVENT_TYPE } from './record.js';
import { isMetastream, metadataProblem, originalStreamOf } from './metadata.js';
import { RESERVED_STREAMS } from './system-streams.js';
import { DomainError } from '../errors.js';

/** The record keeps stream names and event types behind a 16-bit length. */
const MAX_RECORD_NAME_BYTES = 65_535;
/** A stream name leaves room for the `$$` of its metadata stream, which a soft delete or `$tb` writes. */
export const MAX_STREAM_NAME_BYTES = MAX_RECORD_NAME_BYTES - 2;
export const MAX_EVENT_TYPE_BYTES = MAX_RECORD_NAME_BYTES;
/**
 * JSON nesting the node stores or answers with. Readers re-serialise JSON (feeds with embedded
 * bodies, XML, projection event objects, metadata rewrites), and serialisers recurse: a document
 * a million levels deep overflows their stack. No real event comes near a thousand.
 */
export const MAX_JSON_DEPTH = 1000;

export type WriteRule = 'stream-name' | 'event-type' | 'event-size' | 'link' | 'json-depth' | 'event-id' | 'metadata' | 'reserved';

export interface WriteLimits {
  /** Largest data + metadata of one event, in bytes (the `maxAppendSize` option). */
  maxEventBytes: number;
}

/** A write the door refuses: the operation fails alone, with the stream and the rule it broke. */
export class InvalidWriteError extends DomainError {
  readonly code = 'INVALID_WRITE';

  constructor(readonly streamId: string, readonly rule: WriteRule, message: string) {
    super(message);
  }
}

/** The stream name as a message can show it: a long one is cut, with its size. */
export function shownName(streamId: string): string {
  if (streamId.length <= 100) return streamId;
  return `${streamId.slice(0, 60)}… (${Buffer.byteLength(streamId, 'utf8').toLocaleString('en-US')} bytes)`;
}

function utf8Exceeds(text: string, max: number): number | undefined {
  // A UTF-16 unit is at most 3 UTF-8 bytes: short strings need no count.
  if (text.length * 3 <= max) return undefined;
  const bytes = Buffer.byteLength(text, 'utf8');
  return bytes > max ? bytes : undefined;
}

/** Why a stream name cannot be written to, or undefined when it can. */
export function streamNameProblem(streamId: unknown): string | undefined {
  if (typeof streamId !== 'string' || streamId === '') return 'a stream name must not be empty';
  if (streamId === '$all') return "'$all' is the log itself, not a stream that can be written to";
  if (streamId === '$$') return "'$$' is the metadata stream of no stream";
  const limit = streamId.startsWith('$$') ? MAX_RECORD_NAME_BYTES : MAX_STREAM_NAME_BYTES;
  const bytes = utf8Exceeds(streamId, limit);
  if (bytes !== undefined) {
    return `the stream name is ${bytes.toLocaleString('en-US')} bytes; stream names are limited to ${MAX_STREAM_NAME_BYTES.toLocaleString('en-US')} bytes (UTF-8)`;
  }
  return undefined;
}

/** Throws InvalidWriteError when the stream name breaks a rule. */
/** Refuses a write to a reserved stream or its metadata stream (system-streams.ts) by anyone but the node itself. */
export function checkNotReserved(streamId: string): void {
  const target = isMetastream(streamId) ? originalStreamOf(streamId) : streamId;
  if (RESERVED_STREAMS.has(target)) {
    throw new InvalidWriteError(streamId, 'reserved', `The ${target} stream is written by cluster leaders only.`);
  }
}

export function checkStreamName(streamId: string): void {
  const problem = streamNameProblem(streamId);
  if (problem) throw new InvalidWriteError(String(streamId), 'stream-name', `Invalid write to stream '${shownName(String(streamId))}': ${problem}.`);
}

/** An event as the door sees it (the writer's proposed event). */
export interface CheckedEvent {
  eventId: Buffer;
  eventType: string;
  isJson: boolean;
  dataIsJson?: boolean;
  data: Buffer;
  metadata: Buffer;
}

/** Throws InvalidWriteError for the first event of an append that breaks a rule (of events [from, to), for a check in steps). */
export function checkEvents(streamId: string, events: readonly CheckedEvent[], limits: WriteLimits, from = 0, to = events.length): void {
  const metastream = isMetastream(streamId);
  for (let i = from; i < to; i++) {
    const problem = eventProblem(events[i], limits) ?? (metastream ? metadataDocumentProblem(events[i]) : undefined);
    if (problem) {
      const where = events.length > 1 ? ` (event ${i})` : '';
      throw new InvalidWriteError(streamId, problem.rule, `Invalid write to stream '${shownName(streamId)}'${where}: ${problem.message}.`);
    }
  }
}

function eventProblem(e: CheckedEvent, limits: WriteLimits): { rule: WriteRule; message: string } | undefined {
  if (!Buffer.isBuffer(e.eventId) || e.eventId.length !== 16) return { rule: 'event-id', message: 'an event id is 16 bytes' };
  if (typeof e.eventType !== 'string' || e.eventType === '') return { rule: 'event-type', message: 'an event type must not be empty' };
  const typeBytes = utf8Exceeds(e.eventType, MAX_EVENT_TYPE_BYTES);
  if (typeBytes !== undefined) {
    return { rule: 'event-type', message: `the event type is ${typeBytes.toLocaleString('en-US')} bytes; event types are limited to ${MAX_EVENT_TYPE_BYTES.toLocaleString('en-US')} bytes (UTF-8)` };
  }
  const size = e.data.length + e.metadata.length;
  if (size > limits.maxEventBytes) {
    return { rule: 'event-size', message: `data and metadata are ${size.toLocaleString('en-US')} bytes; an event is limited to ${limits.maxEventBytes.toLocaleString('en-US')} bytes (maxAppendSize)` };
  }
  if (e.eventType === LINK_EVENT_TYPE && !isLinkBody(e.data)) {
    return { rule: 'link', message: "a link's body must be '{eventNumber}@{stream}' with an event number of 0 or more and a stream name" };
  }
  if ((e.dataIsJson ?? e.isJson) && jsonDepthExceeds(e.data, MAX_JSON_DEPTH)) {
    return { rule: 'json-depth', message: `the data is JSON nested deeper than ${MAX_JSON_DEPTH} levels` };
  }
  if (jsonDepthExceeds(e.metadata, MAX_JSON_DEPTH)) {
    return { rule: 'json-depth', message: `the metadata is JSON nested deeper than ${MAX_JSON_DEPTH} levels` };
  }
  return undefined;
}

/** An event of a metadata stream is the stream's metadata: a JSON object with well-typed reserved keys. */
function metadataDocumentProblem(e: CheckedEvent): { rule: WriteRule; message: string } | undefined {
  let doc: unknown;
  try {
    doc = JSON.parse(e.data.toString('utf8'));
  } catch {
    doc = undefined;
  }
  const problem = metadataProblem(doc);
  return problem ? { rule: 'metadata', message: problem.replace(/\.$/, '') } : undefined;
}

const AT = 0x40;

/** `n@stream`: decimal digits (a safe integer), `@`, a stream name that is not empty. */
function isLinkBody(data: Buffer): boolean {
  const at = data.indexOf(AT);
  if (at <= 0 || at > 16 || at === data.length - 1) return false;
  for (let i = 0; i < at; i++) if (data[i] < 0x30 || data[i] > 0x39) return false;
  const n = Number(data.toString('latin1', 0, at));
  if (!Number.isSafeInteger(n)) return false;
  return streamNameProblem(data.toString('utf8', at + 1)) === undefined;
}

const OPEN_BRACE = 0x7b, OPEN_BRACKET = 0x5b, CLOSE_BRACE = 0x7d, CLOSE_BRACKET = 0x5d, QUOTE = 0x22, BACKSLASH = 0x5c;

/**
 * Whether the JSON text nests objects and arrays deeper than `max`. One pass over the bytes with
 * no allocation; brackets inside strings do not count. Text that is not JSON is measured the same
 * way (a bracket outside quotes nests), which only ever errs on the side of refusing.
 */
export function jsonDepthExceeds(text: Buffer, max: number): boolean {
  if (text.length <= max) return false; // each level takes a byte
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) inString = true;
    else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > max) return true;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) depth--;
  }
  return false;
}
