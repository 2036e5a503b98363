import { jsonDepthExceeds, MAX_JSON_DEPTH } from '../store/index.js';
import { badRequest } from './errors.js';

// Every JSON body a route reads goes through here: JSON.parse itself copes with any nesting, but
// what is parsed is later serialised again (stored, echoed, rendered as XML), and serialisers
// recurse. A body nested deeper than the store keeps answers 400 before anything looks at it.

export const JSON_TOO_DEEP = `The body is JSON nested deeper than ${MAX_JSON_DEPTH} levels.`;

/** Parses a JSON request body; `invalidMessage` answers 400 when it is not JSON. */
export function parseJsonBody(body: unknown, invalidMessage: string): unknown {
  const bytes = Buffer.isBuffer(body) ? body : Buffer.alloc(0);
  if (jsonDepthExceeds(bytes, MAX_JSON_DEPTH)) throw badRequest(JSON_TOO_DEEP);
  try {
    return JSON.parse(bytes.toString('utf8'));
  } catch {
    throw badRequest(invalidMessage);
  }
}
