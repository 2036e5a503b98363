import type { FastifyReply } from 'fastify';
import { JsonText } from './json-indent.js';

// Bodies that are neither feeds nor events: text, and JSON indented by two spaces as the
// established servers write it (their clients, and our tests, read it byte for byte).

export function sendText(reply: FastifyReply, status: number, text: string): FastifyReply {
  return reply.code(status).type('text/plain; charset=utf-8').send(text);
}

export function sendJson(reply: FastifyReply, status: number, body: unknown): FastifyReply {
  return reply.code(status).type('application/json; charset=utf-8').send(JSON.stringify(body, null, 2));
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
