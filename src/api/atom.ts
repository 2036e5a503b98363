import assert from 'node:assert/strict';
import { XMLBuilder } from 'fast-xml-parser';
import { formatUuid, LINK_EVENT_TYPE, parseLinkTarget, type EventRecord, type ResolvedEvent } from '../store/index.js';
import { indentJson } from './json-indent.js';
import { eventUrl } from './urls.js';

// The Atom representation of streams: one model for a feed and its entries, written as
// atom+json (also served for application/json) or as Atom XML, in pieces (`feedPieces`) that
// send-feed.ts writes out: stream pages, $all pages and persistent subscription messages alike.

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
  // The events of one commit share their time: a page of them formats it once.
  if (createdMicros === lastFormatted.micros) return lastFormatted.text;
  const ms = Math.floor(createdMicros / 1000);
  const iso = new Date(ms).toISOString(); // 2024-05-01T10:00:00.123Z
  const micros = Math.floor(createdMicros - ms * 1000);
  const fraction = (iso.slice(20, 23) + String(micros).padStart(3, '0')).replace(/0+$/, '');
  const text = `${iso.slice(0, 19)}${fraction ? `.${fraction}` : ''}Z`;
  lastFormatted = { micros: createdMicros, text };
  return text;
}

let lastFormatted = { micros: NaN, text: '' };

export interface Link { uri: string; relation: string; type?: null }

export function link(uri: string, relation: string): Link {
  return { uri, relation, type: null };
}

/** A feed's own fields and links: everything but its entries. */
export type FeedHead = Omit<FeedModel, 'entries' | 'leases'>;

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
  leases?: Lease[];
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

/** What every representation of an entry shows; `content` is the event whose content goes with it, if any. */
interface EntryHead {
  streamId: string;
  eventNumber: number;
  url: string;
  updated: string;
  summary: string;
  content: EventRecord | undefined;
}

function entryHead(base: string, e: ResolvedEvent, embed: Embed, withContent: boolean): EntryHead {
  const { streamId, eventNumber } = target(e);
  const original = e.link ?? e.event!;
  // A feed shows no content for a resolved link; a single event always shows its own.
  const includeContent = e.event && !(e.link && !withContent) && (withContent || LEVEL[embed] >= LEVEL.content);
  return {
    streamId,
    eventNumber,
    url: eventUrl(base, streamId, eventNumber),
    updated: formatUpdated(original.created),
    summary: e.link ? LINK_EVENT_TYPE : e.event!.eventType,
    content: includeContent && (withContent || e.event!.isJson) ? e.event : undefined,
  };
}

/** The content object of an event (for XML, which builds its documents from objects). */
export function contentOf(event: EventRecord): Record<string, unknown> {
  return {
    eventStreamId: event.streamId,
    eventNumber: event.eventNumber,
    eventType: event.eventType,
    eventId: formatUuid(event.eventId),
    data: event.isJson ? parseJson(event.data) : event.data.toString('utf8'),
    metadata: event.metadata.length > 0 ? parseJson(event.metadata) : '',
  };
}

// The JSON representation is written as text, field by field in the order clients have always
// seen (they are compared byte for byte), instead of building objects for JSON.stringify: stored
// JSON data is spliced in as it is, and a 20-entry page costs a few string concatenations per
// entry. Measured on bench (c): building and stringifying the objects was ~30% of a page read.

/** A string (or null) as JSON. */
function str(value: string | null): string {
  return value === null ? 'null' : JSON.stringify(value);
}

// Stream names, event types and base URLs repeat on every entry of a page and across pages: their
// JSON text is kept rather than escaped again (JSON.stringify of a short string is ~0.2 µs, about
// a quarter of the time to write an entry when done seven times per entry).
const NAMES_KEPT = 4096;
const namesJson = new Map<string, string>();

function name(text: string): string {
  let json = namesJson.get(text);
  if (json === undefined) {
    if (namesJson.size >= NAMES_KEPT) namesJson.clear();
    json = JSON.stringify(text);
    namesJson.set(text, json);
  }
  return json;
}

/** An event's URL as JSON: only its base can need escaping (the rest is URI-encoded or a number). */
function eventUrlJson(base: string, url: string): string {
  return name(base).length === base.length + 2 ? `"${url}"` : str(url);
}

const AUTHOR_JSON = JSON.stringify(AUTHOR);

function linksJson(links: readonly Link[]): string {
  let out = '';
  for (const l of links) out += `${out ? ',' : ''}{"uri":${str(l.uri)},"relation":${name(l.relation)},"type":null}`;
  return `[${out}]`;
}

/** JSON made compact, numbers and strings as written (or the text as a JSON string, when it is not JSON). */
function reserialised(bytes: Buffer): string {
  const text = bytes.toString('utf8');
  return indentJson(text, '') ?? JSON.stringify(text);
}

/** The content object of an event as JSON; JSON data goes in as stored. */
export function contentJson(event: EventRecord, eventId = formatUuid(event.eventId), text = event.data.toString('utf8')): string {
  let data: string;
  if (event.dataIsJson) data = text;
  else data = event.isJson ? reserialised(event.data) : str(text);
  const metadata = event.metadata.length > 0 ? reserialised(event.metadata) : '""';
  return `{"eventStreamId":${name(event.streamId)},"eventNumber":${event.eventNumber},"eventType":${name(event.eventType)},`
    + `"eventId":"${eventId}","data":${data},"metadata":${metadata}}`;
}

/** JSON laid out with two spaces, numbers and strings as written (indentJson); other text as it is. */
function reindent(text: string): string {
  return indentJson(text) ?? text;
}

/** The fields `embed=rich` and above add to an entry, as JSON members (a leading comma each). */
function richJson(e: ResolvedEvent, embed: Embed, eventId: string, text: string): string {
  const event = e.event;
  const position = e.link ?? e.event!;
  let out = '';
  if (event) out += `,"eventId":"${eventId}","eventType":${name(event.eventType)},"eventNumber":${event.eventNumber}`;
  const level = LEVEL[embed];
  let isJson = event?.isJson ?? false;
  let data: string | null = null;
  if (event && level >= LEVEL.body) {
    if (isJson) data = level >= LEVEL.pretty ? reindent(text) : text;
    else if (level >= LEVEL.tryharder) {
      // Data not flagged as JSON that is a JSON object or array after all is shown as JSON.
      const pretty = /^\s*[[{]/.test(text) ? indentJson(text) : undefined;
      isJson = pretty !== undefined;
      data = pretty ?? text;
    }
  }
  const metaText = event && level >= LEVEL.body && event.metadata.length > 0 ? event.metadata.toString('utf8') : null;
  const linkMetaText = e.link && e.event && level >= LEVEL.body && e.link.metadata.length > 0
    ? e.link.metadata.toString('utf8') : null;
  out += `,"data":${str(data)},"metaData":${str(metaText !== null && level >= LEVEL.pretty ? reindent(metaText) : metaText)}`
    + `,"linkMetaData":${str(linkMetaText)}`;
  if (event) out += `,"streamId":${name(event.streamId)}`;
  return `${out},"isJson":${isJson},"isRedacted":false,"isMetaData":${metaText !== null},"isLinkMetaData":${linkMetaText !== null}`
    + `,"positionEventNumber":${position.eventNumber},"positionStreamId":${name(position.streamId)}`;
}

/** One entry as JSON; a competing-consumer lease sets its retry count and adds its ack/nack links. */
export function entryJson(base: string, e: ResolvedEvent, embed: Embed, withContent: boolean, lease?: Lease): string {
  const head = entryHead(base, e, embed, withContent);
  const url = eventUrlJson(base, head.url);
  const rich = LEVEL[embed] >= LEVEL.rich;
  // The id and data text serve both the content and the rich fields.
  const eventId = e.event ? formatUuid(e.event.eventId) : '';
  const text = e.event && (head.content || rich) ? e.event.data.toString('utf8') : '';
  const links = `{"uri":${url},"relation":"edit","type":null},{"uri":${url},"relation":"alternate","type":null}`
    + (lease && lease.links.length > 0 ? `,${linksJson(lease.links).slice(1, -1)}` : '');
  // The title is `number@stream`: the stream's JSON text without its opening quote follows the number.
  return `{"title":"${head.eventNumber}@${name(head.streamId).slice(1)},"id":${url},"updated":"${head.updated}",`
    + `"author":${AUTHOR_JSON},"summary":${name(head.summary)},"retryCount":${lease ? lease.retryCount : 'null'},`
    + `"content":${head.content ? contentJson(head.content, eventId, text) : 'null'},"links":[${links}]`
    + `${rich ? richJson(e, embed, eventId, text) : ''}}`;
}

/** A competing-consumer entry's retry count and ack/nack links. */
export interface Lease { retryCount: number; links: Link[] }

/**
 * A feed written in pieces: what comes before the first entry (the feed's own fields and links),
 * each entry, what goes between two entries and what closes the feed. Joined, they are the
 * document; send-feed.ts writes a big page a part at a time from them.
 */
export interface FeedPieces {
  readonly opening: string;
  readonly separator: string;
  readonly closing: string;
  entry(e: ResolvedEvent, lease?: Lease): string;
}

/** The pieces of a feed in the negotiated representation (`embed` picks how much of each entry the JSON carries). */
export function feedPieces(base: string, mediaType: string, feed: FeedHead, embed: Embed): FeedPieces {
  if (mediaType.endsWith('xml')) {
    return { opening: feedXmlOpening(feed), separator: '', closing: FEED_XML_CLOSING, entry: (e, lease) => entryXmlText(base, e, lease) };
  }
  return { opening: feedJsonOpening(feed), separator: ',', closing: ']}', entry: (e, lease) => entryJson(base, e, embed, false, lease) };
}

/** The whole document from its pieces. */
export function feedText(pieces: FeedPieces, feed: FeedModel): string {
  return pieces.opening + feed.entries.map((e, i) => pieces.entry(e, feed.leases?.[i])).join(pieces.separator) + pieces.closing;
}

function feedJsonOpening(feed: FeedHead): string {
  return `{"title":${str(feed.title)},"id":${str(feed.id)},"updated":${str(feed.updated)},"streamId":${str(feed.streamId)},`
    + `"author":${AUTHOR_JSON},"headOfStream":${feed.headOfStream},"selfUrl":${str(feed.selfUrl)},"eTag":${str(feed.eTag)},`
    + `"links":${linksJson(feed.links)},"entries":[`;
}

/** The feed as atom+json text (compact; event data spliced in as stored). */
export function feedJsonText(base: string, feed: FeedModel, embed: Embed): string {
  return feedText(feedPieces(base, 'application/json', feed, embed), feed);
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

function entryXmlObject(base: string, e: ResolvedEvent, withContent: boolean, lease?: Lease): Record<string, unknown> {
  const head = entryHead(base, e, withContent ? 'content' : 'none', withContent);
  const entry: Record<string, unknown> = {
    title: `${head.eventNumber}@${head.streamId}`, id: head.url, updated: head.updated, author: AUTHOR, summary: head.summary,
    ...(lease ? { retryCount: lease.retryCount } : {}),
    link: xmlLinks([link(head.url, 'edit'), link(head.url, 'alternate'), ...(lease?.links ?? [])]),
  };
  if (head.content) {
    const c = contentOf(head.content);
    entry.content = { '@_type': 'application/xml', ...c, data: xmlValue(c.data), metadata: xmlValue(c.metadata) };
  }
  return entry;
}

const FEED_XML_CLOSING = '</feed>';

/** The feed element with its fields and links, open: without its entries (which come last) and its closing tag. */
function feedXmlOpening(feed: FeedHead): string {
  const doc = {
    feed: { '@_xmlns': ATOM_NS, title: feed.title, id: feed.id, updated: feed.updated, author: AUTHOR, link: xmlLinks(feed.links) },
  };
  const text = xmlBuilder.build(doc) as string;
  assert(text.endsWith(FEED_XML_CLOSING), 'a feed element with children ends with its closing tag');
  return XML_DECLARATION + text.slice(0, -FEED_XML_CLOSING.length);
}

/** One entry of a feed as XML (the builder writes an array member as consecutive elements: the same text). */
function entryXmlText(base: string, e: ResolvedEvent, lease?: Lease): string {
  return xmlBuilder.build({ entry: entryXmlObject(base, e, false, lease) }) as string;
}

export function feedXml(base: string, feed: FeedModel): string {
  return feedText(feedPieces(base, 'application/atom+xml', feed, 'none'), feed);
}

export function entryXml(base: string, e: ResolvedEvent): string {
  return XML_DECLARATION + xmlBuilder.build({ entry: { '@_xmlns': ATOM_NS, ...entryXmlObject(base, e, true) } });
}

/** A plain XML document with one root element. */
export function simpleXml(root: string, value: unknown): string {
  return XML_DECLARATION + xmlBuilder.build({ [root]: xmlValue(value) });
}
