// What a query can observe of its event objects (src/projections/event-use.ts): a query that
// only reads event fields by name gets plain event objects; any other use escapes and gets
// frozen, complete ones. The runtime's behaviour in both cases is in
// projections-language.unit.spec.ts ("plain event objects").

import { describe, expect, it } from 'vitest';
import { analyseEventUse } from '../src/projections/event-use.js';

const handler = (body: string) => `fromAll().when({ A: function (s, e) { ${body} } })`;

describe('event use analysis', () => {
  it('reads by name do not escape, and the fields read are listed', () => {
    const use = analyseEventUse(`fromAll().partitionBy(e => e.streamId).when({
      $init: () => ({ n: 0 }),
      A: (s, e) => { s.n += e.body.v; s.t = e['eventType']; s.m = e?.metadata; },
    })`);
    expect(use.escapes).toBe(false);
    expect([...use.reads].sort()).toEqual(['body', 'eventType', 'metadata', 'streamId']);
    expect(use.partitionFunctions).toEqual(['e => e.streamId']);
    expect(use.functions).toContain('(s, e) => { s.n += e.body.v; s.t = e[\'eventType\']; s.m = e?.metadata; }');
  });

  it('writing to the state or to the body does not escape', () => {
    expect(analyseEventUse(handler('s.count++; e.body.x = 1; delete e.body.y; s[e.streamId] = e.body;')).escapes).toBe(false);
  });

  it.each([
    ['an assignment to a field', 'e.eventType = "B";'],
    ['a compound assignment', 'e.sequenceNumber += 1;'],
    ['an update', 'e.sequenceNumber++;'],
    ['a delete', 'delete e.body;'],
    ['a destructuring assignment target', '[e.eventType] = ["B"];'],
    ['an object pattern target', '({ x: e.eventType } = { x: 1 });'],
    ['a for-in target', 'for (e.eventType in s) {}'],
    ['passing it to a function', 'log(e);'],
    ['storing it in the state', 's.last = e;'],
    ['aliasing it', 'var x = e; x.eventType = 1;'],
    ['returning it', 'return e;'],
    ['spreading it', 's.copy = { ...e };'],
    ['putting it in an array', 's.list = [e];'],
    ['a shorthand property', 's.wrapped = { e };'],
    ['a template literal', 's.text = `${e}`;'],
    ['a comparison', 's.same = e === s;'],
    ['an in test', 's.has = "bodyRaw" in e;'],
    ['a computed read', 'var k = "bodyRaw"; s.raw = e[k];'],
    ['a method call on it', 's.text = e.toString();'],
    ['arguments', 's.args = arguments.length;'],
  ])('%s escapes', (_, body) => {
    expect(analyseEventUse(handler(body)).escapes).toBe(true);
  });

  it('with escapes', () => {
    expect(analyseEventUse(`fromAll().when({ A: function (s, e) { with (e) { s.t = eventType; } } })`).escapes).toBe(true);
  });

  it('an arrow body that is the event escapes', () => {
    expect(analyseEventUse(`fromAll().partitionBy(e => e).when({ A: (s, e) => s })`).escapes).toBe(true);
  });

  it('a pattern or defaulted event parameter escapes; a rest parameter escapes', () => {
    expect(analyseEventUse(`fromAll().when({ A: function (s, { body }) { s.b = body; } })`).escapes).toBe(true);
    expect(analyseEventUse(`fromAll().when({ A: function (s, e = {}) { s.t = e.eventType; } })`).escapes).toBe(true);
    expect(analyseEventUse(`fromAll().when({ A: function (...args) { args[0].n = 1; } })`).escapes).toBe(true);
  });

  it('a destructured state parameter does not escape', () => {
    expect(analyseEventUse(`fromAll().when({ A: function ({ n }, e) { return { n: n + e.body.v }; } })`).escapes).toBe(false);
  });

  it('a function given to partitionBy by reference is not among the partition functions', () => {
    const use = analyseEventUse(`function byStream(e) { return e.streamId; }
      fromAll().partitionBy(byStream).when({ A: function (s, e) { s.n = 1; } })`);
    expect(use.escapes).toBe(false);
    expect(use.partitionFunctions).toEqual([]);
  });

  it('the first parameter of a partitionBy function is an event: using it otherwise escapes', () => {
    expect(analyseEventUse(`fromAll().partitionBy(function (e) { return keyOf(e); }).when({ A: function (s) {} })`).escapes).toBe(true);
  });

  it('a parameter named like the event elsewhere is held to the same rule (conservative)', () => {
    expect(analyseEventUse(`fromAll().when({ A: function (s, e) { s.n = [1, 2].reduce(function (a, e) { return a + e; }, 0); } })`).escapes).toBe(true);
  });

  it('property names and labels that look like the event are not uses of it', () => {
    const use = analyseEventUse(`fromAll().when({ A: function (s, e) { var o = { e: 1 }; s.x = o.e; e: for (;;) { break e; } } })`);
    expect(use.escapes).toBe(false);
  });

  it('source that does not parse escapes', () => {
    expect(analyseEventUse('fromAll().when({').escapes).toBe(true);
  });
});
