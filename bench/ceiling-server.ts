import { readFileSync } from 'node:fs';
import Fastify from 'fastify';

// The ceiling: bare fastify on the same routes, doing no work beyond HTTP. Whatever the node
// reaches is measured against this, so the ratio shows what the store and API layers cost.
// Usage: node ceiling-server.js [--get-body FILE --get-type TYPE] [--get-event-body FILE --get-event-type TYPE] --http-port PORT

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

const port = Number(arg('--http-port'));
// A real page and a real event captured from the node, so the response bytes on the wire match.
const answer = (file: string | undefined, type: string | undefined) =>
  ({ body: file ? readFileSync(file, 'utf8') : '{}', type: type ?? 'application/json; charset=utf-8' });
const page = answer(arg('--get-body'), arg('--get-type'));
const event = answer(arg('--get-event-body'), arg('--get-event-type'));

const app = Fastify({ logger: false, bodyLimit: 64 * 1024 * 1024 });
// Like the node: accept any content type and keep the raw bytes, so the body is still received in full.
app.removeAllContentTypeParsers();
app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));

app.post('/streams/:stream', async (_req, reply) => reply.code(201).send());
app.get('/streams/:stream/:event/forward/:count', async (_req, reply) => reply.type(page.type).send(page.body));
app.get('/streams/:stream/:event', async (_req, reply) => reply.type(event.type).send(event.body));

await app.listen({ host: '127.0.0.1', port });

process.once('SIGTERM', () => {
  app.close().then(() => process.exit(0), () => process.exit(1));
});
