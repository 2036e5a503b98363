import { randomBytes } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { XMLBuilder } from 'fast-xml-parser';
import { formatUuid, LINK_EVENT_TYPE, parseLinkTarget, type EventRecord, type ResolvedEvent } from '../store/index.js';
import { eventUrl } from './urls.js';

// The Atom representation of streams: one model for a feed and its entries, written as
// atom+json (also served for application/json) or as Atom XML. Stream pages, $all pages and
// persistent subscription messages are all sent through `sendFeed`.

export type Embed = 'none' | 'content' | 'rich' | 'body' | 'pretty' | 'tryharder';
const EMBEDS: readonly Embed[] = ['none', 'content', 'rich', 'body', 'pretty', 'tryharder'];
const LEVEL = Object.fromEntries(EMBEDS.map((e, i) => [e, i])) as Record<Embed, number>;

/** `?embed=`, any case: None, Content, Rich, Body, PrettyBody (or Pretty), TryHarder; anything else is none. */
export function parseEmbed(value: string | undefined): Embed {
  const lower = value?.toLowerCase();
  const v = (lower === 'prettybody' ? 'pretty' : lower) as Embed | undefined;
  return v && EMBEDS.includes(v) ? v : 'none';
}

export const AUTHOR = { name: 'SVC' };
export const EMPTY_UPDATED = '0001-01-01T00:00:00Z';

/** UTC XML dateTime from µs since the epoch, fraction trimmed of trailing zeros. */
export function formatUpdated(createdMicros: number): string {
  const ms = Math.floor(createdMicros / 1000);
  const iso = new Date(ms).toISOString(); // 2024-05-01T10:00:00.123Z
  const micros = Math.floor(createdMicros - ms * 1000);
  const fraction = (iso.slice(20, 23) + String(micros).padStart(3, '0')).replace(/0+$/, '');
  return `${iso.slice(0, 19)}${fraction ? `.${fraction}` : ''}Z`;
}

export interface Link { uri: string; relation: string; type?: null }

export function link(uri: string, relation: string): Link {
  return { uri, relation, type: null };
}

export interface FeedModel {
  title: string;
  id: string;
  updated: string;
  streamId: string | null;
  headOfStream: boolean;
  selfUrl: string | null;
  eTag: string | null;
  links: Link[];
  entries: ResolvedEvent[];
  /** Competing-consumer feeds: each entry's retry count and its ack/nack links (parallel to entries). */
  leases?: { retryCount: number; links: Link[] }[];
}

function parseJson(bytes: Buffer): unknown {
  try {
    return JSON.parse(bytes.toString('utf8'));
  } catch {
    return bytes.toString('utf8');
  }
}

/** Where an entry points: the resolved event, or the link's target when the target is gone. */
function target(e: ResolvedEvent): { streamId: string; eventNumber: number } {
  if (e.event) return { streamId: e.event.streamId, eventNumber: e.event.eventNumber };
  return parseLinkTarget(e.link!.data) ?? { streamId: e.link!.streamId, eventNumber: e.link!.eventNumber };
}

/**
 * Splices stored JSON text into a serialised document without parsing and re-serialising it:
 * the value is a marker string while the document is stringified, then the marker is replaced
 * by the raw text. The marker carries a per-process random nonce, so stored data cannot forge one.
 */
export class RawJson {
  private static readonly nonce = randomBytes(8).toString('hex');
  private readonly texts: string[] = [];

  mark(text: string): string {
    this.texts.push(text);
    return `\u0000${RawJson.nonce}:${this.texts.length - 1}\u0000`;
  }

  stringify(value: unknown): string {
    const json = JSON.stringify(value);
    if (this.texts.length === 0) return json;
    return json.replace(new RegExp(`"\\\\u0000${RawJson.nonce}:(\\d+)\\\\u0000"`, 'g'), (_, i: string) => this.texts[Number(i)]);
  }
}

/** The content object of an event; with `raw`, JSON data is spliced in as stored instead of parsed. */
export function contentOf(event: EventRecord, raw?: RawJson): Record<string, unknown> {
  let data: unknown;
  if (raw && event.dataIsJson) data = raw.mark(event.data.toString('utf8'));
  else data = event.isJson ? parseJson(event.data) : event.data.toString('utf8');
  return {
    eventStreamId: event.streamId,
    eventNumber: event.eventNumber,
    eventType: event.eventType,
    eventId: formatUuid(event.eventId),
    data,
    metadata: event.metadata.length > 0 ? parseJson(event.metadata) : '',
  };
}

function reindent(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

function richFields(e: ResolvedEvent, embed: Embed): Record<string, unknown> {
  const event = e.event;
  const position = e.link ?? e.event!;
  const out: Record<string, unknown> = {};
  if (event) {
    out.eventId = formatUuid(event.eventId);
    out.eventType = event.eventType;
    out.eventNumber = event.eventNumber;
  }
  const level = LEVEL[embed];
  let isJson = event?.isJson ?? false;
  let data: string | null = null;
  if (event && level >= LEVEL.body) {
    const text = event.data.toString('utf8');
    if (isJson) data = level >= LEVEL.pretty ? reindent(text) : text;
    else if (level >= LEVEL.tryharder) {
      const parsed = parseJson(event.data);
      if (typeof parsed === 'object' && parsed !== null) {
        isJson = true;
        data = JSON.stringify(parsed, null, 2);
      } else {
        data = text;
      }
    }
  }
  const metaText = event && level >= LEVEL.body && event.metadata.length > 0 ? event.metadata.toString('utf8') : null;
  const linkMetaText = e.link && e.event && level >= LEVEL.body && e.link.metadata.length > 0
    ? e.link.metadata.toString('utf8') : null;
  out.data = data;
  out.metaData = metaText !== null && level >= LEVEL.pretty ? reindent(metaText) : metaText;
  out.linkMetaData = linkMetaText;
  if (event) out.streamId = event.streamId;
  out.isJson = isJson;
  out.isRedacted = false;
  out.isMetaData = metaText !== null;
  out.isLinkMetaData = linkMetaText !== null;
  out.positionEventNumber = position.eventNumber;
  out.positionStreamId = position.streamId;
  return out;
}

export function entryJson(base: string, e: ResolvedEvent, embed: Embed, withContent: boolean, raw?: RawJson): Record<string, unknown> {
  const { streamId, eventNumber } = target(e);
  const url = eventUrl(base, streamId, eventNumber);
  const original = e.link ?? e.event!;
  const entry: Record<string, unknown> = {
    title: `${eventNumber}@${streamId}`,
    id: url,
    updated: formatUpdated(original.created),
    author: AUTHOR,
    summary: e.link ? LINK_EVENT_TYPE : e.event!.eventType,
    retryCount: null,
    content: null,
  };
  const includeContent = e.event && !(e.link && !withContent) && (withContent || LEVEL[embed] >= LEVEL.content);
  if (includeContent && (withContent || e.event!.isJson)) entry.content = contentOf(e.event!, raw);
  entry.links = [link(url, 'edit'), link(url, 'alternate')];
  if (LEVEL[embed] >= LEVEL.rich) Object.assign(entry, richFields(e, embed));
  return entry;
}

/** The feed as atom+json text (compact; event data spliced in as stored). */
export function feedJsonText(base: string, feed: FeedModel, embed: Embed): string {
  const raw = new RawJson();
  return raw.stringify(feedJson(base, feed, embed, raw));
}

export function feedJson(base: string, feed: FeedModel, embed: Embed, raw?: RawJson): Record<string, unknown> {
  return {
    title: feed.title,
    id: feed.id,
    updated: feed.updated,
    streamId: feed.streamId,
    author: AUTHOR,
    headOfStream: feed.headOfStream,
    selfUrl: feed.selfUrl,
    eTag: feed.eTag,
    links: feed.links,
    entries: feed.entries.map((e, i) => {
      const entry = entryJson(base, e, embed, false, raw);
      const lease = feed.leases?.[i];
      if (lease) {
        entry.retryCount = lease.retryCount;
        (entry.links as Link[]).push(...lease.links);
      }
      return entry;
    }),
  };
}

const xmlBuilder = new XMLBuilder({ ignoreAttributes: false, attributeNamePrefix: '@_', suppressEmptyNode: true });
const XML_DECLARATION = '<?xml version="1.0" encoding="utf-8"?>';
const ATOM_NS = 'http://www.w3.org/2005/Atom';
const XML_NAME = /^[A-Za-z_][A-Za-z0-9._-]*$/;

/** JSON as XML elements when every key is a valid element name; otherwise the JSON text. */
function xmlValue(value: unknown): unknown {
  const valid = (v: unknown): boolean => {
    if (Array.isArray(v)) return v.every(valid);
    if (typeof v === 'object' && v !== null) return Object.entries(v).every(([k, x]) => XML_NAME.test(k) && valid(x));
    return true;
  };
  if (typeof value === 'object' && value !== null && valid(value)) return value;
  return typeof value === 'string' ? value : JSON.stringify(value);
}

function xmlLinks(links: Link[]): object[] {
  return links.map((l) => ({ '@_href': l.uri, '@_rel': l.relation }));
}

function entryXmlObject(base: string, e: ResolvedEvent, withContent: boolean,
  lease?: { retryCount: number; links: Link[] }): Record<string, unknown> {
  const json = entryJson(base, e, withContent ? 'content' : 'none', withContent);
  const entry: Record<string, unknown> = {
    title: json.title, id: json.id, updated: json.updated, author: AUTHOR, summary: json.summary,
    ...(lease ? { retryCount: lease.retryCount } : {}),
    link: xmlLinks([...(json.links as Link[]), ...(lease?.links ?? [])]),
  };
  if (json.content) {
    const c = json.content as Record<string, unknown>;
    entry.content = { '@_type': 'application/xml', ...c, data: xmlValue(c.data), metadata: xmlValue(c.metadata) };
  }
  return entry;
}

export function feedXml(base: string, feed: FeedModel): string {
  const doc = {
    feed: {
      '@_xmlns': ATOM_NS,
      title: feed.title, id: feed.id, updated: feed.updated, author: AUTHOR,
      link: xmlLinks(feed.links),
      entry: feed.entries.map((e, i) => entryXmlObject(base, e, false, feed.leases?.[i])),
    },
  };
  return XML_DECLARATION + xmlBuilder.build(doc);
}

/** Sends a feed page in the negotiated representation (`?embed=` picks how much of each entry the JSON carries). */
export function sendFeed(reply: FastifyReply, base: string, mediaType: string, feed: FeedModel, req: FastifyRequest): FastifyReply {
  if (mediaType.endsWith('xml')) return reply.type(`${mediaType}; charset=utf-8`).send(feedXml(base, feed));
  const embed = parseEmbed((req.query as Record<string, string | undefined>).embed);
  return reply.type(`${mediaType}; charset=utf-8`).send(feedJsonText(base, feed, embed));
}

export function entryXml(base: string, e: ResolvedEvent): string {
  return XML_DECLARATION + xmlBuilder.build({ entry: { '@_xmlns': ATOM_NS, ...entryXmlObject(base, e, true) } });
}

/** A plain XML document with one root element. */
export function simpleXml(root: string, value: unknown): string {
  return XML_DECLARATION + xmlBuilder.build({ [root]: xmlValue(value) });
}
