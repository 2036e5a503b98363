import { request as httpRequest } from 'node:http';
import { XMLParser } from 'fast-xml-parser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN, append, http, newEvent, startTestNode, type TestNode } from './support/node.js';

// End-to-end reads of streams over real HTTP: Atom feeds and their paging links, embed levels,
// representations, single events, caching and conditional GET, long polling, the description
// document and the trailing-slash redirect. (http-wire.md §1.1, §1.3, §3.4–§3.10)

const ATOM_JSON = 'application/vnd.eventstore.atom+json';
const ATOM_JSON_K = 'application/vnd.kurrent.atom+json';
const ATOM_XML = 'application/atom+xml';
const EVENT_JSON = 'application/vnd.eventstore.event+json';
const EVENT_JSON_K = 'application/vnd.kurrent.event+json';
const STREAMDESC = 'application/vnd.eventstore.streamdesc+json';
const STREAMDESC_K = 'application/vnd.kurrent.streamdesc+json';
const IMMUTABLE = 'max-age=31536000, private';
const NO_CACHE = 'max-age=0, no-cache, must-revalidate';
const UPDATED = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,7})?Z$/;

let t: TestNode;
beforeAll(async () => { t = await startTestNode(); });
afterAll(async () => { await t?.dispose(); });

let counter = 0;
function unique(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${++counter}`;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function appendN(stream: string, n: number, type = 'Numbered'): Promise<void> {
  const res = await append(t, stream, Array.from({ length: n }, (_, i) => newEvent(type, { i })));
  expect(res.status).toBe(201);
}

/** POST one event in a single-body form (the body is the data). */
async function appendRaw(stream: string, body: string | Buffer, contentType: string, eventType: string): Promise<void> {
  const res = await http(t, `/streams/${encodeURIComponent(stream)}`, {
    method: 'POST', body: typeof body === 'string' ? body : new Uint8Array(body),
    headers: { 'Content-Type': contentType, 'SVC-EventType': eventType, 'SVC-EventId': crypto.randomUUID() },
  });
  expect(res.status).toBe(201);
}

function get(path: string, accept: string | undefined = ATOM_JSON, headers: Record<string, string> = {}): Promise<Response> {
  return http(t, path, { headers: { ...(accept ? { Accept: accept } : {}), ...headers } });
}

async function feed(path: string, accept = ATOM_JSON, headers: Record<string, string> = {}): Promise<any> {
  const res = await get(path, accept, headers);
  expect(res.status, `GET ${path}`).toBe(200);
  return res.json();
}

/** Follows an absolute URL the server emitted (it must point at this node). */
async function follow(uri: string): Promise<any> {
  expect(uri.startsWith(`${t.url}/`), `${uri} is absolute and on this node`).toBe(true);
  return feed(uri.slice(t.url.length));
}

function links(doc: any): Array<{ relation: string; uri: string }> {
  return doc.links.map((l: any) => ({ relation: l.relation, uri: l.uri }));
}

function rel(doc: any, relation: string): string | undefined {
  return doc.links.find((l: any) => l.relation === relation)?.uri;
}

function titles(doc: any): string[] {
  return doc.entries.map((e: any) => e.title);
}

function entryOf(doc: any, title: string): any {
  const entry = doc.entries.find((e: any) => e.title === title);
  expect(entry, `entry ${title}`).toBeDefined();
  return entry;
}

/** Titles `<n>@stream` for n from `from` down to `to`. */
function range(stream: string, from: number, to: number): string[] {
  const out: string[] = [];
  for (let n = from; n >= to; n--) out.push(`${n}@${stream}`);
  return out;
}

/** A GET without any Accept header (fetch always adds one). */
function rawGet(path: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: Record<string, any>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(t.url + path, { method: 'GET', headers: { Authorization: ADMIN, ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

const xml = new XMLParser({
  ignoreAttributes: false, attributeNamePrefix: '@_',
  isArray: (name, jpath) => name === 'link' || jpath === 'feed.entry',
});

describe('the 27-event worked example (§3.5)', () => {
  let s: string;
  let S: string;
  beforeAll(async () => {
    s = unique('orders');
    S = `${t.url}/streams/${s}`;
    await appendN(s, 27);
  });

  it('head page: links, headOfStream, selfUrl, eTag and 20 entries newest first', async () => {
    const res = await get(`/streams/${s}`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/vnd\.eventstore\.atom\+json/);
    const doc = await res.json();
    expect(links(doc)).toEqual([
      { relation: 'self', uri: S },
      { relation: 'first', uri: `${S}/head/backward/20` },
      { relation: 'last', uri: `${S}/0/forward/20` },
      { relation: 'next', uri: `${S}/6/backward/20` },
      { relation: 'previous', uri: `${S}/27/forward/20` },
      { relation: 'metadata', uri: `${S}/metadata` },
    ]);
    expect(doc.title).toBe(`Event stream '${s}'`);
    expect(doc.id).toBe(S);
    expect(doc.streamId).toBe(s);
    expect(doc.headOfStream).toBe(true);
    expect(doc.selfUrl).toBe(S);
    expect(doc.eTag).toMatch(/^26;-?\d+$/);
    expect(typeof doc.author?.name).toBe('string');
    expect(titles(doc)).toEqual(range(s, 26, 7));
    expect(doc.updated).toMatch(UPDATED);
    expect(doc.updated).toBe(doc.entries[0].updated);
    expect(res.headers.get('etag')).toBe(`"${doc.eTag}"`);
    expect(res.headers.get('cache-control')).toBe(NO_CACHE);
    expect(res.headers.get('vary')).toMatch(/Accept/i);
  });

  it('head/backward/20 is the same head page', async () => {
    const doc = await feed(`/streams/${s}/head/backward/20`);
    expect(doc.headOfStream).toBe(true);
    expect(rel(doc, 'next')).toBe(`${S}/6/backward/20`);
    expect(rel(doc, 'previous')).toBe(`${S}/27/forward/20`);
    expect(titles(doc)).toEqual(range(s, 26, 7));
    expect(doc.eTag).toMatch(/^26;-?\d+$/);
  });

  it('6/backward/20 (next of head): oldest page has no last/next, previous 7/forward/20, immutable', async () => {
    const res = await get(`/streams/${s}/6/backward/20`);
    expect(res.status).toBe(200);
    const doc = await res.json();
    expect(links(doc)).toEqual([
      { relation: 'self', uri: S },
      { relation: 'first', uri: `${S}/head/backward/20` },
      { relation: 'previous', uri: `${S}/7/forward/20` },
      { relation: 'metadata', uri: `${S}/metadata` },
    ]);
    expect(titles(doc)).toEqual(range(s, 6, 0));
    expect(doc.headOfStream).toBe(false);
    expect(doc.eTag ?? null).toBeNull();
    expect(res.headers.get('cache-control')).toBe(IMMUTABLE);
    expect(res.headers.get('etag')).toBeNull();
  });

  it('0/forward/20: previous 20/forward/20, no last/next, not head of stream, immutable, newest first', async () => {
    const res = await get(`/streams/${s}/0/forward/20`);
    expect(res.status).toBe(200);
    const doc = await res.json();
    expect(links(doc)).toEqual([
      { relation: 'self', uri: S },
      { relation: 'first', uri: `${S}/head/backward/20` },
      { relation: 'previous', uri: `${S}/20/forward/20` },
      { relation: 'metadata', uri: `${S}/metadata` },
    ]);
    expect(doc.headOfStream).toBe(false);
    expect(doc.selfUrl ?? null).toBeNull();
    expect(titles(doc)).toEqual(range(s, 19, 0));
    expect(res.headers.get('cache-control')).toBe(IMMUTABLE);
    expect(res.headers.get('etag')).toBeNull();
  });

  it('20/forward/20: previous 27/forward/20, next 19/backward/20, head of stream, ETag 26;…', async () => {
    const res = await get(`/streams/${s}/20/forward/20`);
    expect(res.status).toBe(200);
    const doc = await res.json();
    expect(links(doc)).toEqual([
      { relation: 'self', uri: S },
      { relation: 'first', uri: `${S}/head/backward/20` },
      { relation: 'last', uri: `${S}/0/forward/20` },
      { relation: 'next', uri: `${S}/19/backward/20` },
      { relation: 'previous', uri: `${S}/27/forward/20` },
      { relation: 'metadata', uri: `${S}/metadata` },
    ]);
    expect(doc.headOfStream).toBe(true);
    expect(titles(doc)).toEqual(range(s, 26, 20));
    expect(res.headers.get('etag')).toMatch(/^"26;-?\d+"$/);
    expect(res.headers.get('cache-control')).toBe(NO_CACHE);
  });

  it('27/forward/20: the empty live edge has no previous link and the empty-page updated', async () => {
    const res = await get(`/streams/${s}/27/forward/20`);
    expect(res.status).toBe(200);
    const doc = await res.json();
    expect(links(doc)).toEqual([
      { relation: 'self', uri: S },
      { relation: 'first', uri: `${S}/head/backward/20` },
      { relation: 'last', uri: `${S}/0/forward/20` },
      { relation: 'next', uri: `${S}/26/backward/20` },
      { relation: 'metadata', uri: `${S}/metadata` },
    ]);
    expect(doc.entries).toEqual([]);
    expect(doc.headOfStream).toBe(true);
    expect(doc.updated).toBe('0001-01-01T00:00:00Z');
    expect(res.headers.get('cache-control')).toBe(NO_CACHE);
  });

  it('reading forward: GET last, follow previous until an empty page without previous', async () => {
    const head = await feed(`/streams/${s}`);
    let page = await follow(rel(head, 'last')!);
    const seen: string[] = [];
    const visited: string[] = [];
    for (let i = 0; i < 10; i++) {
      // Entries are newest first even on forward pages.
      seen.push(...[...titles(page)].reverse());
      const previous = rel(page, 'previous');
      if (!previous) break;
      visited.push(previous);
      page = await follow(previous);
    }
    expect(visited).toEqual([`${S}/20/forward/20`, `${S}/27/forward/20`]);
    expect(page.entries).toEqual([]);
    expect(rel(page, 'previous')).toBeUndefined();
    expect(seen).toEqual(range(s, 26, 0).reverse());
  });

  it('reading backward: from the head follow next until the page without next', async () => {
    let page = await feed(`/streams/${s}`);
    const seen: string[] = [...titles(page)];
    for (let i = 0; i < 10 && rel(page, 'next'); i++) {
      page = await follow(rel(page, 'next')!);
      seen.push(...titles(page));
    }
    expect(rel(page, 'next')).toBeUndefined();
    expect(seen).toEqual(range(s, 26, 0));
  });

  it('/{event}/{count} pages backward', async () => {
    const doc = await feed(`/streams/${s}/10/5`);
    expect(titles(doc)).toEqual(range(s, 10, 6));
    expect(rel(doc, 'next')).toBe(`${S}/5/backward/5`);
    expect(rel(doc, 'previous')).toBe(`${S}/11/forward/5`);
    expect(rel(doc, 'last')).toBe(`${S}/0/forward/5`);
    expect(rel(doc, 'first')).toBe(`${S}/head/backward/5`);
    expect(doc.headOfStream).toBe(false);
  });

  it('entries carry title, id, summary, updated and edit/alternate links', async () => {
    const doc = await feed(`/streams/${s}/3/backward/1`);
    expect(doc.entries).toHaveLength(1);
    const e = doc.entries[0];
    expect(e.title).toBe(`3@${s}`);
    expect(e.id).toBe(`${S}/3`);
    expect(e.summary).toBe('Numbered');
    expect(e.updated).toMatch(UPDATED);
    expect(e.content ?? null).toBeNull();
    expect(links(e)).toEqual([{ relation: 'edit', uri: `${S}/3` }, { relation: 'alternate', uri: `${S}/3` }]);
  });
});

describe('feed updated', () => {
  it('backward pages use the newest event, forward stream pages the oldest', async () => {
    const s = unique('updated');
    await appendN(s, 1, 'Old');
    await sleep(30);
    await appendN(s, 1, 'New');
    const backward = await feed(`/streams/${s}`);
    const forward = await feed(`/streams/${s}/0/forward/20`);
    const newer = entryOf(backward, `1@${s}`).updated;
    const older = entryOf(backward, `0@${s}`).updated;
    expect(newer).not.toBe(older);
    expect(backward.updated).toBe(newer);
    expect(forward.updated).toBe(older);
  });
});

describe('embed levels', () => {
  let s: string;
  const jsonData = { a: 1, nested: { b: [1, 2] } };
  const jsonMeta = { m: 'x' };
  const rawJson = '{"c":3,"d":[4,5]}';
  let firstId: string;

  beforeAll(async () => {
    s = unique('embed');
    const first = newEvent('JsonEv', jsonData, jsonMeta);
    firstId = first.eventId;
    expect((await append(t, s, [first])).status).toBe(201);               // 0: JSON + JSON metadata
    await appendRaw(s, rawJson, 'application/json', 'RawJson');             // 1: JSON, compact text as sent
    await appendRaw(s, 'plain text', 'application/octet-stream', 'Text');   // 2: not JSON
    await appendRaw(s, '{"t":1}', 'application/octet-stream', 'ObjText');  // 3: not JSON, but looks like an object
    expect((await append(t, s, [newEvent('NoMeta', { z: true })])).status).toBe(201); // 4: JSON, no metadata
  });

  const read = (embed?: string) => feed(`/streams/${s}${embed === undefined ? '' : `?embed=${embed}`}`);

  it.each([undefined, 'none', 'None', 'bogus'])('embed=%s adds nothing', async (embed) => {
    const doc = await read(embed);
    expect(doc.entries).toHaveLength(5);
    for (const e of doc.entries) {
      expect(e.content ?? null).toBeNull();
      expect(e).not.toHaveProperty('eventId');
      expect(e).not.toHaveProperty('data');
      expect(e).not.toHaveProperty('isJson');
    }
  });

  it('embed=content adds the content object to JSON events only', async () => {
    const doc = await read('content');
    expect(entryOf(doc, `0@${s}`).content).toEqual({
      eventStreamId: s, eventNumber: 0, eventType: 'JsonEv', eventId: firstId, data: jsonData, metadata: jsonMeta,
    });
    const raw = entryOf(doc, `1@${s}`).content;
    expect(raw.data).toEqual({ c: 3, d: [4, 5] });
    expect(raw.eventType).toBe('RawJson');
    expect(raw.eventNumber).toBe(1);
    expect(raw.metadata).toBe('');
    expect(entryOf(doc, `2@${s}`).content ?? null).toBeNull();
    expect(entryOf(doc, `3@${s}`).content ?? null).toBeNull();
    expect(entryOf(doc, `4@${s}`).content.data).toEqual({ z: true });
    for (const e of doc.entries) expect(e).not.toHaveProperty('eventId');
  });

  it('embed=rich adds the event fields with null data and false flags', async () => {
    const doc = await read('rich');
    const e0 = entryOf(doc, `0@${s}`);
    expect(e0).toMatchObject({
      eventId: firstId, eventType: 'JsonEv', eventNumber: 0, streamId: s, isJson: true, isRedacted: false,
      positionEventNumber: 0, positionStreamId: s,
      data: null, metaData: null, linkMetaData: null, isMetaData: false, isLinkMetaData: false,
    });
    expect(e0.content.data).toEqual(jsonData);
    const e2 = entryOf(doc, `2@${s}`);
    expect(e2).toMatchObject({ eventType: 'Text', eventNumber: 2, isJson: false, data: null, positionEventNumber: 2 });
    expect(entryOf(doc, `3@${s}`).isJson).toBe(false);
  });

  it('embed=body adds data as a JSON string (JSON events only) and metaData', async () => {
    const doc = await read('body');
    const e0 = entryOf(doc, `0@${s}`);
    expect(typeof e0.data).toBe('string');
    expect(JSON.parse(e0.data)).toEqual(jsonData);
    expect(typeof e0.metaData).toBe('string');
    expect(JSON.parse(e0.metaData)).toEqual(jsonMeta);
    expect(e0.isMetaData).toBe(true);
    expect(e0.isJson).toBe(true);
    expect(e0.eventId).toBe(firstId);
    expect(entryOf(doc, `1@${s}`).data).toBe(rawJson);
    expect(entryOf(doc, `2@${s}`).data).toBeNull();
    expect(entryOf(doc, `3@${s}`).data).toBeNull();
    const e4 = entryOf(doc, `4@${s}`);
    expect(JSON.parse(e4.data)).toEqual({ z: true });
    expect(e4.metaData).toBeNull();
    expect(e4.isMetaData).toBe(false);
  });

  it('embed is case-insensitive, for every value the seed lists', async () => {
    const doc = await read('Body');
    expect(entryOf(doc, `1@${s}`).data).toBe(rawJson);
    expect(entryOf(await read('Content'), `1@${s}`).content).toBeDefined();
    expect(entryOf(await read('Rich'), `1@${s}`)).toHaveProperty('eventType');
    expect(entryOf(await read('TryHarder'), `2@${s}`).data).toBe('plain text');
  });

  it.each(['pretty', 'PrettyBody', 'prettybody'])('embed=%s re-indents JSON data', async (embed) => {
    const doc = await read(embed);
    expect(entryOf(doc, `1@${s}`).data).toBe(JSON.stringify({ c: 3, d: [4, 5] }, null, 2));
    const e0 = entryOf(doc, `0@${s}`);
    expect(e0.data).toBe(JSON.stringify(jsonData, null, 2));
    expect(JSON.parse(e0.metaData)).toEqual(jsonMeta);
    expect(entryOf(doc, `2@${s}`).data).toBeNull();
    expect(entryOf(doc, `3@${s}`).data).toBeNull();
  });

  it('embed=tryharder also shows non-JSON data, as JSON when it parses as an object', async () => {
    const doc = await read('tryharder');
    const e2 = entryOf(doc, `2@${s}`);
    expect(e2.data).toBe('plain text');
    expect(e2.isJson).toBe(false);
    const e3 = entryOf(doc, `3@${s}`);
    expect(e3.isJson).toBe(true);
    expect(JSON.parse(e3.data)).toEqual({ t: 1 });
    expect(e3.data).toBe(JSON.stringify({ t: 1 }, null, 2));
    expect(entryOf(doc, `1@${s}`).data).toBe(JSON.stringify({ c: 3, d: [4, 5] }, null, 2));
  });
});

describe('feed representations', () => {
  let s: string;
  let S: string;
  beforeAll(async () => {
    s = unique('repr');
    S = `${t.url}/streams/${s}`;
    const res = await append(t, s, [newEvent('First', { n: 1 }), newEvent('Second', { n: 2 }), newEvent('Third', { n: 3 })]);
    expect(res.status).toBe(201);
  });

  it('atom+json in both vendor spellings and application/json give the same document', async () => {
    const path = `/streams/${s}/0/forward/20`;
    const bodies: unknown[] = [];
    for (const accept of [ATOM_JSON, ATOM_JSON_K, 'application/json']) {
      const res = await get(path, accept);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(new RegExp(`^${accept.replace(/[.+]/g, '\\$&')}(;|$)`));
      bodies.push(await res.json());
    }
    expect(bodies[1]).toEqual(bodies[0]);
    expect(bodies[2]).toEqual(bodies[0]);
    expect(titles(bodies[2])).toEqual(range(s, 2, 0));
  });

  it('application/json on the head page is the atom feed', async () => {
    const doc = await feed(`/streams/${s}`, 'application/json');
    expect(titles(doc)).toEqual(range(s, 2, 0));
    expect(doc.headOfStream).toBe(true);
    expect(rel(doc, 'previous')).toBe(`${S}/3/forward/20`);
  });

  it('application/atom+xml is an Atom feed with the same links and entries', async () => {
    const res = await get(`/streams/${s}`, ATOM_XML);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/atom\+xml/);
    const json = await feed(`/streams/${s}`);
    const doc = xml.parse(await res.text());
    expect(doc.feed['@_xmlns']).toBe('http://www.w3.org/2005/Atom');
    expect(doc.feed.title).toBe(`Event stream '${s}'`);
    expect(doc.feed.id).toBe(S);
    expect(doc.feed.updated).toMatch(UPDATED);
    expect(doc.feed.link.map((l: any) => ({ relation: l['@_rel'], uri: l['@_href'] }))).toEqual(links(json));
    expect(doc.feed.entry.map((e: any) => e.title)).toEqual(range(s, 2, 0));
    const third = doc.feed.entry[0];
    expect(third.id).toBe(`${S}/2`);
    expect(third.summary).toBe('Third');
    expect(third.link.map((l: any) => ({ relation: l['@_rel'], uri: l['@_href'] }))).toEqual([
      { relation: 'edit', uri: `${S}/2` }, { relation: 'alternate', uri: `${S}/2` },
    ]);
  });
});

describe('single events', () => {
  let s: string;
  let S: string;
  const bytes = Buffer.from([0, 1, 2, 0x7f, 0xfe, 0xff]);
  let firstId: string;

  beforeAll(async () => {
    s = unique('single');
    S = `${t.url}/streams/${s}`;
    const first = newEvent('Single', { a: 1, b: 'two' }, { m: 1 });
    firstId = first.eventId;
    expect((await append(t, s, [first])).status).toBe(201);                // 0 JSON
    await appendRaw(s, bytes, 'application/octet-stream', 'Bin');           // 1 raw bytes
    await appendRaw(s, 'hello world', 'application/octet-stream', 'Text');  // 2 text
    expect((await append(t, s, [newEvent('Last', { last: true })])).status).toBe(201); // 3 JSON
  });

  it('atom+json: an entry with content, immutable', async () => {
    for (const accept of [ATOM_JSON, ATOM_JSON_K]) {
      const res = await get(`/streams/${s}/0`, accept);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(new RegExp(`^${accept.replace(/[.+]/g, '\\$&')}`));
      expect(res.headers.get('cache-control')).toBe(IMMUTABLE);
      const e = await res.json();
      expect(e.title).toBe(`0@${s}`);
      expect(e.id).toBe(`${S}/0`);
      expect(e.summary).toBe('Single');
      expect(links(e)).toEqual([{ relation: 'edit', uri: `${S}/0` }, { relation: 'alternate', uri: `${S}/0` }]);
      expect(e.content).toEqual({
        eventStreamId: s, eventNumber: 0, eventType: 'Single', eventId: firstId, data: { a: 1, b: 'two' }, metadata: { m: 1 },
      });
    }
  });

  it('atom+xml: an Atom entry with <content type="application/xml">', async () => {
    const res = await get(`/streams/${s}/0`, ATOM_XML);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/atom\+xml/);
    const doc = xml.parse(await res.text());
    expect(doc.entry['@_xmlns']).toBe('http://www.w3.org/2005/Atom');
    expect(doc.entry.title).toBe(`0@${s}`);
    expect(doc.entry.id).toBe(`${S}/0`);
    expect(doc.entry.summary).toBe('Single');
    expect(doc.entry.content['@_type']).toBe('application/xml');
    expect(doc.entry.content.eventStreamId).toBe(s);
    expect(doc.entry.content.eventType).toBe('Single');
    expect(doc.entry.content.eventId).toBe(firstId);
    expect(doc.entry.content.data).toEqual({ a: 1, b: 'two' });
  });

  it('no Accept (and */*) answers atom+xml', async () => {
    const raw = await rawGet(`/streams/${s}/0`);
    expect(raw.status).toBe(200);
    expect(raw.headers['content-type']).toMatch(/^application\/atom\+xml/);
    expect(xml.parse(raw.body).entry.title).toBe(`0@${s}`);
    const star = await get(`/streams/${s}/0`, '*/*');
    expect(star.status).toBe(200);
    expect(star.headers.get('content-type')).toMatch(/^application\/atom\+xml/);
  });

  it('application/json: the bare data', async () => {
    const res = await get(`/streams/${s}/0`, 'application/json');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await res.json()).toEqual({ a: 1, b: 'two' });
  });

  it('application/json of a non-JSON event: the data as a JSON string', async () => {
    const res = await get(`/streams/${s}/2`, 'application/json');
    expect(res.status).toBe(200);
    expect(await res.json()).toBe('hello world');
  });

  it('event+json (both vendors): the event envelope', async () => {
    for (const accept of [EVENT_JSON, EVENT_JSON_K]) {
      const res = await get(`/streams/${s}/0`, accept);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(new RegExp(`^${accept.replace(/[.+]/g, '\\$&')}`));
      expect(await res.json()).toEqual({
        eventStreamId: s, eventNumber: 0, eventType: 'Single', eventId: firstId, data: { a: 1, b: 'two' }, metadata: { m: 1 },
      });
    }
  });

  it('text/xml: <data>…</data>', async () => {
    const res = await get(`/streams/${s}/0`, 'text/xml');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/xml/);
    const doc = xml.parse(await res.text());
    expect(doc.data).toEqual({ a: 1, b: 'two' });
  });

  it('application/octet-stream: the raw bytes', async () => {
    const res = await get(`/streams/${s}/1`, 'application/octet-stream');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/octet-stream/);
    expect(Buffer.from(await res.arrayBuffer())).toEqual(bytes);
    const text = await get(`/streams/${s}/2`, 'application/octet-stream');
    expect(Buffer.from(await text.arrayBuffer()).toString('utf8')).toBe('hello world');
  });

  it('/head is the last event, with an ETag and no-cache', async () => {
    const res = await get(`/streams/${s}/head`);
    expect(res.status).toBe(200);
    const e = await res.json();
    expect(e.title).toBe(`3@${s}`);
    expect(e.summary).toBe('Last');
    expect(e.content.data).toEqual({ last: true });
    expect(res.headers.get('etag')).toMatch(/^"3;-?\d+"$/);
    expect(res.headers.get('cache-control')).toBe(NO_CACHE);
    const again = await get(`/streams/${s}/head`, ATOM_JSON, { 'If-None-Match': res.headers.get('etag')! });
    expect(again.status).toBe(304);
  });

  it('/head in the other representations', async () => {
    const asJson = await get(`/streams/${s}/head`, 'application/json');
    expect(await asJson.json()).toEqual({ last: true });
    const asEvent = await get(`/streams/${s}/head`, EVENT_JSON);
    expect(await asEvent.json()).toMatchObject({ eventStreamId: s, eventNumber: 3, eventType: 'Last', data: { last: true } });
    const asXml = xml.parse(await (await get(`/streams/${s}/head`, ATOM_XML)).text());
    expect(asXml.entry.title).toBe(`3@${s}`);
  });

  it('/head moves when an event is appended', async () => {
    const s2 = unique('head-moves');
    await appendN(s2, 1, 'One');
    expect((await feed(`/streams/${s2}/head`)).title).toBe(`0@${s2}`);
    await appendN(s2, 1, 'Two');
    const e = await feed(`/streams/${s2}/head`);
    expect(e.title).toBe(`1@${s2}`);
    expect(e.summary).toBe('Two');
  });
});

describe('errors', () => {
  let s: string;
  beforeAll(async () => {
    s = unique('errors');
    await appendN(s, 3);
  });

  it.each([
    ['feed of a missing stream', '/streams/{missing}'],
    ['backward page of a missing stream', '/streams/{missing}/head/backward/20'],
    ['forward page of a missing stream', '/streams/{missing}/0/forward/20'],
    ['event of a missing stream', '/streams/{missing}/0'],
    ['head of a missing stream', '/streams/{missing}/head'],
    ['missing event number', '/streams/{s}/3'],
    ['far missing event number', '/streams/{s}/99'],
  ])('404 for the %s', async (_name, template) => {
    const path = template.replace('{missing}', unique('missing')).replace('{s}', s);
    const res = await get(path);
    expect(res.status).toBe(404);
  });

  it.each([
    ['/streams/{s}/abc', `'abc' is not valid event number`],
    ['/streams/{s}/-1', `'-1' is not valid event number`],
    ['/streams/{s}/abc/forward/20', `'abc' is not valid event number`],
    ['/streams/{s}/abc/backward/20', `'abc' is not valid event number`],
    ['/streams/{s}/1.5/backward/20', `'1.5' is not valid event number`],
    ['/streams/{s}/0/forward/abc', `'abc' is not valid count. Should be positive integer`],
    ['/streams/{s}/0/forward/0', `'0' is not valid count. Should be positive integer`],
    ['/streams/{s}/head/backward/-5', `'-5' is not valid count. Should be positive integer`],
    ['/streams/{s}/0/abc', `'abc' is not valid count. Should be positive integer`],
  ])('400 for %s', async (template, message) => {
    const res = await get(template.replace('{s}', s));
    expect(res.status).toBe(400);
    expect(await res.text()).toContain(message);
  });

  it('400 for head on a forward read', async () => {
    expect((await get(`/streams/${s}/head/forward/20`)).status).toBe(400);
  });
});

describe('caching and conditional GET', () => {
  it('head page ETag: If-None-Match answers 304 until the stream changes', async () => {
    const s = unique('etag');
    await appendN(s, 3);
    const first = await get(`/streams/${s}`);
    expect(first.status).toBe(200);
    const etag = first.headers.get('etag')!;
    expect(etag).toMatch(/^"2;-?\d+"$/);
    expect((await first.json()).eTag).toBe(etag.replace(/"/g, ''));

    const notModified = await get(`/streams/${s}`, ATOM_JSON, { 'If-None-Match': etag });
    expect(notModified.status).toBe(304);
    expect(await notModified.text()).toBe('');
    expect(notModified.headers.get('etag')).toBeNull();

    // Quotes are optional.
    const unquoted = await get(`/streams/${s}`, ATOM_JSON, { 'If-None-Match': etag.replace(/"/g, '') });
    expect(unquoted.status).toBe(304);

    await appendN(s, 1);
    const changed = await get(`/streams/${s}`, ATOM_JSON, { 'If-None-Match': etag });
    expect(changed.status).toBe(200);
    expect(changed.headers.get('etag')).toMatch(/^"3;-?\d+"$/);
    expect(titles(await changed.json())[0]).toBe(`3@${s}`);
  });

  it('new metadata changes the head page ETag: a client holding the old page gets the new one', async () => {
    const s = unique('etag-meta');
    await appendN(s, 3);
    const first = await get(`/streams/${s}`);
    const etag = first.headers.get('etag')!;
    expect(titles(await first.json())).toHaveLength(3);
    const meta = await http(t, `/streams/${s}/metadata`, {
      method: 'POST', headers: { 'Content-Type': 'application/vnd.eventstore.events+json' },
      body: JSON.stringify([newEvent('$metadata', { $maxCount: 1 })]),
    });
    expect(meta.status).toBe(201);
    const after = await get(`/streams/${s}`, ATOM_JSON, { 'If-None-Match': etag });
    expect(after.status).toBe(200);
    expect(after.headers.get('etag')).toMatch(/^"2;-?\d+"$/);
    expect(after.headers.get('etag')).not.toBe(etag);
    expect(titles(await after.json())).toEqual([`2@${s}`]);
    const again = await get(`/streams/${s}`, ATOM_JSON, { 'If-None-Match': after.headers.get('etag')! });
    expect(again.status).toBe(304);
  });

  it('the ETag depends on the media type', async () => {
    const s = unique('etag-type');
    await appendN(s, 2);
    const atom = await get(`/streams/${s}`, ATOM_JSON);
    const plain = await get(`/streams/${s}`, 'application/json');
    const etag = atom.headers.get('etag')!;
    expect(plain.headers.get('etag')).toMatch(/^"1;-?\d+"$/);
    expect(plain.headers.get('etag')).not.toBe(etag);
    const other = await get(`/streams/${s}`, 'application/json', { 'If-None-Match': etag });
    expect(other.status).toBe(200);
    const same = await get(`/streams/${s}`, ATOM_JSON, { 'If-None-Match': etag });
    expect(same.status).toBe(304);
  });

  it('immutable pages: backward non-head and full forward pages; partial and beyond-end pages are not', async () => {
    const s = unique('immutable');
    await appendN(s, 10);
    const cases: Array<[string, string, boolean]> = [
      [`/streams/${s}/5/backward/3`, IMMUTABLE, false],
      [`/streams/${s}/9/backward/20`, IMMUTABLE, false],
      [`/streams/${s}/0/forward/5`, IMMUTABLE, false],
      [`/streams/${s}/5/forward/5`, IMMUTABLE, false],
      [`/streams/${s}/6/forward/5`, NO_CACHE, true],
      [`/streams/${s}/50/backward/20`, NO_CACHE, true],
      [`/streams/${s}`, NO_CACHE, true],
    ];
    for (const [path, cacheControl, hasEtag] of cases) {
      const res = await get(path);
      expect(res.status, path).toBe(200);
      expect(res.headers.get('cache-control'), path).toBe(cacheControl);
      expect(res.headers.get('etag') !== null, `${path} has an ETag`).toBe(hasEtag);
      expect(res.headers.get('vary'), path).toMatch(/Accept/i);
    }
  });

  it('$cacheControl metadata sets the head max-age', async () => {
    const s = unique('cache-meta');
    await appendN(s, 2);
    const meta = await http(t, `/streams/${s}/metadata`, {
      method: 'POST', headers: { 'Content-Type': 'application/vnd.eventstore.events+json' },
      body: JSON.stringify([newEvent('$metadata', { $cacheControl: 30 })]),
    });
    expect(meta.status).toBe(201);
    const head = await get(`/streams/${s}`);
    expect(head.headers.get('cache-control')).toBe('max-age=30, private');
    expect(head.headers.get('etag')).toMatch(/^"1;-?\d+"$/);
    expect((await get(`/streams/${s}/0/backward/1`)).headers.get('cache-control')).toBe(IMMUTABLE);
  });
});

describe('long polling', () => {
  const forwardAt = (s: string, from: number, headers: Record<string, string>) =>
    get(`/streams/${s}/${from}/forward/20`, ATOM_JSON, headers);

  it('without a long-poll header a read at the end answers at once with an empty page', async () => {
    const s = unique('nopoll');
    await appendN(s, 1);
    const started = performance.now();
    const res = await forwardAt(s, 1, {});
    expect(res.status).toBe(200);
    expect((await res.json()).entries).toEqual([]);
    expect(performance.now() - started).toBeLessThan(1000);
  });

  it('SVC-LongPoll: a forward read at the end returns as soon as another request appends', async () => {
    const s = unique('poll');
    await appendN(s, 1, 'Before');
    const started = performance.now();
    const poll = forwardAt(s, 1, { 'SVC-LongPoll': '10' });
    await sleep(500);
    const appended = await append(t, s, [newEvent('Late', { late: true })]);
    expect(appended.status).toBe(201);
    const res = await poll;
    const elapsed = performance.now() - started;
    expect(res.status).toBe(200);
    const doc = await res.json();
    expect(titles(doc)).toEqual([`1@${s}`]);
    expect(doc.entries[0].summary).toBe('Late');
    expect(elapsed).toBeGreaterThanOrEqual(450);
    expect(elapsed).toBeLessThan(5000);
  });

  it.each(['Kurrent-LongPoll', 'ES-LongPoll'])('%s is accepted as an alias', async (header) => {
    const s = unique('poll-alias');
    await appendN(s, 2);
    const started = performance.now();
    const poll = forwardAt(s, 2, { [header]: '10' });
    await sleep(300);
    expect((await append(t, s, [newEvent('Late')])).status).toBe(201);
    const res = await poll;
    const elapsed = performance.now() - started;
    expect(titles(await res.json())).toEqual([`2@${s}`]);
    expect(elapsed).toBeGreaterThanOrEqual(250);
    expect(elapsed).toBeLessThan(5000);
  });

  it('answers an empty page after the timeout when nothing arrives', async () => {
    const s = unique('poll-timeout');
    await appendN(s, 1);
    const started = performance.now();
    const res = await forwardAt(s, 1, { 'SVC-LongPoll': '1' });
    const elapsed = performance.now() - started;
    expect(res.status).toBe(200);
    const doc = await res.json();
    expect(doc.entries).toEqual([]);
    expect(rel(doc, 'previous')).toBeUndefined();
    expect(elapsed).toBeGreaterThanOrEqual(950);
    expect(elapsed).toBeLessThan(5000);
  });

  it('appends to other streams do not end the wait', async () => {
    const s = unique('poll-other');
    await appendN(s, 1);
    const started = performance.now();
    const poll = forwardAt(s, 1, { 'SVC-LongPoll': '10' });
    await sleep(300);
    expect((await append(t, unique('unrelated'), [newEvent('Noise')])).status).toBe(201);
    await sleep(600);
    expect((await append(t, s, [newEvent('Wanted')])).status).toBe(201);
    const res = await poll;
    const elapsed = performance.now() - started;
    const doc = await res.json();
    expect(titles(doc)).toEqual([`1@${s}`]);
    expect(elapsed).toBeGreaterThanOrEqual(850);
    expect(elapsed).toBeLessThan(5000);
  });

  it('a long poll on a stream that does not exist yet returns its first event', async () => {
    const s = unique('poll-new');
    const started = performance.now();
    const poll = forwardAt(s, 0, { 'SVC-LongPoll': '10' });
    await sleep(300);
    expect((await append(t, s, [newEvent('Born')])).status).toBe(201);
    const res = await poll;
    expect(res.status).toBe(200);
    expect(titles(await res.json())).toEqual([`0@${s}`]);
    expect(performance.now() - started).toBeLessThan(5000);
  });
});

describe('description document', () => {
  let s: string;
  beforeAll(async () => {
    s = unique('desc');
    await appendN(s, 2);
  });

  function expectDescription(doc: any, selfType: string): void {
    expect(doc.title).toBe(`Description document for '${s}'`);
    expect(doc._links.self.href).toBe(`/streams/${s}`);
    expect(doc._links.self.supportedContentTypes).toEqual([selfType]);
    expect(doc._links.stream.href).toBe(`/streams/${s}`);
    expect(doc._links.stream.supportedContentTypes).toEqual(
      expect.arrayContaining([ATOM_XML, ATOM_JSON]),
    );
  }

  it('no Accept on GET /streams/{s} answers 406 with the description document', async () => {
    const res = await rawGet(`/streams/${s}`);
    expect(res.status).toBe(406);
    expect(res.headers['content-type']).toMatch(/streamdesc\+json/);
    expectDescription(JSON.parse(res.body), res.headers['content-type'].split(';')[0]);
  });

  it('Accept */* answers 406 with the description document too', async () => {
    const res = await get(`/streams/${s}`, '*/*');
    expect(res.status).toBe(406);
    const doc = await res.json();
    expect(doc.title).toBe(`Description document for '${s}'`);
  });

  it('no Accept on a backward page route answers 406 with the description document', async () => {
    const res = await rawGet(`/streams/${s}/head/backward/20`);
    expect(res.status).toBe(406);
    expect(JSON.parse(res.body).title).toBe(`Description document for '${s}'`);
  });

  it.each([STREAMDESC, STREAMDESC_K])('Accept %s answers 200 with the description document', async (accept) => {
    const res = await get(`/streams/${s}`, accept);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(new RegExp(`^${accept.replace(/[.+]/g, '\\$&')}`));
    expectDescription(await res.json(), accept);
  });

  it('a forward page with */* is the feed, not the description document', async () => {
    const res = await get(`/streams/${s}/0/forward/20`, '*/*');
    expect(res.status).toBe(200);
    expect(titles(await res.json())).toEqual(range(s, 1, 0));
  });
});

describe('trailing slash', () => {
  it('GET /streams/{s}/ redirects 307 to the URL without the slash, without authorization', async () => {
    const s = unique('slash');
    await appendN(s, 1);
    const res = await http(t, `/streams/${s}/`, { authorization: '', headers: { Accept: ATOM_JSON } });
    expect(res.status).toBe(307);
    expect(res.headers.get('location')).toBe(`${t.url}/streams/${s}`);
    expect(res.headers.get('cache-control')).toBe('max-age=31536000, public');
    expect(await res.text()).toBe('Moved Permanently');
  });
});
