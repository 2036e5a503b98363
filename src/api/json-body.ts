import type { FastifyRequest } from 'fastify';
import { jsonDepthExceeds, MAX_JSON_DEPTH } from '../store/index.js';
import { ApiError, badRequest } from './errors.js';
import { requestMediaType } from './media.js';

// Every JSON body a route reads goes through here. A route declares its JSON body in its schema
// (`body`, or `body.content` per media type when only some of the types it takes are JSON) and
// runs `decodeJsonBody` as its preValidation hook: the raw bytes the app's parser kept become the
// parsed value that fastify then validates. A body that is not JSON answers the body schema's
// errorMessage. JSON.parse itself copes with any nesting, but what is parsed is later serialised
// again (stored, echoed, rendered as XML), and serialisers recurse: a body nested deeper than
// the store keeps answers 400 before anything looks at it.

export const JSON_TOO_DEEP = `The body is JSON nested deeper than ${MAX_JSON_DEPTH} levels.`;

/**
 * The text each parsed body came from, by the parsed value: what needs a member as it was written
 * (append-body.ts: data and metadata holding numbers JSON.parse rounded) finds it here.
 */
const sources = new WeakMap<object, string>();

/** The text `value` was parsed from (parseJson), if it was. */
export function sourceOf(value: object): string | undefined {
  return sources.get(value);
}

/** Parses a raw JSON body (no body is not JSON); `invalidMessage` answers 400 when it is not JSON. */
export function parseJson(body: unknown, invalidMessage: string): unknown {
  const bytes = Buffer.isBuffer(body) ? body : Buffer.alloc(0);
  if (jsonDepthExceeds(bytes, MAX_JSON_DEPTH)) throw badRequest(JSON_TOO_DEEP);
  const text = bytes.toString('utf8');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw badRequest(invalidMessage);
  }
  if (typeof value === 'object' && value !== null) sources.set(value, text);
  return value;
}

interface BodySchema {
  errorMessage?: string;
  content?: Record<string, { schema: { errorMessage?: string } }>;
}

/**
 * preValidation hook: decodes the body when the route's schema declares it JSON for this media type
 * (fastify picks a `body.content` schema by the media type alone: a charset other than UTF-8 is 415).
 * Any other body stays the raw bytes.
 */
export async function decodeJsonBody(req: FastifyRequest): Promise<void> {
  const declared = req.routeOptions.schema?.body as BodySchema | undefined;
  const schema = declared?.content ? declared.content[req.mediaType ?? '']?.schema : declared;
  if (!schema) return;
  if (declared?.content && requestMediaType(req) === undefined) throw new ApiError('UNSUPPORTED_MEDIA_TYPE');
  req.body = parseJson(req.body, schema.errorMessage ?? 'The body is not JSON.');
}

/** The members of a JSON (or XML) object named in lower case, as the established servers match them (the last of equals wins). */
export function lowerCaseMembers(doc: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(doc).map(([name, value]) => [name.toLowerCase(), value]));
}

/** preValidation hook after `decodeJsonBody`: an object body's member names in lower case, for a schema that names them so. */
export async function lowerCaseBodyMembers(req: FastifyRequest): Promise<void> {
  if (typeof req.body === 'object' && req.body !== null && !Array.isArray(req.body)) req.body = lowerCaseMembers(req.body as Record<string, unknown>);
}
