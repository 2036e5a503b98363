import Fastify, { type FastifyInstance } from 'fastify';
import { ANONYMOUS, type Principal } from '../auth/index.js';
import { ApiError, badRequest, errorAnswer, errorBody } from './errors.js';
import { spellings } from './header-spellings.js';
import { AJV_OPTIONS, schemaErrorFormatter } from './schemas.js';
import type { ApiContext } from './context.js';
import { maxAppendBytes } from '../verbs/index.js';
import { registerStreamWrites } from './streams-write.js';
import { registerStreamReads } from './streams-read.js';
import { registerUsers } from './users.js';
import { registerNodeInfo } from './node-info.js';
import { registerProjections } from './projections.js';
import { registerSubscriptions } from './subscriptions.js';
import { registerScavenge } from './scavenge.js';
import { registerBackup } from './backup.js';
import { registerAutoScavenge } from './auto-scavenge.js';
import { registerWeb } from './web.js';
import { registerLeaderRouting, type LeaderRouting } from './leader-routing.js';

// The fastify app: one body parser that keeps raw bytes (a route that takes JSON declares it and
// decodes it, see json-body.ts), request schemas with the API's own 400 messages (schemas.ts),
// authentication before every handler, CORS headers, and the one place errors become answers.

const ALLOW_HEADERS = [
  'Content-Type', 'X-Requested-With', 'X-Forwarded-Host', 'X-Forwarded-Prefix', 'X-PINGOTHER', 'Authorization',
  ...['LongPoll', 'ExpectedVersion', 'EventId', 'EventType', 'RequireLeader', 'RequiresMaster', 'HardDelete', 'ResolveLinkTos']
    .flatMap(spellings),
].join(', ');
const EXPOSE_HEADERS = ['Location', ...['Position', 'CurrentVersion'].flatMap(spellings)].join(', ');
const CORS_HEADERS = {
  'Access-Control-Allow-Origin': '*',
  'Access-Control-Allow-Methods': 'GET, POST, PUT, DELETE, OPTIONS',
  'Access-Control-Allow-Headers': ALLOW_HEADERS,
  'Access-Control-Expose-Headers': EXPOSE_HEADERS,
};

const draining = new WeakSet<FastifyInstance>();

/** One method and URL template the API answers. */
export interface Route {
  readonly method: string;
  readonly url: string;
}

const routeTables = new WeakMap<FastifyInstance, Route[]>();

/** Every route of an app built by buildApp, in registration order (the HEAD twins fastify adds to GETs left out). */
export function routesOf(app: FastifyInstance): readonly Route[] {
  return routeTables.get(app) ?? [];
}

/** From now on responses close their connections; call before `app.close()`. */
export function markDraining(app: FastifyInstance): void {
  draining.add(app);
}

export function buildApp(ctx: ApiContext, options: { https?: Record<string, unknown>; cluster?: LeaderRouting } = {}): FastifyInstance {
  const app = Fastify({
    logger: false,
    bodyLimit: maxAppendBytes(ctx.config.maxAppendSize),
    // Stream and group names travel in the path: fastify's default of 100 characters answered 414
    // for ordinary long names. Node's header limit (16 KiB) bounds the whole request line anyway.
    routerOptions: { maxParamLength: 16 * 1024 },
    ajv: AJV_OPTIONS,
    schemaErrorFormatter,
    ...(options.https ? { https: options.https } : {}),
  } as Record<string, unknown>) as unknown as FastifyInstance;

  // The route table, for the tests and benches that must cover every route (an auth matrix, a soak).
  const routes: Route[] = [];
  routeTables.set(app, routes);
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) if (method !== 'HEAD') routes.push({ method, url: route.url });
  });

  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));

  app.decorateRequest('principal', null as unknown as Principal);
  // A cluster follower forwards what the leader answers before authenticating (the leader does).
  if (options.cluster) registerLeaderRouting(app, options.cluster);
  // Every answer's CORS headers, then who is asking. Every query parameter is one value: a
  // repeated one (`?embed=a&embed=b`) would reach the handlers as an array where they read a
  // string. One hook, in callback form, and no promise for a caller already verified: this runs
  // for every request.
  app.addHook('onRequest', (req, reply, done) => {
    reply.headers(CORS_HEADERS);
    const query = req.query as Record<string, unknown>;
    for (const name in query) {
      if (Array.isArray(query[name])) return done(badRequest(`The query parameter '${name}' is given more than once.`));
    }
    const authorization = req.headers.authorization;
    if (!authorization) {
      req.principal = ANONYMOUS;
      return done();
    }
    const known = ctx.users.verifiedPrincipal(authorization);
    if (known) {
      req.principal = known;
      return done();
    }
    ctx.users.authenticate(authorization).then((result) => {
      if (!result.ok) return done(new ApiError('BAD_CREDENTIALS'));
      req.principal = result.principal;
      done();
    }, done);
  });

  // Request durations for GET /metrics, by the matched route's family (never the URL itself).
  app.addHook('onResponse', (req, reply, done) => {
    ctx.metrics.latency.http(req.routeOptions.url).observe(reply.elapsedTime / 1000);
    ctx.sends.noteAnswered(reply.raw);
    done();
  });

  // While shutting down, every answer closes its connection, so keep-alive clients cannot hold
  // the server open (and the requests in flight still get their answers).
  app.addHook('onSend', (_req, reply, payload, done) => {
    if (draining.has(app)) reply.header('Connection', 'close');
    done(null, payload);
  });

  app.options('*', async (_req, reply) => reply.code(200).send());

  app.setNotFoundHandler(async () => {
    throw new ApiError('NOT_FOUND');
  });

  app.setErrorHandler(async (error, req, reply) => {
    let answer = errorAnswer(error);
    if (!answer) {
      ctx.node.stats.countException();
      ctx.log.error({ err: error, url: req.url, method: req.method }, 'request failed');
      answer = new ApiError('INTERNAL');
    }
    if (answer.reason) reply.raw.statusMessage = answer.reason;
    reply.code(answer.status).headers(answer.headers);
    const body = errorBody(answer);
    return body ? reply.type(body.type).send(body.text) : reply.send();
  });

  registerStreamWrites(app, ctx);
  registerStreamReads(app, ctx);
  registerUsers(app, ctx);
  registerNodeInfo(app, ctx);
  registerProjections(app, ctx);
  registerSubscriptions(app, ctx);
  registerScavenge(app, ctx);
  registerBackup(app, ctx);
  registerAutoScavenge(app, ctx);
  registerWeb(app);
  return app;
}
