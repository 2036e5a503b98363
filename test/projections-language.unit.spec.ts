// The projection language (reference: projections.md §1-12, §21), exercised the way users run
// it: events written to a real store, the query run over them by a Projection with the
// production engine (test/support/projection-harness.ts).
//
// Project decisions that override the reference: copyTo COPIES (legacy behaviour);
// console.log/info/warn/error behave like log; state/result changes are reported per batch.

import { describe, expect, it } from 'vitest';
import { definitionProblem, eventFilterOf } from '../src/projections/definition.js';
import { define, resultOf, runProjection, stateOf, type EventSpec, type RunOptions } from './support/projection-harness.js';

const ev = (type: string, data: unknown = {}, extra: EventSpec = {}): EventSpec => ({ type, data, ...extra });
const run = runProjection;
const EMIT: RunOptions = { emitEnabled: true };

/** A projection that records every handled event's type in a log line. */
const LOG_TYPES = `function (s, e) { log(e.eventType); }`;

// ------------------------------------------------------------------------------------------
describe('selectors (§2)', () => {
  it('fromAll() reads every stream', async () => {
    const r = await run(`fromAll().when({ $any: function (s, e) { s.seen = (s.seen || []).concat(e.streamId); } })`,
      [ev('A', {}, { stream: 'orders-1' }), ev('B', {}, { stream: 'users-1' })]);
    expect(r.error).toBeUndefined();
    expect(r.definition).toMatchObject({ allStreams: true, streams: [], categories: [] });
    expect(stateOf(r)).toEqual({ seen: ['orders-1', 'users-1'] });
  });

  it("fromStream('s') records one stream", async () => {
    const r = await run(`fromStream('orders').when({ $any: function (s, e) { s.n = (s.n || 0) + 1; } })`,
      [ev('A', {}, { stream: 'orders' }), ev('A', {}, { stream: 'orders' })]);
    expect(r.error).toBeUndefined();
    expect(r.definition).toMatchObject({ allStreams: false, streams: ['orders'], categories: [] });
    expect(stateOf(r)).toEqual({ n: 2 });
  });

  it("fromStreams(['a','b']) (array form) records both streams", async () => {
    const r = await run(`fromStreams(['a', 'b']).when({ $any: function (s, e) { s.n = (s.n || 0) + 1; } })`,
      [ev('A', {}, { stream: 'a' }), ev('A', {}, { stream: 'b' })]);
    expect(r.error).toBeUndefined();
    expect(r.definition).toMatchObject({ allStreams: false, streams: ['a', 'b'], categories: [] });
    expect(stateOf(r)).toEqual({ n: 2 });
  });

  it("fromStreams('a','b') (varargs form) records both streams", async () => {
    const { definition, problem, definitionError } = await define(`fromStreams('a', 'b', 'c').when({ $any: function () {} })`);
    expect(definitionError).toBeUndefined();
    expect(problem).toBeUndefined();
    expect(definition).toMatchObject({ allStreams: false, streams: ['a', 'b', 'c'], categories: [] });
  });

  it("fromCategory('c') is a category source (foreachStream allowed, event.category set)", async () => {
    const r = await run(`fromCategory('user').foreachStream().when({ $any: function (s, e) { s.category = e.category; } })`,
      [ev('A', {}, { stream: 'user-1', via: '$ce-user' })]);
    expect(r.error).toBeUndefined();
    expect(r.definition).toMatchObject({ categories: ['user'], streams: [], allStreams: false, byStream: true });
    expect(stateOf(r, 'user-1')).toEqual({ category: 'user' });
  });

  it("fromCategory('a','b') and fromCategory(['a','b']) become a multi-stream source over $ce-a, $ce-b", async () => {
    for (const src of [`fromCategory('a', 'b')`, `fromCategory(['a', 'b'])`]) {
      const { definition, problem } = await define(`${src}.when({ $any: function () {} })`);
      expect(problem).toBeUndefined();
      expect(definition, src).toMatchObject({ streams: ['$ce-a', '$ce-b'], categories: [] });
    }
  });

  it("fromCategories('a','b') becomes a multi-stream source over $ce-a, $ce-b", async () => {
    for (const src of [`fromCategories('a', 'b')`, `fromCategories(['a', 'b'])`]) {
      const { definition, problem } = await define(`${src}.when({ $any: function () {} })`);
      expect(problem).toBeUndefined();
      expect(definition, src).toMatchObject({ streams: ['$ce-a', '$ce-b'], categories: [] });
    }
  });

  it('fromCategory() without arguments records nothing and fails at start', async () => {
    const r = await run(`fromCategory().when({ $any: function () {} })`);
    expect(r.definitionError).toBeUndefined();
    expect(r.definition).toMatchObject({ streams: [], categories: [], allStreams: false });
    expect(r.problem).toBe('None of streams and categories are included');
  });

  it('selectors accumulate: two fromStream calls make a multi-stream projection', async () => {
    const { definition, problem } = await define(`fromStream('a'); fromStream('b').when({ $any: function () {} })`);
    expect(problem).toBeUndefined();
    expect(definition?.streams).toEqual(['a', 'b']);
  });

  it('selector names must be strings', async () => {
    expect((await define(`fromStream(1)`)).definitionError).toBe('stream');
    expect((await define(`fromStreams(['a', 2])`)).definitionError).toBe('streams');
    expect((await define(`fromStreams('a', null)`)).definitionError).toBe('streams');
    expect((await define(`fromCategory(5)`)).definitionError).toBe('category');
    expect((await define(`fromCategories(['a', {}])`)).definitionError).toMatch(/^categor(y|ies)$/);
    expect((await define(`fromCategory('a', 7)`)).definitionError).toMatch(/^categor(y|ies)$/);
  });

  it("on_event('type', fn) registers a named handler and returns undefined", async () => {
    const r = await run(`fromAll(); if (on_event('A', function (s, e) { s.a = (s.a || 0) + 1; }) !== undefined) throw new Error('returned a value');`,
      [ev('A'), ev('B'), ev('A')]);
    expect(r.error).toBeUndefined();
    expect(r.definition?.events).toEqual(['A']);
    expect(r.delivered.map((e) => e.eventType)).toEqual(['A', 'A']);
    expect(stateOf(r)).toEqual({ a: 2 });
  });

  it('on_any(fn) registers a handler for every event and returns undefined', async () => {
    const r = await run(`fromAll(); if (on_any(function (s, e) { s.n = (s.n || 0) + 1; }) !== undefined) throw new Error('returned a value');`,
      [ev('A'), ev('B'), ev('C')]);
    expect(r.error).toBeUndefined();
    expect(eventFilterOf(r.definition!).all).toBe(true);
    expect(stateOf(r)).toEqual({ n: 3 });
  });

  it('the recorded definition reports allEvents as the reader filters ($any -> true, named only -> false)', async () => {
    const any = await define(`fromAll().when({ $any: function () {} })`);
    expect(any.definition?.allEvents).toBe(true);
    const named = await define(`fromAll().when({ A: function () {} })`);
    expect(named.definition?.allEvents).toBe(false);
    expect(named.definition?.events).toEqual(['A']);
  });
});

// ------------------------------------------------------------------------------------------
describe('definition phase (§1)', () => {
  it('an exception during the definition run fails creation with its message (throw 123 -> "123")', async () => {
    expect((await define(`throw 123;`)).definitionError).toBe('123');
    expect((await define(`fromAll(); throw new Error('nope');`)).definitionError).toBe('nope');
    expect((await define(`fromAll().when({`)).definitionError).toMatch(/Unexpected|SyntaxError|end of input/i);
  });

  it('emit/linkTo/linkStreamTo/copyTo do not exist during the definition phase', async () => {
    for (const fn of ['emit', 'linkTo', 'linkStreamTo', 'copyTo']) {
      const { definitionError } = await define(`fromAll(); ${fn}('s', 'T', {});`);
      expect(definitionError, fn).toMatch(new RegExp(`${fn} is not defined`));
    }
  });

  it('definition functions are removed in the execution phase (calling one in a handler faults)', async () => {
    const r = await run(`fromAll().when({ $any: function (s, e) {
      log([typeof fromAll, typeof fromStream, typeof fromStreams, typeof fromCategory, typeof fromCategories, typeof options, typeof on_event, typeof on_any].join(','));
      if (e.eventType === 'Boom') fromStream('x');
    } })`, [ev('A'), ev('Boom')]);
    expect(r.logs[0]).toBe(Array(8).fill('undefined').join(','));
    expect(r.fault?.message).toMatch(/fromStream is not defined/);
    expect(r.fault?.index).toBe(1);
  });
});

// ------------------------------------------------------------------------------------------
describe('chain grammar (§3)', () => {
  const f = 'function () {}';
  const illegal: [string, string][] = [
    ['fromStream().foreachStream()', `fromStream('a').foreachStream()`],
    ['fromStreams().foreachStream()', `fromStreams('a', 'b').foreachStream()`],
    ['foreachStream().partitionBy()', `fromAll().foreachStream().partitionBy(${f})`],
    ['partitionBy().foreachStream()', `fromAll().partitionBy(${f}).foreachStream()`],
    ['foreachStream().outputState()', `fromAll().foreachStream().outputState()`],
    ['partitionBy().outputState()', `fromAll().partitionBy(${f}).outputState()`],
    ['when().when()', `fromAll().when({}).when({})`],
    ['when().partitionBy()', `fromAll().when({}).partitionBy(${f})`],
    ['when().foreachStream()', `fromAll().when({}).foreachStream()`],
    ['outputState().when()', `fromAll().outputState().when({})`],
    ['outputState().outputState()', `fromAll().when({}).outputState().outputState()`],
    ['outputState().$defines_state_transform()', `fromAll().when({}).outputState().$defines_state_transform()`],
    ['transformBy().when()', `fromAll().when({}).transformBy(${f}).when({})`],
    ['filterBy().partitionBy()', `fromAll().when({}).filterBy(${f}).partitionBy(${f})`],
    ['outputTo().outputState()', `fromAll().when({}).outputTo('x').outputState()`],
    ['outputTo().transformBy()', `fromAll().when({}).outputTo('x').transformBy(${f})`],
    ['fromStream().transformBy()', `fromStream('a').transformBy(${f})`],
    ['fromAll().outputTo()', `fromAll().outputTo('x')`],
  ];
  it.each(illegal)('%s is a TypeError at definition', async (_name, src) => {
    const { definitionError } = await define(src);
    expect(definitionError).toBeDefined();
    expect(definitionError).toMatch(/is not a function|Cannot read propert(y|ies) of undefined/);
  });

  it('every legal transition is accepted', async () => {
    const legal = [
      `fromStream('a').when({ $any: ${f} })`,
      `fromStream('a').partitionBy(${f}).when({ $any: ${f} })`,
      `fromStream('a').outputState().transformBy(${f}).filterBy(${f}).outputTo('r')`,
      `fromStreams('a', 'b').outputState().filterBy(${f})`,
      `fromAll().foreachStream().when({ $any: ${f} }).outputState().outputTo('r', 'r-{0}')`,
      `fromAll().partitionBy(${f}).when({ $any: ${f} }).transformBy(${f}).transformBy(${f}).outputState().outputTo('r')`,
      `fromCategory('c').foreachStream().when({ $any: ${f} }).filterBy(${f}).outputState().transformBy(${f})`,
      `fromCategory('c').when({ $any: ${f} }).$defines_state_transform()`,
      `fromAll().when({ $any: ${f} }).outputTo('r')`,
      `fromAll().outputState()`,
      `fromAll()`,
    ];
    for (const src of legal) expect((await define(src)).definitionError, src).toBeUndefined();
  });

  it('the chain records its flags', async () => {
    const f2 = 'function (x) { return x; }';
    expect((await define(`fromAll().when({ $any: ${f} })`)).definition).toMatchObject({
      definesFold: true, byStream: false, byCustomPartitions: false, producesResults: false, definesStateTransform: false });
    expect((await define(`fromAll().foreachStream().when({ $any: ${f} })`)).definition).toMatchObject({ byStream: true });
    expect((await define(`fromAll().partitionBy(${f2}).when({ $any: ${f} })`)).definition).toMatchObject({ byCustomPartitions: true });
    expect((await define(`fromAll().when({ $any: ${f} }).outputState()`)).definition).toMatchObject({ producesResults: true, definesStateTransform: false });
    expect((await define(`fromAll().when({ $any: ${f} }).transformBy(${f2})`)).definition).toMatchObject({ producesResults: true, definesStateTransform: true });
    expect((await define(`fromAll().when({ $any: ${f} }).filterBy(${f2})`)).definition).toMatchObject({ producesResults: true, definesStateTransform: true });
    expect((await define(`fromAll().when({ $any: ${f} }).$defines_state_transform()`)).definition).toMatchObject({ producesResults: true, definesStateTransform: true });
    expect((await define(`fromAll().foreachStream().when({ $deleted: ${f}, $any: ${f} })`)).definition).toMatchObject({ handlesDeletedNotifications: true });
    expect((await define(`fromAll()`)).definition).toMatchObject({ definesFold: false });
  });
});

// ------------------------------------------------------------------------------------------
describe('options (§4)', () => {
  const base = `fromStreams('a', 'b').when({ $any: function () {} })`;
  const keys: [string, string, string, unknown][] = [
    ['resultStreamName', `'my-results'`, 'resultStreamName', 'my-results'],
    ['$includeLinks', 'true', 'includeLinks', true],
    ['reorderEvents', 'true', 'reorderEvents', true],
    ['processingLag', '750', 'processingLag', 750],
    ['biState', 'true', 'biState', true],
  ];
  it.each(keys)('%s is recorded', async (key, value, field, expected) => {
    const { definition, definitionError } = await define(`options({ ${JSON.stringify(key)}: ${value} }); ${base}`);
    expect(definitionError).toBeUndefined();
    expect((definition as unknown as Record<string, unknown>)[field]).toEqual(expected);
  });

  it('keys are matched case-insensitively', async () => {
    const { definition, definitionError } = await define(
      `options({ RESULTSTREAMNAME: 'r', $INCLUDELINKS: true, ReorderEvents: true, PROCESSINGLAG: 60, bistate: true }); ${base}`);
    expect(definitionError).toBeUndefined();
    expect(definition).toMatchObject({ resultStreamName: 'r', includeLinks: true, reorderEvents: true, processingLag: 60, biState: true });
  });

  it('options may be called several times; later values overwrite earlier ones', async () => {
    const { definition } = await define(`options({ resultStreamName: 'first', processingLag: 100 }); options({ resultStreamName: 'second' }); ${base}`);
    expect(definition).toMatchObject({ resultStreamName: 'second', processingLag: 100 });
  });

  it('an unknown key throws "Unrecognized option: <key>"', async () => {
    expect((await define(`options({ x: 1 }); ${base}`)).definitionError).toBe('Unrecognized option: x');
    expect((await define(`options({ resultStreamName: 'r', fooBar: true }); ${base}`)).definitionError).toBe('Unrecognized option: fooBar');
  });

  it('partitionResultStreamNamePattern is not an option (only outputTo sets it)', async () => {
    expect((await define(`options({ partitionResultStreamNamePattern: 'p-{0}' }); ${base}`)).definitionError)
      .toBe('Unrecognized option: partitionResultStreamNamePattern');
  });

  const wrongTypes: [string, string][] = [
    ['resultStreamName', '5'], ['resultStreamName', 'true'],
    ['$includeLinks', `'true'`], ['$includeLinks', '1'],
    ['reorderEvents', `'yes'`], ['processingLag', `'500'`], ['processingLag', 'true'],
    ['biState', '1'], ['biState', 'null'],
  ];
  it.each(wrongTypes)('%s with a value of the wrong type (%s) throws "Invalid value"', async (key, value) => {
    expect((await define(`options({ ${JSON.stringify(key)}: ${value} }); ${base}`)).definitionError).toBe('Invalid value');
  });
});

// ------------------------------------------------------------------------------------------
describe('start-time validation (§8)', () => {
  const any = '{ $any: function () {} }';
  const reasons: [string, string, string][] = [
    ['no source', `options({ biState: false });`, 'None of streams and categories are included'],
    ['streams + category', `fromStream('a'); fromCategory('c').when(${any})`, 'Streams and categories cannot be included in a filter at the same time'],
    ['fromAll + streams', `fromAll(); fromStream('a').when(${any})`, 'Both FromAll and specific categories/streams cannot be set'],
    ['fromAll + category', `fromCategory('c'); fromAll().when(${any})`, 'Both FromAll and specific categories/streams cannot be set'],
    ['$any after named handlers', `fromAll().when({ A: function () {}, $any: function () {} })`, 'Both AllEvents and specific event filters cannot be set'],
    ['foreachStream on multi-category', `fromCategory('a', 'b').foreachStream().when(${any})`, 'foreachStream projections are not supported on stream based sources'],
    ['foreachStream on fromCategories', `fromCategories(['a', 'b']).foreachStream().when(${any})`, 'foreachStream projections are not supported on stream based sources'],
    ['reorderEvents with fromAll', `options({ reorderEvents: true, processingLag: 100 }); fromAll().when(${any})`, 'Event reordering cannot be used with fromAll()'],
    ['reorderEvents with one stream', `options({ reorderEvents: true, processingLag: 100 }); fromStream('a').when(${any})`, 'Event reordering is only available in fromStreams([]) projections'],
    ['reorderEvents with a category', `options({ reorderEvents: true, processingLag: 100 }); fromCategory('c').when(${any})`, 'Event reordering is only available in fromStreams([]) projections'],
    ['reorderEvents with processingLag < 50', `options({ reorderEvents: true, processingLag: 49 }); fromStreams('a', 'b').when(${any})`, 'Event reordering requires processing lag at least of 50ms'],
    ['reorderEvents with the default processingLag', `options({ reorderEvents: true }); fromStreams('a', 'b').when(${any})`, 'Event reordering requires processing lag at least of 50ms'],
    ['$deleted without foreachStream', `fromAll().when({ $deleted: function () {}, $any: function () {} })`, 'Deleted stream notifications are only supported with foreachStream()'],
  ];
  it.each(reasons)('%s', async (_name, src, reason) => {
    const { definitionError, problem, definition } = await define(src);
    expect(definitionError).toBeUndefined();
    expect(problem).toBe(reason);
    expect(definitionProblem(definition!)).toBe(reason);
  });

  it('legal neighbours of those combinations pass', async () => {
    for (const src of [
      `options({ reorderEvents: true, processingLag: 50 }); fromStreams('a', 'b').when(${any})`,
      `fromStream('a'); fromStream('b').when(${any})`,
      `fromCategory('c').foreachStream().when(${any})`,
      `fromAll().foreachStream().when({ $deleted: function () {}, $any: function () {} })`,
      `fromAll().when({ $any: function () {}, A: function () {} })`,
      `fromAll().when({ $init: function () { return {}; } })`,
    ]) {
      const { definitionError, problem } = await define(src);
      expect(definitionError, src).toBeUndefined();
      expect(problem, src).toBeUndefined();
    }
  });

  it('$deleted cannot be registered once bi-state is on ("Cannot handle deletes in bi-state projections")', async () => {
    const reason = 'Cannot handle deletes in bi-state projections';
    expect((await define(`options({ biState: true }); fromAll().foreachStream().when({ $deleted: function () {} })`)).definitionError).toBe(reason);
    expect((await define(`fromAll().foreachStream().when({ $initShared: function () { return {}; }, $deleted: function () {} })`)).definitionError).toBe(reason);
  });
});

// ------------------------------------------------------------------------------------------
describe('handlers (§5.1, §5.4, §5.5, §6.2, §6.4)', () => {
  it('$init gives each partition its initial state, lazily; without $init the state starts as {}', async () => {
    const src = `fromAll().foreachStream().when({
      $init: function () { log('init'); return { n: 10 }; },
      A: function (s) { s.n++; } })`;
    const r = await run(src, [ev('A', {}, { stream: 'x' }), ev('A', {}, { stream: 'x' }), ev('A', {}, { stream: 'y' })], { batchSize: 1 });
    expect(stateOf(r, 'x')).toEqual({ n: 12 });
    expect(stateOf(r, 'y')).toEqual({ n: 11 });
    expect(r.logs).toEqual(['init', 'init']);

    const none = await run(src, [ev('Other')]); // nothing delivered -> nothing initialised
    expect(none.delivered).toEqual([]);
    expect(none.states).toEqual({});

    const noInit = await run(`fromAll().when({ A: function (s) { s.keys = Object.keys(s).length; } })`, [ev('A')]);
    expect(stateOf(noInit)).toEqual({ keys: 0 });
  });

  it('$initShared switches to bi-state: handlers get [state, shared], shared lives in the root partition', async () => {
    const r = await run(`fromAll().foreachStream().when({
      $init: function () { return { c: 0 }; },
      $initShared: function () { return { total: 0 }; },
      A: function (s, e) { s[0].c++; s[1].total++; }
    }).transformBy(function (s) { return { p: s[0], sh: s[1] }; })`,
    [ev('A', {}, { stream: 'a' }), ev('A', {}, { stream: 'b' }), ev('A', {}, { stream: 'a' })], { batchSize: 1 });
    expect(r.error).toBeUndefined();
    expect(r.definition?.biState).toBe(true);
    expect(stateOf(r, 'a')).toEqual({ c: 2 });
    expect(stateOf(r, 'b')).toEqual({ c: 1 });
    expect(stateOf(r, '')).toEqual({ total: 3 });
    expect(resultOf(r, 'a')).toEqual({ p: { c: 2 }, sh: { total: 3 } });
  });

  it('options({biState:true}) without $initShared starts the shared state as {}; a returned pair replaces both', async () => {
    const r = await run(`options({ biState: true }); fromAll().foreachStream().when({
      A: function (s, e) { log(JSON.stringify(s)); return [{ last: e.streamId }, { n: (s[1].n || 0) + 1 }]; } })`,
    [ev('A', {}, { stream: 'a' }), ev('A', {}, { stream: 'b' })], { batchSize: 1 });
    expect(r.logs[0]).toBe('[{},{}]');
    expect(stateOf(r, 'a')).toEqual({ last: 'a' });
    expect(stateOf(r, 'b')).toEqual({ last: 'b' });
    expect(stateOf(r, '')).toEqual({ n: 2 });
  });

  it('$any handles every event type', async () => {
    const r = await run(`fromAll().when({ $any: ${LOG_TYPES} })`, [ev('A'), ev('B'), ev('$metadata')]);
    expect(r.logs).toEqual(['A', 'B', '$metadata']);
    expect(r.handled).toBe(3);
  });

  it('named handlers match event types exactly (case-sensitive)', async () => {
    const r = await run(`fromAll().when({ Created: function (s) { s.created = (s.created || 0) + 1; }, Deleted: function (s) { s.deleted = true; } })`,
      [ev('Created'), ev('created'), ev('CREATED'), ev('Created '), ev('Created'), ev('Deleted')]);
    expect(r.delivered.map((e) => e.eventType)).toEqual(['Created', 'Created', 'Deleted']);
    expect(stateOf(r)).toEqual({ created: 2, deleted: true });
  });

  it('only own function-valued keys of the when object are registered', async () => {
    const { definition } = await define(`var proto = { Inherited: function () {} };
      var m = Object.create(proto); m.A = 5; m.B = 'x'; m.C = function () {};
      fromAll().when(m)`);
    expect(definition?.events).toEqual(['C']);
  });

  it('$created runs on initialisation, before the handler — the upstream example gives {a:3} per stream', async () => {
    const r = await run(`fromAll().foreachStream().when({
      $init: function () { return { a: 0 }; },
      $created: function (s, e) { s.a++; log('created ' + e.partition + ' ' + e.sequenceNumber); },
      $any: function (s, e) { s.a++; log('handler ' + e.partition + ' ' + e.sequenceNumber); } })`,
    [ev('A', {}, { stream: 's-1' }), ev('A', {}, { stream: 's-2' }), ev('A', {}, { stream: 's-1' }), ev('A', {}, { stream: 's-2' })]);
    expect(stateOf(r, 's-1')).toEqual({ a: 3 });
    expect(stateOf(r, 's-2')).toEqual({ a: 3 });
    expect(r.logs).toEqual(['created s-1 0', 'handler s-1 0', 'created s-2 0', 'handler s-2 0', 'handler s-1 1', 'handler s-2 1']);
  });

  it('$created fires once for an unpartitioned projection; its return value is ignored', async () => {
    const r = await run(`fromAll().when({
      $created: function (s) { log('created'); s.c = 1; return { replaced: true }; },
      $any: function (s) { s.n = (s.n || 0) + 1; } })`, [ev('A'), ev('B'), ev('C')], { batchSize: 1 });
    expect(r.logs).toEqual(['created']);
    expect(stateOf(r)).toEqual({ c: 1, n: 3 });
  });

  it('$deleted: the upstream example gives {"a":2,"deleted":1}; arguments are (state, null, partition, false)', async () => {
    const r = await run(`fromAll().foreachStream().when({
      $init: function () { return { a: 0 }; },
      $any: function (s, e) { s.a++; },
      $deleted: function (s, e, partition, isSoftDelete) { s.deleted = 1; log(JSON.stringify([e, partition, isSoftDelete])); return { ignored: true }; } })`,
    [ev('A', {}, { stream: 'stream-1' }), ev('A', {}, { stream: 'stream-1' }), { deleted: 'stream-1' }, { deleted: 'stream-2' }]);
    expect(r.error).toBeUndefined();
    expect(r.states['stream-1']).toBe('{"a":2,"deleted":1}');
    expect(stateOf(r, 'stream-2')).toEqual({ a: 0, deleted: 1 }); // never seen: initialised, then handled
    expect(r.logs).toEqual(['[null,"stream-1",false]', '[null,"stream-2",false]']);
  });
});

// ------------------------------------------------------------------------------------------
describe('dispatch (§5.2)', () => {
  it('{$any, A}: only A is delivered and $any never runs', async () => {
    const r = await run(`fromAll().when({ $any: function (s, e) { log('any ' + e.eventType); }, A: function (s, e) { log('A'); } })`,
      [ev('A'), ev('B'), ev('A')]);
    expect(r.error).toBeUndefined();
    expect(eventFilterOf(r.definition!)).toEqual({ all: false, types: new Set(['A']) });
    expect(r.delivered.map((e) => e.eventType)).toEqual(['A', 'A']);
    expect(r.logs).toEqual(['A', 'A']);
  });

  it('{A, $any}: faults at start with "Both AllEvents and specific event filters cannot be set"', async () => {
    const r = await run(`fromAll().when({ A: function () {}, $any: function () {} })`, [ev('A')]);
    expect(r.stage).toBe('validation');
    expect(r.problem).toBe('Both AllEvents and specific event filters cannot be set');
  });

  it('a named handler wins over $any for its type (legacy ran both)', async () => {
    // on_any then on_event gives the same key order as {$any, A}: only A events, A handler only.
    const r = await run(`fromAll(); on_any(function (s, e) { log('any'); }); on_event('A', function (s, e) { log('A'); });`, [ev('A')]);
    expect(r.logs).toEqual(['A']);
  });

  it('{$init} only: all events are delivered and handled by the default rule', async () => {
    const r = await run(`fromAll().when({ $init: function () { return { init: true }; } })`,
      [ev('A', { a: 1 }), ev('B', { b: 2 })]);
    expect(eventFilterOf(r.definition!).all).toBe(true);
    expect(r.delivered).toHaveLength(2);
    expect(stateOf(r)).toEqual({ b: 2 });
  });
});

// ------------------------------------------------------------------------------------------
describe('return semantics (§5.3)', () => {
  it('returning undefined keeps the (mutated) state', async () => {
    const r = await run(`fromAll().when({ A: function (s) { s.n = (s.n || 0) + 1; } })`, [ev('A'), ev('A')], { batchSize: 1 });
    expect(stateOf(r)).toEqual({ n: 2 });
  });

  it('any other value replaces the state (object, array, number)', async () => {
    const r = await run(`fromAll().when({ O: function (s) { s.old = true; return { replaced: true }; } })`, [ev('O')]);
    expect(stateOf(r)).toEqual({ replaced: true });
    const r2 = await run(`fromAll().when({ Arr: function (s) { return [1, 2, s]; } })`, [ev('Arr'), ev('Arr')], { batchSize: 1 });
    expect(stateOf(r2)).toEqual([1, 2, [1, 2, {}]]);
    const r3 = await run(`fromAll().when({ Num: function (s) { return typeof s === 'number' ? s + 1 : 42; } })`, [ev('Num'), ev('Num')], { batchSize: 1 });
    expect(stateOf(r3)).toEqual(43);
  });

  it('returning null stores "no state"; the same partition keeps receiving null (no re-init)', async () => {
    const r = await run(`fromAll().when({
      $init: function () { log('init'); return { n: 0 }; },
      $created: function () { log('created'); },
      Clear: function (s) { return null; },
      Look: function (s) { log('state ' + JSON.stringify(s)); } })`, [ev('Clear'), ev('Look')], { batchSize: 1 });
    expect(r.error).toBeUndefined();
    expect(r.states['']).toBeNull();
    expect(r.logs).toEqual(['init', 'created', 'state null']);
  });

  it('a partition whose state became null is re-initialised ($init, $created) when revisited after another partition', async () => {
    const r = await run(`fromAll().partitionBy(function (e) { return e.data.p; }).when({
      $init: function () { return { n: 0 }; },
      $created: function (s, e) { log('created ' + e.partition); },
      Clear: function (s) { return null; },
      Inc: function (s) { s.n++; } })`,
    [ev('Inc', { p: 'a' }), ev('Clear', { p: 'a' }), ev('Inc', { p: 'b' }), ev('Inc', { p: 'a' })], { batchSize: 1 });
    expect(r.logs).toEqual(['created a', 'created b', 'created a']);
    expect(stateOf(r, 'a')).toEqual({ n: 1 });
    expect(stateOf(r, 'b')).toEqual({ n: 1 });
  });
});

// ------------------------------------------------------------------------------------------
describe('partitionBy (§6.1)', () => {
  it('a string key selects the partition; partitionBy sees partition "", handlers see the key', async () => {
    const r = await run(`fromAll().partitionBy(function (e) { log('by ' + JSON.stringify(e.partition)); return e.data.customer; }).when({
      $any: function (s, e) { s.n = (s.n || 0) + 1; s.partition = e.partition; } })`,
    [ev('A', { customer: 'c-1' }), ev('A', { customer: 'c-2' }), ev('A', { customer: 'c-1' })]);
    expect(r.states).toEqual({ 'c-1': '{"n":2,"partition":"c-1"}', 'c-2': '{"n":1,"partition":"c-2"}' });
    expect(r.logs).toEqual(['by ""', 'by ""', 'by ""']);
  });

  it('a number key becomes its decimal string (42 -> "42")', async () => {
    const r = await run(`fromAll().partitionBy(function (e) { return e.data.k; }).when({ $any: function (s, e) { s.p = e.partition; s.t = typeof e.partition; } })`,
      [ev('A', { k: 42 }), ev('A', { k: 1.5 })]);
    expect(Object.keys(r.states).sort()).toEqual(['1.5', '42']);
    expect(stateOf(r, '42')).toEqual({ p: '42', t: 'string' });
  });

  const skipped: [string, string][] = [
    ['null', 'null'], ['undefined', 'undefined'], ['true', 'true'], ['false', 'false'], ['an object', '{ k: 1 }'], ['an array', `['a']`],
  ];
  it.each(skipped)('returning %s skips the event entirely (no $init, no handler, no emit)', async (_n, value) => {
    const r = await run(`fromAll().partitionBy(function (e) { return e.data.skip ? ${value} : 'kept'; }).when({
      $init: function () { log('init'); return {}; },
      $any: function (s, e) { log('handled'); emit('out', 'Seen', {}); s.n = (s.n || 0) + 1; } })`,
    [ev('A', { skip: true }), ev('A', { skip: false })], EMIT);
    expect(r.error).toBeUndefined();
    expect(r.logs).toEqual(['init', 'handled']);
    expect(r.states).toEqual({ kept: '{"n":1}' });
    expect(r.emitted).toHaveLength(1);
    expect(r.handled).toBe(1);
  });

  it('partitionBy with a non-function throws "partitionBy"', async () => {
    expect((await define(`fromAll().partitionBy('x')`)).definitionError).toBe('partitionBy');
  });
});

// ------------------------------------------------------------------------------------------
describe('foreachStream (§6.1)', () => {
  it('partitions by the partition stream the host supplies (original stream, $o of a link, x of $$x)', async () => {
    const r = await run(`fromCategory('chat').foreachStream().when({ $any: function (s, e) { s.n = (s.n || 0) + 1; s.p = e.partition; s.from = e.streamId; } })`, [
      ev('A', {}, { stream: 'chat-1', via: '$ce-chat' }),
      ev('A', {}, { stream: 'chat-2', via: '$ce-chat', linkMetadata: { $o: 'user-7' } }),
      ev('$metadata', {}, { stream: '$$chat-1', via: '$ce-chat' }),
    ]);
    expect(r.error).toBeUndefined();
    expect(stateOf(r, 'chat-1')).toEqual({ n: 2, p: 'chat-1', from: '$$chat-1' });
    expect(stateOf(r, 'user-7')).toEqual({ n: 1, p: 'user-7', from: 'chat-2' });
    expect(r.states['chat-2']).toBeUndefined();
  });
});

// ------------------------------------------------------------------------------------------
describe('no when / no handler (§5.6)', () => {
  it('every delivered event replaces the state with its body (last event wins)', async () => {
    const r = await run(`fromAll()`, [ev('A', { a: 1 }), ev('B', { b: [1, 2] })]);
    expect(r.error).toBeUndefined();
    expect(stateOf(r)).toEqual({ b: [1, 2] });
  });

  it('the state is the raw body text, byte for byte', async () => {
    const raw = '{ "id": 12345678901234567890, "x" : 1.50 }';
    const r = await run(`fromAll()`, [ev('A', {}, { raw, isJson: true })]);
    expect(r.states['']).toBe(raw);
  });

  it('a non-JSON body is stored as its raw text', async () => {
    const r = await run(`fromAll().when({})`, [ev('A', {}, { raw: 'plain text', isJson: false })]);
    expect(r.states['']).toBe('plain text');
  });
});

// ------------------------------------------------------------------------------------------
describe('the event object (§7)', () => {
  it('carries eventType, streamId, sequenceNumber, eventId, isJson, raw texts, partition and category', async () => {
    // Read through a link, so that it has link metadata.
    const r = await run(`fromStream('order-links').when({ $any: function (s, e) {
      return { eventType: e.eventType, streamId: e.streamId, sequenceNumber: e.sequenceNumber, eventId: e.eventId, isJson: e.isJson,
        bodyRaw: e.bodyRaw, body: e.body, metadataRaw: e.metadataRaw, metadata: e.metadata,
        linkMetadataRaw: e.linkMetadataRaw, linkMetadata: e.linkMetadata, partition: e.partition, category: e.category };
    } })`, [ev('OrderPlaced', { total: 5 }, {
      stream: 'order-9', sequenceNumber: 7, eventId: 'a1b2c3d4-0000-4000-8000-00000000abcd',
      metadata: { user: 'u' }, via: 'order-links', linkMetadata: { $v: '1' },
    })]);
    expect(stateOf(r)).toEqual({
      eventType: 'OrderPlaced', streamId: 'order-9', sequenceNumber: 7, eventId: 'a1b2c3d4-0000-4000-8000-00000000abcd', isJson: true,
      bodyRaw: '{"total":5}', body: { total: 5 }, metadataRaw: '{"user":"u"}', metadata: { user: 'u' },
      linkMetadataRaw: '{"$v":"1"}', linkMetadata: { $v: '1' }, partition: '', category: null,
    });
  });

  it('body and data are the same parsed object', async () => {
    const r = await run(`fromAll().when({ $any: function (s, e) { e.body.touched = 1; return { same: e.body === e.data, viaData: e.data.touched, v: e.data.v }; } })`,
      [ev('A', { v: 3 })]);
    expect(stateOf(r)).toEqual({ same: true, viaData: 1, v: 3 });
  });

  it('body/data are undefined for non-JSON events; metadata is still parsed', async () => {
    const r = await run(`fromAll().when({ $any: function (s, e) {
      return { body: typeof e.body, data: typeof e.data, bodyRaw: e.bodyRaw, isJson: e.isJson, meta: e.metadata }; } })`,
    [ev('A', {}, { raw: '{"looks":"like json"}', isJson: false, metadata: { k: 1 } })]);
    expect(stateOf(r)).toEqual({ body: 'undefined', data: 'undefined', bodyRaw: '{"looks":"like json"}', isJson: false, meta: { k: 1 } });
  });

  it('metadata and linkMetadata are null (not {}) when absent', async () => {
    const r = await run(`fromAll().when({ $any: function (s, e) {
      return { m: e.metadata, l: e.linkMetadata, mr: e.metadataRaw, lr: e.linkMetadataRaw, c: e.category }; } })`, [ev('A')]);
    expect(r.states['']).toBe('{"m":null,"l":null,"mr":null,"lr":null,"c":null}');
  });

  it('its fields are enumerable own properties and read-only', async () => {
    const r = await run(`fromAll().when({ $any: function (s, e) {
      e.eventType = 'Changed'; e.sequenceNumber = 99;
      var copy = Object.assign({}, e);
      return { keys: Object.keys(e).sort(), type: e.eventType, seq: e.sequenceNumber, copyType: copy.eventType, copyBody: copy.body };
    } })`, [ev('A', { x: 1 })]);
    const s = stateOf(r) as Record<string, unknown>;
    expect(s.type).toBe('A');
    expect(s.seq).toBe(0);
    expect(s.keys).toEqual(expect.arrayContaining(['eventType', 'streamId', 'sequenceNumber', 'eventId', 'isJson', 'bodyRaw', 'body', 'data',
      'metadataRaw', 'metadata', 'linkMetadataRaw', 'linkMetadata', 'partition', 'category']));
    expect(s.copyType).toBe('A');
    expect(s.copyBody).toEqual({ x: 1 });
  });
});

// ------------------------------------------------------------------------------------------
describe('plain event objects: a query that only reads event fields by name (src/projections/event-use.ts)', () => {
  it('gets plain event objects with the right fields', async () => {
    const r = await run(`fromStream('links').partitionBy(e => e.streamId).when({ $any: function (s, e) {
      return { type: e.eventType, seq: e.sequenceNumber, id: e.eventId, body: e.body, data: e.data, meta: e.metadata,
        link: e.linkMetadata, partition: e.partition, category: e.category, json: e.isJson };
    } })`, [ev('A', { v: 1 }, {
      stream: 's-1', sequenceNumber: 4, eventId: 'a1b2c3d4-0000-4000-8000-00000000abcd', metadata: { m: 1 }, via: 'links', linkMetadata: { l: 2 },
    })]);
    expect(r.error).toBeUndefined();
    expect(r.plainEvents).toBe(true);
    expect(stateOf(r, 's-1')).toEqual({
      type: 'A', seq: 4, id: 'a1b2c3d4-0000-4000-8000-00000000abcd', body: { v: 1 }, data: { v: 1 }, meta: { m: 1 },
      link: { l: 2 }, partition: 's-1', category: null, json: true,
    });
  });

  it('metadata that is not JSON still throws when read', async () => {
    const r = await run(`fromAll().when({ $any: function (s, e) { return { m: e.metadata }; } })`, [ev('A', {}, { metadata: 'not json' })]);
    expect(r.plainEvents).toBe(true);
    expect(r.error).toMatch(/JSON|Unexpected token/);
  });

  it('a query that writes to its events gets frozen ones', async () => {
    const r = await run(`fromAll().when({ $any: function (s, e) { e.eventType = 'B'; return { t: e.eventType }; } })`, [ev('A')]);
    expect(r.plainEvents).toBe(false);
    expect(stateOf(r)).toEqual({ t: 'A' });
  });

  // Events that escape the analysis cross as the exact text (deliveryFor, src/projections/engine.ts).
  it('a built-in used as a handler sees the whole event, bodyRaw included', async () => {
    const r = await run(`fromAll().when({ $init: function () { return {}; }, A: Object.assign })`, [ev('A', {}, { raw: '{ "x": 1 }', isJson: true })]);
    expect(r.plainEvents).toBe(false);
    expect(stateOf(r)).toMatchObject({ eventType: 'A', bodyRaw: '{ "x": 1 }', body: { x: 1 }, metadata: null });
  });

  it('log as a handler writes the whole event', async () => {
    const r = await run(`fromAll().when({ A: log })`, [ev('A', { x: 1 })]);
    expect(r.plainEvents).toBe(false);
    expect(r.logs[0]).toContain('"bodyRaw":"{\\"x\\":1}"');
  });

  it('a bound handler works and gets complete events', async () => {
    const r = await run(`function h(tag, s, e) { return { tag: tag, t: e.eventType, v: e.body.v }; }
      fromAll().when({ A: h.bind(null, 'bound') })`, [ev('A', { v: 2 })]);
    expect(r.plainEvents).toBe(false);
    expect(stateOf(r)).toEqual({ tag: 'bound', t: 'A', v: 2 });
  });

  it('a partitionBy function given by reference gets complete events', async () => {
    const r = await run(`function byStream(e) { return e.streamId; }
      fromAll().partitionBy(byStream).when({ A: function (s, e) { return { n: (s.n || 0) + 1 }; } })`, [ev('A', {}, { stream: 'x' })]);
    expect(r.plainEvents).toBe(false);
    expect(stateOf(r, 'x')).toEqual({ n: 1 });
  });
});

// ------------------------------------------------------------------------------------------
describe("JSON data delivered pre-parsed (the runtime's spliced batch encoding, §7)", () => {
  const raw = '{ "id": 12345678901234567890, "x" : 1.50 }';

  it('bodyRaw is still the raw data text (also after the handler mutated body)', async () => {
    const r = await run(`fromAll().when({ $any: function (s, e) { e.body.added = true; return { raw: e.bodyRaw }; } })`,
      [ev('A', {}, { raw, isJson: true })]);
    expect(r.error).toBeUndefined();
    expect(stateOf(r)).toEqual({ raw });
  });

  it('body and data are the same parsed object; non-JSON events keep body undefined and their raw text', async () => {
    const r = await run(`fromAll().when({ $any: function (s, e) {
      s[e.eventType] = { same: e.body === e.data, body: e.body === undefined ? 'undefined' : e.body, raw: e.bodyRaw }; } })`,
    [ev('J', { v: [1, { w: 2 }] }), ev('T', {}, { raw: 'plain', isJson: false })]);
    expect(stateOf(r)).toEqual({
      J: { same: true, body: { v: [1, { w: 2 }] }, raw: '{"v":[1,{"w":2}]}' },
      T: { same: true, body: 'undefined', raw: 'plain' },
    });
  });

  it('the no-when default rule stores the raw body text', async () => {
    const r = await run(`fromAll()`, [ev('A', {}, { raw, isJson: true })]);
    expect(r.states['']).toBe(raw);
  });

  it('copyTo copies the raw data text', async () => {
    const r = await run(`fromAll().when({ $any: function (s, e) { copyTo('copy', e); } })`, [ev('A', {}, { raw, isJson: true })],
      EMIT);
    expect(r.emitted.map((e) => e.data)).toEqual([raw]);
  });
});

describe('deferred collection (the partitions changed since the last collection, collected at the next: a checkpoint or the end)', () => {
  it('changes since the last collection are reported by collect(), each partition once', async () => {
    const r = await run(`fromAll().foreachStream().when({ $any: function (s) { s.n = (s.n || 0) + 1; } }).outputState()`,
      [ev('A', {}, { stream: 'a' }), ev('A', {}, { stream: 'b' }), ev('A', {}, { stream: 'a' })], { batchSize: 1, checkpoints: false });
    expect(r.changes.slice(0, 2)).toEqual([[], []]);
    expect(r.changes[2]).toEqual([['a', '{"n":2}', '{"n":2}', true], ['b', '{"n":1}', '{"n":1}', true]]);
  });

  it('a state that cannot be serialised faults at collection', async () => {
    const r = await run(`fromAll().when({ $any: function (s) { s.bad = NaN; } })`, [ev('A')], { checkpoints: false });
    expect(r.fault?.message).toMatch(/NaN/);
  });
});

// ------------------------------------------------------------------------------------------
describe('state serialisation (§6.5)', () => {
  it('undefined properties are omitted; undefined array elements and holes become null', async () => {
    const r = await run(`fromAll().when({ $any: function () { var a = [1, undefined]; a[3] = 4; return { a: 1, u: undefined, arr: a, nested: { x: undefined, y: 2 } }; } })`, [ev('A')]);
    expect(r.states['']).toBe('{"a":1,"arr":[1,null,null,4],"nested":{"y":2}}');
  });

  it.each([['NaN'], ['Infinity'], ['-Infinity']])('%s in the state faults (JSON.stringify would write null)', async (value) => {
    const r = await run(`fromAll().when({ $any: function (s) { s.x = { v: ${value} }; } })`, [ev('A')]);
    expect(r.stage).toBe('faulted');
    expect(r.fault?.message).toMatch(/NaN|Infinity/);
    expect(r.states['']).toBeUndefined();
  });

  it('a self-referencing state faults', async () => {
    const r = await run(`fromAll().when({ $any: function (s) { s.self = s; } })`, [ev('A')]);
    expect(r.stage).toBe('faulted');
    expect(r.fault?.message).toBeTruthy();
    expect(r.states['']).toBeUndefined();
  });

  it('a function in the state faults', async () => {
    const r = await run(`fromAll().when({ $any: function (s) { s.f = function () {}; } })`, [ev('A')]);
    expect(r.stage).toBe('faulted');
    expect(r.fault?.message).toMatch(/function/);
  });

  it('nesting deeper than ~64 levels faults; shallow nesting is fine', async () => {
    const deep = await run(`fromAll().when({ $any: function () { var o = {}; for (var i = 0; i < 100; i++) o = { o: o }; return o; } })`, [ev('A')]);
    expect(deep.stage).toBe('faulted');
    const shallow = await run(`fromAll().when({ $any: function () { var o = {}; for (var i = 0; i < 10; i++) o = { o: o }; return o; } })`, [ev('A')]);
    expect(shallow.error).toBeUndefined();
  });

  it('own-property walk: Date -> {}, BigInt -> string of digits, non-enumerable properties included', async () => {
    const r = await run(`fromAll().when({ $any: function () {
      var s = { d: new Date(0), b: 12345678901234567890n };
      Object.defineProperty(s, 'hidden', { value: 1, enumerable: false });
      return s; } })`, [ev('A')]);
    expect(r.states['']).toBe('{"d":{},"b":"12345678901234567890","hidden":1}');
  });
});

// ------------------------------------------------------------------------------------------
describe('results (§11)', () => {
  it('outputState(): the result is the state', async () => {
    const r = await run(`fromAll().when({ $any: function (s) { s.n = (s.n || 0) + 1; } }).outputState()`, [ev('A'), ev('A')]);
    expect(r.definition?.producesResults).toBe(true);
    expect(r.results['']).toBe('{"n":2}');
    expect(r.changes.at(-1)).toEqual([['', '{"n":2}', '{"n":2}', true]]);
  });

  it('transformBy(f): the result is f(state); an unchanged result is flagged as not changed', async () => {
    const r = await run(`fromAll().when({ $any: function (s) { s.n = (s.n || 0) + 1; } }).transformBy(function (s) { return { big: s.n > 1 }; })`,
      [ev('A'), ev('A'), ev('A')], { batchSize: 1 });
    expect(r.states['']).toBe('{"n":3}');
    expect(r.results['']).toBe('{"big":true}');
    expect(r.changes.map((c) => c[0][3])).toEqual([true, true, false]);
  });

  it('a partition whose state did not change is not reported', async () => {
    const r = await run(`fromAll().when({ Inc: function (s) { s.n = (s.n || 0) + 1; }, Same: function (s) { log('same'); }, Replace: function (s) { return { n: s.n }; } }).outputState()`,
      [ev('Inc'), ev('Same'), ev('Replace'), ev('Inc')], { batchSize: 1 });
    expect(r.logs).toEqual(['same']);
    expect(r.changes).toEqual([[['', '{"n":1}', '{"n":1}', true]], [], [], [['', '{"n":2}', '{"n":2}', true]]]);
  });

  it('transformBy without return nulls the result (the state is kept)', async () => {
    const r = await run(`fromAll().when({ $any: function (s) { s.n = 1; } }).transformBy(function (s) { s.n; })`, [ev('A')]);
    expect(r.states['']).toBe('{"n":1}');
    expect(r.results['']).toBeNull();
  });

  it.each([['true', '{"n":1}'], ['1', null], ["'yes'", null], ['{}', null], ['false', null], ['undefined', null]])(
    'filterBy passes only on boolean true (predicate returns %s)', async (value, expected) => {
      const r = await run(`fromAll().when({ $any: function (s) { s.n = 1; } }).filterBy(function (s) { return ${value}; })`, [ev('A')]);
      expect(r.error).toBeUndefined();
      expect(r.states['']).toBe('{"n":1}');
      expect(r.results['']).toBe(expected);
    });

  it('transforms run in chain order; a null step stops the chain', async () => {
    const r = await run(`fromAll().when({ $any: function (s) { s.n = (s.n || 0) + 1; } })
      .transformBy(function (s) { return { doubled: s.n * 2 }; })
      .filterBy(function (r) { return r.doubled > 2; })
      .transformBy(function (r) { return { final: r.doubled }; })`, [ev('A'), ev('A')], { batchSize: 1 });
    expect(r.outcomes[0].changed[0][2]).toBeNull();
    expect(r.results['']).toBe('{"final":4}');
    const stop = await run(`fromAll().when({ $any: function (s) { s.n = 1; } })
      .transformBy(function () { return null; }).transformBy(function (r) { log('reached'); return { x: 1 }; })`, [ev('A')]);
    expect(stop.results['']).toBeNull();
    expect(stop.logs).toEqual([]);
  });

  it('outputTo sets the result stream name (and partition pattern) but does not turn results on', async () => {
    const one = await define(`fromAll().when({ $any: function () {} }).outputTo('totals')`);
    expect(one.definition).toMatchObject({ resultStreamName: 'totals', partitionResultStreamNamePattern: null, producesResults: false });
    const two = await define(`fromAll().when({ $any: function () {} }).outputState().outputTo('totals', 'totals-{0}')`);
    expect(two.definition).toMatchObject({ resultStreamName: 'totals', partitionResultStreamNamePattern: 'totals-{0}', producesResults: true });
  });

  it('outputTo takes 1 or 2 string arguments', async () => {
    const w = `fromAll().when({ $any: function () {} })`;
    expect((await define(`${w}.outputTo()`)).definitionError).toBeDefined();
    expect((await define(`${w}.outputTo('a', 'b', 'c')`)).definitionError).toBeDefined();
    expect((await define(`${w}.outputTo(5)`)).definitionError).toBe('expected string value');
    expect((await define(`${w}.outputTo('a', 5)`)).definitionError).toBe('expected string value');
  });
});

// ------------------------------------------------------------------------------------------
describe('emit (§10)', () => {
  it('emit writes a JSON event with the user metadata plus $causedBy (undefined values dropped, null kept)', async () => {
    const r = await run(`fromAll().when({ $any: function (s, e) { emit('out-' + e.data.n, 'Copied', { n: e.data.n, list: [1] }, { a: 1, u: undefined, z: null }); } })`,
      [ev('A', { n: 1 }, { eventId: '11111111-1111-4111-8111-111111111111' })], EMIT);
    expect(r.error).toBeUndefined();
    expect(r.emitted).toHaveLength(1);
    const [e] = r.emitted;
    expect(e).toMatchObject({ streamId: 'out-1', eventType: 'Copied', isJson: true });
    expect(JSON.parse(e.data)).toEqual({ n: 1, list: [1] });
    expect(e.metadata).toEqual({ a: 1, z: null, $causedBy: '11111111-1111-4111-8111-111111111111' });
  });

  it('$correlationId is copied from a JSON triggering event, not from a non-JSON one, and user metadata wins', async () => {
    const src = `fromAll().when({ $any: function (s, e) { if (e.eventType === 'Own') emit('o', 'T', {}, { $correlationId: 'mine' }); else emit('o', 'T', {}); } })`;
    const r = await run(src, [
      ev('A', {}, { metadata: { $correlationId: 'corr-1' } }),
      ev('B', {}, { raw: 'x', isJson: false, metadata: { $correlationId: 'corr-2' } }),
      ev('Own', {}, { metadata: { $correlationId: 'corr-3' } }),
      ev('C'),
    ], EMIT);
    expect(r.emitted.map((e) => e.metadata.$correlationId)).toEqual(['corr-1', undefined, 'mine', undefined]);
    expect(r.emitted.map((e) => e.metadata.$causedBy)).toEqual(r.delivered.map((e) => e.eventId));
  });

  it('emits are returned in call order, $created emits first', async () => {
    const r = await run(`fromAll().when({
      $created: function (s, e) { emit('o', 'FromCreated', {}); },
      $any: function (s, e) { emit('o', 'First', {}); emit('p', 'Second', [1]); } })`, [ev('A'), ev('A')], EMIT);
    expect(r.emitted.map((e) => `${e.streamId}/${e.eventType}`)).toEqual(['o/FromCreated', 'o/First', 'p/Second', 'o/First', 'p/Second']);
    expect(r.emitted[2].data).toBe('[1]');
  });

  const invalid: [string, string, RegExp][] = [
    ['two arguments', `emit('s', 'T')`, /invalid number of parameters/],
    ['no arguments', `emit()`, /invalid number of parameters/],
    ['null streamId', `emit(null, 'T', {})`, /./],
    ['undefined streamId', `emit(undefined, 'T', {})`, /./],
    ['empty streamId', `emit('', 'T', {})`, /./],
    ['numeric streamId', `emit(5, 'T', {})`, /string expected/],
    ['null eventType', `emit('s', null, {})`, /./],
    ['empty eventType', `emit('s', '', {})`, /./],
    ['object eventType', `emit('s', {}, {})`, /string expected/],
    ['null body', `emit('s', 'T', null)`, /./],
    ['undefined body', `emit('s', 'T', undefined)`, /./],
    ['string body', `emit('s', 'T', 'text')`, /object expected/],
    ['number body', `emit('s', 'T', 5)`, /object expected/],
    ['explicit undefined metadata', `emit('s', 'T', {}, undefined)`, /./],
    ['explicit null metadata', `emit('s', 'T', {}, null)`, /./],
    ['string metadata', `emit('s', 'T', {}, 'm')`, /./],
  ];
  it.each(invalid)('emit with %s faults', async (_n, call, message) => {
    const r = await run(`fromAll().when({ $any: function (s, e) { ${call}; s.after = true; } })`, [ev('A')], EMIT);
    expect(r.stage).toBe('faulted');
    expect(r.fault?.message).toMatch(/\S/);
    expect(r.fault?.message).toMatch(message);
    expect(r.emitted).toEqual([]);
  });

  it.each([
    ['emit', `emit('s', 'T', {})`], ['linkTo', `linkTo('s', e)`], ['linkStreamTo', `linkStreamTo('s', 'other')`], ['copyTo', `copyTo('s', e)`],
  ])("%s without emitEnabled faults with \"'emit' is not allowed by the projection/configuration/mode\"", async (_n, call) => {
    const r = await run(`fromAll().when({ $any: function (s, e) { ${call}; } })`, [ev('A')], { emitEnabled: false });
    expect(r.fault?.message).toBe("'emit' is not allowed by the projection/configuration/mode");
    expect(r.emitted).toEqual([]);
  });
});

describe('linkTo / linkStreamTo / copyTo (§10.1)', () => {
  it('linkTo writes a non-JSON $> event whose data is "N@stream"', async () => {
    const r = await run(`fromAll().when({ $any: function (s, e) { linkTo('by-type-' + e.eventType, e, { why: 'x' }); } })`,
      [ev('A', {}, { stream: 'orders-1' }), ev('B', {}, { stream: 'orders-1' })], EMIT);
    expect(r.emitted.map(({ streamId, eventType, data, isJson }) => ({ streamId, eventType, data, isJson }))).toEqual([
      { streamId: 'by-type-A', eventType: '$>', data: '0@orders-1', isJson: false },
      { streamId: 'by-type-B', eventType: '$>', data: '1@orders-1', isJson: false },
    ]);
    expect(r.emitted[0].metadata).toMatchObject({ why: 'x', $causedBy: r.delivered[0].eventId });
  });

  it('linkTo to something that is not an event faults with "Invalid link to event undefined@undefined"', async () => {
    const r = await run(`fromAll().when({ $any: function (s, e) { linkTo('s', {}); } })`, [ev('A')], EMIT);
    expect(r.fault?.message).toBe('Invalid link to event undefined@undefined');
    const r2 = await run(`fromAll().when({ $any: function (s, e) { linkTo('s', { sequenceNumber: '1', streamId: 'x' }); } })`, [ev('A')], EMIT);
    expect(r2.fault?.message).toMatch(/^Invalid link to event 1@x$/);
  });

  it('linkTo takes 2 or 3 arguments', async () => {
    expect((await run(`fromAll().when({ $any: function (s, e) { linkTo('s'); } })`, [ev('A')], EMIT)).stage).toBe('faulted');
    expect((await run(`fromAll().when({ $any: function (s, e) { linkTo('s', e, {}, {}); } })`, [ev('A')], EMIT)).stage).toBe('faulted');
  });

  it('linkStreamTo writes a non-JSON $@ event whose data is the linked stream id', async () => {
    const r = await run(`fromAll().when({ $any: function (s, e) { linkStreamTo('catalog', e.streamId); } })`, [ev('A', {}, { stream: 'orders-1' })], EMIT);
    expect(r.emitted).toHaveLength(1);
    expect(r.emitted[0]).toMatchObject({ streamId: 'catalog', eventType: '$@', data: 'orders-1', isJson: false });
    expect(r.emitted[0].metadata.$causedBy).toBe(r.delivered[0].eventId);
  });

  it('copyTo copies the event type and raw body (project decision: legacy copyTo)', async () => {
    const r = await run(`fromAll().when({ $any: function (s, e) { copyTo('copy-' + e.streamId, e); } })`, [
      ev('Json', {}, { raw: '{ "spaced" : 1 }', isJson: true, stream: 'a' }),
      ev('Text', {}, { raw: 'hello', isJson: false, stream: 'b' }),
    ], EMIT);
    expect(r.emitted.map(({ streamId, eventType, data, isJson }) => ({ streamId, eventType, data, isJson }))).toEqual([
      { streamId: 'copy-a', eventType: 'Json', data: '{ "spaced" : 1 }', isJson: true },
      { streamId: 'copy-b', eventType: 'Text', data: 'hello', isJson: false },
    ]);
  });

  it('copyTo metadata: source keys not starting with $ plus $correlationId, then given keys not starting with $ (given wins)', async () => {
    const r = await run(`fromAll().when({ $any: function (s, e) { copyTo('c', e, { extra: 1, shared: 'given', $private: 1 }); } })`, [
      ev('A', { v: 1 }, { eventId: '22222222-2222-4222-8222-222222222222', metadata: { user: 'u', shared: 'source', $system: 'x', $correlationId: 'corr' } }),
    ], EMIT);
    expect(r.emitted[0].metadata).toEqual({
      user: 'u', shared: 'given', $correlationId: 'corr', extra: 1, $causedBy: '22222222-2222-4222-8222-222222222222',
    });
  });
});

// ------------------------------------------------------------------------------------------
describe('log and console (§10.1)', () => {
  it('log writes strings as-is and objects as JSON, without touching the state', async () => {
    const r = await run(`fromAll().when({ $any: function (s, e) { log('text'); log({ a: [1] }); log(5); } })`, [ev('A')]);
    expect(r.logs).toEqual(['text', '{"a":[1]}', '5']);
    expect(r.states['']).toBe('{}');
  });

  it('console.log/info/warn/error behave like log (project decision)', async () => {
    const r = await run(`fromAll().when({ $any: function (s, e) {
      console.log('l'); console.info('i'); console.warn({ w: 1 }); console.error('e'); } })`, [ev('A')]);
    expect(r.error).toBeUndefined();
    expect(r.logs).toEqual(['l', 'i', '{"w":1}', 'e']);
  });
});

// ------------------------------------------------------------------------------------------
describe('faults while processing (§1, §12)', () => {
  it('a throwing handler faults at that event; later events are not applied', async () => {
    const r = await run(`fromAll().when({ $any: function (s, e) {
      if (e.eventType === 'Boom') throw new Error('kaput');
      s.seen = (s.seen || []).concat(e.eventType); emit('o', e.eventType, {}); log(e.eventType); } })`,
    [ev('A'), ev('Boom'), ev('C')], EMIT);
    expect(r.fault).toMatchObject({ message: 'kaput', index: 1 });
    expect(r.processed).toBe(1);
    expect(r.handled).toBe(1);
    expect(r.emitted.map((e) => e.eventType)).toEqual(['A']);
    expect(r.logs).toEqual(['A']);
    expect(stateOf(r)).toEqual({ seen: ['A'] });
  });

  // In-place mutations the failing handler made before it threw are not rolled back (the
  // projection is faulted and nothing after the last checkpoint is saved); its emits are dropped.
  it("the failing event's emits are not reported", async () => {
    const r = await run(`fromAll().when({ $any: function (s, e) {
      s.n = (s.n || 0) + 1; emit('o', e.eventType, {}); if (e.eventType === 'Boom') throw new Error('kaput'); } })`,
    [ev('A'), ev('Boom')], EMIT);
    expect(r.fault).toMatchObject({ message: 'kaput', index: 1 });
    expect(r.emitted.map((e) => e.eventType)).toEqual(['A']);
  });

  it('a partition changed by several events of one batch is reported once, with its final state', async () => {
    const r = await run(`fromAll().foreachStream().when({ $any: function (s) { s.n = (s.n || 0) + 1; } })`,
      [ev('A', {}, { stream: 'a' }), ev('A', {}, { stream: 'b' }), ev('A', {}, { stream: 'a' }), ev('A', {}, { stream: 'a' })], { batchSize: 4 });
    expect(r.changes).toHaveLength(1);
    expect(r.changes[0].filter((c) => c[0] === 'a')).toEqual([['a', '{"n":3}', '{"n":3}', true]]);
    expect(r.changes[0]).toHaveLength(2);
  });
});

// ------------------------------------------------------------------------------------------
describe('sandbox hostility (§12)', () => {
  it('an infinite loop in a handler faults with "took too long"', async () => {
    const started = Date.now();
    const r = await run(`fromAll().when({ $any: function () { for (;;) {} } })`, [ev('A')], { timeoutMs: 200 });
    expect(r.fault?.message).toMatch(/took too long/);
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('an infinite loop in the definition phase fails creation with "took too long"', async () => {
    const { definitionError } = await define(`while (true) {}`, { timeoutMs: 200 });
    expect(definitionError).toMatch(/took too long/);
  });

  it('a memory bomb faults with a memory fault and the sandbox is disposed', async () => {
    const r = await run(`fromAll().when({ $any: function (s) { var a = []; for (;;) a.push(new Array(100000).fill(a.length)); } })`,
      [ev('A')], { memoryLimitMb: 16, timeoutMs: 20_000 });
    expect(r.fault?.message).toMatch(/memory/i);
    expect(r.fault?.sandboxDisposed).toBe(true);
  });

  it('runaway recursion faults instead of crashing', async () => {
    const r = await run(`fromAll().when({ $any: function (s) { function f(n) { return f(n + 1) + 1; } f(0); } })`, [ev('A')]);
    expect(r.fault?.message).toMatch(/call stack/i);
  });

  it("this.constructor.constructor('return process')() cannot reach process", async () => {
    const { definitionError } = await define(`var p = this.constructor.constructor('return process')(); fromAll();`);
    expect(definitionError).toBeDefined();
    const r = await run(`fromAll().when({ $any: function (s, e) {
      var probes = [
        function () { return this.constructor.constructor('return process')(); },
        function () { return ({}).constructor.constructor('return process')(); },
        function () { return e.constructor.constructor('return process')(); },
        function () { return Object.getPrototypeOf(function* () {}).constructor('yield process')().next().value; },
        function () { return typeof process === 'undefined' ? undefined : process; },
      ];
      s.reached = probes.map(function (p) { try { var v = p(); return v !== undefined && v !== null && typeof v === 'object' && typeof v.exit === 'function'; } catch (err) { return false; } });
    } })`, [ev('A')]);
    expect(r.error).toBeUndefined();
    expect(stateOf(r)).toEqual({ reached: [false, false, false, false, false] });
  });

  it('require, setTimeout/timers and eval are not available', async () => {
    const r = await run(`fromAll().when({ $any: function (s) {
      s.types = [typeof require, typeof setTimeout, typeof setInterval, typeof setImmediate, typeof eval, typeof globalThis['ev' + 'al']];
      try { eval('1'); s.eval = 'ran'; } catch (err) { s.eval = 'threw'; }
    } })`, [ev('A')]);
    expect(r.error).toBeUndefined();
    expect(stateOf(r)).toEqual({ types: Array(6).fill('undefined'), eval: 'threw' });
  });

  it('string compilation is disabled: new Function(...) and the other function constructors throw', async () => {
    const r = await run(`fromAll().when({ $any: function (s) {
      function tryIt(f) { try { f(); return 'ran'; } catch (err) { return 'threw'; } }
      s.compile = [
        tryIt(function () { return new Function('return 1')(); }),
        tryIt(function () { return Function('return 1')(); }),
        tryIt(function () { return Object.getPrototypeOf(function* () {}).constructor('yield 1'); }),
        tryIt(function () { return Object.getPrototypeOf(async function () {}).constructor('return 1'); }),
        tryIt(function () { return Object.getPrototypeOf(async function* () {}).constructor('yield 1'); }),
      ];
    } })`, [ev('A')]);
    expect(r.error).toBeUndefined();
    expect(stateOf(r)).toEqual({ compile: Array(5).fill('threw') });
  });

  it("the sandbox's internal entry points are not reachable from the query (no emit behind emitEnabled=false)", async () => {
    const r = await run(`fromAll().when({ $any: function (s, e) {
      s.hooks = [typeof __svcStart, typeof __svcProcess, typeof __svcDefinition, typeof __svcCollect, typeof __svcPartition];
      if (typeof __svcStart === 'function') { __svcStart(JSON.stringify({ emitEnabled: true }), '{}'); emit('victim', 'Forged', {}); }
    } })`, [ev('A')], { emitEnabled: false });
    expect(r.emitted).toEqual([]);
    expect(stateOf(r)).toEqual({ hooks: Array(5).fill('undefined') });
  });

  it('patching built-ins (JSON.stringify) cannot forge emitted events when emitting is disabled', async () => {
    const r = await run(`var realStringify = JSON.stringify;
      JSON.stringify = function (v) {
        if (v && typeof v === 'object' && Array.isArray(v.emitted)) {
          v.emitted.push({ streamId: 'victim', eventType: 'Forged', data: '{}', isJson: true, metadata: {} });
        }
        return realStringify.apply(JSON, arguments);
      };
      fromAll().when({ $any: function (s) { s.n = 1; } })`, [ev('A')], { emitEnabled: false });
    expect(r.emitted).toEqual([]);
  });
});

// ------------------------------------------------------------------------------------------
describe('stored states (§6.2, §6.3)', () => {
  it('states passed to start() are resumed: no $init/$created for stored partitions', async () => {
    const r = await run(`fromAll().foreachStream().when({
      $init: function () { log('init'); return { n: 0 }; },
      $created: function (s, e) { log('created ' + e.partition); },
      $any: function (s) { s.n++; } }).outputState()`,
    [ev('A', {}, { stream: 'a' }), ev('A', {}, { stream: 'b' })],
    { storedStates: { a: '{"n":41}' }, batchSize: 1 });
    expect(r.error).toBeUndefined();
    expect(stateOf(r, 'a')).toEqual({ n: 42 });
    expect(stateOf(r, 'b')).toEqual({ n: 1 });
    expect(r.logs).toEqual(['init', 'created b']);
    expect(r.changes[0]).toEqual([['a', '{"n":42}', '{"n":42}', true]]);
  });

  it('a stored shared state is resumed for a bi-state projection', async () => {
    const r = await run(`fromAll().foreachStream().when({
      $initShared: function () { log('initShared'); return { total: 0 }; },
      $any: function (s) { s[1].total++; } })`,
    [ev('A', {}, { stream: 'a' })], { storedStates: { '': '{"total":10}' } });
    expect(stateOf(r, '')).toEqual({ total: 11 });
    expect(r.logs).toEqual([]);
  });

  it('a stored null state is treated as empty and initialised', async () => {
    const r = await run(`fromAll().when({ $init: function () { return { n: 100 }; }, $any: function (s) { s.n++; } })`,
      [ev('A')], { storedStates: { '': null } });
    expect(stateOf(r)).toEqual({ n: 101 });
  });
});
