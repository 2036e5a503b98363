import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { formatUuid, parseUuid } from '../store/index.js';
import { settingsFromBody, settingsJson, type GroupSettings } from '../subscriptions/index.js';
import type { ConnectionInfo, GroupInfo, NackAction } from '../verbs/index.js';
import { link, type FeedModel, type Link } from './atom.js';
import { entriesInMemory, sendFeed } from './send-feed.js';
import { ApiError } from './errors.js';
import { parseJson } from './json-body.js';
import { COMPETING_TYPES, negotiate, requestMediaType } from './media.js';
import { baseUrl, escapeStream } from './urls.js';
import { principalOf, type ApiContext } from './context.js';
import { hangUpSignal, longPollMs } from './long-poll.js';
import { sendJson } from './reply.js';
import { formatted } from './schemas.js';

// The persistent subscriptions API: group management, listings and info, the competing-consumer
// message feed with ack and nack, and a restart of the subsystem. Who may do what, the settings'
// rules and the groups themselves are the verbs' (verbs/persistent.ts, shared with the gRPC door);
// this file reads HTTP and writes the established servers' JSON and feeds.

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
function parkedUrl(base: string, g: GroupInfo): string {
  return `${base}/streams/${escapeStream(g.parkedStream).replace(/%3A/gi, ':')}`;
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

function summary(base: string, g: GroupInfo): Record<string, unknown> {
  const url = groupUrl(base, g.source, g.group);
  return {
    links: [{ href: `${url}/info`, rel: 'detail' }],
    eventStreamId: g.source,
    groupName: g.group,
    parkedMessageUri: parkedUrl(base, g),
    getMessagesUri: `${url}/1`,
    status: g.status,
    averageItemsPerSecond: g.averagePerSecond,
    totalItemsProcessed: g.totalItems,
    lastProcessedEventNumber: g.lastProcessed,
    lastCheckpointedEventPosition: g.lastCheckpointedPosition ?? null,
    lastKnownEventNumber: g.lastKnown,
    lastKnownEventPosition: g.lastKnownPosition ?? null,
    connectionCount: g.connections.length,
    totalInFlightMessages: g.totalInFlightMessages,
  };
}

function info(base: string, g: GroupInfo): Record<string, unknown> {
  const { connectionCount: _unused, ...rest } = summary(base, g);
  const url = groupUrl(base, g.source, g.group);
  return {
    ...rest,
    links: [{ href: `${url}/info`, rel: 'detail' }, { href: `${url}/replayParked`, rel: 'replayParked' }],
    config: settingsJson(g.settings, g.startFrom),
    countSinceLastMeasurement: g.countSinceLastMeasurement,
    readBufferCount: g.readBufferCount,
    liveBufferCount: g.liveBufferCount,
    retryBufferCount: g.retryBufferCount,
    outstandingMessagesCount: g.outstandingMessagesCount,
    parkedMessageCount: g.parkedMessageCount,
    oldestParkedMessage: g.oldestParkedMessage,
    connections: g.connections.map(connection),
  };
}

/** A push consumer as the established servers' /info lists it. */
function connection(c: ConnectionInfo): Record<string, unknown> {
  return {
    from: c.from, username: c.username, averageItemsPerSecond: c.averageItemsPerSecond, totalItemsProcessed: c.totalItems,
    countSinceLastMeasurement: c.countSinceLastMeasurement, extraStatistics: c.observedMeasurements,
    availableSlots: c.availableSlots, inFlightMessages: c.inFlightMessages, connectionName: c.connectionName,
  };
}

/** The ids of a `uuid-list` (checked by the route's schema), as the group keys them. */
function messageIds(text: string): string[] {
  return text.split(',').filter((part) => part.trim() !== '').map((part) => parseUuid(part.trim())!.toString('hex'));
}

export function registerSubscriptions(app: FastifyInstance, ctx: ApiContext): void {
  const groups = ctx.verbs.persistent;

  app.get('/subscriptions', { schema: SCHEMAS.listing }, async (req, reply) => {
    const base = baseUrl(req);
    const q = req.query as Query;
    const all = groups.list(principalOf(req));
    if (q.offset === undefined && q.count === undefined) return sendJson(reply, 200, all.map((g) => summary(base, g)));
    const offset = q.offset === undefined ? 0 : Number(q.offset);
    const count = q.count === undefined ? 10 : Number(q.count);
    // Paged over streams, as the established servers page it.
    const streams = [...new Set(all.map((g) => g.source))].sort();
    const page = new Set(streams.slice(offset, offset + count));
    const href = (o: number) => `${base}/subscriptions?offset=${o}&count=${count}`;
    const links = [{ href: href(offset), rel: 'self' }, { href: href(0), rel: 'first' }];
    if (offset > 0) links.push({ href: href(Math.max(0, offset - count)), rel: 'previous' });
    if (offset + count < streams.length) links.push({ href: href(offset + count), rel: 'next' });
    return sendJson(reply, 200, {
      links, offset, count, total: streams.length,
      subscriptions: all.filter((g) => page.has(g.source)).map((g) => summary(base, g)),
    });
  });

  app.get<{ Params: { stream: string } }>('/subscriptions/:stream', async (req, reply) => {
    const base = baseUrl(req);
    return sendJson(reply, 200, groups.list(principalOf(req), req.params.stream).map((g) => summary(base, g)));
  });

  app.get<{ Params: Params }>('/subscriptions/:stream/:group/info', async (req, reply) => {
    return sendJson(reply, 200, info(baseUrl(req), groups.info(principalOf(req), req.params.stream, req.params.group)));
  });

  /** PUT creates, POST updates: the same settings body, answer and Location. */
  const definition = { schema: SCHEMAS.definition };
  /** The settings body, once the caller may: every answer from there on names the group (Location), refusals too. */
  const definitionOf = (req: FastifyRequest<{ Params: Params }>, reply: FastifyReply) => (): GroupSettings => {
    reply.header('Location', groupUrl(baseUrl(req), req.params.stream, req.params.group));
    return settingsOf(req);
  };
  app.put<{ Params: Params }>('/subscriptions/:stream/:group', definition, async (req, reply) => {
    const settings = definitionOf(req, reply);
    await groups.create(principalOf(req), req.params.stream, req.params.group, () => ({ settings: settings() }));
    return succeeded(reply);
  });
  app.post<{ Params: Params }>('/subscriptions/:stream/:group', definition, async (req, reply) => {
    await groups.update(principalOf(req), req.params.stream, req.params.group, definitionOf(req, reply));
    return succeeded(reply);
  });

  app.delete<{ Params: Params }>('/subscriptions/:stream/:group', definition, async (req, reply) => {
    await groups.delete(principalOf(req), req.params.stream, req.params.group);
    return succeeded(reply);
  });

  app.post('/subscriptions/restart', async (req, reply) => {
    await groups.restart(principalOf(req));
    return succeeded(reply);
  });

  const pull = async (req: FastifyRequest<{ Params: Params & { count?: string } }>, reply: FastifyReply) => {
    const count = req.params.count === undefined ? 1 : Number(req.params.count);
    const mediaType = negotiate(req, COMPETING_TYPES);
    const { stream, group } = req.params;
    const waitMs = longPollMs(req, MAX_LONG_POLL_SECONDS);
    const messages = await groups.pull(principalOf(req), stream, group, count, waitMs, waitMs > 0 ? hangUpSignal(req) : undefined);
    const base = baseUrl(req);
    const url = groupUrl(base, stream, group);
    const newestFirst = [...messages].reverse();
    const ids = newestFirst.map((m) => formatUuid(Buffer.from(m.id, 'hex')));
    const links: Link[] = [];
    if (ids.length > 0) links.push(link(`${url}/ack?ids=${ids.join(',')}`, 'ackAll'), link(`${url}/nack?ids=${ids.join(',')}`, 'nackAll'));
    links.push(link(`${url}/${count}`, 'previous'), link(url, 'self'));
    const feed: FeedModel = {
      title: `Messages for '${stream}/${group}'`, id: url, updated: new Date().toISOString(), streamId: null,
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
    const { stream, group } = req.params;
    if (nack) groups.nack(principalOf(req), stream, group, ids, NACK_ACTIONS[(q.action ?? '').toLowerCase()] ?? 'Unknown', 'Nacked from HTTP');
    else groups.ack(principalOf(req), stream, group, ids);
    return reply.code(200).send();
  };
  for (const [verb, nack] of [['ack', false], ['nack', true]] as const) {
    app.post<{ Params: Params & { messageid: string } }>(`/subscriptions/:stream/:group/${verb}/:messageid`,
      { schema: SCHEMAS.settleOne }, async (req, reply) => settle(req, reply, nack));
    app.post<{ Params: Params }>(`/subscriptions/:stream/:group/${verb}`, { schema: SCHEMAS.settleMany }, async (req, reply) => settle(req, reply, nack));
  }

  app.post<{ Params: Params }>('/subscriptions/:stream/:group/replayParked', { schema: SCHEMAS.replay }, async (req, reply) => {
    const raw = (req.query as Query).stopAt;
    groups.replayParked(principalOf(req), req.params.stream, req.params.group, raw === undefined ? undefined : Number(raw));
    return succeeded(reply);
  });
}
