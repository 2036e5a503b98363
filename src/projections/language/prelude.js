// @ts-check
// The projection language as it runs INSIDE the sandbox (an isolated-vm isolate). The host
// (../sandbox.ts) evaluates this module, with what it imports, in each isolate before the
// query's source: it locks the global scope down and gives the query the definition functions
// and log/console. Its exports are the entry points only the host can call (the query is a
// script, and a script cannot import): closeDefinition once the source ran, then start, then
// process (and supply, collect, partition) per batch. Only JSON texts cross, once per call.

import { closeDefinitionPhase, openDefinitionPhase } from './definition-phase.js';
import { collectJson, partitionJson, processBatch, startExecution, supplyJson } from './execution.js';
import { copyTo, emit, linkStreamTo, linkTo, log } from './output.js';

const global = /** @type {Record<string, unknown>} */ (/** @type {unknown} */ (globalThis));

openDefinitionPhase(global);
global.log = log;
global.console = { log, info: log, warn: log, error: log, debug: log };

// No string compilation inside the sandbox: eval is gone, and every function constructor
// (plain, async, generator, async generator) is unreachable or throws.
delete global.eval;
const OriginalFunction = Function;
for (const prototype of [OriginalFunction.prototype, Object.getPrototypeOf(async function () {}),
  Object.getPrototypeOf(function* () {}), Object.getPrototypeOf(async function* () {})]) {
  Object.defineProperty(prototype, 'constructor', { value: undefined, writable: false, configurable: false });
}
const BlockedFunction = function Function() { throw new EvalError('Code generation from strings is disabled in projections'); };
BlockedFunction.prototype = OriginalFunction.prototype;
Object.defineProperty(global, 'Function', { value: BlockedFunction, writable: false, configurable: false });

/** @returns {string} the recorded definition (SourceDefinition) as JSON; the definition functions are gone after it */
export function closeDefinition() {
  return closeDefinitionPhase(global);
}

/**
 * Switches to the execution phase: emitting exists from here on.
 * @param {string} configJson
 * @param {string} statesJson
 * @returns {string}
 */
export function start(configJson, statesJson) {
  const answer = startExecution(configJson, statesJson);
  global.emit = emit; global.linkTo = linkTo; global.linkStreamTo = linkStreamTo; global.copyTo = copyTo;
  return answer;
}

export { processBatch as process, supplyJson as supply, collectJson as collect, partitionJson as partition };
