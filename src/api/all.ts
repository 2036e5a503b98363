import type { FastifyReply, FastifyRequest } from 'fastify';
import { originalOf, PackedPlaces, type ResolvedEvent } from '../store/index.js';
import type { AllRead } from '../verbs/index.js';
import { booleanHeader } from './headers.js';
import { FEED_TYPES, MEDIA, negotiate } from './media.js';
import { EMPTY_UPDATED, formatUpdated, link, type FeedHead, type Link } from './atom.js';
import { applyCaching, type Cacheability } from './caching.js';
import { baseUrl, formatAllPosition, parseAllPosition, streamUrl } from './urls.js';
import { principalOf, type ApiContext } from './context.js';
import { longPollMs, readWithLongPoll } from './long-poll.js';
import { rereadFromStore, sendFeed, StoredEntries } from './send-feed.js';
import type { SendQueue } from './send-queue.js';
import { ALL_STREAM } from '../auth/index.js';

// GET /streams/$all: the whole log by position, for authenticated users the $all ACL admits.
// The stream read routes take $all pages too (their schema checks the position) and hand them here.
// A page is read a slice at a time, one slice per turn of the send queue (send-queue.ts), and held
// as the places of its records: a 1,000-event page of 5 KB events is ~5 MB to read (10-40 ms of
// the event loop in one go on a busy machine, cold), and a page being read or sent holds ~9 bytes
// an entry instead of its records.

export interface AllRequest { position: string; count: number; direction: 'backward' | 'forward' }

const ZEROS = formatAllPosition(0);
/** Bytes of records read in one turn (about what a part of a feed costs); the first slice is FIRST_SLICE records. */
const SLICE_BYTES = 256 * 1024;
const FIRST_SLICE = 32;

/** A page of $all as read: the places of its records in log order, and the newest records as read (newest first). */
interface AllPlaces {
  places: PackedPlaces;
  newest: ResolvedEvent[];
  nextPosition: number;
  isEnd: boolean;
}

type ReadSlice = (from: number, count: number) => AllRead;

/** Reads the rest of a page after its first slice, a slice per turn of the queue (each about SLICE_BYTES of records). */
async function readInSlices(sends: SendQueue, first: AllRead, count: number, direction: AllRequest['direction'],
  read: ReadSlice): Promise<AllPlaces> {
  const places = new PackedPlaces(count);
  let bytes = 0;
  const add = (events: readonly ResolvedEvent[]) => {
    for (const e of events) {
      const record = originalOf(e);
      places.push(record);
      bytes += record.size;
    }
  };
  add(first.events);
  let slice = first;
  // Forward pages show their last slice first, backward ones their first.
  let newest = first.events;
  while (!slice.isEnd && places.length < count && slice.events.length > 0) {
    const n = Math.min(count - places.length, Math.max(1, Math.floor(SLICE_BYTES / (bytes / places.length))));
    const from = slice.nextPosition;
    slice = await sends.call(() => read(from, n), true);
    add(slice.events);
    if (direction === 'forward' && slice.events.length > 0) newest = slice.events;
  }
  return { places, newest: direction === 'forward' ? [...newest].reverse() : newest, nextPosition: slice.nextPosition, isEnd: slice.isEnd };
}

export async function readAll(ctx: ApiContext, req: FastifyRequest, reply: FastifyReply, r: AllRequest) {
  let mediaType = negotiate(req, FEED_TYPES);
  if (mediaType === MEDIA.streamDescK || mediaType === MEDIA.streamDescL) mediaType = MEDIA.json;
  const head = r.position === 'head';
  const position = head ? ctx.store.headPosition : parseAllPosition(r.position)!; // the route's schema checked it
  const resolveLinks = booleanHeader(req, 'ResolveLinkTos', false);

  const read: ReadSlice = (from, n) => ctx.verbs.streams.readAll(principalOf(req), from, n, r.direction, resolveLinks);
  const first = await readWithLongPoll(req, ctx.store.bus, r.direction === 'forward' ? longPollMs(req) : 0,
    () => ctx.sends.forPage(r.count, () => read(position, Math.min(r.count, FIRST_SLICE))), (p) => p.events.length === 0, () => true);
  const page = await readInSlices(ctx.sends, first, r.count, r.direction, read);

  const headPosition = ctx.store.headPosition;
  const immutable = r.direction === 'backward' ? !head : page.places.length === r.count;
  const cache: Cacheability = immutable ? { immutable: true } : { immutable: false, version: headPosition };
  if (applyCaching(req, reply, mediaType, cache, ctx.config.disableHttpCaching)) return reply;

  const base = baseUrl(req);
  const url = streamUrl(base, ALL_STREAM);
  const c = r.count;
  const links: Link[] = [link(url, 'self'), link(`${url}/head/backward/${c}`, 'first')];
  const newest = page.newest.length > 0 ? originalOf(page.newest[0]) : undefined;
  if (r.direction === 'backward') {
    if (!page.isEnd) links.push(link(`${url}/${ZEROS}/forward/${c}`, 'last'), link(`${url}/${formatAllPosition(page.nextPosition)}/backward/${c}`, 'next'));
    links.push(link(`${url}/${formatAllPosition(newest ? newest.position + newest.size : position)}/forward/${c}`, 'previous'));
  } else {
    if (position > 0) links.push(link(`${url}/${ZEROS}/forward/${c}`, 'last'), link(`${url}/${formatAllPosition(position)}/backward/${c}`, 'next'));
    if (!(page.places.length === 0 && page.isEnd)) links.push(link(`${url}/${formatAllPosition(page.nextPosition)}/forward/${c}`, 'previous'));
  }
  links.push(link(`${url}/metadata`, 'metadata'));
  const feed: FeedHead = {
    title: 'All events', id: url, updated: newest ? formatUpdated(newest.created) : EMPTY_UPDATED,
    streamId: null, headOfStream: false, selfUrl: null, eTag: null, links,
  };
  // Entries are newest first on every page.
  const places = r.direction === 'backward' ? page.places : page.places.reverse();
  return sendFeed(reply, req, base, mediaType, feed, new StoredEntries(places.length, rereadFromStore(ctx, places, resolveLinks), page.newest),
    { sends: ctx.sends });
}
