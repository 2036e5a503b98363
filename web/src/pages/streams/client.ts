import { request, seg } from '../../api';

// What the streams views share: media types, the feed's shape, paths and page links.

export const ATOM = 'application/vnd.eventstore.atom+json';
export const EVENTS = 'application/vnd.eventstore.events+json';
/** Entries carry data and metadata as text (JSON or not), with type, number and stream. */
export const EMBED = 'embed=tryharder';
export const PAGE_SIZE = 20;
export const ALL = '$all';

/** The console's request (api.ts): the session's credentials, never the HTTP cache, the node's explanations as errors. */
export const call = request;

export interface FeedLink { uri: string; relation: string }

/** An Atom entry as the node writes it with ?embed=tryharder (the rich fields are absent for a link to a gone event). */
export interface Entry {
  title: string;
  id: string;
  updated: string;
  summary: string;
  eventId?: string;
  eventType?: string;
  eventNumber?: number;
  streamId?: string;
  data?: string | null;
  metaData?: string | null;
  linkMetaData?: string | null;
  isJson?: boolean;
  positionEventNumber?: number;
  positionStreamId?: string;
  links: FeedLink[];
  content?: { eventStreamId: string; eventNumber: number; eventType: string; eventId: string; data: unknown; metadata: unknown } | null;
}

export interface Feed {
  title: string;
  streamId: string | null;
  headOfStream: boolean;
  links: FeedLink[];
  entries: Entry[];
}

/** The node's API path of a stream (`/streams/%24all`). */
export const streamPath = (stream: string) => `/streams/${seg(stream)}`;

/** A page of a stream (or of $all): `page` = [from, direction, count] or none for the newest. */
export function pagePath(stream: string, page: string[]): string {
  const [from, direction, count] = page.length === 3 ? page : ['head', 'backward', String(PAGE_SIZE)];
  return `${streamPath(stream)}/${seg(from)}/${seg(direction)}/${seg(count)}?${EMBED}`;
}

/** A feed link's page as route segments [from, direction, count] (links are absolute URLs of the node). */
export function linkPage(feed: Feed | undefined, relation: string): string[] | undefined {
  const l = feed?.links.find((x) => x.relation === relation);
  if (!l) return undefined;
  const parts = new URL(l.uri, location.href).pathname.split('/').filter(Boolean).map(decodeURIComponent);
  return parts.length >= 5 ? parts.slice(-3) : undefined;
}

/** "12@orders-1" → which event an entry shows (for entries without the rich fields). */
export function entryTarget(e: Entry): { streamId: string; eventNumber: number } {
  if (e.streamId !== undefined && e.eventNumber !== undefined) return { streamId: e.streamId, eventNumber: e.eventNumber };
  const at = e.title.indexOf('@');
  return { streamId: e.title.slice(at + 1), eventNumber: Number(e.title.slice(0, at)) };
}

/** The event number in a Location header (`.../streams/s/7` → 7). */
export function eventNumberOf(location: string | null): number | undefined {
  const last = location?.split('/').pop();
  return last !== undefined && /^\d+$/.test(last) ? Number(last) : undefined;
}

/** A soft delete writes `$tb` = Int64.MaxValue into the stream's metadata. */
export const SOFT_DELETED_TB = 2 ** 53;

/** "2026-11-26T12:00:00.123456Z" → "2026-11-26 12:00:00.123 UTC": the console's one time format. */
export { formatTime } from '../../components';
