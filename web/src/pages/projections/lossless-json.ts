import { JsonText } from '../../../../src/api/json-indent';

// JSON read and shown without losing a digit. The node writes stored JSON as it was sent (event
// data of 12345678901234567890, a state of 0.1000), which JSON.parse would round to a double: here
// a number whose text a double does not give back stays a LosslessNumber, its text as it came, and
// indentedValue (src/api/json-indent.ts) writes it so. Everything else parses as JSON.parse parses it.

/** A JSON number kept as its text (one a double cannot hold exactly, or not in the shortest form). */
export class LosslessNumber extends JsonText {
  toString(): string {
    return this.text;
  }
}

const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
const STRING = /"(?:[^"\\\u0000-\u001f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"/y;
const SPACE = /[ \t\n\r]*/y;

/** Parses a JSON text; numbers a double does not give back as written are LosslessNumbers. Throws SyntaxError as JSON.parse does. */
export function parseLossless(text: string): unknown {
  let at = 0;
  const fail = (): never => { throw new SyntaxError(`Not JSON at offset ${at}`); };
  const skipSpace = () => { SPACE.lastIndex = at; SPACE.exec(text); at = SPACE.lastIndex; };
  const take = (pattern: RegExp): string => {
    pattern.lastIndex = at;
    const m = pattern.exec(text);
    if (!m) fail();
    at = pattern.lastIndex;
    return m![0];
  };
  const expect = (c: string) => { skipSpace(); if (text[at] !== c) fail(); at++; };
  const literal = (word: string, value: unknown) => { if (!text.startsWith(word, at)) fail(); at += word.length; return value; };

  const value = (): unknown => {
    skipSpace();
    switch (text[at]) {
      case '{': {
        at++;
        const object: Record<string, unknown> = {};
        skipSpace();
        if (text[at] === '}') { at++; return object; }
        for (;;) {
          skipSpace();
          const key = JSON.parse(take(STRING)) as string;
          expect(':');
          // defineProperty: a member named __proto__ is a member, as JSON.parse makes it.
          Object.defineProperty(object, key, { value: value(), enumerable: true, writable: true, configurable: true });
          skipSpace();
          if (text[at] === ',') { at++; continue; }
          expect('}');
          return object;
        }
      }
      case '[': {
        at++;
        const array: unknown[] = [];
        skipSpace();
        if (text[at] === ']') { at++; return array; }
        for (;;) {
          array.push(value());
          skipSpace();
          if (text[at] === ',') { at++; continue; }
          expect(']');
          return array;
        }
      }
      case '"': return JSON.parse(take(STRING));
      case 't': return literal('true', true);
      case 'f': return literal('false', false);
      case 'n': return literal('null', null);
      default: {
        const written = take(NUMBER);
        const n = Number(written);
        return String(n) === written ? n : new LosslessNumber(written);
      }
    }
  };

  const result = value();
  skipSpace();
  if (at !== text.length) fail();
  return result;
}
