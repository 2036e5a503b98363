import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { append, basic, EVENTS_JSON, http, newEvent, OPS, startTestNode, type TestNode } from './support/node.js';

// End-to-end reads of $all (paging by 32-hex positions, admin-only access, what the log shows
// that stream reads hide) and of link events `$>` on stream reads and $all.
// (http-wire.md §3.6, §3.11, §4.2, §5.4)

const ATOM_JSON = 'application/vnd.eventstore.atom+json';
const IMMUTABLE = 'max-age=31536000, private';
const NO_CACHE = 'max-age=0, no-cache, must-revalidate';
const ZEROS = '0'.repeat(32);
const HEX = '[0-9A-F]{32}';

let t: TestNode;
let ALL: string;
beforeAll(async () => {
  t = await startTestNode();
  ALL = `${t.url}/streams/%24all`;
});
afterAll(async () => { await t?.dispose(); });

let counter = 0;
function unique(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${++counter}`;
}

async function appendOk(stream: string, events: unknown[]): Promise<void> {
  const res = await append(t, stream, events);
  expect(res.status, `append to ${stream}`).toBe(201);
}

function get(path: string, headers: Record<string, string> = {}, authorization?: string): Promise<Response> {
  return http(t, path, { headers: { Accept: ATOM_JSON, ...headers }, ...(authorization === undefined ? {} : { authorization }) });
}

async function feed(path: string, headers: Record<string, string> = {}): Promise<any> {
  const res = await get(path, headers);
  expect(res.status, `GET ${path}`).toBe(200);
  return res.json();
}

async function follow(uri: string): Promise<any> {
  expect(uri.startsWith(`${t.url}/`), `${uri} is absolute and on this node`).toBe(true);
  return feed(uri.slice(t.url.length));
}

function rel(doc: any, relation: string): string | undefined {
  return doc.links.find((l: any) => l.relation === relation)?.uri;
}

function titles(doc: any): string[] {
  return doc.entries.map((e: any) => e.title);
}

function entryOf(doc: any, title: string): any {
  const entry = doc.entries.find((e: any) => e.title === title);
  expect(entry, `entry ${title} in ${JSON.stringify(titles(doc))}`).toBeDefined();
  return entry;
}

/** A big enough head page of $all to see everything the test just wrote. */
async function allHead(headers: Record<string, string> = {}): Promise<any> {
  return feed('/streams/%24all/head/backward/500', headers);
}

function expectChallenge(res: Response): void {
  expect(res.status).toBe(401);
  expect(res.headers.get('www-authenticate') ?? '').not.toBe('');
}

describe('$all paging', () => {
  let s: string;
  beforeAll(async () => {
    s = unique('paging');
    await appendOk(s, Array.from({ length: 7 }, (_, i) => newEvent('Paged', { i })));
  });

  it('the head page: feed fields, links and the newest events first', async () => {
    const res = await get('/streams/%24all');
    expect(res.status).toBe(200);
    const doc = await res.json();
    expect(doc.title).toBe('All events');
    expect(doc.id).toBe(ALL);
    expect(doc.streamId ?? null).toBeNull();
    expect(doc.headOfStream).toBe(false);
    expect(titles(doc).slice(0, 7)).toEqual([6, 5, 4, 3, 2, 1, 0].map((n) => `${n}@${s}`));
    expect(rel(doc, 'self')).toBe(ALL);
    expect(rel(doc, 'first')).toBe(`${ALL}/head/backward/20`);
    expect(rel(doc, 'metadata')).toBe(`${ALL}/metadata`);
    expect(rel(doc, 'previous')).toMatch(new RegExp(`^${ALL}/${HEX}/forward/20$`));
    expect(res.headers.get('cache-control')).toBe(NO_CACHE);
    expect(res.headers.get('etag')).not.toBeNull();
  });

  it('$all and %24all are the same resource', async () => {
    const literal = await feed('/streams/$all/head/backward/5');
    const escaped = await feed('/streams/%24all/head/backward/5');
    expect(titles(literal)).toEqual(titles(escaped));
    expect(titles(literal)).toEqual([6, 5, 4, 3, 2].map((n) => `${n}@${s}`));
  });

  it('pages backward by position following next, and forward from last following previous', async () => {
    const head = await feed('/streams/%24all/head/backward/3');
    expect(titles(head)).toEqual([`6@${s}`, `5@${s}`, `4@${s}`]);
    expect(rel(head, 'last')).toBe(`${ALL}/${ZEROS}/forward/3`);

    const backward: string[] = [...titles(head)];
    let page = head;
    for (let i = 0; i < 200 && rel(page, 'next'); i++) {
      const next = rel(page, 'next')!;
      expect(next).toMatch(new RegExp(`^${ALL}/${HEX}/backward/3$`));
      expect(rel(page, 'last')).toBe(`${ALL}/${ZEROS}/forward/3`);
      page = await follow(next);
      expect(page.entries.length).toBeLessThanOrEqual(3);
      backward.push(...titles(page));
    }
    expect(rel(page, 'next')).toBeUndefined();
    expect(new Set(backward).size).toBe(backward.length);
    expect(backward.slice(0, 7)).toEqual([6, 5, 4, 3, 2, 1, 0].map((n) => `${n}@${s}`));
    expect(backward.length).toBeGreaterThan(7); // the users written at start-up are in the log too

    let fwd = await follow(rel(head, 'last')!);
    expect(rel(fwd, 'last')).toBeUndefined();
    expect(rel(fwd, 'next')).toBeUndefined();
    const forward: string[] = [];
    for (let i = 0; i < 200; i++) {
      forward.push(...[...titles(fwd)].reverse()); // entries are newest first on every page
      const previous = rel(fwd, 'previous');
      if (!previous) break;
      expect(previous).toMatch(new RegExp(`^${ALL}/${HEX}/forward/3$`));
      fwd = await follow(previous);
      if (fwd.entries.length > 0) {
        expect(rel(fwd, 'last')).toBe(`${ALL}/${ZEROS}/forward/3`);
        expect(rel(fwd, 'next')).toMatch(new RegExp(`^${ALL}/${HEX}/backward/3$`));
      }
    }
    expect(fwd.entries).toEqual([]);
    expect(rel(fwd, 'previous')).toBeUndefined();
    expect(forward).toEqual([...backward].reverse());
  });

  it('full forward pages and older backward pages are immutable; the live edge is not', async () => {
    const full = await get(`/streams/%24all/${ZEROS}/forward/2`);
    expect(full.status).toBe(200);
    expect(full.headers.get('cache-control')).toBe(IMMUTABLE);
    const head = await feed('/streams/%24all/head/backward/2');
    const older = await get(rel(head, 'next')!.slice(t.url.length));
    expect(older.status).toBe(200);
    expect(older.headers.get('cache-control')).toBe(IMMUTABLE);
    const edge = await get(rel(head, 'previous')!.slice(t.url.length));
    expect(edge.status).toBe(200);
    expect(edge.headers.get('cache-control')).toBe(NO_CACHE);
  });

  it('the previous link of the head page is where new events appear', async () => {
    const head = await feed('/streams/%24all/head/backward/5');
    const previous = rel(head, 'previous')!;
    expect((await follow(previous)).entries).toEqual([]);
    const later = unique('later');
    await appendOk(later, [newEvent('Later')]);
    expect(titles(await follow(previous))).toEqual([`0@${later}`]);
  });

  it('400 for a bad position', async () => {
    expect((await get('/streams/%24all/xyz/forward/20')).status).toBe(400);
    expect((await get('/streams/%24all/1234/backward/20')).status).toBe(400);
  });
});

describe('$all access', () => {
  it.each([
    '/streams/%24all',
    '/streams/$all',
    '/streams/%24all/head/backward/20',
    `/streams/%24all/${ZEROS}/forward/20`,
  ])('ops (not an admin) gets 401 with a challenge on %s', async (path) => {
    expectChallenge(await get(path, {}, OPS));
  });

  it.each([
    '/streams/%24all',
    `/streams/%24all/${ZEROS}/forward/20`,
  ])('anonymous gets 401 with a challenge on %s', async (path) => {
    expectChallenge(await get(path, {}, ''));
  });

  it('a bad password gets 401 with a challenge', async () => {
    expectChallenge(await get('/streams/%24all', {}, basic('admin', 'wrong')));
  });

  it('admin reads $all', async () => {
    expect((await get('/streams/%24all', {})).status).toBe(200);
  });

  it('writing $all is refused with 401 and a challenge, even for admin', async () => {
    const write = await http(t, '/streams/%24all', {
      method: 'POST', headers: { 'Content-Type': EVENTS_JSON }, body: JSON.stringify([newEvent('Nope')]),
    });
    expectChallenge(write);
    const head = await allHead();
    expect(head.entries.map((e: any) => e.summary)).not.toContain('Nope');
  });

  it('deleting $all is refused with 401 and a challenge, even for admin', async () => {
    expectChallenge(await http(t, '/streams/%24all', { method: 'DELETE' }));
    expect((await get('/streams/%24all')).status).toBe(200);
  });
});

describe('what $all shows that stream reads hide', () => {
  it('metadata events', async () => {
    const s = unique('with-meta');
    await appendOk(s, [newEvent('Plain')]);
    const meta = await http(t, `/streams/${s}/metadata`, {
      method: 'POST', headers: { 'Content-Type': EVENTS_JSON },
      body: JSON.stringify([newEvent('$metadata', { custom: 'value' })]),
    });
    expect(meta.status).toBe(201);
    const doc = await allHead();
    const entry = entryOf(doc, `0@$$${s}`);
    expect(entry.summary).toBe('$metadata');
    expect(entry.id).toBe(`${t.url}/streams/%24%24${s}/0`);
  });

  it('events of a soft-deleted stream', async () => {
    const s = unique('soft');
    await appendOk(s, [newEvent('Gone', { n: 0 }), newEvent('Gone', { n: 1 })]);
    expect((await http(t, `/streams/${s}`, { method: 'DELETE' })).status).toBe(204);
    expect((await get(`/streams/${s}`)).status).toBe(404);
    const doc = await allHead();
    expect(entryOf(doc, `0@${s}`).summary).toBe('Gone');
    expect(entryOf(doc, `1@${s}`).summary).toBe('Gone');
  });

  it('events of a hard-deleted stream', async () => {
    const s = unique('hard');
    await appendOk(s, [newEvent('Tombstoned', { n: 0 })]);
    expect((await http(t, `/streams/${s}`, { method: 'DELETE', headers: { 'SVC-HardDelete': 'true' } })).status).toBe(204);
    expect((await get(`/streams/${s}`)).status).toBe(410);
    const doc = await allHead();
    expect(entryOf(doc, `0@${s}`).summary).toBe('Tombstoned');
  });
});

describe('link events', () => {
  let target: string;
  let links: string;
  let T: string;
  let L: string;
  beforeAll(async () => {
    target = unique('target');
    links = unique('links');
    T = `${t.url}/streams/${target}`;
    L = `${t.url}/streams/${links}`;
    await appendOk(target, [newEvent('TargetEvent', { v: 1 })]);
    await appendOk(links, [newEvent('$>', `0@${target}`)]);
  });

  it('a stream read resolves the link to its target by default', async () => {
    const doc = await feed(`/streams/${links}`);
    expect(doc.entries).toHaveLength(1);
    const e = doc.entries[0];
    expect(e.title).toBe(`0@${target}`);
    expect(e.id).toBe(`${T}/0`);
    expect(e.links.map((l: any) => [l.relation, l.uri])).toEqual([['edit', `${T}/0`], ['alternate', `${T}/0`]]);
    expect(e.summary).toBe('$>');
  });

  it('embedded fields of a resolved link describe the target, positions the link', async () => {
    const doc = await feed(`/streams/${links}?embed=body`);
    const e = doc.entries[0];
    expect(e).toMatchObject({
      eventType: 'TargetEvent', eventNumber: 0, streamId: target, positionStreamId: links, positionEventNumber: 0,
    });
    expect(JSON.parse(e.data)).toEqual({ v: 1 });
  });

  it.each(['SVC-ResolveLinkTos', 'Kurrent-ResolveLinkTos', 'ES-ResolveLinkTos'])(
    'a stream read with %s: False shows the link event itself',
    async (header) => {
      const doc = await feed(`/streams/${links}`, { [header]: 'False' });
      expect(doc.entries).toHaveLength(1);
      expect(doc.entries[0].title).toBe(`0@${links}`);
      expect(doc.entries[0].id).toBe(`${L}/0`);
      expect(doc.entries[0].summary).toBe('$>');
    },
  );

  it('a single-event read resolves too, unless told not to', async () => {
    const resolved = await feed(`/streams/${links}/0`);
    expect(resolved.title).toBe(`0@${target}`);
    expect(resolved.content).toMatchObject({ eventStreamId: target, eventNumber: 0, eventType: 'TargetEvent', data: { v: 1 } });
    const raw = await feed(`/streams/${links}/0`, { 'SVC-ResolveLinkTos': 'False' });
    expect(raw.title).toBe(`0@${links}`);
    expect(raw.summary).toBe('$>');
  });

  it('$all does not resolve links by default', async () => {
    const doc = await allHead();
    const link = entryOf(doc, `0@${links}`);
    expect(link.summary).toBe('$>');
    expect(link.id).toBe(`${L}/0`);
    expect(titles(doc).filter((x) => x === `0@${target}`)).toHaveLength(1); // only the target event itself
  });

  it('$all resolves links with SVC-ResolveLinkTos: True', async () => {
    const doc = await allHead({ 'SVC-ResolveLinkTos': 'True' });
    expect(titles(doc)).not.toContain(`0@${links}`);
    expect(titles(doc).filter((x) => x === `0@${target}`)).toHaveLength(2); // the target and the resolved link
  });

  it('a link whose target is missing still points at the target; reading it singly is 404', async () => {
    const dangling = unique('dangling');
    await appendOk(dangling, [newEvent('$>', `5@${target}`)]);
    const doc = await feed(`/streams/${dangling}`);
    expect(doc.entries).toHaveLength(1);
    expect(doc.entries[0].title).toBe(`5@${target}`);
    expect(doc.entries[0].id).toBe(`${T}/5`);
    expect((await get(`/streams/${dangling}/0`)).status).toBe(404);
  });
});
