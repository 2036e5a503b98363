import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVENTS_JSON, OPS, append, http, newEvent, startTestNode, type TestNode, uniq } from './support/node.js';

// End-to-end tests of DELETE /streams/{stream} (soft and hard) and of stream metadata:
// GET/POST /streams/{s}/metadata, the reserved keys applied to reads ($maxCount, $maxAge, $tb,
// $cacheControl, $acl), custom keys, and validation. Every test uses its own stream names.

const ATOM_JSON = 'application/vnd.eventstore.atom+json';
const SOFT_DELETED_TB = /"\$tb"\s*:\s*9223372036854775807\b/;

let t: TestNode;
beforeAll(async () => { t = await startTestNode(); });
afterAll(async () => { await t?.dispose(); });


function enc(stream: string): string {
  return encodeURIComponent(stream);
}

async function appendN(stream: string, n: number, type = 'E'): Promise<void> {
  const res = await append(t, stream, Array.from({ length: n }, (_, i) => newEvent(`${type}${i}`, { i })));
  expect(res.status).toBe(201);
}

function get(path: string, accept = ATOM_JSON, authorization?: string): Promise<Response> {
  return http(t, path, { headers: { Accept: accept }, ...(authorization === undefined ? {} : { authorization }) });
}

/** Titles (`n@stream`) of the entries of a stream page, newest first; the status when not 200. */
async function titles(path: string): Promise<string[] | number> {
  const res = await get(path);
  if (res.status !== 200) return res.status;
  const feed = await res.json() as { entries: { title: string }[] };
  return feed.entries.map((e) => e.title);
}

/** Event numbers visible in a stream (forward from 0, oldest first); the status when not 200. */
async function visible(stream: string): Promise<number[] | number> {
  const res = await get(`/streams/${enc(stream)}/0/forward/4096`);
  if (res.status !== 200) return res.status;
  const feed = await res.json() as { entries: { title: string }[] };
  return feed.entries.map((e) => Number(e.title.split('@')[0])).reverse();
}

function del(stream: string, headers: Record<string, string> = {}): Promise<Response> {
  return http(t, `/streams/${enc(stream)}`, { method: 'DELETE', headers });
}

async function expectDeleted204(res: Response): Promise<void> {
  const body = await res.text();
  expect({ status: res.status, body }).toEqual({ status: 204, body: '' });
}

async function expectWrongVersion(res: Response, current: number): Promise<void> {
  const body = await res.text();
  expect(res.status).toBe(400);
  expect(body).toBe('');
  expect(res.headers.get('svc-currentversion')).toBe(String(current));
  expect(res.headers.get('kurrent-currentversion')).toBe(String(current));
  expect(res.headers.get('es-currentversion')).toBe(String(current));
}

async function expectCreatedAt(res: Response, stream: string, n: number): Promise<void> {
  expect(res.status).toBe(201);
  expect(res.headers.get('location')).toBe(`${t.url}/streams/${enc(stream)}/${n}`);
}

function postMetadata(stream: string, doc: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return http(t, `/streams/${enc(stream)}/metadata`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'SVC-EventId': randomUUID(), ...headers },
    body: typeof doc === 'string' ? doc : JSON.stringify(doc),
  });
}

async function setMetadata(stream: string, doc: unknown): Promise<void> {
  const res = await postMetadata(stream, doc);
  expect(res.status).toBe(201);
}

async function getMetadata(stream: string): Promise<{ status: number; text: string }> {
  const res = await get(`/streams/${enc(stream)}/metadata`, 'application/json');
  return { status: res.status, text: await res.text() };
}

/** Every entry title of $all (admin), paging forward from the start with the `previous` links. */
async function allTitles(): Promise<Set<string>> {
  const seen = new Set<string>();
  let path = '/streams/%24all/00000000000000000000000000000000/forward/100';
  for (let page = 0; page < 100_000; page++) {
    const res = await get(path);
    expect(res.status).toBe(200);
    const feed = await res.json() as { entries: { title: string }[]; links: { uri: string; relation: string }[] };
    for (const e of feed.entries) seen.add(e.title);
    const previous = feed.links.find((l) => l.relation === 'previous');
    if (feed.entries.length === 0 || !previous) break;
    expect(previous.uri.startsWith(t.url)).toBe(true);
    path = previous.uri.slice(t.url.length);
  }
  return seen;
}

async function expectInAll(stream: string, numbers: number[]): Promise<void> {
  const all = await allTitles();
  expect(numbers.filter((n) => !all.has(`${n}@${stream}`))).toEqual([]);
}

describe('soft delete', () => {
  it('answers 204 with an empty body; every read of the stream then answers 404', async () => {
    const s = uniq('soft');
    await appendN(s, 3);
    await expectDeleted204(await del(s));
    expect((await get(`/streams/${enc(s)}`)).status).toBe(404);
    expect((await get(`/streams/${enc(s)}/head/backward/20`)).status).toBe(404);
    expect((await get(`/streams/${enc(s)}/0/forward/20`)).status).toBe(404);
    expect((await get(`/streams/${enc(s)}/0`, 'application/vnd.eventstore.event+json')).status).toBe(404);
    expect((await get(`/streams/${enc(s)}/2`, 'application/vnd.eventstore.event+json')).status).toBe(404);
    expect((await get(`/streams/${enc(s)}/head`, 'application/vnd.eventstore.event+json')).status).toBe(404);
  });

  it('writes $tb = Int64.MaxValue as the metadata, replacing the earlier metadata', async () => {
    const s = uniq('soft-meta');
    await appendN(s, 2);
    await setMetadata(s, { custom: 'gone after delete', $maxCount: 50 });
    await expectDeleted204(await del(s));
    const meta = await getMetadata(s);
    expect(meta.status).toBe(200);
    expect(meta.text).toMatch(SOFT_DELETED_TB);
    expect(meta.text).not.toContain('custom');
    expect(meta.text).not.toContain('$maxCount');
  });

  it.each(['-2', undefined])('appending again (expected version %s) recreates it: numbering continues, old events stay hidden', async (ev) => {
    const s = uniq('soft-recreate');
    await appendN(s, 3);
    await expectDeleted204(await del(s));
    const e = newEvent('Reborn', { again: true });
    await expectCreatedAt(await append(t, s, [e], ev === undefined ? {} : { 'SVC-ExpectedVersion': ev }), s, 3);

    expect(await titles(`/streams/${enc(s)}`)).toEqual([`3@${s}`]);
    expect(await visible(s)).toEqual([3]);
    expect((await get(`/streams/${enc(s)}/0`, 'application/vnd.eventstore.event+json')).status).toBe(404);
    expect((await get(`/streams/${enc(s)}/2`, 'application/vnd.eventstore.event+json')).status).toBe(404);
    const three = await get(`/streams/${enc(s)}/3`, 'application/vnd.eventstore.event+json');
    expect(three.status).toBe(200);
    expect(await three.json()).toMatchObject({ eventNumber: 3, eventType: 'Reborn', eventId: e.eventId, data: { again: true } });
    // the server rewrote $tb to the old last event number + 1
    const meta = await getMetadata(s);
    expect(meta.status).toBe(200);
    expect(JSON.parse(meta.text)).toEqual({ $tb: 3 });
  });

  it('appending with -1 recreates it after a soft delete', async () => {
    const s = uniq('soft-nostream');
    await appendN(s, 2);
    await expectDeleted204(await del(s));
    await expectCreatedAt(await append(t, s, [newEvent('New')], { 'SVC-ExpectedVersion': '-1' }), s, 2);
    expect(await visible(s)).toEqual([2]);
  });

  it('appending with the old last event number recreates it; another number conflicts and writes nothing', async () => {
    const s = uniq('soft-exact');
    await appendN(s, 3);
    await expectDeleted204(await del(s));
    const wrong = await append(t, s, [newEvent('Wrong')], { 'SVC-ExpectedVersion': '0' });
    expect(wrong.status).toBe(400);
    expect((await get(`/streams/${enc(s)}`)).status).toBe(404);
    await expectCreatedAt(await append(t, s, [newEvent('Right')], { 'SVC-ExpectedVersion': '2' }), s, 3);
    expect(await visible(s)).toEqual([3]);
  });

  it('appending with -4 to a soft-deleted stream answers 410 and does not recreate it', async () => {
    const s = uniq('soft-exists');
    await appendN(s, 2);
    await expectDeleted204(await del(s));
    expect((await append(t, s, [newEvent('X')], { 'SVC-ExpectedVersion': '-4' })).status).toBe(410);
    expect((await get(`/streams/${enc(s)}`)).status).toBe(404);
  });

  it('can be repeated: delete, recreate, delete, recreate keeps numbering and hides everything older', async () => {
    const s = uniq('soft-twice');
    await appendN(s, 2);
    await expectDeleted204(await del(s));
    await expectCreatedAt(await append(t, s, [newEvent('Second'), newEvent('Second')]), s, 2);
    expect(await visible(s)).toEqual([2, 3]);
    await expectDeleted204(await del(s));
    expect((await get(`/streams/${enc(s)}`)).status).toBe(404);
    await expectCreatedAt(await append(t, s, [newEvent('Third')]), s, 4);
    expect(await visible(s)).toEqual([4]);
    expect(await titles(`/streams/${enc(s)}`)).toEqual([`4@${s}`]);
  });

  it('soft-deleted events stay visible in $all (no scavenge has run)', async () => {
    const s = uniq('soft-all');
    await appendN(s, 3);
    await expectDeleted204(await del(s));
    await expectInAll(s, [0, 1, 2]);
  });

  it.each([
    ['-2', 204], ['1', 204], ['-4', 204],
  ])('honours expected version %s on a stream with 2 events (%i)', async (ev, status) => {
    const s = uniq('soft-ev');
    await appendN(s, 2);
    const res = await del(s, { 'SVC-ExpectedVersion': ev });
    expect(res.status).toBe(status);
    expect((await get(`/streams/${enc(s)}`)).status).toBe(404);
  });

  it.each(['2', '0', '-1'])('a wrong expected version %s answers 400 with CurrentVersion 1 and deletes nothing', async (ev) => {
    const s = uniq('soft-ev-wrong');
    await appendN(s, 2);
    await expectWrongVersion(await del(s, { 'SVC-ExpectedVersion': ev }), 1);
    expect(await visible(s)).toEqual([0, 1]);
  });

  it.each(['ES-ExpectedVersion', 'Kurrent-ExpectedVersion'])('reads the expected version from %s', async (header) => {
    const s = uniq('soft-ev-spell');
    await appendN(s, 2);
    await expectWrongVersion(await del(s, { [header]: '0' }), 1);
    await expectDeleted204(await del(s, { [header]: '1' }));
  });

  it('of a stream that never existed answers 400 with CurrentVersion -1', async () => {
    const s = uniq('soft-none');
    await expectWrongVersion(await del(s), -1);
    expect((await get(`/streams/${enc(s)}`)).status).toBe(404);
  });

  it('an explicit HardDelete: false is a soft delete', async () => {
    const s = uniq('soft-explicit');
    await appendN(s, 1);
    await expectDeleted204(await del(s, { 'ES-HardDelete': 'false' }));
    await expectCreatedAt(await append(t, s, [newEvent('Again')]), s, 1);
  });

  it('refuses deleting $all with 401', async () => {
    expect((await del('$all')).status).toBe(401);
  });
});

describe('hard delete', () => {
  const readPaths = (s: string) => [
    `/streams/${enc(s)}`, `/streams/${enc(s)}/head/backward/20`, `/streams/${enc(s)}/0/forward/20`,
    `/streams/${enc(s)}/0`, `/streams/${enc(s)}/1`, `/streams/${enc(s)}/head`,
  ];

  it('answers 204; every later read answers 410', async () => {
    const s = uniq('hard');
    await appendN(s, 2);
    await expectDeleted204(await del(s, { 'SVC-HardDelete': 'true' }));
    for (const path of readPaths(s)) {
      expect({ path, status: (await get(path)).status }).toEqual({ path, status: 410 });
    }
  });

  it('every later append answers 410 whatever the form or expected version, and writes nothing', async () => {
    const s = uniq('hard-append');
    const original = [newEvent('A'), newEvent('B')];
    expect((await append(t, s, original)).status).toBe(201);
    await expectDeleted204(await del(s, { 'SVC-HardDelete': 'True' }));

    const attempts: [string, () => Promise<Response>][] = [
      ['array -2', () => append(t, s, [newEvent('X')])],
      ['array -1', () => append(t, s, [newEvent('X')], { 'SVC-ExpectedVersion': '-1' })],
      ['array -4', () => append(t, s, [newEvent('X')], { 'SVC-ExpectedVersion': '-4' })],
      ['array 1', () => append(t, s, [newEvent('X')], { 'SVC-ExpectedVersion': '1' })],
      ['array 7', () => append(t, s, [newEvent('X')], { 'SVC-ExpectedVersion': '7' })],
      ['retry of the original batch', () => append(t, s, original)],
      ['single body', () => http(t, `/streams/${enc(s)}`, {
        method: 'POST', headers: { 'Content-Type': 'application/json', 'SVC-EventType': 'X', 'SVC-EventId': randomUUID() }, body: '{}',
      })],
      ['incoming', () => http(t, `/streams/${enc(s)}/incoming/${randomUUID()}`, {
        method: 'POST', headers: { 'Content-Type': 'application/json', 'SVC-EventType': 'X' }, body: '{}',
      })],
    ];
    for (const [name, attempt] of attempts) {
      expect({ name, status: (await attempt()).status }).toEqual({ name, status: 410 });
    }
    expect((await get(`/streams/${enc(s)}`)).status).toBe(410);
  });

  it('its metadata stream is deleted with it: metadata reads and writes answer 410', async () => {
    const s = uniq('hard-meta');
    await appendN(s, 2);
    await setMetadata(s, { custom: 'before the tombstone', $maxCount: 10 });
    await expectDeleted204(await del(s, { 'SVC-HardDelete': 'true' }));
    expect((await getMetadata(s)).status).toBe(410);
    expect((await postMetadata(s, { custom: 'after the tombstone' })).status).toBe(410);
    expect((await get(`/streams/${enc(s)}`)).status).toBe(410);
  });

  it('its metadata stream is deleted with it even when no metadata was ever written', async () => {
    const s = uniq('hard-meta-none');
    await appendN(s, 1);
    await expectDeleted204(await del(s, { 'SVC-HardDelete': 'true' }));
    expect((await getMetadata(s)).status).toBe(410);
    expect((await postMetadata(s, { custom: 'after the tombstone' })).status).toBe(410);
  });

  it('a later soft or hard delete answers 410', async () => {
    const s = uniq('hard-again');
    await appendN(s, 1);
    await expectDeleted204(await del(s, { 'SVC-HardDelete': 'true' }));
    expect((await del(s)).status).toBe(410);
    expect((await del(s, { 'SVC-HardDelete': 'true' })).status).toBe(410);
    expect((await del(s, { 'SVC-ExpectedVersion': '0' })).status).toBe(410);
  });

  it.each([
    ['ES-HardDelete', 'True'], ['Kurrent-HardDelete', 'TRUE'], ['SVC-HardDelete', 'true'],
  ])('is requested with %s: %s', async (header, value) => {
    const s = uniq('hard-spell');
    await appendN(s, 1);
    await expectDeleted204(await del(s, { [header]: value }));
    expect((await get(`/streams/${enc(s)}`)).status).toBe(410);
    expect((await append(t, s, [newEvent('X')])).status).toBe(410);
  });

  it('with a wrong expected version answers 400 with CurrentVersion and deletes nothing', async () => {
    const s = uniq('hard-ev');
    await appendN(s, 2);
    await expectWrongVersion(await del(s, { 'SVC-HardDelete': 'true', 'SVC-ExpectedVersion': '5' }), 1);
    expect(await visible(s)).toEqual([0, 1]);
    await expectDeleted204(await del(s, { 'SVC-HardDelete': 'true', 'SVC-ExpectedVersion': '1' }));
    expect((await get(`/streams/${enc(s)}`)).status).toBe(410);
  });

  it('a malformed HardDelete header answers 400 and deletes nothing', async () => {
    const s = uniq('hard-bad');
    await appendN(s, 2);
    const res = await del(s, { 'SVC-HardDelete': 'yes please' });
    expect(res.status).toBe(400);
    expect(await res.text()).toMatch(/HardDelete header in wrong format\./);
    expect(await visible(s)).toEqual([0, 1]);
  });

  it('can follow a soft delete, and is then permanent', async () => {
    const s = uniq('hard-after-soft');
    await appendN(s, 2);
    await expectDeleted204(await del(s));
    await expectDeleted204(await del(s, { 'SVC-HardDelete': 'true' }));
    expect((await get(`/streams/${enc(s)}`)).status).toBe(410);
    expect((await append(t, s, [newEvent('X')], { 'SVC-ExpectedVersion': '-1' })).status).toBe(410);
  });

  it('does not affect other streams', async () => {
    const s = uniq('hard-one');
    const other = `${s}-other`;
    await appendN(s, 1);
    await appendN(other, 2);
    await expectDeleted204(await del(s, { 'SVC-HardDelete': 'true' }));
    expect(await visible(other)).toEqual([0, 1]);
    await expectCreatedAt(await append(t, other, [newEvent('More')]), other, 2);
  });
});

describe('metadata round trip', () => {
  const doc = {
    $maxCount: 100,
    $cacheControl: 10,
    $acl: { $r: ['$all', 'reader'], $w: '$all', $d: '$admins', $mr: '$admins', $mw: '$admins' },
    custom: 'kept verbatim',
    nested: { list: [1, 'two', { three: null }], flag: false, 'ünïcødé': 'ñ ☃' },
    number: 12.5,
  };

  it('application/json with an event id: 201 with the absolute $$ Location; GET returns every key', async () => {
    const s = uniq('meta-json');
    await appendN(s, 1);
    const res = await postMetadata(s, doc);
    expect(res.status).toBe(201);
    expect(res.headers.get('location')).toBe(`${t.url}/streams/%24%24${enc(s)}/0`);
    const meta = await getMetadata(s);
    expect(meta.status).toBe(200);
    expect(JSON.parse(meta.text)).toEqual(doc);
  });

  it('array form (events+json, type $metadata) works the same way', async () => {
    const s = uniq('meta-array');
    const res = await http(t, `/streams/${enc(s)}/metadata`, {
      method: 'POST', headers: { 'Content-Type': EVENTS_JSON },
      body: JSON.stringify([{ eventId: randomUUID(), eventType: '$metadata', data: doc }]),
    });
    expect(res.status).toBe(201);
    expect(res.headers.get('location')).toBe(`${t.url}/streams/%24%24${enc(s)}/0`);
    expect(JSON.parse((await getMetadata(s)).text)).toEqual(doc);
  });

  it('the metadata can be written before the stream exists and survives its first append', async () => {
    const s = uniq('meta-first');
    await setMetadata(s, { custom: { a: 1 } });
    await appendN(s, 2);
    expect(JSON.parse((await getMetadata(s)).text)).toEqual({ custom: { a: 1 } });
    expect(await visible(s)).toEqual([0, 1]);
  });

  it('a later write replaces the document; Location numbers the $$ stream', async () => {
    const s = uniq('meta-replace');
    await appendN(s, 1);
    await setMetadata(s, { first: true });
    const res = await postMetadata(s, { second: true, custom: [1, 2] });
    expect(res.status).toBe(201);
    expect(res.headers.get('location')).toBe(`${t.url}/streams/%24%24${enc(s)}/1`);
    expect(JSON.parse((await getMetadata(s)).text)).toEqual({ second: true, custom: [1, 2] });
  });

  it('a retry with the same event id is idempotent', async () => {
    const s = uniq('meta-retry');
    await appendN(s, 1);
    const id = randomUUID();
    const first = await postMetadata(s, { v: 1 }, { 'SVC-EventId': id });
    const again = await postMetadata(s, { v: 1 }, { 'SVC-EventId': id });
    expect([first.status, again.status]).toEqual([201, 201]);
    expect(again.headers.get('location')).toBe(first.headers.get('location'));
    const next = await postMetadata(s, { v: 2 });
    expect(next.headers.get('location')).toBe(`${t.url}/streams/%24%24${enc(s)}/1`);
  });

  it('honours the expected version of the $$ stream', async () => {
    const s = uniq('meta-ev');
    expect((await postMetadata(s, { v: 1 }, { 'SVC-ExpectedVersion': '-1' })).status).toBe(201);
    await expectWrongVersion(await postMetadata(s, { v: 2 }, { 'SVC-ExpectedVersion': '-1' }), 0);
    expect(JSON.parse((await getMetadata(s)).text)).toEqual({ v: 1 });
    expect((await postMetadata(s, { v: 3 }, { 'SVC-ExpectedVersion': '0' })).status).toBe(201);
    expect(JSON.parse((await getMetadata(s)).text)).toEqual({ v: 3 });
  });

  it('a stream without metadata answers {}; neither stream nor metadata answers 404', async () => {
    const s = uniq('meta-none');
    expect((await getMetadata(s)).status).toBe(404);
    await appendN(s, 1);
    const meta = await getMetadata(s);
    expect(meta.status).toBe(200);
    expect(JSON.parse(meta.text)).toEqual({});
  });

  it('accepts an absent or $metadata event type header, refuses any other', async () => {
    const s = uniq('meta-type');
    expect((await postMetadata(s, { a: 1 }, { 'SVC-EventType': '$metadata' })).status).toBe(201);
    const res = await postMetadata(s, { a: 2 }, { 'SVC-EventType': 'Other' });
    expect(res.status).toBe(400);
    expect(await res.text()).toBe('Bad Request. You should not include an event type for metadata.');
    expect(JSON.parse((await getMetadata(s)).text)).toEqual({ a: 1 });
  });

  it('raw JSON without an event id answers 400 (no redirect)', async () => {
    const s = uniq('meta-noid');
    const res = await http(t, `/streams/${enc(s)}/metadata`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"a":1}',
    });
    expect(res.status).toBe(400);
    expect(await res.text()).toMatch(/^Empty eventId provided/);
    expect((await getMetadata(s)).status).toBe(404);
  });

  it('can be written directly to /streams/$$stream', async () => {
    const s = uniq('meta-direct');
    await appendN(s, 4);
    const res = await append(t, `$$${s}`, [{ eventId: randomUUID(), eventType: '$metadata', data: { $maxCount: 1, custom: 'direct' } }]);
    expect(res.status).toBe(201);
    expect(res.headers.get('location')).toBe(`${t.url}/streams/%24%24${enc(s)}/0`);
    expect(JSON.parse((await getMetadata(s)).text)).toEqual({ $maxCount: 1, custom: 'direct' });
    expect(await visible(s)).toEqual([3]);
  });
});

describe('invalid metadata answers 400 and changes nothing', () => {
  const invalid: [string, string][] = [
    ['$maxCount a string', '{"$maxCount": "x"}'],
    ['$maxCount a fraction', '{"$maxCount": 1.5}'],
    ['$maxAge a string', '{"$maxAge": "1d"}'],
    ['$tb a string', '{"$tb": "3"}'],
    ['$cacheControl a string', '{"$cacheControl": "soon"}'],
    ['$cacheControl an object', '{"$cacheControl": {"s": 1}}'],
    ['$acl a string', '{"$acl": "everyone"}'],
    ['$acl with a number for $r', '{"$acl": {"$r": 5}}'],
    ['not JSON', '{"$maxCount": '],
    ['a JSON array', '[{"$maxCount": 1}]'],
    ['a JSON string', '"hello"'],
  ];

  it.each(invalid)('%s (application/json)', async (_name, body) => {
    const s = uniq('meta-bad');
    await appendN(s, 3);
    await setMetadata(s, { $maxCount: 2, custom: 'before' });
    const res = await postMetadata(s, body);
    expect(res.status).toBe(400);
    expect((await res.text()).length).toBeGreaterThan(0);
    expect(JSON.parse((await getMetadata(s)).text)).toEqual({ $maxCount: 2, custom: 'before' });
    expect(await visible(s)).toEqual([1, 2]);
  });

  it('$maxCount "x" in the array form', async () => {
    const s = uniq('meta-bad-arr');
    await appendN(s, 2);
    const res = await http(t, `/streams/${enc(s)}/metadata`, {
      method: 'POST', headers: { 'Content-Type': EVENTS_JSON },
      body: JSON.stringify([{ eventId: randomUUID(), eventType: '$metadata', data: { $maxCount: 'x' } }]),
    });
    expect(res.status).toBe(400);
    expect(JSON.parse((await getMetadata(s)).text)).toEqual({});
    expect(await visible(s)).toEqual([0, 1]);
  });

  it('$maxCount "x" written directly to /streams/$$stream', async () => {
    const s = uniq('meta-bad-direct');
    await appendN(s, 2);
    const res = await append(t, `$$${s}`, [{ eventId: randomUUID(), eventType: '$metadata', data: { $maxCount: 'x' } }]);
    expect(res.status).toBe(400);
    expect(JSON.parse((await getMetadata(s)).text)).toEqual({});
  });
});

describe('reserved metadata keys applied to stream reads', () => {
  it('$maxCount keeps only the newest N events visible; $all still has them all', async () => {
    const s = uniq('maxcount');
    await appendN(s, 5);
    await setMetadata(s, { $maxCount: 2, custom: 'x' });
    expect(await titles(`/streams/${enc(s)}`)).toEqual([`4@${s}`, `3@${s}`]);
    expect(await visible(s)).toEqual([3, 4]);
    expect((await get(`/streams/${enc(s)}/0`, 'application/vnd.eventstore.event+json')).status).toBe(404);
    expect((await get(`/streams/${enc(s)}/2`, 'application/vnd.eventstore.event+json')).status).toBe(404);
    expect((await get(`/streams/${enc(s)}/3`, 'application/vnd.eventstore.event+json')).status).toBe(200);
    await expectInAll(s, [0, 1, 2, 3, 4]);

    await appendN(s, 2, 'More');
    expect(await visible(s)).toEqual([5, 6]);
    // lifting the limit shows the older events again (nothing was scavenged)
    await setMetadata(s, { custom: 'x' });
    expect(await visible(s)).toEqual([0, 1, 2, 3, 4, 5, 6]);
  });

  it('$tb hides the events numbered below it; $all still has them', async () => {
    const s = uniq('tb');
    await appendN(s, 5);
    await setMetadata(s, { $tb: 3 });
    expect(await titles(`/streams/${enc(s)}`)).toEqual([`4@${s}`, `3@${s}`]);
    expect(await visible(s)).toEqual([3, 4]);
    expect((await get(`/streams/${enc(s)}/2`, 'application/vnd.eventstore.event+json')).status).toBe(404);
    expect((await get(`/streams/${enc(s)}/3`, 'application/vnd.eventstore.event+json')).status).toBe(200);
    await expectInAll(s, [0, 1, 2, 3, 4]);
  });

  it('$maxAge hides the events older than N seconds; $all still has them', async () => {
    const s = uniq('maxage');
    await appendN(s, 3, 'Old');
    // the old events are > 4.5 s old, the fresh one is read well within 3 s of its write
    await new Promise((r) => setTimeout(r, 4500));
    await setMetadata(s, { $maxAge: 3 });
    expect((await append(t, s, [newEvent('Fresh')])).status).toBe(201);
    expect(await visible(s)).toEqual([3]);
    expect(await titles(`/streams/${enc(s)}`)).toEqual([`3@${s}`]);
    expect((await get(`/streams/${enc(s)}/0`, 'application/vnd.eventstore.event+json')).status).toBe(404);
    await expectInAll(s, [0, 1, 2, 3]);
  });

  it('$cacheControl sets the max-age of the head page and the head event', async () => {
    const s = uniq('cachecontrol');
    await appendN(s, 2);
    const before = await get(`/streams/${enc(s)}`);
    expect(before.status).toBe(200);
    expect(before.headers.get('cache-control')).toBe('max-age=0, no-cache, must-revalidate');

    await setMetadata(s, { $cacheControl: 30 });
    const head = await get(`/streams/${enc(s)}`);
    expect(head.status).toBe(200);
    expect(head.headers.get('cache-control')).toMatch(/^max-age=30\b/);
    expect(head.headers.get('etag')).toMatch(/^"1;-?\d+"$/);
    const headEvent = await get(`/streams/${enc(s)}/head`, 'application/vnd.eventstore.event+json');
    expect(headEvent.status).toBe(200);
    expect(headEvent.headers.get('cache-control')).toMatch(/^max-age=30\b/);
    // immutable pages keep their one-year max-age
    const old = await get(`/streams/${enc(s)}/0`, 'application/vnd.eventstore.event+json');
    expect(old.headers.get('cache-control')).toMatch(/^max-age=31536000\b/);
  });

  it('$acl restricts reads and writes of the stream to the listed roles', async () => {
    const s = uniq('acl');
    await appendN(s, 1);
    const opsRead = async () => (await get(`/streams/${enc(s)}`, ATOM_JSON, OPS)).status;
    const opsWrite = async () => (await http(t, `/streams/${enc(s)}`, {
      method: 'POST', authorization: OPS, headers: { 'Content-Type': EVENTS_JSON }, body: JSON.stringify([newEvent('ByOps')]),
    })).status;
    expect(await opsRead()).toBe(200);

    const acl = { $acl: { $r: '$admins', $w: ['$admins'] }, owner: 'team-a' };
    await setMetadata(s, acl);
    expect(JSON.parse((await getMetadata(s)).text)).toEqual(acl);
    expect(await opsRead()).toBe(401);
    expect(await opsWrite()).toBe(401);
    expect(await visible(s)).toEqual([0]);
    expect((await append(t, s, [newEvent('ByAdmin')])).status).toBe(201);

    await setMetadata(s, { owner: 'team-a' });
    expect(await opsRead()).toBe(200);
    expect(await opsWrite()).toBe(201);
    expect(await visible(s)).toEqual([0, 1, 2]);
  });

  it('$all is readable by admins only', async () => {
    const path = '/streams/%24all/00000000000000000000000000000000/forward/100';
    expect((await get(path, ATOM_JSON, OPS)).status).toBe(401);
    expect((await get(path)).status).toBe(200);
  });
});
