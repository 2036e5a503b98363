// JSON text re-indented token by token, never parsed into values: numbers and strings are copied
// exactly as written. JSON.parse would round 9007199254740993 to 9007199254740992 and the $tb of
// a soft-deleted stream (9223372036854775807, Int64.MaxValue) to 9223372036854776000, and
// JSON.stringify would write the rounded numbers. The node re-indents event data with it (atom
// feeds with embed=pretty and tryharder) and the console shows every JSON document through it.
// The layout is JSON.stringify's (`{}` and `[]` when empty, `"key": value`); it checks the
// grammar as strictly as JSON.parse does and answers undefined for anything that is not one
// JSON value. Iterative: any depth of nesting, no recursion.

type Expecting = 'value' | 'firstValue' | 'key' | 'firstKey' | 'colon' | 'next' | 'end';

const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
const ESCAPABLE = new Set(['"', '\\', '/', 'b', 'f', 'n', 'r', 't']);
const HEX4 = /^[0-9a-fA-F]{4}$/;

/**
 * `text` (one JSON value, whitespace around it allowed) laid out with `indent` per level, or
 * compact when `indent` is ''; undefined when `text` is not JSON.
 */
export function indentJson(text: string, indent = '  '): string | undefined {
  const out: string[] = [];
  const open: Array<'{' | '['> = [];
  const newlines: string[] = [];
  const newline = (depth: number) => (indent ? (newlines[depth] ??= '\n' + indent.repeat(depth)) : '');
  let expecting: Expecting = 'value';
  let i = 0;
  for (;;) {
    i = skipWhitespace(text, i);
    if (i >= text.length) return expecting === 'end' ? out.join('') : undefined;
    const c = text[i];
    if (expecting === 'end') return undefined;
    if (expecting === 'next') {
      const top = open[open.length - 1];
      if (c === ',') {
        out.push(',', newline(open.length));
        expecting = top === '{' ? 'key' : 'value';
      } else if (c === closerOf(top)) {
        open.pop();
        out.push(newline(open.length), c);
        expecting = open.length > 0 ? 'next' : 'end';
      } else {
        return undefined;
      }
      i++;
      continue;
    }
    if (expecting === 'colon') {
      if (c !== ':') return undefined;
      out.push(indent ? ': ' : ':');
      expecting = 'value';
      i++;
      continue;
    }
    if (expecting === 'firstKey' || expecting === 'firstValue') {
      if (c === closerOf(open[open.length - 1])) {
        open.pop();
        out.push(c);
        expecting = open.length > 0 ? 'next' : 'end';
        i++;
        continue;
      }
      out.push(newline(open.length));
      expecting = expecting === 'firstKey' ? 'key' : 'value';
    }
    if (expecting === 'key') {
      const end = c === '"' ? stringEnd(text, i) : -1;
      if (end < 0) return undefined;
      out.push(text.slice(i, end));
      expecting = 'colon';
      i = end;
      continue;
    }
    // A value.
    if (c === '{' || c === '[') {
      open.push(c);
      out.push(c);
      expecting = c === '{' ? 'firstKey' : 'firstValue';
      i++;
      continue;
    }
    const end = scalarEnd(text, i);
    if (end < 0) return undefined;
    out.push(text.slice(i, end));
    expecting = open.length > 0 ? 'next' : 'end';
    i = end;
  }
}

const closerOf = (opener: '{' | '[' | undefined) => (opener === '{' ? '}' : ']');

function skipWhitespace(text: string, i: number): number {
  for (;;) {
    const c = text.charCodeAt(i);
    if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) i++;
    else return i;
  }
}

/** Where the string, number or literal starting at `i` ends; -1 when none starts there. */
function scalarEnd(text: string, i: number): number {
  const c = text[i];
  if (c === '"') return stringEnd(text, i);
  for (const literal of ['true', 'false', 'null']) {
    if (text.startsWith(literal, i)) return i + literal.length;
  }
  NUMBER.lastIndex = i;
  return NUMBER.test(text) ? NUMBER.lastIndex : -1;
}

/** The end of the string whose opening quote is at `i`; -1 when it is not a JSON string. */
function stringEnd(text: string, i: number): number {
  for (let j = i + 1; j < text.length; j++) {
    const c = text[j];
    if (c === '"') return j + 1;
    if (c === '\\') {
      const escaped = text[j + 1];
      if (escaped === 'u') {
        if (!HEX4.test(text.slice(j + 2, j + 6))) return -1;
        j += 5;
      } else if (ESCAPABLE.has(escaped)) {
        j += 1;
      } else {
        return -1;
      }
    } else if (text.charCodeAt(j) < 0x20) {
      return -1;
    }
  }
  return -1;
}

/**
 * Where each member's value is in the text of a JSON array of objects (an append body that
 * JSON.parse accepted: the values are delimited here, not checked again): for each
 * element, its member names (as JSON.parse reads them; the last of equal names, as JSON.parse
 * keeps it) and the [start, end) of their values' text. Undefined when `text` is not such an
 * array. With it an event's data is stored as its client wrote it: JSON.parse and JSON.stringify
 * would round 9007199254740993 to 9007199254740992.
 */
export function arrayMemberSpans(text: string): Map<string, [number, number]>[] | undefined {
  const out: Map<string, [number, number]>[] = [];
  let i = skipWhitespace(text, 0);
  if (text[i] !== '[') return undefined;
  i = skipWhitespace(text, i + 1);
  if (text[i] === ']') return skipWhitespace(text, i + 1) === text.length ? out : undefined;
  for (;;) {
    if (text[i] !== '{') return undefined;
    const members = new Map<string, [number, number]>();
    out.push(members);
    i = skipWhitespace(text, i + 1);
    if (text[i] === '}') {
      i++;
    } else {
      for (;;) {
        const keyEnd = text[i] === '"' ? stringEnd(text, i) : -1;
        if (keyEnd < 0) return undefined;
        const name = JSON.parse(text.slice(i, keyEnd)) as string;
        i = skipWhitespace(text, keyEnd);
        if (text[i] !== ':') return undefined;
        const start = skipWhitespace(text, i + 1);
        const end = valueEnd(text, start);
        if (end < 0) return undefined;
        members.set(name, [start, end]);
        i = skipWhitespace(text, end);
        if (text[i] === ',') { i = skipWhitespace(text, i + 1); continue; }
        if (text[i] === '}') { i++; break; }
        return undefined;
      }
    }
    i = skipWhitespace(text, i);
    if (text[i] === ',') { i = skipWhitespace(text, i + 1); continue; }
    if (text[i] === ']') return skipWhitespace(text, i + 1) === text.length ? out : undefined;
    return undefined;
  }
}

/** The end of the one JSON value starting at `i` (containers skipped whole, iteratively); -1 when none does. */
function valueEnd(text: string, i: number): number {
  const c = text[i];
  if (c !== '{' && c !== '[') return scalarEnd(text, i);
  let depth = 0;
  for (let j = i; j < text.length; j++) {
    const d = text[j];
    if (d === '"') {
      const end = stringEnd(text, j);
      if (end < 0) return -1;
      j = end - 1;
    } else if (d === '{' || d === '[') {
      depth++;
    } else if (d === '}' || d === ']') {
      depth--;
      if (depth === 0) return j + 1;
    }
  }
  return -1;
}

/** A JSON text to be written as it is inside a value written by indentedValue (stored event data, a number kept as its digits). */
export class JsonText {
  constructor(readonly text: string) {}
}

/** A JSON text that parses as it is (written as it was stored: nothing lost to a parse), or the text as a JSON string. */
export function jsonOrText(text: string): JsonText | string {
  try {
    JSON.parse(text);
    return new JsonText(text.trim());
  } catch {
    return text;
  }
}

/**
 * `JSON.stringify(value, null, 2)`, but a JsonText inside is written as its text: numbers beyond
 * a double's precision keep every digit.
 */
export function indentedValue(value: unknown, indent = ''): string {
  if (value instanceof JsonText) return value.text;
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  const inner = `${indent}  `;
  if (Array.isArray(value)) {
    if (value.length === 0) return '[]';
    return `[\n${value.map((v) => inner + indentedValue(v === undefined ? null : v, inner)).join(',\n')}\n${indent}]`;
  }
  const members = Object.entries(value).filter(([, v]) => v !== undefined);
  if (members.length === 0) return '{}';
  return `{\n${members.map(([k, v]) => `${inner}${JSON.stringify(k)}: ${indentedValue(v, inner)}`).join(',\n')}\n${indent}}`;
}
