// Feed pages through src/api/send-feed.ts over real HTTP, in a fastify app of their own: a page
// that fits in one part goes in one piece with its Content-Length; a bigger one in parts
// (chunked), byte for byte the document atom.ts makes in one piece, in every representation and
// at every embed level; entries held as places are read back (those whose records are gone left
// out). And the XML builder property the parts rely on: a feed's entries written one by one are
// the text it writes for them as one array.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Fastify, { type FastifyInstance } from 'fastify';
import { XMLBuilder } from 'fast-xml-parser';
import { storedRecord } from './support/records.js';
import type { EventRecord, ResolvedEvent } from '../src/store/index.js';
import { feedPieces, feedText, link, parseEmbed, type FeedHead, type FeedModel } from '../src/api/atom.js';
import { entriesInMemory, PART_CHARS, sendFeed, StoredEntries } from '../src/api/send-feed.js';
import { SendQueue } from '../src/api/send-queue.js';

const CREATED = Date.UTC(2024, 4, 1, 10, 0, 0, 123) * 1000 + 456;
const TYPES = ['application/vnd.eventstore.atom+json', 'application/json', 'application/atom+xml'];
const EMBEDS = ['none', 'content', 'rich', 'body', 'PrettyBody', 'tryharder'];

function record(streamId: string, eventNumber: number, type: string, data: string, metadata = '', isJson = true): EventRecord {
  return storedRecord({ position: 10_000 + eventNumber * 1000, created: CREATED + eventNumber }, streamId, eventNumber, type, data, metadata, isJson);
}

/** Entries of every kind, newest first: JSON, text, non-ASCII data (more bytes than characters), metadata, links. */
function entries(count: number, dataChars: number): ResolvedEvent[] {
  const out: ResolvedEvent[] = [];
  for (let i = count - 1; i >= 0; i--) {
    const pad = (i % 3 === 0 ? 'é€' : 'x').repeat(dataChars / 2);
    const kind = i % 4;
    if (kind === 0) out.push({ event: record('orders', i, 'Placed', JSON.stringify({ i, pad }), JSON.stringify({ m: i })) });
    else if (kind === 1) out.push({ event: record('notes', i, 'Note', `text ${i} <&> ${pad}`, '', false) });
    else if (kind === 2) {
      const target = record('orders', i, 'Placed', JSON.stringify({ i, pad }));
      out.push({ event: target, link: record('$ce-orders', i, '$>', `${i}@orders`, '{"l":1}', false) });
    } else out.push({ event: record('a "quoted" stream', i, 'Q', `{"n": ${i}, "pad": "${pad}"}`) });
  }
  return out;
}

const HEAD: FeedHead = {
  title: "Event stream 'orders'", id: 'http://h:1/streams/orders', updated: '2024-05-01T10:00:00.123456Z', streamId: 'orders',
  headOfStream: false, selfUrl: null, eTag: null, links: [link('http://h:1/streams/orders', 'self'), link('http://h:1/streams/orders/0/forward/20', 'last')],
};

let app: FastifyInstance;
let url: string;
let page: ResolvedEvent[] = [];
/** Places whose records are gone (read back as nothing). */
const removed = new Set<number>();
/** Entries `from` to `to` of the page read back, as a store would: those whose records are gone left out. */
const reread = (from: number, to: number): ResolvedEvent[] =>
  page.slice(from, to).filter((e) => !removed.has((e.link ?? e.event)!.position));

beforeAll(async () => {
  const sends = new SendQueue(32 * 1024 * 1024, 30_000);
  app = Fastify();
  app.get('/memory', async (req, reply) => sendFeed(reply, req, 'http://h:1', String(req.headers.accept), HEAD, entriesInMemory(page), { sends }));
  app.get('/stored', async (req, reply) => {
    return sendFeed(reply, req, 'http://h:1', String(req.headers.accept), HEAD, new StoredEntries(page.length, reread, page.slice(0, 5)), { sends });
  });
  url = await app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => { await app?.close(); });

function expected(mediaType: string, embed: string, feedEntries: ResolvedEvent[]): string {
  const feed: FeedModel = { ...HEAD, entries: feedEntries };
  return feedText(feedPieces('http://h:1', mediaType, feed, parseEmbed(embed)), feed);
}

async function get(path: string, accept: string, embed: string): Promise<{ res: Response; body: string }> {
  const res = await fetch(`${url}${path}?embed=${embed}`, { headers: { Accept: accept } });
  return { res, body: Buffer.from(await res.arrayBuffer()).toString('utf8') };
}

describe('feed pages over HTTP', () => {
  it('a page that fits in one part goes in one piece, with its Content-Length', async () => {
    page = entries(5, 100);
    for (const type of TYPES) {
      const { res, body } = await get('/memory', type, 'body');
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe(`${type}; charset=utf-8`);
      expect(res.headers.get('content-length')).toBe(String(Buffer.byteLength(body)));
      expect(body).toBe(expected(type, 'body', page));
    }
  });

  it('a big page goes in parts (chunked), byte for byte the one-piece document, in every representation and embed level', async () => {
    page = entries(300, 2000);
    for (const type of TYPES) {
      for (const embed of type.endsWith('xml') ? ['body'] : EMBEDS) {
        const want = expected(type, embed, page);
        expect(want.length, 'the page is more than one part').toBeGreaterThan(PART_CHARS);
        for (const path of ['/memory', '/stored']) {
          const { res, body } = await get(path, type, embed);
          expect(res.status).toBe(200);
          expect(res.headers.get('content-type')).toBe(`${type}; charset=utf-8`);
          expect(res.headers.get('content-length'), `${path} ${type} ${embed}`).toBeNull();
          expect(res.headers.get('transfer-encoding')).toBe('chunked');
          expect(body === want, `${path} ${type} embed=${embed}: ${body.length} characters against ${want.length}`).toBe(true);
        }
      }
    }
  });

  it('entries read back from their places leave out those whose records are gone', async () => {
    page = entries(300, 2000);
    const gone = [page[2], page[150], page[299]].map((e) => (e.link ?? e.event)!.position);
    for (const p of gone) removed.add(p);
    try {
      // The first five are held as read (the first part); the rest are read back.
      const kept = page.filter((e, i) => i < 5 || !removed.has((e.link ?? e.event)!.position));
      const { body } = await get('/stored', TYPES[0], 'body');
      expect(body === expected(TYPES[0], 'body', kept)).toBe(true);
      expect(JSON.parse(body).entries).toHaveLength(298);
    } finally {
      removed.clear();
    }
  });

  it('HEAD of a big page: the headers of the GET, no body', async () => {
    page = entries(300, 2000);
    const res = await fetch(`${url}/memory?embed=body`, { method: 'HEAD', headers: { Accept: TYPES[0] } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe(`${TYPES[0]}; charset=utf-8`);
    expect(await res.text()).toBe('');
  });
});

describe('the XML builder, as the parts use it', () => {
  const builder = new XMLBuilder({ ignoreAttributes: false, attributeNamePrefix: '@_', suppressEmptyNode: true });
  const entry = (i: number) => ({
    title: `${i}@a <"b"> & c`, id: `http://h/streams/a/${i}`, author: { name: 'SVC' }, summary: 'T',
    link: [{ '@_href': `http://h/${i}`, '@_rel': 'edit' }, { '@_href': `http://h/${i}`, '@_rel': 'alternate' }],
    ...(i % 2 ? { content: { '@_type': 'application/xml', data: { a: [1, 2], b: { c: 'é' } }, metadata: '' } } : {}),
  });
  const head = { '@_xmlns': 'http://www.w3.org/2005/Atom', title: 't', id: 'i', updated: 'u', author: { name: 'SVC' }, link: [{ '@_href': 'h', '@_rel': 'self' }] };

  it('writes a feed with entries as its opening, each entry on its own, and its closing tag', () => {
    for (const n of [0, 1, 3]) {
      const entries = Array.from({ length: n }, (_, i) => entry(i));
      const whole = builder.build({ feed: { ...head, entry: entries } }) as string;
      const opening = (builder.build({ feed: head }) as string).slice(0, -'</feed>'.length);
      expect(opening + entries.map((e) => builder.build({ entry: e })).join('') + '</feed>').toBe(whole);
    }
  });
});
