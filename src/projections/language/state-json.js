// @ts-check
// A partition's state (or result) as JSON (§6.5). Unlike JSON.stringify it refuses what would be
// stored as something else (NaN and Infinity, functions), walks own properties (non-enumerable
// ones too), writes a BigInt as its digits, and stops at a nesting depth no real state reaches
// (a cycle ends there too).

import { fail } from './fail.js';

const MAX_DEPTH = 64;

/**
 * @param {unknown} value
 * @param {number} depth of value in the state (0 for the state itself)
 * @returns {string}
 */
export function stateJson(value, depth) {
  if (depth > MAX_DEPTH) fail('The state is nested too deeply to serialise');
  if (value === null) return 'null';
  switch (typeof value) {
    case 'number': if (!isFinite(value)) fail('The state contains NaN or Infinity, which cannot be serialised'); return JSON.stringify(value);
    case 'string': return JSON.stringify(value);
    case 'boolean': return value ? 'true' : 'false';
    case 'bigint': return JSON.stringify(String(value));
    case 'undefined': return 'null';
    case 'function': fail('The state contains a function, which cannot be serialised');
    case 'object': break;
    default: return 'null';
  }
  if (Array.isArray(value)) {
    const parts = [];
    for (let i = 0; i < value.length; i++) parts.push(value[i] === undefined ? 'null' : stateJson(value[i], depth + 1));
    return '[' + parts.join(',') + ']';
  }
  const object = /** @type {Record<string, unknown>} */ (value);
  const parts = [];
  for (const key of Object.getOwnPropertyNames(object)) {
    const v = object[key];
    if (v === undefined) continue;
    parts.push(JSON.stringify(key) + ':' + stateJson(v, depth + 1));
  }
  return '{' + parts.join(',') + '}';
}
