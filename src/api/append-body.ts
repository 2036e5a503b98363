import { parseUuid, type ProposedEvent } from '../store/index.js';
import { ApiError, badRequest } from './errors.js';
import { MEDIA } from './media.js';
import { parseJson, sourceOf } from './json-body.js';
import { arrayMemberSpans, indentJson } from './json-indent.js';

// Turning an append request into events. The array form carries ids, types, data and metadata
// in the body (JSON, declared by EVENTS_BODY); the single-body forms carry one event whose type
// and id come from headers and whose body is the data, kept raw.

export const ARRAY_TYPES: readonly string[] = [MEDIA.eventsJsonK, MEDIA.eventsJsonL, MEDIA.eventJsonK, MEDIA.eventJsonL];
export const SINGLE_TYPES: readonly string[] = [MEDIA.json, MEDIA.textXml, MEDIA.appXml, MEDIA.octet];
/** The idempotent /incoming/{guid} URL takes one event, but not raw bytes or the array forms. */
export const INCOMING_TYPES: readonly string[] = [MEDIA.json, MEDIA.textXml, MEDIA.appXml, MEDIA.atomXml, MEDIA.atomJsonK, MEDIA.atomJsonL];

const INVALID_BODY = 'Write request body invalid.';
const EMPTY = Buffer.alloc(0);

const EVENT_ARRAY = { type: 'array', minItems: 1, items: { type: 'object', errorMessage: INVALID_BODY }, errorMessage: INVALID_BODY };

/** The body schema of the append routes: JSON only for the array media types, an array of event objects. */
export const EVENTS_BODY = { content: Object.fromEntries(ARRAY_TYPES.map((type) => [type, { schema: EVENT_ARRAY }])) };

function isJsonContainer(value: unknown): boolean {
  return typeof value === 'object' && value !== null;
}

/**
 * data / metadata members: JSON containers stored as JSON, JSON text stored as is, other text as
 * UTF-8. `written`: the container's text as the client wrote it, when the body may hold numbers
 * JSON.parse rounded (stored compact, every digit kept).
 */
function payload(value: unknown, written?: string): { bytes: Buffer; isJson: boolean } {
  if (isJsonContainer(value)) {
    const exact = written === undefined ? undefined : indentJson(written, '');
    return { bytes: Buffer.from(exact ?? JSON.stringify(value), 'utf8'), isJson: true };
  }
  if (typeof value === 'string') {
    const trimmed = value.trim();
    if (trimmed.startsWith('{') || trimmed.startsWith('[')) {
      try {
        if (isJsonContainer(JSON.parse(trimmed))) return { bytes: Buffer.from(value, 'utf8'), isJson: true };
      } catch {
        // plain text after all
      }
    }
    return { bytes: Buffer.from(value, 'utf8'), isJson: false };
  }
  return { bytes: EMPTY, isJson: false };
}

/**
 * Whether a parsed JSON value holds a number that JSON.stringify may not write as its client did:
 * an integer beyond 2^53, a fraction printed with 16 or more significant digits (the source had
 * at least as many), or one too large for a double. Those were rounded by JSON.parse.
 */
function mayBeRounded(value: unknown): boolean {
  if (typeof value === 'number') return mayBeRoundedNumber(value);
  if (typeof value !== 'object' || value === null) return false;
  // Recursion is bounded: a body nests at most MAX_JSON_DEPTH levels (json-body.ts).
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) if (mayBeRounded(value[i])) return true;
    return false;
  }
  for (const key in value) if (mayBeRounded((value as Record<string, unknown>)[key])) return true;
  return false;
}

function mayBeRoundedNumber(n: number): boolean {
  if (Number.isInteger(n)) return !Number.isSafeInteger(n);
  // At most two decimals (amounts, most measures): the nearest double to such a decimal, short enough.
  if (Math.abs(n) < 1e13 && Math.round(n * 100) / 100 === n) return false;
  return !Number.isFinite(n) || significantDigits(n) >= 16;
}

/** Significant digits of a number as JavaScript prints it (1.2345e-7: 5). */
function significantDigits(n: number): number {
  const text = String(n);
  const e = text.indexOf('e');
  let digits = 0;
  let leading = true;
  for (let i = 0; i < (e < 0 ? text.length : e); i++) {
    const c = text.charCodeAt(i);
    if (c < 0x30 || c > 0x39) continue;
    if (leading && c === 0x30) continue;
    leading = false;
    digits++;
  }
  return digits;
}

/** Member lookup ignoring case, as the established servers read request JSON. */
function member(item: Record<string, unknown>, name: string): unknown {
  const key = memberName(item, name);
  return key === undefined ? undefined : item[key];
}

/** The name of the member `member` reads: the exact name first, then the first equal ignoring case. */
function memberName(item: Record<string, unknown>, name: string): string | undefined {
  if (name in item) return name;
  const lower = name.toLowerCase();
  for (const key of Object.keys(item)) if (key.toLowerCase() === lower) return key;
  return undefined;
}

/**
 * The events of an array body (EVENTS_BODY has checked its shape). Member names match without
 * regard to case, the exact name first, which JSON schema cannot say: the members are read here.
 */
export function eventsOf(items: Record<string, unknown>[], maxEventSize: number): ProposedEvent[] {
  // The body's text is read again only when some data or metadata holds a number JSON.parse may have rounded.
  let spans: Map<string, [number, number]>[] | undefined | null = null;
  const source = sourceOf(items);
  /** The text of member `name` of element `index` as written, when its value holds such a number. */
  const written = (record: Record<string, unknown>, index: number, name: string): string | undefined => {
    const key = memberName(record, name);
    if (key === undefined || source === undefined || !mayBeRounded(record[key])) return undefined;
    if (spans === null) spans = arrayMemberSpans(source);
    const span = spans?.[index]?.get(key);
    return span && source.slice(span[0], span[1]);
  };
  return items.map((record, index) => {
    const idText = member(record, 'eventId');
    if (idText === undefined || idText === null || idText === '') throw badRequest(`Empty eventId provided. (Parameter 'eventId') at event ${index}`);
    const eventId = typeof idText === 'string' ? parseUuid(idText) : undefined;
    if (!eventId) throw badRequest(`Invalid eventId ${JSON.stringify(idText)} at event ${index}: expected a GUID.`);
    const eventType = member(record, 'eventType');
    if (typeof eventType !== 'string' || eventType === '') throw badRequest(`Empty eventType provided. (Parameter 'eventType') at event ${index}`);
    const data = payload(member(record, 'data'), written(record, index, 'data'));
    const metadata = payload(member(record, 'metadata'), written(record, index, 'metadata'));
    checkSize(data.bytes.length + metadata.bytes.length, maxEventSize);
    return { eventId, eventType, isJson: data.isJson || metadata.isJson, dataIsJson: data.isJson, data: data.bytes, metadata: metadata.bytes };
  });
}

/** One event whose body is the data; `mediaType` decides whether it is JSON. */
export function singleEvent(body: Buffer, mediaType: string, eventId: Buffer, eventType: string, maxEventSize: number): ProposedEvent {
  checkSize(body.length, maxEventSize);
  const isJson = mediaType === MEDIA.json || mediaType.endsWith('+json');
  if (isJson) parseJson(body, INVALID_BODY);
  return { eventId, eventType, isJson, data: body, metadata: EMPTY };
}

export function checkSize(bytes: number, max: number): void {
  if (bytes > max) throw new ApiError('PAYLOAD_TOO_LARGE', `Too large events received. Limit is ${max} bytes.`);
}
