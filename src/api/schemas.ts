import type { FastifySchemaValidationError } from 'fastify';
import { isMetastream, parseUuid } from '../store/index.js';
import { ApiError } from './errors.js';
import { parseAllPosition } from './urls.js';

// Request validation is declared on each route as JSON schemas (params, querystring, body), and
// fastify runs them before the handler (after the route's guard and body decoding). Rules that
// plain JSON schema cannot say are the named formats below and the `integerText` keyword (a
// number in a query is text), defined once. Every schema that can fail carries `errorMessage`:
// the text the 400 answers with, `{value}` standing for the value refused; the first failing
// schema that declares one speaks (so a schema's own message wins over its parent's). Values
// are never coerced: a route gets the strings it was sent.

/** The longest page a read may ask for (the established servers' limit). */
export const MAX_PAGE = 4096;

const digits = (text: string): number => (/^\d+$/.test(text) ? Number(text) : NaN);

const FORMATS = {
  /** An event number: decimal digits within the safe integers. */
  'event-number': (text) => Number.isSafeInteger(digits(text)),
  /** A page size: an event number above 0 (the MAX_PAGE limit is `page-limit`, with its own message). */
  'page-size': (text) => Number.isSafeInteger(digits(text)) && digits(text) > 0,
  'page-limit': (text) => digits(text) <= MAX_PAGE,
  /** A $all position: 32 hex digits, the commit then the prepare position. */
  'all-position': (text) => parseAllPosition(text) !== undefined,
  uuid: (text) => parseUuid(text) !== undefined,
  /** A stream that is not a metadata stream ($$...). */
  'not-metastream': (text) => !isMetastream(text),
  /** Message ids of a persistent subscription: GUIDs separated by commas, blanks skipped. */
  'uuid-list': (text) => text.split(',').every((part) => part.trim() === '' || parseUuid(part.trim()) !== undefined),
  /** Up to 16 digits within the safe integers. */
  long: (text) => /^\d{1,16}$/.test(text) && Number.isSafeInteger(Number(text)),
  /** 1 to 100, up to 4 digits: how many messages a subscription pull takes. */
  'message-count': (text) => /^\d{1,4}$/.test(text) && Number(text) >= 1 && Number(text) <= 100,
  /** Paging of listings, read as a JavaScript number ('' is 0). */
  'number-from-0': (text) => Number.isSafeInteger(Number(text)) && Number(text) >= 0,
  'number-from-1': (text) => Number.isSafeInteger(Number(text)) && Number(text) >= 1,
  /** A yes/no query flag, any case; empty means the route's default. */
  flag: (text) => /^(yes|true|1|no|false|0)?$/i.test(text),
  /** `true` or `false`, any case (as bool.TryParse reads it); nothing else, not even empty. */
  boolean: (text) => /^(true|false)$/i.test(text),
} satisfies Record<string, (text: string) => boolean>;

interface IntegerBounds {
  minimum?: number;
  maximum?: number;
}

/** Decimal digits with an optional sign (as the established servers' int.TryParse reads a query value), within the bounds. */
function isIntegerWithin(text: string, { minimum = -Number.MAX_SAFE_INTEGER, maximum = Number.MAX_SAFE_INTEGER }: IntegerBounds): boolean {
  const value = /^[+-]?\d+$/.test(text) ? Number(text) : NaN;
  return Number.isSafeInteger(value) && value >= minimum && value <= maximum;
}

interface KeywordDefinition {
  keyword: string;
  schemaType: string;
  type?: string;
  validate?(schema: IntegerBounds, data: string): boolean;
}

/**
 * The fastify `ajv` option: the formats, no coercion, errors that carry their schema, and two
 * keywords: `errorMessage` (see above) and `integerText` (a string that is an integer within bounds).
 */
export const AJV_OPTIONS = {
  customOptions: { coerceTypes: false, verbose: true, formats: FORMATS },
  plugins: [(ajv: { addKeyword(definition: KeywordDefinition): unknown }) => {
    ajv.addKeyword({ keyword: 'errorMessage', schemaType: 'string' });
    ajv.addKeyword({ keyword: 'integerText', schemaType: 'object', type: 'string', validate: (bounds, text) => isIntegerWithin(text, bounds) });
  }],
};

/** A string of the named format; any other value answers `errorMessage`. */
export function formatted(format: keyof typeof FORMATS, errorMessage: string) {
  return { type: 'string', format, errorMessage } as const;
}

/** A query value that is an integer within `bounds` (both ends included); any other value answers `errorMessage`. */
export function integerText(bounds: IntegerBounds, errorMessage: string) {
  return { type: 'string', integerText: bounds, errorMessage } as const;
}

/** `head`, or what `schema` admits (with its message). */
export function headOr(schema: { errorMessage: string }) {
  return { anyOf: [{ const: 'head' }, schema], errorMessage: schema.errorMessage } as const;
}

/** The stream in a /streams/ path: any name but the empty one. */
export const STREAM_NAME = { type: 'string', minLength: 1, errorMessage: 'Stream name must not be empty.' } as const;

/** The stream whose metadata a /streams/{stream}/metadata path names: not itself a metadata stream. */
export function metadataOwner(errorMessage: string) {
  return { allOf: [STREAM_NAME, formatted('not-metastream', errorMessage)] } as const;
}

type VerboseError = FastifySchemaValidationError & { data?: unknown; parentSchema?: { errorMessage?: string } };

/** Fastify's `schemaErrorFormatter`: the first declared message, as a 400 of the error table. */
export function schemaErrorFormatter(errors: FastifySchemaValidationError[], part: string): Error {
  const declared = (errors as VerboseError[]).find((e) => e.parentSchema?.errorMessage !== undefined);
  if (!declared) return new ApiError('BAD_REQUEST', `${part}${errors[0]?.instancePath ?? ''} ${errors[0]?.message ?? 'is not valid'}`);
  return new ApiError('BAD_REQUEST', declared.parentSchema!.errorMessage!.replaceAll('{value}', String(declared.data)));
}
