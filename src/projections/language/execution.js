// @ts-check
// The execution phase (§5, §6, §11): partitions and their states, which handler an event
// reaches, results, and the batch loop: a batch of events in as one JSON text (wire-format.js),
// one JSON text out with what it emitted and logged. Changed states stay here until collected
// (the host collects at its checkpoints), so a state is serialised once per collection, not per event.

import { definition, handlers, partitionFunction, transforms } from './definition-phase.js';
import { chooseEventObjects, eventObject } from './event-object.js';
import { fail } from './fail.js';
import { batch, logs, tooManyEmitsMessage } from './output.js';
import { stateJson } from './state-json.js';
import { decodeEvent, wireEvent } from './wire-format.js';

/** @import { QueryFunction } from './definition-phase.js' */
/** @import { WireEvent } from './wire-format.js' */
/** @import { BatchOutcome, ChangedPartition, EmittedEvent, EventTrace } from '../sandbox.js' */
/** @import { EventUse } from '../event-use.js' */

// Our own copies of the built-ins we rely on: a query that patches JSON or Object in its global
// scope cannot change what we report.
const JSON_parse = JSON.parse;
const JSON_stringify = JSON.stringify;
const Object_keys = Object.keys;
const fnToString = Function.prototype.toString;

/**
 * What the host starts us with, and what we keep of the definition.
 * @typedef {object} ExecutionConfig
 * @property {boolean} emitEnabled
 * @property {EventUse} eventUse
 * @property {string[]} handlerOrder
 * @property {boolean} byStream
 * @property {boolean} byCustomPartitions
 * @property {boolean} biState
 * @property {boolean} resultsPerEvent each event's result change is reported with its batch (§11), not only at collection
 * @property {number} partitionCache partitions kept here at most (clean ones beyond it are evicted); 0: keep all, none is stored to reload from
 * @property {number} maxEmitsPerEvent events one event may emit at most (MaxProjectionEmitsPerEvent); 0: no limit
 * @property {boolean} [trace] each event's outcome says what ran for it (the debugger: ../debugger.ts)
 */

/**
 * Emitted events go out in pages of this many when there are more: the outcome's JSON text has
 * none of them, and each page follows it as a JSON array on a line of its own (JSON texts hold
 * no raw line breaks), so the host parses a few hundred KB at a time between turns of its event
 * loop instead of one text of tens of MB (200,000 emitted events: ~30 MB, ~0.3-1 s to parse).
 */
const EMITTED_PER_PAGE = 1000;

/** @type {ExecutionConfig} */
let config;
/** partition -> state (live objects); the shared state of a bi-state projection is partition ''. @type {Map<string, any>} */
const states = new Map();
/** partition -> result JSON text. @type {Map<string, string>} */
const results = new Map();
/** partition -> state JSON text (as last reported). @type {Map<string, string | null>} */
const serialized = new Map();
/** Partitions changed since the last collection. @type {Set<string>} */
let touched = new Set();
/** partition -> state JSON text right after its last handler (results per event). @type {Map<string, string | null>} */
const afterHandler = new Map();
/**
 * Resident partitions with no stored checkpoint yet: reported as new when collected (the host
 * registers them in the partitions stream). @type {Set<string>}
 */
const unstored = new Set();
/**
 * A batch waiting for the host to supply the stored states of partitions that are not resident
 * (lazy partitions: only `partitionCache` of them live here; the others are in their checkpoints).
 * @type {{ a: any[], pre: Precomputed, collect: boolean } | null}
 */
let waiting = null;
/** The partition the last handled event changed. @type {string} */
let handledPartition = '';
/** Every event of a batch is decoded into this one record. */
const ev = wireEvent();
/**
 * With config.trace, what ran for the current event: its partition, the handler it reached and
 * every query function called for it, in order. Null otherwise: a running projection pays one
 * test per call.
 * @type {EventTrace | null}
 */
let tracing = null;

function initState() {
  return handlers.$init ? handlers.$init() : {};
}
function initShared() {
  return handlers.$initShared ? handlers.$initShared() : {};
}
/** @param {unknown} s */
function isEmptyState(s) { return s === undefined || s === null; }

/** @type {string | undefined} */
let lastPartition;
/**
 * @param {string} partition
 * @param {Record<string, unknown> | null} env the event object ($created sees it)
 */
function stateOf(partition, env) {
  let state = states.get(partition);
  if (!states.has(partition) && partition !== '') unstored.add(partition); // never stored (a lazy one was supplied before use)
  // A partition whose state became null keeps receiving null until another partition was processed.
  if (isEmptyState(state) && !(state === null && partition === lastPartition)) {
    if (tracing && handlers.$init) tracing.calls.push('$init');
    state = initState();
    if (state === undefined) state = {};
    states.set(partition, state);
    touched.add(partition);
    if (handlers.$created) {
      if (tracing) tracing.calls.push('$created');
      const arg = config.biState ? [state, sharedState()] : state;
      handlers.$created(arg, env);
      if (config.biState) {
        // What $created did to the pair it received counts (st[0] = null leaves the state null).
        states.set(partition, arg[0]);
        states.set('', arg[1]);
      }
    }
  }
  return states.get(partition);
}
function sharedState() {
  let shared = states.get('');
  if (isEmptyState(shared)) {
    if (tracing && handlers.$initShared) tracing.calls.push('$initShared');
    shared = initShared();
    states.set('', shared);
    touched.add('');
  }
  return shared;
}

const SPECIAL_KEYS = new Set(['$init', '$initShared', '$created', '$deleted', '$any']);
/**
 * The key of the handler an event type reaches (handlerFor's, by name): its own, else $any, else none.
 * @param {string} type
 * @returns {string | null}
 */
function handlerKey(type) {
  if (!SPECIAL_KEYS.has(type) && handlers[type]) return type;
  return handlers.$any ? '$any' : null;
}
/** @param {string} type */
function handlerFor(type) {
  if (!SPECIAL_KEYS.has(type) && handlers[type]) return handlers[type];
  return handlers.$any || null;
}

/** The event object partitionBy saw, reused when the partition is ''. @type {Record<string, unknown> | null} */
let partitionEnvelope = null;
/**
 * @param {WireEvent} e
 * @returns {string | null} the partition, or null when the event is skipped
 */
function partitionOf(e) {
  if (config.byStream) return e.partitionStream === null ? e.streamId : e.partitionStream;
  if (config.byCustomPartitions) {
    if (tracing) tracing.calls.push('partitionBy');
    const key = /** @type {QueryFunction} */ (partitionFunction)(partitionEnvelope = eventObject(e, ''));
    if (typeof key === 'string') return key;
    if (typeof key === 'number') return String(key);
    return null;
  }
  return '';
}

/**
 * The partitions of a batch, found before any handler runs so that the stored states of those not
 * resident can be asked for once: the partition function runs once per event, here.
 * @typedef {object} Precomputed
 * @property {(string | null)[]} parts each event's partition (null: not handled)
 * @property {(Record<string, unknown> | null)[]} envelopes the event object the partition function saw, where the partition is ''
 * @property {{ index: number, message: string } | null} fault the partition function threw at this event
 */

/**
 * @param {any[]} a the parsed batch
 * @returns {Precomputed}
 */
function precompute(a) {
  const end = a.length - 1;
  const strings = a[end];
  /** @type {Precomputed} */
  const pre = { parts: [], envelopes: [], fault: null };
  const noHandlers = config.handlerOrder.length === 0;
  for (let i = 0, n = 0; i < end; n++) {
    i = decodeEvent(a, i, strings, ev);
    let part = null;
    partitionEnvelope = null;
    if (ev.deletedPartition !== null) part = handlers.$deleted ? ev.deletedPartition : null;
    else if (handlerFor(ev.eventType) || noHandlers) {
      batch.current = ev;
      try {
        part = partitionOf(ev);
      } catch (thrown) {
        const err = /** @type {any} */ (thrown);
        pre.fault = { message: err && err.message !== undefined ? String(err.message) : String(err), index: n };
        break;
      }
    }
    pre.parts.push(part);
    pre.envelopes.push(part === '' ? partitionEnvelope : null);
  }
  partitionEnvelope = null;
  return pre;
}

/**
 * The partitions of a batch that are neither resident nor known to have no stored state.
 * @param {Precomputed} pre
 * @returns {string[]}
 */
function missing(pre) {
  /** @type {string[]} */
  const needs = [];
  const seen = new Set();
  for (const p of pre.parts) {
    if (p === null || p === '' || states.has(p) || seen.has(p)) continue;
    seen.add(p);
    needs.push(p);
  }
  return needs;
}

/**
 * @param {WireEvent} e
 * @param {string | null | undefined} known the partition found beforehand (precompute), or undefined to find it now
 * @param {Record<string, unknown> | null} envelope with `known` '': the event object the partition function saw
 * @returns {boolean} whether a handler (or the no-handler rule) handled it
 */
function handleOne(e, known, envelope) {
  batch.current = e;
  if (e.deletedPartition !== null) {
    if (!handlers.$deleted) return false;
    const partition = e.deletedPartition;
    if (tracing) { tracing.partition = partition; tracing.handler = '$deleted'; }
    const state = stateOf(partition, null);
    if (tracing) tracing.calls.push('$deleted');
    handlers.$deleted(state, null, partition, false);
    touched.add(partition);
    handledPartition = partition;
    return true;
  }
  const handler = handlerFor(e.eventType);
  const noHandlers = config.handlerOrder.length === 0;
  if (!handler && !noHandlers) return false;
  if (known !== undefined) partitionEnvelope = envelope;
  const partition = known !== undefined ? known : partitionOf(e);
  if (partition === null) return false;
  if (tracing) { tracing.partition = partition; tracing.handler = noHandlers ? null : handlerKey(e.eventType); }
  const env = partition === '' && partitionEnvelope !== null ? partitionEnvelope : eventObject(e, partition);
  partitionEnvelope = null;
  handledPartition = partition;
  if (noHandlers) {
    if (!states.has(partition) && partition !== '') unstored.add(partition);
    states.set(partition, env.bodyRaw); // the raw text, kept as it was written
    touched.add(partition);
    return true;
  }
  const state = stateOf(partition, env);
  if (config.biState) {
    const pair = [state, sharedState()];
    if (tracing) tracing.calls.push(/** @type {string} */ (tracing.handler));
    const r = handler(pair, env);
    const next = r === undefined ? pair : r;
    if (!Array.isArray(next)) fail('A bi-state handler must return [state, sharedState]');
    states.set(partition, next[0]);
    states.set('', next[1]);
    touched.add('');
  } else {
    if (tracing) tracing.calls.push(/** @type {string} */ (tracing.handler));
    const r = handler(state, env);
    if (r !== undefined) states.set(partition, r);
  }
  touched.add(partition);
  lastPartition = partition;
  return true;
}

/**
 * The result of a partition: its state through the transforms (a bi-state one with the shared state).
 * @param {string} partition
 * @returns {string | null}
 */
function resultOf(partition) {
  return resultFrom(states.get(partition), states.get(''));
}

/**
 * The result of a state value: through the transforms, which may change what they are given. The
 * raw body kept as the state of a query without handlers is its JSON value.
 * @param {any} state
 * @param {any} shared the shared state, for a bi-state query
 * @returns {string | null}
 */
function resultFrom(state, shared) {
  let value = state;
  if (typeof value === 'string' && config.handlerOrder.length === 0) {
    try { value = JSON_parse(value); } catch (err) { /* not JSON: the text itself */ }
  }
  if (config.biState) value = [value, shared];
  for (const t of transforms) {
    if (value === null || value === undefined) return null;
    if (t.kind === 'transform') value = t.fn(value);
    else if (t.fn(value) !== true) return null;
  }
  return value === null || value === undefined ? null : stateJson(value, 0);
}

/**
 * Switches to the execution phase with the stored partition states.
 * @param {string} configJson `{ emitEnabled, eventUse }`
 * @param {string} statesJson `{ partition: [state JSON | null, result JSON | null] }`
 * @returns {string} `{ plainEvents }`: whether handlers get plain event objects (event-object.js)
 */
export function startExecution(configJson, statesJson) {
  config = JSON.parse(configJson);
  config.handlerOrder = definition.handlerOrder;
  config.byStream = definition.byStream;
  config.byCustomPartitions = definition.byCustomPartitions;
  config.biState = definition.biState;
  batch.emitEnabled = config.emitEnabled;
  batch.maxEmitsPerEvent = config.maxEmitsPerEvent > 0 ? config.maxEmitsPerEvent : 0;
  const stored = JSON.parse(statesJson);
  supplyStates(stored);
  const use = config.eventUse;
  const plainEvents = !use.escapes && handlersAreKnown(use);
  chooseEventObjects(plainEvents, use.reads);
  return JSON_stringify({ plainEvents });
}

/**
 * Makes partitions resident with their stored [state JSON, result JSON] (null: nothing stored).
 * @param {Record<string, [string | null, string | null] | null>} stored
 */
function supplyStates(stored) {
  for (const p of Object_keys(stored)) {
    const value = stored[p];
    if (value === null) {
      states.set(p, undefined); // resident, with nothing stored: its first event initialises it
      unstored.add(p);
      continue;
    }
    const [state, result] = value;
    states.set(p, state === null ? null : JSON_parse(state));
    serialized.set(p, state);
    if (result !== null) results.set(p, result);
  }
}

/**
 * With a partition cache: forgets the oldest resident partitions beyond it that have nothing to
 * collect (their state is in their checkpoint, or with the host until that is written). The
 * shared state and the partition of the last event stay.
 */
function evict() {
  let excess = states.size - config.partitionCache;
  if (config.partitionCache <= 0 || excess <= 0) return;
  for (const p of states.keys()) {
    if (excess <= 0) break;
    if (p === '' || p === lastPartition || touched.has(p)) continue;
    states.delete(p);
    serialized.delete(p);
    results.delete(p);
    afterHandler.delete(p);
    unstored.delete(p);
    excess--;
  }
}

/**
 * Every function that receives event objects is one the host analysed (not a built-in or bound function).
 * @param {EventUse} use
 */
function handlersAreKnown(use) {
  const known = (/** @type {QueryFunction} */ fn, /** @type {string[]} */ texts) => {
    try { return texts.indexOf(fnToString.call(fn)) >= 0; } catch (err) { return false; }
  };
  for (const key of Object_keys(handlers)) {
    if (key === '$init' || key === '$initShared' || key === '$deleted') continue;
    if (!known(handlers[key], use.functions)) return false;
  }
  return partitionFunction === null || known(partitionFunction, use.partitionFunctions);
}

/**
 * Serialises the partitions touched since the last collection; reports those whose state changed.
 * @returns {ChangedPartition[]}
 */
function collectChanges() {
  /** @type {ChangedPartition[]} */
  const changed = [];
  for (const p of touched) {
    const s = states.get(p);
    // With results per event, the state as its last handler left it (what a restart resumes from,
    // as in the reference: a transform's change to the live state is not stored).
    const text = config.resultsPerEvent && afterHandler.has(p) ? /** @type {string | null} */ (afterHandler.get(p))
      : s === null || s === undefined ? null : typeof s === 'string' ? s : stateJson(s, 0);
    if (text === serialized.get(p)) continue;
    serialized.set(p, text);
    const isNew = unstored.delete(p);
    if (config.resultsPerEvent) {
      // Reported event by event already (noteResult): the collection carries the latest.
      changed.push([p, text, results.has(p) ? /** @type {string} */ (results.get(p)) : null, false, isNew]);
      continue;
    }
    // Computed from a copy of the state: collecting never changes what the next event sees.
    const result = definition.producesResults ? resultOfText(p, text) : text;
    const previous = results.has(p) ? results.get(p) : null;
    if (result !== null) results.set(p, result); else results.delete(p);
    changed.push([p, text, result, result !== previous, isNew]);
  }
  touched = new Set();
  return changed;
}

/**
 * The result of a partition from its serialised state, on a copy (the live state is not touched).
 * @param {string} partition
 * @param {string | null} text
 * @returns {string | null}
 */
function resultOfText(partition, text) {
  if (text === null) return null;
  const copy = typeof states.get(partition) === 'string' ? text : JSON_parse(text);
  const shared = config.biState ? states.get('') : undefined;
  return resultFrom(copy, shared === undefined || shared === null ? shared : JSON_parse(stateJson(shared, 0)));
}

/**
 * Results per event (§11): after an event changed its partition's serialised state, the result is
 * computed on the live state (a transform that changes its argument changes what the partition's
 * next event sees, as in the reference) and reported when it differs from the last one.
 * @param {string} partition
 * @param {[string, string | null][]} out
 */
function noteResult(partition, out) {
  const s = states.get(partition);
  const text = s === null || s === undefined ? null : typeof s === 'string' ? s : stateJson(s, 0);
  if (afterHandler.has(partition) && afterHandler.get(partition) === text) return;
  afterHandler.set(partition, text);
  const result = text === null ? null : resultOf(partition);
  const previous = results.has(partition) ? results.get(partition) : null;
  if (result === previous) return;
  if (result !== null) results.set(partition, result); else results.delete(partition);
  out.push([partition, result]);
}

/**
 * One batch: events in, one result out. Stops at the first failing event. With collect set,
 * the changed partitions are serialised now; otherwise they wait for collectJson (checkpoints).
 * With a partition cache, a batch whose partitions are not all resident answers `{"needs": [...]}`
 * instead, and goes on once the host supplied their stored states (supplyJson).
 * @param {[string]} batchJson the batch's JSON text, in an array (see Sandbox.process)
 * @param {boolean} collect
 * @returns {string} the BatchOutcome (or the partitions needed) as JSON
 */
export function processBatch(batchJson, collect) {
  const a = JSON_parse(batchJson[0]);
  // What the partition function logs or emits (precompute) belongs to the batch too.
  logs.length = 0;
  batch.emitted = [];
  batch.eventStart = 0;
  batch.overLimit = false;
  if (config.partitionCache <= 0 || !(config.byStream || config.byCustomPartitions || handlers.$deleted)) return runBatch(a, null, collect);
  const pre = precompute(a);
  const needs = missing(pre);
  if (needs.length === 0) return runBatch(a, pre, collect);
  waiting = { a, pre, collect };
  return JSON_stringify({ needs });
}

/**
 * The stored states of the partitions the waiting batch needs; runs it.
 * @param {[string]} statesJson `{ partition: [state JSON | null, result JSON | null] | null }`, in an array
 * @returns {string} the BatchOutcome as JSON
 */
export function supplyJson(statesJson) {
  if (waiting === null) fail('No batch is waiting for partition states');
  const { a, pre, collect } = /** @type {NonNullable<typeof waiting>} */ (waiting);
  waiting = null;
  supplyStates(JSON_parse(statesJson[0]));
  return runBatch(a, pre, collect);
}

/**
 * @param {any[]} a the parsed batch
 * @param {Precomputed | null} pre its partitions, found beforehand
 * @param {boolean} collect
 * @returns {string}
 */
function runBatch(a, pre, collect) {
  const end = a.length - 1;
  const strings = a[end];
  /** @type {BatchOutcome} */
  const out = { emitted: [], changed: [], logs: [], handled: 0, processed: 0, fault: null, results: [] };
  const resultsOut = /** @type {[string, string | null][]} */ (out.results);
  const traces = config.trace ? (out.trace = /** @type {EventTrace[]} */ ([])) : null;
  const emitted = batch.emitted;
  out.emitted = emitted;
  const stopAt = pre !== null && pre.fault !== null ? pre.fault.index : -1;
  for (let i = 0, n = 0; i < end; n++) {
    if (n === stopAt) {
      out.fault = /** @type {NonNullable<Precomputed['fault']>} */ (/** @type {Precomputed} */ (pre).fault);
      break;
    }
    const emittedBefore = emitted.length;
    const resultsBefore = resultsOut.length;
    batch.eventStart = emittedBefore;
    batch.overLimit = false;
    if (traces) traces.push(tracing = { partition: null, handler: null, calls: [] });
    try {
      i = decodeEvent(a, i, strings, ev);
      const handled = handleOne(ev, pre === null ? undefined : pre.parts[n], pre === null ? null : pre.envelopes[n]);
      if (batch.overLimit) fail(tooManyEmitsMessage()); // even if the handler caught the error emit threw
      if (handled) {
        out.handled++;
        if (config.resultsPerEvent) noteResult(handledPartition, resultsOut);
      }
      out.processed = n + 1;
    } catch (thrown) {
      const err = /** @type {any} */ (thrown);
      emitted.length = emittedBefore; // what the failing event emitted is not kept
      resultsOut.length = resultsBefore;
      out.fault = { message: err && err.message !== undefined ? String(err.message) : String(err), index: n };
      break;
    }
  }
  tracing = null;
  if (collect) {
    try {
      out.changed = collectChanges();
    } catch (thrown) {
      const err = /** @type {any} */ (thrown);
      if (!out.fault) out.fault = { message: String(err && err.message || err), index: Math.max(out.processed - 1, 0) };
    }
  }
  out.logs = logs.slice();
  out.touched = touched.size;
  evict();
  out.resident = states.size;
  if (emitted.length <= EMITTED_PER_PAGE) return JSON_stringify(out);
  out.emitted = [];
  let text = JSON_stringify(out);
  for (let from = 0; from < emitted.length; from += EMITTED_PER_PAGE) {
    /** @type {EmittedEvent[]} */
    const page = [];
    for (let i = from; i < from + EMITTED_PER_PAGE && i < emitted.length; i++) page[i - from] = emitted[i];
    text += '\n' + JSON_stringify(page);
  }
  return text;
}

/**
 * The partitions changed since the last collection; those collected may leave the cache now.
 * @returns {string} `[ChangedPartition[], resident partitions]` as JSON
 */
export function collectJson() {
  const changed = collectChanges();
  evict();
  return JSON_stringify([changed, states.size]);
}

/**
 * The live [state, result] of one partition, serialised now.
 * @param {string} p
 * @returns {string}
 */
export function partitionJson(p) {
  if (config.partitionCache > 0 && p !== '' && !states.has(p)) return 'null'; // not resident: the host reads its checkpoint
  if (config.resultsPerEvent && afterHandler.has(p)) {
    // The state as serialised after the handler (before the transforms ran on it), and its result.
    return JSON.stringify([afterHandler.get(p), results.has(p) ? results.get(p) : null]);
  }
  const s = states.get(p);
  if (s === null || s === undefined) return JSON.stringify([null, null]);
  const text = typeof s === 'string' ? s : stateJson(s, 0);
  return JSON.stringify([text, definition.producesResults ? resultOfText(p, text) : text]);
}
