// @ts-check
// The definition phase (§1-4): the selectors, the chain grammar and options a query calls while
// its source runs once. They record the definition, the handlers, the partition function and the
// result transforms; the execution phase (execution.js) runs what they recorded. Each chain step
// returns only the steps that may follow it, so an illegal chain is a TypeError at definition.

import { blankDefinition } from './source-definition.js';
import { fail } from './fail.js';

/** @typedef {(...args: any[]) => any} QueryFunction */

export const definition = blankDefinition();
/** The functions given to when(), by key ($init, $any, an event type...). @type {Record<string, QueryFunction>} */
export const handlers = Object.create(null);
/** transformBy and filterBy steps, in chain order. @type {{ kind: 'transform' | 'filter', fn: QueryFunction }[]} */
export const transforms = [];
/** @type {QueryFunction | null} */
export let partitionFunction = null;

/**
 * @param {unknown} v
 * @param {string} what the message when it is not a string
 * @returns {string}
 */
function str(v, what) { if (typeof v !== 'string') fail(what); return v; }

function afterOutput() { return { transformBy, filterBy, outputTo }; }
function afterWhen() {
  return { transformBy, filterBy, outputState, outputTo, $defines_state_transform: definesStateTransform };
}
/** @param {Record<string, unknown>} map */
function when(map) {
  if (typeof map !== 'object' || map === null) fail('when expects an object of handlers');
  definition.definesFold = true;
  for (const key of Object.keys(map)) {
    const fn = map[key];
    if (typeof fn !== 'function') continue;
    handlers[key] = /** @type {QueryFunction} */ (fn);
    if (key === '$init' || key === '$created') continue;
    if (key === '$initShared') { definition.biState = true; continue; }
    if (key === '$deleted') {
      if (definition.biState) fail('Cannot handle deletes in bi-state projections');
      definition.handlesDeletedNotifications = true;
      continue;
    }
    if (key === '$any') { definition.anyHandler = true; definition.allEvents = true; definition.handlerOrder.push('$any'); continue; }
    definition.allEvents = false;
    definition.events.push(key);
    definition.handlerOrder.push(key);
  }
  return afterWhen();
}
function outputState() { definition.producesResults = true; return { transformBy, filterBy, outputTo }; }
/** @param {QueryFunction} fn */
function transformBy(fn) {
  if (typeof fn !== 'function') fail('transformBy expects a function');
  transforms.push({ kind: 'transform', fn });
  definition.producesResults = true; definition.definesStateTransform = true;
  return { transformBy, filterBy, outputState, outputTo };
}
/** @param {QueryFunction} fn */
function filterBy(fn) {
  if (typeof fn !== 'function') fail('filterBy expects a function');
  transforms.push({ kind: 'filter', fn });
  definition.producesResults = true; definition.definesStateTransform = true;
  return { transformBy, filterBy, outputState, outputTo };
}
function definesStateTransform() {
  definition.producesResults = true; definition.definesStateTransform = true;
  return afterOutput();
}
/**
 * @param {unknown} resultStream
 * @param {unknown} [pattern]
 */
function outputTo(resultStream, pattern) {
  if (arguments.length < 1 || arguments.length > 2) fail('outputTo expects 1 or 2 arguments');
  definition.resultStreamName = str(resultStream, 'expected string value');
  if (pattern !== undefined) definition.partitionResultStreamNamePattern = str(pattern, 'expected string value');
}
/** @param {QueryFunction} fn */
function partitionBy(fn) {
  if (typeof fn !== 'function') fail('partitionBy');
  partitionFunction = fn;
  definition.byCustomPartitions = true;
  return { when };
}
function foreachStream() { definition.byStream = true; return { when }; }
const streamChain = () => ({ when, partitionBy, outputState });
const allChain = () => ({ when, partitionBy, outputState, foreachStream });
/**
 * The names given as arguments, or as one array.
 * @param {IArguments} args
 * @param {string} what the message when one is not a string
 * @returns {string[]}
 */
function names(args, what) {
  const list = args.length === 1 && Array.isArray(args[0]) ? args[0] : Array.prototype.slice.call(args);
  return list.map((/** @type {unknown} */ s) => str(s, what));
}
function fromAll() { definition.allStreams = true; return allChain(); }
/** @param {unknown} s */
function fromStream(s) { definition.streams.push(str(s, 'stream')); return streamChain(); }
function fromStreams() { for (const s of names(arguments, 'streams')) definition.streams.push(s); return streamChain(); }
function fromCategory() {
  const list = names(arguments, 'category');
  if (list.length === 1) { definition.categories.push(list[0]); return allChain(); }
  for (const c of list) definition.streams.push('$ce-' + c);
  return allChain();
}
function fromCategories() {
  for (const c of names(arguments, 'categories')) definition.streams.push('$ce-' + c);
  return allChain();
}
/** Option keys (lower case) with the definition field each sets and the type its value must have. @type {Record<string, [string, string]>} */
const OPTION_TYPES = {
  resultstreamname: ['resultStreamName', 'string'], $includelinks: ['includeLinks', 'boolean'],
  reorderevents: ['reorderEvents', 'boolean'], processinglag: ['processingLag', 'number'], bistate: ['biState', 'boolean'],
};
const definitionFields = /** @type {Record<string, unknown>} */ (/** @type {unknown} */ (definition));
/** @param {Record<string, unknown>} o */
function options(o) {
  if (typeof o !== 'object' || o === null) fail('options expects an object');
  for (const key of Object.keys(o)) {
    const known = OPTION_TYPES[key.toLowerCase()];
    if (!known) fail('Unrecognized option: ' + key);
    if (typeof o[key] !== known[1]) fail('Invalid value');
    if (known[0] === 'biState' && o[key] && definition.handlesDeletedNotifications) fail('Cannot handle deletes in bi-state projections');
    definitionFields[known[0]] = o[key];
  }
}
/**
 * @param {string} type
 * @param {QueryFunction} fn
 */
function on_event(type, fn) {
  /** @type {Record<string, unknown>} */
  const m = {};
  m[type] = fn;
  when(m);
}
/** @param {QueryFunction} fn */
function on_any(fn) { when({ $any: fn }); }

/** @type {Record<string, unknown>} */
const DEFINITION_API = { fromAll, fromStream, fromStreams, fromCategory, fromCategories, options, on_event, on_any };

/**
 * Puts the definition functions in the query's global scope, for its one run.
 * @param {Record<string, unknown>} global
 */
export function openDefinitionPhase(global) {
  for (const k of Object.keys(DEFINITION_API)) global[k] = DEFINITION_API[k];
}

/**
 * Takes the definition functions away (a handler that calls one faults).
 * @param {Record<string, unknown>} global
 * @returns {string} the recorded definition as JSON
 */
export function closeDefinitionPhase(global) {
  for (const k of Object.keys(DEFINITION_API)) delete global[k];
  return JSON.stringify(definition);
}
