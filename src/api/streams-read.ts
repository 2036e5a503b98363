import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  isMetastream, metastreamOf, originalOf,
  type EventRecord, type ResolvedEvent, type StreamPage,
} from '../store/index.js';
import { ApiError } from './errors.js';
import { booleanHeader } from './headers.js';
import { EVENT_TYPES, FEED_TYPES, MEDIA, negotiate } from './media.js';
import {
  contentJson, contentOf, EMPTY_UPDATED, entryJson, entryXml, formatUpdated, link, parseEmbed, simpleXml,
  type FeedModel, type Link,
} from './atom.js';
import { applyCaching, etagOf, type Cacheability } from './caching.js';
import { sendFeed, storedPage } from './send-feed.js';
import { baseUrl, streamUrl } from './urls.js';
import { principalOf, type ApiContext } from './context.js';
import { longPollMs, readWithLongPoll } from './long-poll.js';
import { ALL_STREAM } from '../auth/index.js';
import { readAll } from './all.js';
import { describeStream } from './description.js';
import { formatted, headOr, MAX_PAGE, metadataOwner, STREAM_NAME } from './schemas.js';

// Reads of streams: Atom feed pages (backward, forward, head), single events, and metadata.

const DEFAULT_PAGE = 20;

const EVENT_NUMBER = formatted('event-number', "'{value}' is not valid event number");
const ALL_POSITION = formatted('all-position', 'Invalid position argument: {value}');
const COUNT = {
  allOf: [
    formatted('page-size', "'{value}' is not valid count. Should be positive integer"),
    formatted('page-limit', `Read size too big, should be less than ${MAX_PAGE} items`),
  ],
};
const IS_ALL = { properties: { stream: { const: ALL_STREAM } } };
const STREAM_PARAMS = { type: 'object', properties: { stream: STREAM_NAME } };

/** A page: of a stream from an event number, of $all from a position (checked after the count); only backward from the head. */
function pageParams(direction: 'backward' | 'forward') {
  const from = (schema: typeof EVENT_NUMBER) => (direction === 'backward' ? headOr(schema) : schema);
  return {
    type: 'object',
    allOf: [
      { properties: { stream: STREAM_NAME } },
      { if: IS_ALL, then: { properties: { count: COUNT, event: from(ALL_POSITION) } }, else: { properties: { event: from(EVENT_NUMBER), count: COUNT } } },
    ],
  };
}

/** One event of a stream (of $all there is none: 404). */
const EVENT_PARAMS = {
  type: 'object',
  allOf: [{ properties: { stream: STREAM_NAME } }, { if: IS_ALL, else: { properties: { event: headOr(EVENT_NUMBER) } } }],
};

const METADATA_PARAMS = {
  type: 'object',
  properties: { stream: metadataOwner('Metadata of a metadata stream cannot be read this way.'), event: headOr(EVENT_NUMBER) },
};

function newestUpdated(entries: ResolvedEvent[]): string {
  return entries.length > 0 ? formatUpdated(originalOf(entries[0]).created) : EMPTY_UPDATED;
}

interface PageRequest { streamId: string; from: number; count: number; direction: 'backward' | 'forward'; head: boolean }

function feedFor(base: string, r: PageRequest, page: Extract<StreamPage, { status: 'ok' }>, etag: string | null): FeedModel {
  const url = streamUrl(base, r.streamId);
  const last = page.lastEventNumber;
  const c = r.count;
  const links: Link[] = [link(url, 'self'), link(`${url}/head/backward/${c}`, 'first')];
  // Entries are newest first on every page.
  const entries = r.direction === 'backward' ? page.events : [...page.events].reverse();
  if (r.direction === 'backward') {
    const from = r.head ? last : r.from;
    if (!page.isEndOfStream) {
      links.push(link(`${url}/0/forward/${c}`, 'last'), link(`${url}/${Math.max(from - c, 0)}/backward/${c}`, 'next'));
    }
    links.push(link(`${url}/${Math.min(from, last) + 1}/forward/${c}`, 'previous'));
  } else {
    if (r.from > 0) links.push(link(`${url}/0/forward/${c}`, 'last'), link(`${url}/${r.from - 1}/backward/${c}`, 'next'));
    const emptyAtEnd = page.events.length === 0 && r.from > last;
    if (!emptyAtEnd) links.push(link(`${url}/${Math.min(r.from + c - 1, last) + 1}/forward/${c}`, 'previous'));
  }
  if (!isMetastream(r.streamId)) links.push(link(`${url}/metadata`, 'metadata'));
  const oldestFirst = r.direction === 'forward' && entries.length > 0;
  return {
    title: `Event stream '${r.streamId}'`,
    id: url,
    updated: oldestFirst ? formatUpdated(originalOf(entries[entries.length - 1]).created) : newestUpdated(entries),
    streamId: r.streamId,
    headOfStream: r.direction === 'backward' ? r.head : page.isEndOfStream,
    selfUrl: r.direction === 'backward' ? url : null,
    eTag: etag,
    links,
    entries,
  };
}

function cacheabilityOf(r: PageRequest, page: Extract<StreamPage, { status: 'ok' }>, metadataVersion: number): Cacheability {
  const last = page.lastEventNumber;
  const immutable = r.direction === 'backward' ? !r.head && r.from <= last : last + 1 >= r.from + r.count;
  return immutable ? { immutable: true } : { immutable: false, version: last, maxAge: page.metadata.cacheControl, metadataVersion };
}

async function readPage(ctx: ApiContext, req: FastifyRequest, reply: FastifyReply, r: PageRequest, mediaType: string) {
  const who = principalOf(req);
  const resolveLinks = booleanHeader(req, 'ResolveLinkTos', true);
  // A big page is read in one go (a stream's index gives its records' places, which are then read
  // together), in its turn: 1,000 events of 5 KB take ~10 ms when not cached.
  const read = () => ctx.sends.forPage(r.count, () =>
    ctx.verbs.streams.readStream(who, r.streamId, r.direction === 'backward' && r.head ? -1 : r.from, r.count, r.direction, resolveLinks));
  const page = await readWithLongPoll(req, ctx.store.bus, r.direction === 'forward' ? longPollMs(req) : 0, read,
    (p) => p.status === 'noStream' || (p.status === 'ok' && p.events.length === 0),
    (rec) => rec.streamId === r.streamId || rec.streamId === metastreamOf(r.streamId));
  if (page.status === 'deleted') throw new ApiError('DELETED');
  if (page.status === 'noStream') throw new ApiError('NOT_FOUND');
  const metadataVersion = ctx.store.streamInfo(metastreamOf(r.streamId))?.lastEventNumber ?? -1;
  const cache = cacheabilityOf(r, page, metadataVersion);
  if (applyCaching(req, reply, mediaType, cache, ctx.config.disableHttpCaching)) return reply;
  const base = baseUrl(req);
  const etag = r.direction === 'backward' && r.head ? etagOf(page.lastEventNumber, mediaType, metadataVersion) : null;
  const feed = feedFor(base, r, page, etag);
  return sendFeed(reply, req, base, mediaType, feed, storedPage(ctx, feed.entries, resolveLinks), { sends: ctx.sends });
}

/** Negotiates a feed type; on the backward stream routes a description-document choice answers it. */
function feedType(ctx: ApiContext, req: FastifyRequest, reply: FastifyReply, streamId: string, describable: boolean): string | undefined {
  const mediaType = negotiate(req, FEED_TYPES);
  if (mediaType !== MEDIA.streamDescK && mediaType !== MEDIA.streamDescL) return mediaType;
  if (!describable) return MEDIA.json;
  const explicit = (req.headers.accept ?? '').includes('streamdesc');
  if (!explicit) reply.raw.statusMessage = 'Not Acceptable';
  else reply.raw.statusMessage = 'Description Document';
  reply.code(explicit ? 200 : 406).type(`${mediaType}; charset=utf-8`)
    .send(JSON.stringify(describeStream(streamId, mediaType, ctx.subscriptions.listStream(streamId).map((g) => g.name)), null, 2));
  return undefined;
}

function formatBody(record: EventRecord): string {
  return record.isJson ? record.data.toString('utf8') : JSON.stringify(record.data.toString('utf8'));
}

/** One event in the negotiated representation. */
function sendEvent(reply: FastifyReply, req: FastifyRequest, base: string, mediaType: string, e: ResolvedEvent): FastifyReply {
  const event = e.event!;
  const typed = (t: string) => reply.type(t.startsWith('application/octet') ? t : `${t}; charset=utf-8`);
  switch (mediaType) {
    case MEDIA.atomXml:
      return typed(mediaType).send(entryXml(base, e));
    case MEDIA.atomJsonK: case MEDIA.atomJsonL: {
      const embed = parseEmbed((req.query as Record<string, string | undefined>).embed);
      return typed(mediaType).send(entryJson(base, e, embed, true));
    }
    case MEDIA.json:
      return typed(mediaType).send(formatBody(event));
    case MEDIA.eventJsonK: case MEDIA.eventJsonL:
      return typed(mediaType).send(contentJson(event));
    case MEDIA.textXml: case MEDIA.appXml:
      return typed(mediaType).send(simpleXml('data', contentOf(event).data));
    case MEDIA.eventXml:
      return typed(mediaType).send(simpleXml('event', contentOf(event)));
    default:
      return typed(MEDIA.octet).send(event.data);
  }
}

async function readSingle(ctx: ApiContext, req: FastifyRequest, reply: FastifyReply, streamId: string, which: string) {
  const mediaType = negotiate(req, EVENT_TYPES);
  const who = principalOf(req);
  const head = which === 'head';
  const eventNumber = head ? -1 : Number(which);
  const found = ctx.verbs.streams.readEvent(who, streamId, eventNumber, booleanHeader(req, 'ResolveLinkTos', true));
  if (found.status === 'deleted') throw new ApiError('DELETED');
  if (found.status !== 'ok' || !found.event.event) throw new ApiError('NOT_FOUND');
  const cache: Cacheability = head
    ? { immutable: false, version: found.event.event.eventNumber, maxAge: found.metadata.cacheControl }
    : { immutable: true };
  if (applyCaching(req, reply, mediaType, cache, ctx.config.disableHttpCaching)) return reply;
  return sendEvent(reply, req, baseUrl(req), mediaType, found.event);
}

async function readMetadata(ctx: ApiContext, req: FastifyRequest, reply: FastifyReply, streamId: string, which?: string) {
  const mediaType = negotiate(req, EVENT_TYPES);
  const meta = metastreamOf(streamId);
  const found = ctx.verbs.streams.readEvent(principalOf(req), meta, which === undefined || which === 'head' ? -1 : Number(which), false);
  if (found.status === 'deleted') throw new ApiError('DELETED');
  if (found.status === 'ok' && found.event.event) {
    applyCaching(req, reply, mediaType, { immutable: false, version: found.event.event.eventNumber }, true);
    return sendEvent(reply, req, baseUrl(req), mediaType, found.event);
  }
  const info = ctx.store.streamInfo(streamId);
  if (which === undefined && info && info.lastEventNumber >= 0 && !info.tombstoned) {
    // The stream exists but has no metadata: an empty document.
    reply.header('Cache-Control', 'max-age=0, no-cache, must-revalidate').header('Vary', 'Accept');
    if (mediaType.includes('xml')) return reply.type(`${mediaType}; charset=utf-8`).send('');
    return reply.type(`${mediaType}; charset=utf-8`).send('{}');
  }
  if (info?.tombstoned) throw new ApiError('DELETED');
  throw new ApiError('NOT_FOUND');
}

type P = { stream: string; event: string; count: string };

export function registerStreamReads(app: FastifyInstance, ctx: ApiContext): void {
  app.get<{ Params: P }>('/streams/:stream', { schema: { params: STREAM_PARAMS } }, async (req, reply) => {
    const streamId = req.params.stream;
    if (streamId === ALL_STREAM) return readAll(ctx, req, reply, { position: 'head', count: DEFAULT_PAGE, direction: 'backward' });
    const mediaType = feedType(ctx, req, reply, streamId, true);
    if (!mediaType) return reply;
    return readPage(ctx, req, reply, { streamId, from: -1, count: DEFAULT_PAGE, direction: 'backward', head: true }, mediaType);
  });

  const metadata = { schema: { params: METADATA_PARAMS } };
  app.get<{ Params: P }>('/streams/:stream/metadata', metadata, async (req, reply) => readMetadata(ctx, req, reply, req.params.stream));
  app.get<{ Params: P }>('/streams/:stream/metadata/:event', metadata, async (req, reply) =>
    readMetadata(ctx, req, reply, req.params.stream, req.params.event));

  app.get<{ Params: P }>('/streams/:stream/:event', { schema: { params: EVENT_PARAMS } }, async (req, reply) => {
    const { stream: streamId, event } = req.params;
    if (streamId === ALL_STREAM) throw new ApiError('NOT_FOUND');
    return readSingle(ctx, req, reply, streamId, event);
  });

  const page = (direction: 'backward' | 'forward', describable: boolean) => ({
    schema: { params: pageParams(direction) },
    handler: async (req: FastifyRequest<{ Params: P }>, reply: FastifyReply) => {
      const { stream: streamId, event, count } = req.params;
      if (streamId === ALL_STREAM) return readAll(ctx, req, reply, { position: event, count: Number(count), direction });
      const mediaType = feedType(ctx, req, reply, streamId, describable);
      if (!mediaType) return reply;
      const head = event === 'head';
      return readPage(ctx, req, reply, { streamId, from: head ? -1 : Number(event), count: Number(count), direction, head }, mediaType);
    },
  });
  app.get('/streams/:stream/:event/:count', page('backward', true));
  app.get('/streams/:stream/:event/backward/:count', page('backward', true));
  app.get('/streams/:stream/:event/forward/:count', page('forward', false));
}
