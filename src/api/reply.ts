import type { FastifyReply } from 'fastify';

// Bodies that are neither feeds nor events: text, and JSON indented by two spaces as the
// established servers write it (their clients, and our tests, read it byte for byte).

export function sendText(reply: FastifyReply, status: number, text: string): FastifyReply {
  return reply.code(status).type('text/plain; charset=utf-8').send(text);
}

export function sendJson(reply: FastifyReply, status: number, body: unknown): FastifyReply {
  return reply.code(status).type('application/json; charset=utf-8').send(JSON.stringify(body, null, 2));
}

/** A JSON text to be written into a JSON body as it is (a stored event's data: nothing lost to a parse). */
export class RawJson {
  constructor(readonly text: string) {}
}

/** A JSON text that parses as it is, or the text as a JSON string. */
export function jsonOrText(text: string): RawJson | string {
  try {
    JSON.parse(text);
    return new RawJson(text.trim());
  } catch {
    return text;
  }
}

/**
 * `JSON.stringify(value, null, 2)`, but a RawJson inside is written as its text (compact, as it
 * was stored): numbers beyond a double's precision keep every digit.
 */
export function indentedJson(value: unknown, indent = ''): string {
  if (value instanceof RawJson) return value.text;
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  const inner = `${indent}  `;
  if (Array.isArray(value)) {
    if (value.length === 0) return '[]';
    return `[\n${value.map((v) => inner + indentedJson(v === undefined ? null : v, inner)).join(',\n')}\n${indent}]`;
  }
  const members = Object.entries(value).filter(([, v]) => v !== undefined);
  if (members.length === 0) return '{}';
  return `{\n${members.map(([k, v]) => `${inner}${JSON.stringify(k)}: ${indentedJson(v, inner)}`).join(',\n')}\n${indent}}`;
}
