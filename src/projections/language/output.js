// @ts-check
// What a handler sends out of the sandbox (§10): emitted events (emit, linkTo, linkStreamTo,
// copyTo, only with emit enabled) and log lines (log, and console.* that behave like it). The
// execution phase points `batch` at the current batch's list and event before each handler runs.

import { fail } from './fail.js';
import { stateJson } from './state-json.js';

/** @import { WireEvent } from './wire-format.js' */
/** @import { EmittedEvent } from '../sandbox.js' */

export const batch = {
  emitEnabled: false,
  /** Events one event may emit at most (MaxProjectionEmitsPerEvent); 0: no limit. */
  maxEmitsPerEvent: 0,
  /** The events emitted by this batch's handlers so far. @type {EmittedEvent[]} */
  emitted: [],
  /** Where the events emitted for the current event begin in `emitted`. */
  eventStart: 0,
  /** The current event emitted one event too many: it faults even if its handler caught the error. */
  overLimit: false,
  /** The event being handled: it caused what is emitted. @type {WireEvent | null} */
  current: null,
};

/** Log lines of this batch (and of the definition run). @type {string[]} */
export const logs = [];

/** @param {ArrayLike<unknown>} args */
function toLog(args) {
  return Array.prototype.map.call(args, (a) => typeof a === 'string' ? a : safeJson(a)).join(' ');
}
/** @param {unknown} v */
function safeJson(v) { try { return JSON.stringify(v); } catch (e) { return String(v); } }
/** Writes its arguments as one line: strings as they are, anything else as JSON, space-separated. */
export function log() { logs.push(toLog(arguments)); }

function requireEmit() {
  if (!batch.emitEnabled) fail("'emit' is not allowed by the projection/configuration/mode");
}

/** The fault of an event that emits more than MaxProjectionEmitsPerEvent events. */
export function tooManyEmitsMessage() {
  const max = batch.maxEmitsPerEvent;
  return 'The projection emitted more than ' + max + ' events for one event, which exceeds the configured MaxProjectionEmitsPerEvent of ' + max + '.';
}

/**
 * Keeps an emitted event for the batch: within the limit of events per event, which bounds what
 * one event makes the host hold and write in one checkpoint (see Sandbox.process).
 * @param {EmittedEvent} e
 */
function keep(e) {
  if (batch.maxEmitsPerEvent > 0 && batch.emitted.length - batch.eventStart >= batch.maxEmitsPerEvent) {
    batch.overLimit = true;
    fail(tooManyEmitsMessage());
  }
  batch.emitted.push(e);
}
/**
 * The metadata of an emitted event: the given keys, $causedBy, and the $correlationId of the event that caused it.
 * @param {unknown} extra
 * @returns {Record<string, unknown>}
 */
function emittedMetadata(extra) {
  /** @type {Record<string, unknown>} */
  const meta = {};
  if (extra !== undefined) {
    if (typeof extra !== 'object' || extra === null) fail('metadata must be an object');
    const given = /** @type {Record<string, unknown>} */ (extra);
    for (const k of Object.keys(given)) if (given[k] !== undefined) meta[k] = given[k];
  }
  const current = /** @type {WireEvent} */ (batch.current);
  meta.$causedBy = current.eventId;
  if (meta.$correlationId === undefined && current.isJson && current.metadataRaw) {
    try { const m = JSON.parse(current.metadataRaw); if (m && m.$correlationId !== undefined) meta.$correlationId = m.$correlationId; } catch (e) {}
  }
  return meta;
}
/**
 * @param {unknown} v
 * @param {string} what
 * @returns {string}
 */
function nonEmpty(v, what) {
  if (v === null || v === undefined || v === '') fail(what + ' must not be empty');
  if (typeof v !== 'string') fail('string expected');
  return v;
}
/**
 * @param {unknown} streamId
 * @param {unknown} eventType
 * @param {unknown} body
 * @param {unknown} [metadata]
 */
export function emit(streamId, eventType, body, metadata) {
  requireEmit();
  if (arguments.length < 3) fail('invalid number of parameters');
  nonEmpty(streamId, 'streamId'); nonEmpty(eventType, 'eventType');
  if (body === null || body === undefined) fail('body must not be null');
  if (typeof body !== 'object') fail('object expected');
  if (arguments.length > 3 && (metadata === undefined || metadata === null)) fail('metadata must be an object');
  keep({
    streamId: /** @type {string} */ (streamId), eventType: /** @type {string} */ (eventType), data: stateJson(body, 0), isJson: true,
    metadata: emittedMetadata(metadata),
  });
}
/**
 * @param {unknown} streamId
 * @param {any} event
 * @param {unknown} [metadata]
 */
export function linkTo(streamId, event, metadata) {
  requireEmit();
  if (arguments.length < 2 || arguments.length > 3) fail('invalid number of parameters');
  nonEmpty(streamId, 'streamId');
  if (!event || typeof event.sequenceNumber !== 'number' || typeof event.streamId !== 'string') {
    fail('Invalid link to event ' + (event && event.sequenceNumber) + '@' + (event && event.streamId));
  }
  keep({
    streamId: /** @type {string} */ (streamId), eventType: '$>', data: event.sequenceNumber + '@' + event.streamId, isJson: false,
    metadata: emittedMetadata(metadata),
  });
}
/**
 * @param {unknown} streamId
 * @param {unknown} linkedStreamId
 * @param {unknown} [metadata]
 */
export function linkStreamTo(streamId, linkedStreamId, metadata) {
  requireEmit();
  nonEmpty(streamId, 'streamId'); nonEmpty(linkedStreamId, 'linkedStreamId');
  keep({
    streamId: /** @type {string} */ (streamId), eventType: '$@', data: /** @type {string} */ (linkedStreamId), isJson: false,
    metadata: emittedMetadata(metadata),
  });
}
/**
 * Copies the event (legacy copyTo: type, raw data, and the metadata keys not starting with $).
 * @param {unknown} streamId
 * @param {any} event
 * @param {any} [metadata]
 */
export function copyTo(streamId, event, metadata) {
  requireEmit();
  nonEmpty(streamId, 'streamId');
  if (!event || typeof event.eventType !== 'string') fail('copyTo expects an event');
  /** @type {Record<string, unknown>} */
  const meta = {};
  const source = event.metadata;
  if (source && typeof source === 'object') {
    for (const k of Object.keys(source)) if (!k.startsWith('$') || k === '$correlationId') meta[k] = source[k];
  }
  if (metadata && typeof metadata === 'object') for (const k of Object.keys(metadata)) if (!k.startsWith('$')) meta[k] = metadata[k];
  keep({
    streamId: /** @type {string} */ (streamId), eventType: event.eventType, data: event.bodyRaw === null ? '' : event.bodyRaw, isJson: event.isJson,
    metadata: emittedMetadata(meta),
  });
}
