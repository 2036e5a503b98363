import { describe, expect, it } from 'vitest';
import { indentedValue, jsonOrText, JsonText } from '../src/api/json-indent.js';
import { LosslessNumber, parseLossless } from '../web/src/pages/projections/lossless-json.js';

// JSON without a lost digit, both ends: the node writes stored JSON into a body as it is
// (src/api/json-indent.ts: JsonText in indentedValue), and the console reads and shows it without
// rounding (web/src/pages/projections/lossless-json.ts). Ordinary values come out as
// JSON.stringify and JSON.parse make them.

const ORDINARY: unknown[] = [
  null, true, false, 0, -1, 1.5, 1e21, 'text "quoted" \u00e9 \n', [], {}, [1, [2, [3]]],
  { a: 1, b: [true, null, { c: 'd' }], e: {}, f: [] }, { '': 0, 'with space': -0.25 },
];

describe('the node writes stored JSON as it is', () => {
  it('indentedValue is JSON.stringify(v, null, 2) for ordinary values, undefined members left out', () => {
    for (const value of ORDINARY) expect(indentedValue(value)).toBe(JSON.stringify(value, null, 2));
    expect(indentedValue({ a: undefined, b: [undefined] })).toBe(JSON.stringify({ a: undefined, b: [undefined] }, null, 2));
  });

  it('a JsonText is written as its text, every digit kept', () => {
    const text = indentedValue({ data: new JsonText('{"ref":12345678901234567890,"price":0.10}'), n: 1 });
    expect(text).toBe('{\n  "data": {"ref":12345678901234567890,"price":0.10},\n  "n": 1\n}');
    expect(() => JSON.parse(text)).not.toThrow();
  });

  it('jsonOrText takes only text that parses as JSON; anything else stays a string', () => {
    expect(jsonOrText(' {"a": 1} ')).toEqual(new JsonText('{"a": 1}'));
    for (const text of ['plain', '{"a": 1,}', '{"a": 1} // note', '']) expect(jsonOrText(text)).toBe(text);
  });
});

describe('the console reads and shows it without rounding', () => {
  it('parses ordinary JSON as JSON.parse does and prints it as JSON.stringify(v, null, 2)', () => {
    for (const value of ORDINARY) {
      const text = JSON.stringify(value);
      expect(parseLossless(text)).toEqual(JSON.parse(text));
      expect(indentedValue(parseLossless(text))).toBe(JSON.stringify(value, null, 2));
    }
    expect(parseLossless(' \n{ "a" : [ 1 , 2 ] }\t')).toEqual({ a: [1, 2] });
  });

  it('keeps a number a double would round, or write otherwise, as its text', () => {
    const value = parseLossless('{"ref":12345678901234567890,"price":0.10,"big":1E+21,"ok":42}') as Record<string, unknown>;
    expect(value.ref).toEqual(new LosslessNumber('12345678901234567890'));
    expect(value.price).toEqual(new LosslessNumber('0.10'));
    expect(value.ok).toBe(42);
    expect(indentedValue(value)).toBe('{\n  "ref": 12345678901234567890,\n  "price": 0.10,\n  "big": 1E+21,\n  "ok": 42\n}');
  });

  it('a member named __proto__ is a member, not the prototype', () => {
    const value = parseLossless('{"__proto__":{"polluted":true}}') as Record<string, unknown>;
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
    expect(Object.keys(value)).toEqual(['__proto__']);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('refuses what is not JSON, as JSON.parse does', () => {
    for (const text of ['', '{', '[1,]', '{"a":1,}', '01', '+1', '1.', "'a'", '"\u0001"', '{"a" 1}', 'nul', '[1] 2', '{a:1}']) {
      expect(() => JSON.parse(text), text).toThrow(SyntaxError);
      expect(() => parseLossless(text), text).toThrow(SyntaxError);
    }
  });

  it('reads what the node writes: a debug answer round-trips every digit', () => {
    const body = indentedValue({ steps: [{ event: { data: new JsonText('{"ref":12345678901234567890}') }, stateAfter: new JsonText('{"n":1}') }] });
    const parsed = parseLossless(body) as { steps: { event: { data: unknown }; stateAfter: unknown }[] };
    expect(indentedValue(parsed.steps[0].event.data)).toBe('{\n  "ref": 12345678901234567890\n}');
    expect(parsed.steps[0].stateAfter).toEqual({ n: 1 });
  });
});
