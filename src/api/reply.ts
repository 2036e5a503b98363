import type { FastifyReply } from 'fastify';

// Bodies that are neither feeds nor events: text, and JSON indented by two spaces as the
// established servers write it (their clients, and our tests, read it byte for byte).

export function sendText(reply: FastifyReply, status: number, text: string): FastifyReply {
  return reply.code(status).type('text/plain; charset=utf-8').send(text);
}

export function sendJson(reply: FastifyReply, status: number, body: unknown): FastifyReply {
  return reply.code(status).type('application/json; charset=utf-8').send(JSON.stringify(body, null, 2));
}
