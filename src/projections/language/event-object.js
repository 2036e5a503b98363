// @ts-check
// The event object handlers see (§7): a plain object whose fields are all own and enumerable,
// frozen unless the query only reads its fields by name (plain events, see ../event-use.ts: it
// then needs no freezing and no field it never reads). JSON data arrives parsed in the batch
// (bodyRaw is then made from it if the query can see it) or as raw text; metadata that is not
// JSON throws when it is read.

/** @import { WireEvent } from './wire-format.js' */

// Our own copies: a query that patches JSON cannot change the events it is given.
const JSON_parse = JSON.parse;
const JSON_stringify = JSON.stringify;

let plainEvents = false;
let parseMetadata = true;
let parseLinkMetadata = true;

/**
 * Chosen once at start, from what the query reads.
 * @param {boolean} plain
 * @param {string[]} reads the fields the query reads by name (when plain)
 */
export function chooseEventObjects(plain, reads) {
  plainEvents = plain;
  parseMetadata = !plain || reads.indexOf('metadata') >= 0;
  parseLinkMetadata = !plain || reads.indexOf('linkMetadata') >= 0;
}

const NO_VALUE = Object.freeze({ value: null });
/**
 * @param {string} raw
 * @returns {{ value?: unknown, error?: unknown }}
 */
function parsedOrThrowing(raw) {
  if (!raw) return NO_VALUE;
  try { return { value: JSON_parse(raw) }; } catch (err) { return { error: err }; }
}

/**
 * @param {WireEvent} e
 * @param {string} partition
 * @returns {Record<string, unknown>}
 */
export function eventObject(e, partition) {
  const body = !e.isJson ? undefined : e.hasBody ? e.body : e.bodyRaw ? JSON_parse(e.bodyRaw) : undefined;
  /** @type {Record<string, unknown>} */
  const env = {
    eventType: e.eventType, streamId: e.streamId, sequenceNumber: e.sequenceNumber, eventId: e.eventId,
    isJson: e.isJson, bodyRaw: e.bodyRaw, body, data: body, metadataRaw: e.metadataRaw, metadata: null,
    linkMetadataRaw: e.linkMetadataRaw, linkMetadata: null, partition, category: e.category,
  };
  if (e.metadataRaw !== null && parseMetadata) {
    const meta = parsedOrThrowing(e.metadataRaw);
    if (meta.error) Object.defineProperty(env, 'metadata', { enumerable: true, get() { throw meta.error; } });
    else env.metadata = meta.value;
  }
  if (e.linkMetadataRaw !== null && parseLinkMetadata) {
    const link = parsedOrThrowing(e.linkMetadataRaw);
    if (link.error) Object.defineProperty(env, 'linkMetadata', { enumerable: true, get() { throw link.error; } });
    else env.linkMetadata = link.value;
  }
  if (plainEvents) return env;
  if (e.hasBody && e.bodyRaw === null) env.bodyRaw = JSON_stringify(e.body);
  return Object.freeze(env);
}
