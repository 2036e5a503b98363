import type { FastifyReply, FastifyRequest } from 'fastify';
import { originalOf } from '../store/index.js';
import { booleanHeader } from './headers.js';
import { FEED_TYPES, MEDIA, negotiate } from './media.js';
import { EMPTY_UPDATED, formatUpdated, link, sendFeed, type FeedModel, type Link } from './atom.js';
import { applyCaching, type Cacheability } from './caching.js';
import { baseUrl, formatAllPosition, parseAllPosition, streamUrl } from './urls.js';
import { principalOf, type ApiContext } from './context.js';
import { longPollMs, readWithLongPoll } from './long-poll.js';
import { ALL_STREAM } from '../auth/index.js';

// GET /streams/$all: the whole log by position, for authenticated users the $all ACL admits.
// The stream read routes take $all pages too (their schema checks the position) and hand them here.

export interface AllRequest { position: string; count: number; direction: 'backward' | 'forward' }

const ZEROS = formatAllPosition(0);

export async function readAll(ctx: ApiContext, req: FastifyRequest, reply: FastifyReply, r: AllRequest) {
  let mediaType = negotiate(req, FEED_TYPES);
  if (mediaType === MEDIA.streamDescK || mediaType === MEDIA.streamDescL) mediaType = MEDIA.json;
  const head = r.position === 'head';
  const position = head ? ctx.store.headPosition : parseAllPosition(r.position)!; // the route's schema checked it
  const resolveLinks = booleanHeader(req, 'ResolveLinkTos', false);

  const read = () => ctx.verbs.streams.readAll(principalOf(req), position, r.count, r.direction, resolveLinks);
  const page = await readWithLongPoll(req, ctx.store.bus, r.direction === 'forward' ? longPollMs(req) : 0, read,
    (p) => p.events.length === 0, () => true);

  const headPosition = ctx.store.headPosition;
  const immutable = r.direction === 'backward' ? !head : page.events.length === r.count;
  const cache: Cacheability = immutable ? { immutable: true } : { immutable: false, version: headPosition };
  if (applyCaching(req, reply, mediaType, cache, ctx.config.disableHttpCaching)) return reply;

  const base = baseUrl(req);
  const url = streamUrl(base, ALL_STREAM);
  const c = r.count;
  const links: Link[] = [link(url, 'self'), link(`${url}/head/backward/${c}`, 'first')];
  // Entries are newest first on every page.
  const entries = r.direction === 'backward' ? page.events : [...page.events].reverse();
  const records = entries.map(originalOf);
  if (r.direction === 'backward') {
    if (!page.isEnd) links.push(link(`${url}/${ZEROS}/forward/${c}`, 'last'), link(`${url}/${formatAllPosition(page.nextPosition)}/backward/${c}`, 'next'));
    const newest = records[0];
    links.push(link(`${url}/${formatAllPosition(newest ? newest.position + newest.size : position)}/forward/${c}`, 'previous'));
  } else {
    if (position > 0) links.push(link(`${url}/${ZEROS}/forward/${c}`, 'last'), link(`${url}/${formatAllPosition(position)}/backward/${c}`, 'next'));
    if (!(page.events.length === 0 && page.isEnd)) links.push(link(`${url}/${formatAllPosition(page.nextPosition)}/forward/${c}`, 'previous'));
  }
  links.push(link(`${url}/metadata`, 'metadata'));
  const feed: FeedModel = {
    title: 'All events', id: url, updated: records[0] ? formatUpdated(records[0].created) : EMPTY_UPDATED,
    streamId: null, headOfStream: false, selfUrl: null, eTag: null, links, entries,
  };
  return sendFeed(reply, base, mediaType, feed, req);
}
