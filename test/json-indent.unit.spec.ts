import { describe, expect, it } from 'vitest';
import { indentJson } from '../src/api/json-indent.js';

// The lossless re-indenter the node (atom feeds) and the console share: JSON.stringify's layout,
// JSON.parse's grammar, and every number and string exactly as written.

/** A small deterministic generator, so a failure names a seed that reproduces it. */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function randomValue(next: () => number, depth = 0): unknown {
  const kind = Math.floor(next() * (depth > 4 ? 5 : 7));
  switch (kind) {
    case 0: return null;
    case 1: return next() < 0.5;
    case 2: return Math.floor((next() - 0.5) * 1e6);
    case 3: return (next() - 0.5) * 10 ** Math.floor(next() * 40 - 20);
    case 4: return ['', 'a', 'é ü', 'quote " back \\ slash', 'tab\tnew\nline', '\u0001', '😀', '</script>'][Math.floor(next() * 8)];
    case 5: return Array.from({ length: Math.floor(next() * 4) }, () => randomValue(next, depth + 1));
    default: return Object.fromEntries(Array.from({ length: Math.floor(next() * 4) }, (_, i) => [`k${i}${next() < 0.2 ? ' "x"' : ''}`, randomValue(next, depth + 1)]));
  }
}

describe('indentJson', () => {
  it('keeps integers beyond 2^53 and long decimals digit for digit', () => {
    expect(indentJson('{"id": 9007199254740993}')).toBe('{\n  "id": 9007199254740993\n}');
    expect(indentJson('{"$tb":9223372036854775807}')).toBe('{\n  "$tb": 9223372036854775807\n}');
    expect(indentJson('[1.10, -0, 1E+400, 0.1000000000000000055511151231257827]'))
      .toBe('[\n  1.10,\n  -0,\n  1E+400,\n  0.1000000000000000055511151231257827\n]');
    expect(indentJson('12345678901234567890')).toBe('12345678901234567890');
    // What JSON.parse and JSON.stringify would have made of them.
    expect(JSON.stringify(JSON.parse('{"$tb":9223372036854775807}'))).toBe('{"$tb":9223372036854776000}');
  });

  it('keeps strings as written, escapes included', () => {
    expect(indentJson('{"a\\u0041": "\\u00e9\\/\\n"}')).toBe('{\n  "a\\u0041": "\\u00e9\\/\\n"\n}');
  });

  it("lays values out as JSON.stringify does, compact or indented, whatever the source's whitespace", () => {
    const next = random(20261128);
    for (let n = 0; n < 500; n++) {
      const value = randomValue(next);
      const compact = JSON.stringify(value);
      const spread = JSON.stringify(value, null, 4).replace(/\n/g, '\r\n\t ');
      expect(indentJson(compact), compact).toBe(JSON.stringify(value, null, 2));
      expect(indentJson(spread), compact).toBe(JSON.stringify(value, null, 2));
      expect(indentJson(compact, '\t'), compact).toBe(JSON.stringify(value, null, '\t'));
      expect(indentJson(spread, ''), compact).toBe(compact);
    }
    expect(indentJson(' {  } ')).toBe('{}');
    expect(indentJson('[ [ ], { } ]')).toBe('[\n  [],\n  {}\n]');
  });

  it('accepts exactly what JSON.parse accepts', () => {
    const refused = [
      '', ' ', '{', '}', '[1,]', '{"a":1,}', '{"a" 1}', '{a:1}', "{'a':1}", '[1 2]', '01', '1.', '.5', '+1', '-', '1e', '0x10',
      'tru', 'truex', 'nul', 'NaN', 'Infinity', '"a', '"\\x"', '"\\u12"', '"\u0001"', '"a"b', '{}{}', '[]]', '[[]', '{"a":}',
      '{,}', '[,1]', ':', '{"a"::1}', '\ufeff{}', '/* */{}', '{"a":1}//', 'undefined', '"\\u12g4"',
    ];
    for (const text of refused) {
      expect(() => JSON.parse(text), text).toThrow();
      expect(indentJson(text), text).toBeUndefined();
    }
    // Mutations of valid documents: each accepted by both or refused by both.
    const next = random(7);
    const alphabet = '{}[]":,0-1.eE+ tfnru\\a';
    for (let n = 0; n < 3000; n++) {
      const text = [...JSON.stringify(randomValue(next))];
      const at = Math.floor(next() * (text.length + 1));
      const change = next();
      if (change < 0.4) text.splice(at, 1);
      else if (change < 0.8) text.splice(at, 0, alphabet[Math.floor(next() * alphabet.length)]);
      else text.splice(at, 1, alphabet[Math.floor(next() * alphabet.length)]);
      const mutated = text.join('');
      let parses = true;
      try { JSON.parse(mutated); } catch { parses = false; }
      expect(indentJson(mutated) !== undefined, mutated).toBe(parses);
    }
  });

  it('takes any depth of nesting', () => {
    const deep = '['.repeat(20_000) + ']'.repeat(20_000);
    expect(indentJson(deep, '')).toBe(deep);
  });
});
