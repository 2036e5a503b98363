import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { formatUuid, parseUuid } from '../store/index.js';
import { settingsFromBody, settingsJson, type GroupSettings, type NackAction, type PersistentGroup } from '../subscriptions/index.js';
import { link, type FeedModel, type Link } from './atom.js';
import { entriesInMemory, sendFeed } from './send-feed.js';
import { ApiError } from './errors.js';
import { parseJson } from './json-body.js';
import { COMPETING_TYPES, negotiate, requestMediaType } from './media.js';
import { baseUrl, escapeStream } from './urls.js';
import { principalOf, type ApiContext } from './context.js';
import { requireAccess, requireAuthenticated, requireOps } from './guards.js';
import { hangUpSignal, longPollMs } from './long-poll.js';
import { sendJson } from './reply.js';
import { formatted } from './schemas.js';

// The persistent subscriptions API: group management (ops), listings and info (authenticated),
// and the competing-consumer message feed with ack and nack (read access to the stream).

type Params = { stream: string; group: string };
type Query = Record<string, string | undefined>;

/** The stream a group is defined on: not $all, not blank. */
const SOURCE = {
  allOf: [
    { not: { const: '$all' }, errorMessage: 'Persistent subscriptions to $all are only supported over gRPC through gRPC clients' },
    { type: 'string', pattern: '\\S', errorMessage: 'Bad stream name.' },
  ],
};
const MESSAGE_IDS = formatted('uuid-list', 'messageid should be a properly formed guid');
const SCHEMAS = {
  listing: { querystring: { type: 'object', properties: {
    offset: formatted('number-from-0', 'offset must be a non-negative integer'),
    count: formatted('number-from-1', 'count must be a positive integer'),
  } } },
  definition: { params: { type: 'object', properties: { stream: SOURCE } } },
  pull: { params: { type: 'object', properties: {
    count: formatted('message-count', "Message count must be an integer between 1 and 100 'count' ='{value}'"),
  } } },
  settleOne: { params: { type: 'object', properties: { messageid: MESSAGE_IDS } } },
  settleMany: { querystring: { type: 'object', properties: { ids: MESSAGE_IDS } } },
  replay: { querystring: { type: 'object', properties: { stopAt: formatted('long', 'stopAt should be a properly formed positive long') } } },
};
const NACK_ACTIONS: Record<string, NackAction> = { park: 'Park', retry: 'Retry', retyr: 'Retry', skip: 'Skip', stop: 'Stop' };
/** Longest long poll a pull may ask for. */
const MAX_LONG_POLL_SECONDS = 60;

/** The outcome body of a change done, as the established servers write it (a refusal's is written by api/errors.ts). */
function succeeded(reply: FastifyReply): FastifyReply {
  return sendJson(reply, 200, { correlationId: randomUUID(), reason: '', result: 'Success' });
}

function groupUrl(base: string, stream: string, group: string): string {
  return `${base}/subscriptions/${escapeStream(stream)}/${encodeURIComponent(group)}`;
}

/** The parked stream's URL, with the `::` of the group key left readable as the established servers write it. */
function parkedUrl(base: string, g: PersistentGroup): string {
  return `${base}/streams/${escapeStream(g.parked.streamId).replace(/%3A/gi, ':')}`;
}

/**
 * The settings body, read after the route's checks: a blank body of any type means the defaults,
 * and JSON comes with a JSON type or none. The subscriptions' own rules (settingsFromBody) check it.
 */
function settingsOf(req: FastifyRequest): GroupSettings {
  const body = Buffer.isBuffer(req.body) ? req.body : undefined;
  if (!body || body.length === 0 || body.toString('utf8').trim() === '') return settingsFromBody(undefined);
  const type = requestMediaType(req);
  if (type !== undefined && type !== 'application/json' && !type.endsWith('+json')) throw new ApiError('UNSUPPORTED_MEDIA_TYPE');
  return settingsFromBody(parseJson(body, 'The subscription settings are not valid JSON.'));
}

function summary(base: string, g: PersistentGroup): Record<string, unknown> {
  const s = g.statistics;
  const url = groupUrl(base, g.stream, g.name);
  return {
    links: [{ href: `${url}/info`, rel: 'detail' }],
    eventStreamId: g.stream,
    groupName: g.name,
    parkedMessageUri: parkedUrl(base, g),
    getMessagesUri: `${url}/1`,
    status: g.statusText,
    averageItemsPerSecond: s.averagePerSecond,
    totalItemsProcessed: s.totalItems,
    lastProcessedEventNumber: s.lastProcessed,
    lastCheckpointedEventPosition: s.lastCheckpointed >= 0 ? String(s.lastCheckpointed) : null,
    lastKnownEventNumber: s.lastKnown,
    lastKnownEventPosition: s.lastKnown >= 0 ? String(s.lastKnown) : null,
    connectionCount: s.connectionCount,
    totalInFlightMessages: s.totalInFlightMessages,
  };
}

function info(base: string, g: PersistentGroup): Record<string, unknown> {
  const s = g.statistics;
  const { connectionCount: _unused, ...rest } = summary(base, g);
  const url = groupUrl(base, g.stream, g.name);
  return {
    ...rest,
    links: [{ href: `${url}/info`, rel: 'detail' }, { href: `${url}/replayParked`, rel: 'replayParked' }],
    config: settingsJson(g.settings),
    countSinceLastMeasurement: s.countSinceLastMeasurement,
    readBufferCount: s.readBufferCount,
    liveBufferCount: s.liveBufferCount,
    retryBufferCount: s.retryBufferCount,
    outstandingMessagesCount: s.outstandingMessagesCount,
    parkedMessageCount: s.parkedMessageCount,
    oldestParkedMessage: s.oldestParkedMessage,
    connections: [],
  };
}

/** The ids of a `uuid-list` (checked by the route's schema), as the group keys them. */
function messageIds(text: string): string[] {
  return text.split(',').filter((part) => part.trim() !== '').map((part) => parseUuid(part.trim())!.toString('hex'));
}

export function registerSubscriptions(app: FastifyInstance, ctx: ApiContext): void {
  const service = ctx.subscriptions;

  const groupOf = (p: Params): PersistentGroup => {
    const group = service.find(p.stream, p.group);
    if (!group) throw new ApiError('NOT_FOUND');
    return group;
  };

  app.get('/subscriptions', { onRequest: requireAuthenticated, schema: SCHEMAS.listing }, async (req, reply) => {
    const base = baseUrl(req);
    const q = req.query as Query;
    const groups = service.list();
    if (q.offset === undefined && q.count === undefined) return sendJson(reply, 200, groups.map((g) => summary(base, g)));
    const offset = q.offset === undefined ? 0 : Number(q.offset);
    const count = q.count === undefined ? 10 : Number(q.count);
    // Paged over streams, as the established servers page it.
    const streams = [...new Set(groups.map((g) => g.stream))].sort();
    const page = new Set(streams.slice(offset, offset + count));
    const href = (o: number) => `${base}/subscriptions?offset=${o}&count=${count}`;
    const links = [{ href: href(offset), rel: 'self' }, { href: href(0), rel: 'first' }];
    if (offset > 0) links.push({ href: href(Math.max(0, offset - count)), rel: 'previous' });
    if (offset + count < streams.length) links.push({ href: href(offset + count), rel: 'next' });
    return sendJson(reply, 200, {
      links, offset, count, total: streams.length,
      subscriptions: groups.filter((g) => page.has(g.stream)).map((g) => summary(base, g)),
    });
  });

  app.get<{ Params: { stream: string } }>('/subscriptions/:stream', { onRequest: requireAuthenticated }, async (req, reply) => {
    const groups = service.listStream(req.params.stream);
    if (groups.length === 0) throw new ApiError('NOT_FOUND');
    const base = baseUrl(req);
    return sendJson(reply, 200, groups.map((g) => summary(base, g)));
  });

  app.get<{ Params: Params }>('/subscriptions/:stream/:group/info', { onRequest: requireAuthenticated }, async (req, reply) => {
    return sendJson(reply, 200, info(baseUrl(req), groupOf(req.params)));
  });

  /** PUT creates, POST updates: the same settings body, answer and Location. */
  const definition = { onRequest: requireOps, schema: SCHEMAS.definition };
  const define = (apply: typeof service.create) => async (req: FastifyRequest<{ Params: Params }>, reply: FastifyReply) => {
    const { stream, group } = req.params;
    const settings = settingsOf(req);
    reply.header('Location', groupUrl(baseUrl(req), stream, group));
    await apply.call(service, stream, group, settings, principalOf(req).name);
    return succeeded(reply);
  };
  app.put<{ Params: Params }>('/subscriptions/:stream/:group', definition, define(service.create));
  app.post<{ Params: Params }>('/subscriptions/:stream/:group', definition, define(service.update));

  app.delete<{ Params: Params }>('/subscriptions/:stream/:group', definition, async (req, reply) => {
    await service.delete(req.params.stream, req.params.group, principalOf(req).name);
    return succeeded(reply);
  });

  const pull = async (req: FastifyRequest<{ Params: Params & { count?: string } }>, reply: FastifyReply) => {
    const count = req.params.count === undefined ? 1 : Number(req.params.count);
    const mediaType = negotiate(req, COMPETING_TYPES);
    const g = groupOf(req.params);
    requireAccess(ctx, req, 'r', g.stream);
    const waitMs = longPollMs(req, MAX_LONG_POLL_SECONDS);
    const messages = await service.pull(g, count, waitMs, waitMs > 0 ? hangUpSignal(req) : undefined);
    const base = baseUrl(req);
    const url = groupUrl(base, g.stream, g.name);
    const newestFirst = [...messages].reverse();
    const ids = newestFirst.map((m) => formatUuid(Buffer.from(m.id, 'hex')));
    const links: Link[] = [];
    if (ids.length > 0) links.push(link(`${url}/ack?ids=${ids.join(',')}`, 'ackAll'), link(`${url}/nack?ids=${ids.join(',')}`, 'nackAll'));
    links.push(link(`${url}/${count}`, 'previous'), link(url, 'self'));
    const feed: FeedModel = {
      title: `Messages for '${g.stream}/${g.name}'`, id: url, updated: new Date().toISOString(), streamId: null,
      headOfStream: false, selfUrl: null, eTag: null, links,
      entries: newestFirst.map((m) => m.event),
      leases: newestFirst.map((m, i) => ({
        retryCount: m.retryCount,
        links: [link(`${url}/ack/${ids[i]}`, 'ack'), link(`${url}/nack/${ids[i]}`, 'nack')],
      })),
    };
    reply.header('Cache-Control', 'max-age=0, no-cache, must-revalidate');
    return sendFeed(reply, req, base, mediaType, feed, entriesInMemory(feed.entries), { sends: ctx.sends, leases: feed.leases });
  };
  app.get<{ Params: Params }>('/subscriptions/:stream/:group', pull);
  app.get<{ Params: Params & { count: string } }>('/subscriptions/:stream/:group/:count', { schema: SCHEMAS.pull }, pull);

  const settle = (req: FastifyRequest<{ Params: Params & { messageid?: string } }>, reply: FastifyReply, nack: boolean) => {
    const q = req.query as Query;
    const ids = messageIds(req.params.messageid ?? q.ids ?? '');
    const g = groupOf(req.params);
    requireAccess(ctx, req, 'r', g.stream);
    if (nack) g.nack(ids, NACK_ACTIONS[(q.action ?? '').toLowerCase()] ?? 'Unknown', 'Nacked from HTTP');
    else g.ack(ids);
    return reply.code(200).send();
  };
  for (const [verb, nack] of [['ack', false], ['nack', true]] as const) {
    app.post<{ Params: Params & { messageid: string } }>(`/subscriptions/:stream/:group/${verb}/:messageid`,
      { schema: SCHEMAS.settleOne }, async (req, reply) => settle(req, reply, nack));
    app.post<{ Params: Params }>(`/subscriptions/:stream/:group/${verb}`, { schema: SCHEMAS.settleMany }, async (req, reply) => settle(req, reply, nack));
  }

  app.post<{ Params: Params }>('/subscriptions/:stream/:group/replayParked', { onRequest: requireOps, schema: SCHEMAS.replay }, async (req, reply) => {
    const raw = (req.query as Query).stopAt;
    const g = groupOf(req.params);
    g.replayParked(raw === undefined ? undefined : Number(raw));
    return succeeded(reply);
  });
}
