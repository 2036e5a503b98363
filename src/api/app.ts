import Fastify, { type FastifyError, type FastifyInstance } from 'fastify';
import { InvalidWriteError, StoreClosedError, StreamDeletedError, WrongExpectedVersionError } from '../store/index.js';
import { ANONYMOUS, type Principal } from '../auth/principal.js';
import { API_ERRORS, ApiError } from './errors.js';
import { currentVersionHeaders } from './headers.js';
import type { ApiContext } from './context.js';
import { registerStreamWrites } from './streams-write.js';
import { registerStreamReads } from './streams-read.js';
import { registerUsers } from './users.js';
import { registerNodeInfo } from './node-info.js';
import { registerProjections } from './projections.js';
import { registerSubscriptions } from './subscriptions.js';
import { ProjectionError } from '../projections/manager.js';
import { QuerySyntaxError } from '../projections/validate.js';

// The fastify app: one body parser that keeps raw bytes (routes decide what a body means),
// authentication before every handler, CORS headers, and the one place errors become answers.

const BAD_CREDENTIALS_CHALLENGE = 'X-Basic realm="SVC"';
const ALLOW_HEADERS = [
  'Content-Type', 'X-Requested-With', 'X-Forwarded-Host', 'X-Forwarded-Prefix', 'X-PINGOTHER', 'Authorization',
  ...['LongPoll', 'ExpectedVersion', 'EventId', 'EventType', 'RequireLeader', 'RequiresMaster', 'HardDelete', 'ResolveLinkTos']
    .flatMap((h) => [`SVC-${h}`, `Kurrent-${h}`, `ES-${h}`]),
].join(', ');
const EXPOSE_HEADERS = ['Location', ...['Position', 'CurrentVersion'].flatMap((h) => [`SVC-${h}`, `Kurrent-${h}`, `ES-${h}`])].join(', ');

const draining = new WeakSet<FastifyInstance>();

/** From now on responses close their connections; call before `app.close()`. */
export function markDraining(app: FastifyInstance): void {
  draining.add(app);
}

export function buildApp(ctx: ApiContext, options: { https?: Record<string, unknown> } = {}): FastifyInstance {
  const app = Fastify({
    logger: false,
    bodyLimit: Math.max(64 * 1024 * 1024, ctx.config.maxAppendSize * 4),
    // Stream and group names travel in the path: fastify's default of 100 characters answered 414
    // for ordinary long names. Node's header limit (16 KiB) bounds the whole request line anyway.
    routerOptions: { maxParamLength: 16 * 1024 },
    ...(options.https ? { https: options.https } : {}),
  } as Record<string, unknown>) as unknown as FastifyInstance;

  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));

  app.decorateRequest('principal', null as unknown as Principal);
  app.addHook('onRequest', async (req, reply) => {
    reply.header('Access-Control-Allow-Origin', '*');
    reply.header('Access-Control-Allow-Methods', 'GET, POST, PUT, DELETE, OPTIONS');
    reply.header('Access-Control-Allow-Headers', ALLOW_HEADERS);
    reply.header('Access-Control-Expose-Headers', EXPOSE_HEADERS);
    const authorization = req.headers.authorization;
    if (!authorization) {
      req.principal = ANONYMOUS;
      return;
    }
    const result = await ctx.users.authenticate(authorization);
    if (!result.ok) {
      throw new ApiError('UNAUTHORIZED', '', { 'WWW-Authenticate': BAD_CREDENTIALS_CHALLENGE });
    }
    req.principal = result.principal;
  });

  // While shutting down, every answer closes its connection, so keep-alive clients cannot hold
  // the server open (and the requests in flight still get their answers).
  app.addHook('onSend', async (_req, reply) => {
    if (draining.has(app)) reply.header('Connection', 'close');
  });

  app.options('*', async (_req, reply) => reply.code(200).send());

  app.setNotFoundHandler(async (_req, reply) => {
    reply.raw.statusMessage = 'Not Found';
    return reply.code(404).send();
  });

  app.setErrorHandler(async (error: FastifyError | Error, req, reply) => {
    if (error instanceof ApiError) {
      reply.raw.statusMessage = error.reason;
      reply.headers(error.headers).code(error.status);
      return error.message ? reply.type('text/plain; charset=utf-8').send(error.message) : reply.send();
    }
    if (error instanceof ProjectionError) {
      const status = error.kind === 'NotFound' ? 404 : error.kind === 'Conflict' ? 409 : 400;
      return reply.code(status).type('text/plain; charset=utf-8').send(error.message);
    }
    if (error instanceof QuerySyntaxError) return reply.code(400).type('text/plain; charset=utf-8').send(error.message);
    if (error instanceof WrongExpectedVersionError) {
      reply.raw.statusMessage = 'Wrong expected EventNumber';
      return reply.code(400).headers(currentVersionHeaders(error.currentVersion)).send();
    }
    if (error instanceof StreamDeletedError) {
      reply.raw.statusMessage = 'Stream deleted';
      return reply.code(410).send();
    }
    if (error instanceof InvalidWriteError) {
      // The store's write door refused it: too large is 413 as at the HTTP door, any other rule 400.
      const code = error.rule === 'event-size' ? 'PAYLOAD_TOO_LARGE' : 'BAD_REQUEST';
      const status = API_ERRORS[code];
      reply.raw.statusMessage = status.reason;
      return reply.code(status.status).type('text/plain; charset=utf-8').send(error.message);
    }
    if (error instanceof StoreClosedError) {
      reply.raw.statusMessage = 'Server Is Not Ready';
      return reply.code(503).type('text/plain; charset=utf-8').send(error.message);
    }
    const fastifyError = error as FastifyError;
    if (fastifyError.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
      return reply.code(413).type('text/plain; charset=utf-8').send('Too large events received.');
    }
    if (fastifyError.statusCode && fastifyError.statusCode < 500) {
      return reply.code(fastifyError.statusCode).type('text/plain; charset=utf-8').send(fastifyError.message);
    }
    ctx.node.stats.countException();
    ctx.log.error({ err: error, url: req.url, method: req.method }, 'request failed');
    return reply.code(500).type('text/plain; charset=utf-8').send('Internal error.');
  });

  registerStreamWrites(app, ctx);
  registerStreamReads(app, ctx);
  registerUsers(app, ctx);
  registerNodeInfo(app, ctx);
  registerProjections(app, ctx);
  registerSubscriptions(app, ctx);
  return app;
}
