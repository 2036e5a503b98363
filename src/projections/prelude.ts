// The projection language, as it runs INSIDE the sandbox (an isolated-vm isolate). It is plain
// JavaScript, evaluated once per isolate before the user's source. It records the definition
// (selectors, partitioning, handlers, options) while the source runs, then switches to the
// execution phase: the host passes batches of events as one JSON text and gets one JSON text
// back with the changed partitions, emitted events and log lines. Nothing else crosses.

import { WIRE } from './wire.js';

export const PRELUDE = String.raw`
'use strict';
(function (global) {
  // The prelude's own copies of the built-ins it relies on: a query that patches JSON or
  // Object in its global scope cannot change what the prelude reports.
  const JSON_parse = JSON.parse;
  const JSON_stringify = JSON.stringify;
  const Object_keys = Object.keys;
  const Object_getOwnPropertyNames = Object.getOwnPropertyNames;
  const Array_isArray = Array.isArray;
  const fnToString = Function.prototype.toString;
  const definition = {
    allEvents: false, allStreams: false, streams: [], categories: [], events: [],
    byStream: false, byCustomPartitions: false, definesFold: false, producesResults: false,
    definesStateTransform: false, handlesDeletedNotifications: false, biState: false,
    includeLinks: false, reorderEvents: false, processingLag: 0, resultStreamName: null,
    partitionResultStreamNamePattern: null, anyHandler: false, handlerOrder: [],
  };
  const handlers = Object.create(null);
  let partitionFn = null;
  const transforms = [];
  const logs = [];

  function fail(message) { throw new Error(message); }
  function str(v, what) { if (typeof v !== 'string') fail(what); return v; }
  function toLog(args) {
    return Array.prototype.map.call(args, (a) => typeof a === 'string' ? a : safeJson(a)).join(' ');
  }
  function safeJson(v) { try { return JSON.stringify(v); } catch (e) { return String(v); } }
  function log() { logs.push(toLog(arguments)); }

  // ---- definition phase: the chain grammar ----
  function afterOutput() { return { transformBy, filterBy, outputTo }; }
  function afterWhen() {
    return { transformBy, filterBy, outputState, outputTo, $defines_state_transform: definesStateTransform };
  }
  function when(map) {
    if (typeof map !== 'object' || map === null) fail('when expects an object of handlers');
    definition.definesFold = true;
    for (const key of Object.keys(map)) {
      const fn = map[key];
      if (typeof fn !== 'function') continue;
      handlers[key] = fn;
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
  function transformBy(fn) {
    if (typeof fn !== 'function') fail('transformBy expects a function');
    transforms.push({ kind: 'transform', fn });
    definition.producesResults = true; definition.definesStateTransform = true;
    return { transformBy, filterBy, outputState, outputTo };
  }
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
  function outputTo(resultStream, pattern) {
    if (arguments.length < 1 || arguments.length > 2) fail('outputTo expects 1 or 2 arguments');
    definition.resultStreamName = str(resultStream, 'expected string value');
    if (pattern !== undefined) definition.partitionResultStreamNamePattern = str(pattern, 'expected string value');
  }
  function partitionBy(fn) {
    if (typeof fn !== 'function') fail('partitionBy');
    partitionFn = fn;
    definition.byCustomPartitions = true;
    return { when };
  }
  function foreachStream() { definition.byStream = true; return { when }; }
  const streamChain = () => ({ when, partitionBy, outputState });
  const allChain = () => ({ when, partitionBy, outputState, foreachStream });
  function names(args, what) {
    const list = args.length === 1 && Array.isArray(args[0]) ? args[0] : Array.prototype.slice.call(args);
    return list.map((s) => str(s, what));
  }
  function fromAll() { definition.allStreams = true; return allChain(); }
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
  const OPTION_TYPES = {
    resultstreamname: ['resultStreamName', 'string'], $includelinks: ['includeLinks', 'boolean'],
    reorderevents: ['reorderEvents', 'boolean'], processinglag: ['processingLag', 'number'], bistate: ['biState', 'boolean'],
  };
  function options(o) {
    if (typeof o !== 'object' || o === null) fail('options expects an object');
    for (const key of Object.keys(o)) {
      const known = OPTION_TYPES[key.toLowerCase()];
      if (!known) fail('Unrecognized option: ' + key);
      if (typeof o[key] !== known[1]) fail('Invalid value');
      if (known[0] === 'biState' && o[key] && definition.handlesDeletedNotifications) fail('Cannot handle deletes in bi-state projections');
      definition[known[0]] = o[key];
    }
  }
  function on_event(type, fn) { const m = {}; m[type] = fn; when(m); }
  function on_any(fn) { when({ $any: fn }); }

  const DEFINITION_API = { fromAll, fromStream, fromStreams, fromCategory, fromCategories, options, on_event, on_any };
  for (const k of Object.keys(DEFINITION_API)) global[k] = DEFINITION_API[k];
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

  // ---- execution phase ----
  let config = null;
  const states = new Map(); // partition -> state (live objects)
  const results = new Map(); // partition -> result JSON text
  const serialized = new Map(); // partition -> state JSON text (as last reported)
  let out = null;
  let touched = new Set(); // partitions changed since the last collection
  let current = null; // the event being handled

  function serialize(value, depth) {
    if (depth > 64) fail('The state is nested too deeply to serialise');
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
      for (let i = 0; i < value.length; i++) parts.push(value[i] === undefined ? 'null' : serialize(value[i], depth + 1));
      return '[' + parts.join(',') + ']';
    }
    const parts = [];
    for (const key of Object.getOwnPropertyNames(value)) {
      const v = value[key];
      if (v === undefined) continue;
      parts.push(JSON.stringify(key) + ':' + serialize(v, depth + 1));
    }
    return '{' + parts.join(',') + '}';
  }

  const NO_VALUE = Object.freeze({ value: null });
  function parsedOrThrowing(raw) {
    if (!raw) return NO_VALUE;
    try { return { value: JSON_parse(raw) }; } catch (err) { return { error: err }; }
  }

  // Plain event objects: the query only reads event fields by name (event-use.ts, checked again
  // in __svcStart), so an object needs no freezing and no field it never reads.
  let plainEvents = false;
  let parseMetadata = true;
  let parseLinkMetadata = true;

  // The event object handlers see: a plain object whose fields are all own and enumerable,
  // frozen unless plainEvents. JSON data arrives parsed in the batch (bodyRaw is then made from
  // it if the query can see it) or as raw text; metadata that is not JSON throws on access.
  function envelope(e, partition) {
    const body = !e.isJson ? undefined : e.hasBody ? e.body : e.bodyRaw ? JSON_parse(e.bodyRaw) : undefined;
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

  // The batch wire format (wire.ts): events flat in one array, each as flags, type and stream
  // (indexes into the string table, the last element), event number, then the fields its
  // flags name. Each event is decoded into this one reused record.
  const F_JSON = ${WIRE.JSON}, F_BODY = ${WIRE.BODY}, F_RAW = ${WIRE.RAW}, F_METADATA = ${WIRE.METADATA}, F_LINK_METADATA = ${WIRE.LINK_METADATA};
  const F_PARTITION = ${WIRE.PARTITION}, F_CATEGORY = ${WIRE.CATEGORY}, F_DELETED = ${WIRE.DELETED}, F_ID = ${WIRE.ID};
  const ev = {
    eventType: '', streamId: '', sequenceNumber: 0, eventId: null, isJson: false, hasBody: false, body: undefined, bodyRaw: null,
    metadataRaw: null, linkMetadataRaw: null, partitionStream: null, category: null, deletedPartition: null,
  };
  /** Decodes the event at a[i] into ev; returns the index of the next one. */
  function decode(a, i, strings) {
    const flags = a[i];
    ev.eventType = strings[a[i + 1]];
    ev.streamId = strings[a[i + 2]];
    ev.sequenceNumber = a[i + 3];
    i += 4;
    ev.isJson = (flags & F_JSON) !== 0;
    ev.eventId = flags & F_ID ? a[i++] : null;
    ev.hasBody = (flags & F_BODY) !== 0;
    ev.body = ev.hasBody ? a[i++] : undefined;
    ev.bodyRaw = flags & F_RAW ? a[i++] : null;
    ev.metadataRaw = flags & F_METADATA ? a[i++] : null;
    ev.linkMetadataRaw = flags & F_LINK_METADATA ? a[i++] : null;
    ev.partitionStream = flags & F_PARTITION ? strings[a[i++]] : null;
    ev.category = flags & F_CATEGORY ? strings[a[i++]] : null;
    ev.deletedPartition = flags & F_DELETED ? strings[a[i++]] : null;
    return i;
  }

  function requireEmit() {
    if (!config.emitEnabled) fail("'emit' is not allowed by the projection/configuration/mode");
  }
  function emittedMetadata(extra) {
    const meta = {};
    if (extra !== undefined) {
      if (typeof extra !== 'object' || extra === null) fail('metadata must be an object');
      for (const k of Object.keys(extra)) if (extra[k] !== undefined) meta[k] = extra[k];
    }
    meta.$causedBy = current.eventId;
    if (meta.$correlationId === undefined && current.isJson && current.metadataRaw) {
      try { const m = JSON.parse(current.metadataRaw); if (m && m.$correlationId !== undefined) meta.$correlationId = m.$correlationId; } catch (e) {}
    }
    return meta;
  }
  function nonEmpty(v, what) {
    if (v === null || v === undefined || v === '') fail(what + ' must not be empty');
    if (typeof v !== 'string') fail('string expected');
    return v;
  }
  function emit(streamId, eventType, body, metadata) {
    requireEmit();
    if (arguments.length < 3) fail('invalid number of parameters');
    nonEmpty(streamId, 'streamId'); nonEmpty(eventType, 'eventType');
    if (body === null || body === undefined) fail('body must not be null');
    if (typeof body !== 'object') fail('object expected');
    if (arguments.length > 3 && (metadata === undefined || metadata === null)) fail('metadata must be an object');
    out.emitted.push({ streamId, eventType, data: serialize(body, 0), isJson: true, metadata: emittedMetadata(metadata) });
  }
  function linkTo(streamId, event, metadata) {
    requireEmit();
    if (arguments.length < 2 || arguments.length > 3) fail('invalid number of parameters');
    nonEmpty(streamId, 'streamId');
    if (!event || typeof event.sequenceNumber !== 'number' || typeof event.streamId !== 'string') {
      fail('Invalid link to event ' + (event && event.sequenceNumber) + '@' + (event && event.streamId));
    }
    out.emitted.push({ streamId, eventType: '$>', data: event.sequenceNumber + '@' + event.streamId, isJson: false, metadata: emittedMetadata(metadata) });
  }
  function linkStreamTo(streamId, linkedStreamId, metadata) {
    requireEmit();
    nonEmpty(streamId, 'streamId'); nonEmpty(linkedStreamId, 'linkedStreamId');
    out.emitted.push({ streamId, eventType: '$@', data: linkedStreamId, isJson: false, metadata: emittedMetadata(metadata) });
  }
  function copyTo(streamId, event, metadata) {
    requireEmit();
    nonEmpty(streamId, 'streamId');
    if (!event || typeof event.eventType !== 'string') fail('copyTo expects an event');
    const meta = {};
    const source = event.metadata;
    if (source && typeof source === 'object') {
      for (const k of Object.keys(source)) if (!k.startsWith('$') || k === '$correlationId') meta[k] = source[k];
    }
    if (metadata && typeof metadata === 'object') for (const k of Object.keys(metadata)) if (!k.startsWith('$')) meta[k] = metadata[k];
    out.emitted.push({ streamId, eventType: event.eventType, data: event.bodyRaw === null ? '' : event.bodyRaw, isJson: event.isJson, metadata: emittedMetadata(meta) });
  }

  function initState() {
    return handlers.$init ? handlers.$init() : {};
  }
  function initShared() {
    return handlers.$initShared ? handlers.$initShared() : {};
  }
  function isEmptyState(s) { return s === undefined || s === null; }

  let lastPartition;
  function stateOf(partition, env) {
    let state = states.get(partition);
    // A partition whose state became null keeps receiving null until another partition was processed.
    if (isEmptyState(state) && !(state === null && partition === lastPartition)) {
      state = initState();
      if (state === undefined) state = {};
      states.set(partition, state);
      touched.add(partition);
      if (handlers.$created) {
        const arg = config.biState ? [state, sharedState()] : state;
        handlers.$created(arg, env);
        if (config.biState) states.set('', arg[1]);
      }
    }
    return states.get(partition);
  }
  function sharedState() {
    let shared = states.get('');
    if (isEmptyState(shared)) { shared = initShared(); states.set('', shared); touched.add(''); }
    return shared;
  }

  const SPECIAL_KEYS = new Set(['$init', '$initShared', '$created', '$deleted', '$any']);
  function handlerFor(type) {
    if (!SPECIAL_KEYS.has(type) && handlers[type]) return handlers[type];
    return handlers.$any || null;
  }

  let partitionEnvelope = null; // the envelope partitionBy saw, reused when the partition is ''
  function partitionOf(e) {
    if (config.byStream) return e.partitionStream === null ? e.streamId : e.partitionStream;
    if (config.byCustomPartitions) {
      const key = partitionFn(partitionEnvelope = envelope(e, ''));
      if (typeof key === 'string') return key;
      if (typeof key === 'number') return String(key);
      return null;
    }
    return '';
  }

  function handleOne(e) {
    current = e;
    if (e.deletedPartition !== null) {
      if (!handlers.$deleted) return false;
      const partition = e.deletedPartition;
      const state = stateOf(partition, null);
      handlers.$deleted(state, null, partition, false);
      touched.add(partition);
      return true;
    }
    const handler = handlerFor(e.eventType);
    const noHandlers = config.handlerOrder.length === 0;
    if (!handler && !noHandlers) return false;
    const partition = partitionOf(e);
    if (partition === null) return false;
    const env = partition === '' && partitionEnvelope !== null ? partitionEnvelope : envelope(e, partition);
    partitionEnvelope = null;
    if (noHandlers) {
      states.set(partition, env.bodyRaw); // the raw text, kept as it was written
      touched.add(partition);
      return true;
    }
    const state = stateOf(partition, env);
    if (config.biState) {
      const pair = [state, sharedState()];
      const r = handler(pair, env);
      const next = r === undefined ? pair : r;
      if (!Array.isArray(next)) fail('A bi-state handler must return [state, sharedState]');
      states.set(partition, next[0]);
      states.set('', next[1]);
      touched.add('');
    } else {
      const r = handler(state, env);
      if (r !== undefined) states.set(partition, r);
    }
    touched.add(partition);
    lastPartition = partition;
    return true;
  }

  function resultOf(partition) {
    let value = states.get(partition);
    if (config.biState) value = [value, states.get('')];
    for (const t of transforms) {
      if (value === null || value === undefined) return null;
      if (t.kind === 'transform') value = t.fn(value);
      else if (t.fn(value) !== true) return null;
    }
    return value === null || value === undefined ? null : serialize(value, 0);
  }

  global.__svcDefinition = function () {
    for (const k of Object.keys(DEFINITION_API)) delete global[k];
    return JSON.stringify(definition);
  };

  global.__svcStart = function (configJson, statesJson) {
    config = JSON.parse(configJson);
    config.handlerOrder = definition.handlerOrder;
    config.byStream = definition.byStream;
    config.byCustomPartitions = definition.byCustomPartitions;
    config.biState = definition.biState;
    const stored = JSON.parse(statesJson);
    for (const p of Object.keys(stored)) {
      const [state, result] = stored[p];
      states.set(p, state === null ? null : JSON.parse(state));
      serialized.set(p, state);
      if (result !== null) results.set(p, result);
    }
    global.emit = emit; global.linkTo = linkTo; global.linkStreamTo = linkStreamTo; global.copyTo = copyTo;
    const use = config.eventUse;
    plainEvents = !use.escapes && handlersAreKnown(use);
    parseMetadata = !plainEvents || use.reads.indexOf('metadata') >= 0;
    parseLinkMetadata = !plainEvents || use.reads.indexOf('linkMetadata') >= 0;
    return JSON_stringify({ plainEvents });
  };

  /** Every function that receives event objects is one the host analysed (not a built-in or bound function). */
  function handlersAreKnown(use) {
    const known = (fn, texts) => { try { return texts.indexOf(fnToString.call(fn)) >= 0; } catch (err) { return false; } };
    for (const key of Object_keys(handlers)) {
      if (key === '$init' || key === '$initShared' || key === '$deleted') continue;
      if (!known(handlers[key], use.functions)) return false;
    }
    return partitionFn === null || known(partitionFn, use.partitionFunctions);
  }

  /** Serialises the partitions touched since the last collection; reports those whose state changed. */
  function collectChanges() {
    const changed = [];
    for (const p of touched) {
      const s = states.get(p);
      const text = s === null || s === undefined ? null : typeof s === 'string' ? s : serialize(s, 0);
      if (text === serialized.get(p)) continue;
      serialized.set(p, text);
      const result = definition.producesResults ? resultOf(p) : text;
      const previous = results.has(p) ? results.get(p) : null;
      if (result !== null) results.set(p, result); else results.delete(p);
      changed.push([p, text, result, result !== previous]);
    }
    touched = new Set();
    return changed;
  }

  /**
   * One batch: events in, one result out. Stops at the first failing event. With collect set,
   * the changed partitions are serialised now; otherwise they wait for __svcCollect (checkpoints).
   */
  global.__svcProcess = function (batchJson, collect) {
    const a = JSON_parse(batchJson);
    const end = a.length - 1;
    const strings = a[end];
    out = { emitted: [], changed: [], logs: [], handled: 0, processed: 0, fault: null };
    logs.length = 0;
    const emitted = out.emitted;
    for (let i = 0, n = 0; i < end; n++) {
      const emittedBefore = emitted.length;
      try {
        i = decode(a, i, strings);
        if (handleOne(ev)) out.handled++;
        out.processed = n + 1;
      } catch (err) {
        emitted.length = emittedBefore; // what the failing event emitted is not kept
        out.fault = { message: err && err.message !== undefined ? String(err.message) : String(err), index: n };
        break;
      }
    }
    if (collect) {
      try {
        out.changed = collectChanges();
      } catch (err) {
        if (!out.fault) out.fault = { message: String(err && err.message || err), index: Math.max(out.processed - 1, 0) };
      }
    }
    out.logs = logs.slice();
    out.touched = touched.size;
    return JSON_stringify(out);
  };

  global.__svcCollect = function () {
    return JSON_stringify(collectChanges());
  };

  /** The live [state, result] of one partition, serialised now. */
  global.__svcPartition = function (p) {
    const s = states.get(p);
    if (s === null || s === undefined) return JSON.stringify([null, null]);
    const text = typeof s === 'string' ? s : serialize(s, 0);
    return JSON.stringify([text, definition.producesResults ? resultOf(p) : text]);
  };
})(globalThis);
`;
