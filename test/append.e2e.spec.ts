import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVENTS_JSON, OPS, append, http, newEvent, startTestNode, type TestNode, uniq } from './support/node.js';

// End-to-end tests of POST /streams/{stream}: the array form, the single-body forms, the
// idempotent /incoming/{guid} flow, expected versions, idempotent retries, and the request
// validation answers (400 / 413 / 415). Every test uses its own stream names.

const ATOM_JSON = 'application/vnd.eventstore.atom+json';
const EVENT_JSON = 'application/vnd.eventstore.event+json';
const MiB = 1024 * 1024;

let t: TestNode;
beforeAll(async () => { t = await startTestNode(); });
afterAll(async () => { await t?.dispose(); });


function enc(stream: string): string {
  return encodeURIComponent(stream);
}

function locationOf(stream: string, n: number): string {
  return `${t.url}/streams/${enc(stream)}/${n}`;
}

/** POST a raw body to /streams/{stream}. */
function post(stream: string, body: string | Buffer | Uint8Array | undefined, headers: Record<string, string>,
  suffix = ''): Promise<Response> {
  return http(t, `/streams/${enc(stream)}${suffix}`, { method: 'POST', headers, body: body as BodyInit | undefined });
}

interface StoredEvent {
  eventNumber: number;
  eventId: string;
  eventType: string;
  isJson: boolean;
  data: string | null;
  metaData: string | null;
}

/** Every visible event of a stream, oldest first (embed=body), or null when the stream answers 404. */
async function events(stream: string): Promise<StoredEvent[] | null> {
  const res = await http(t, `/streams/${enc(stream)}/0/forward/4096?embed=body`, { headers: { Accept: ATOM_JSON } });
  if (res.status === 404) return null;
  expect(res.status).toBe(200);
  const feed = await res.json() as { entries: StoredEvent[] };
  return [...feed.entries].reverse().map((e) => ({
    eventNumber: e.eventNumber, eventId: e.eventId, eventType: e.eventType, isJson: e.isJson, data: e.data, metaData: e.metaData,
  }));
}

/** Single event as the event+json envelope. */
async function eventEnvelope(stream: string, n: number): Promise<any> {
  const res = await http(t, `/streams/${enc(stream)}/${n}`, { headers: { Accept: EVENT_JSON } });
  expect(res.status).toBe(200);
  return res.json();
}

/** Raw data of one event. */
async function rawData(stream: string, n: number): Promise<Buffer> {
  const res = await http(t, `/streams/${enc(stream)}/${n}`, { headers: { Accept: 'application/octet-stream' } });
  expect(res.status).toBe(200);
  return Buffer.from(await res.arrayBuffer());
}

/** 201 with the event's Location (200 for the idempotent /incoming/{guid} URL, the seed's code). */
async function expectCreated(res: Response, stream: string, firstEventNumber: number, status = res.url.includes('/incoming/') ? 200 : 201): Promise<void> {
  const body = await res.text();
  expect({ status: res.status, body }).toEqual({ status, body: '' });
  expect(res.headers.get('location')).toBe(locationOf(stream, firstEventNumber));
}

/** 400 Wrong expected version: empty body, current version in all three header spellings. */
async function expectWrongVersion(res: Response, current: number): Promise<void> {
  const body = await res.text();
  expect(res.status).toBe(400);
  expect(body).toBe('');
  expect(res.headers.get('svc-currentversion')).toBe(String(current));
  expect(res.headers.get('kurrent-currentversion')).toBe(String(current));
  expect(res.headers.get('es-currentversion')).toBe(String(current));
}

async function expectBadRequest(res: Response, message?: RegExp | string): Promise<string> {
  const body = await res.text();
  expect(res.status).toBe(400);
  expect(body.trim().length).toBeGreaterThan(0);
  if (typeof message === 'string') expect(body).toBe(message);
  else if (message) expect(body).toMatch(message);
  return body;
}

async function expectNothingWritten(stream: string, before: StoredEvent[] | null = null): Promise<void> {
  expect(await events(stream)).toEqual(before);
}

describe('array form (events+json)', () => {
  it('appends a batch atomically: 201, empty body, absolute Location of the first event, events readable in order', async () => {
    const s = uniq('arr');
    const a = newEvent('OrderPlaced', { orderId: 42, lines: [1, 2] }, { user: 'amy' });
    const b = newEvent('OrderPaid', { amount: 10 });
    await expectCreated(await append(t, s, [a, b]), s, 0);

    expect(await events(s)).toEqual([
      { eventNumber: 0, eventId: a.eventId, eventType: 'OrderPlaced', isJson: true,
        data: JSON.stringify(a.data), metaData: JSON.stringify(a.metadata) },
      { eventNumber: 1, eventId: b.eventId, eventType: 'OrderPaid', isJson: true, data: JSON.stringify(b.data), metaData: null },
    ]);
    const envelope = await eventEnvelope(s, 0);
    expect(envelope).toMatchObject({
      eventStreamId: s, eventNumber: 0, eventType: 'OrderPlaced', eventId: a.eventId,
      data: { orderId: 42, lines: [1, 2] }, metadata: { user: 'amy' },
    });
  });

  it('Location points at the first event of each later batch', async () => {
    const s = uniq('arr-loc');
    await expectCreated(await append(t, s, [newEvent('A'), newEvent('B')]), s, 0);
    await expectCreated(await append(t, s, [newEvent('C'), newEvent('D'), newEvent('E')]), s, 2);
    await expectCreated(await append(t, s, [newEvent('F')]), s, 5);
    expect((await events(s))!.map((e) => `${e.eventNumber}:${e.eventType}`))
      .toEqual(['0:A', '1:B', '2:C', '3:D', '4:E', '5:F']);
  });

  it.each([
    'application/vnd.eventstore.events+json',
    'application/vnd.kurrent.events+json',
    'application/vnd.eventstore.event+json',
    'application/vnd.kurrent.event+json',
    'application/vnd.eventstore.events+json; charset=utf-8',
  ])('accepts the array form as %s', async (contentType) => {
    const s = uniq('arr-ct');
    const e = newEvent('Typed', { ok: true });
    await expectCreated(await post(s, JSON.stringify([e]), { 'Content-Type': contentType }), s, 0);
    expect((await events(s))!.map((x) => [x.eventId, x.eventType])).toEqual([[e.eventId, 'Typed']]);
  });

  it('ignores the event type and id headers in the array form', async () => {
    const s = uniq('arr-hdr');
    const e = newEvent('FromBody', { x: 1 });
    const res = await append(t, s, [e], { 'SVC-EventType': 'FromHeader', 'SVC-EventId': randomUUID() });
    await expectCreated(res, s, 0);
    expect((await events(s))!.map((x) => [x.eventId, x.eventType])).toEqual([[e.eventId, 'FromBody']]);
  });

  it('reads member names case-insensitively', async () => {
    const s = uniq('arr-case');
    const id = randomUUID();
    const body = JSON.stringify([{ EventId: id, EventType: 'Cased', Data: { a: 1 }, MetaData: { m: 2 } }]);
    await expectCreated(await post(s, body, { 'Content-Type': EVENTS_JSON }), s, 0);
    expect(await events(s)).toEqual([
      { eventNumber: 0, eventId: id, eventType: 'Cased', isJson: true, data: '{"a":1}', metaData: '{"m":2}' },
    ]);
  });

  it('stores JSON data and metadata with every digit the client wrote, numbers past a double\'s precision included', async () => {
    const s = uniq('arr-exact');
    // Written by hand: JSON.stringify could not write these numbers.
    const body = `[
      {"eventId": "${randomUUID()}", "eventType": "Big", "data": { "id": 9007199254740993, "ratio": 0.12345678901234567890, "n": [1, -12345678901234567890e-3] },
       "metadata": {"$tb": 9223372036854775807, "note": "keep \\"quoted\\" 1234567890123456789"}},
      {"eventId": "${randomUUID()}", "eventType": "Small", "data": {"a": 1, "b": "x"}, "metadata": {"c": 2}}
    ]`;
    await expectCreated(await post(s, body, { 'Content-Type': EVENTS_JSON }), s, 0);
    expect((await rawData(s, 0)).toString('utf8')).toBe('{"id":9007199254740993,"ratio":0.12345678901234567890,"n":[1,-12345678901234567890e-3]}');
    expect((await rawData(s, 1)).toString('utf8')).toBe('{"a":1,"b":"x"}');
    const stored = (await events(s))!;
    expect(stored[0].metaData).toBe('{"$tb":9223372036854775807,"note":"keep \\"quoted\\" 1234567890123456789"}');
    expect(stored[1].metaData).toBe('{"c":2}');
  });

  it('stores string data that is JSON as JSON, other strings as text, and scalars as empty data', async () => {
    const s = uniq('arr-data');
    const body = [
      { eventId: randomUUID(), eventType: 'JsonText', data: '{"k":"v"}' },
      { eventId: randomUUID(), eventType: 'PlainText', data: 'hello world' },
      { eventId: randomUUID(), eventType: 'Number', data: 42 },
      { eventId: randomUUID(), eventType: 'NoData' },
    ];
    await expectCreated(await post(s, JSON.stringify(body), { 'Content-Type': EVENTS_JSON }), s, 0);
    const stored = (await events(s))!;
    expect(stored.map((e) => e.isJson)).toEqual([true, false, false, false]);
    expect((await eventEnvelope(s, 0)).data).toEqual({ k: 'v' });
    expect((await rawData(s, 1)).toString('utf8')).toBe('hello world');
    expect((await rawData(s, 2)).length).toBe(0);
    expect((await rawData(s, 3)).length).toBe(0);
  });

  it('encodes the stream name in the absolute Location', async () => {
    const s = uniq('odd name@x');
    const res = await append(t, s, [newEvent('A')]);
    expect(res.status).toBe(201);
    expect(res.headers.get('location')).toBe(`${t.url}/streams/${s.replace(' ', '%20').replace('@', '%40')}/0`);
  });

  it('builds the Location from X-Forwarded-Proto / X-Forwarded-Host', async () => {
    const s = uniq('arr-fwd');
    const res = await append(t, s, [newEvent('A')], { 'X-Forwarded-Proto': 'https', 'X-Forwarded-Host': 'es.example.com:8443' });
    expect(res.status).toBe(201);
    expect(res.headers.get('location')).toBe(`https://es.example.com:8443/streams/${s}/0`);
  });

  it('refuses writes to $all with 401', async () => {
    const res = await append(t, '$all', [newEvent('A')]);
    expect(res.status).toBe(401);
  });
});

describe('array form: invalid bodies answer 400 and write nothing', () => {
  const invalid: [string, () => string, RegExp | string | undefined][] = [
    ['not JSON', () => '[{"eventId": ', 'Write request body invalid.'],
    ['an empty body', () => '', 'Write request body invalid.'],
    ['an empty array', () => '[]', 'Write request body invalid.'],
    ['a JSON object instead of an array', () => JSON.stringify(newEvent('A')), undefined],
    ['a JSON string', () => '"hello"', undefined],
    ['an array of numbers', () => '[1, 2]', undefined],
    ['a missing eventType', () => JSON.stringify([{ eventId: randomUUID(), data: {} }]),
      /^Empty eventType provided\. \(Parameter 'eventType'\)/],
    ['an empty eventType', () => JSON.stringify([{ eventId: randomUUID(), eventType: '', data: {} }]),
      /^Empty eventType provided\. \(Parameter 'eventType'\)/],
    ['a missing eventId', () => JSON.stringify([{ eventType: 'A', data: {} }]),
      /^Empty eventId provided\. \(Parameter 'eventId'\)/],
    ['an eventId that is not a GUID', () => JSON.stringify([{ eventId: 'not-a-guid', eventType: 'A', data: {} }]), undefined],
    ['a numeric eventId', () => JSON.stringify([{ eventId: 12345, eventType: 'A', data: {} }]), undefined],
    ['the empty GUID as eventId', () => JSON.stringify([{ eventId: '00000000-0000-0000-0000-000000000000', eventType: 'A' }]), undefined],
    ['a valid event followed by an invalid one', () => JSON.stringify([newEvent('Good'), { eventId: randomUUID(), data: {} }]),
      /^Empty eventType provided/],
  ];

  it.each(invalid)('%s on a new stream', async (_name, body, message) => {
    const s = uniq('bad-new');
    await expectBadRequest(await post(s, body(), { 'Content-Type': EVENTS_JSON }), message);
    await expectNothingWritten(s);
  });

  it.each(invalid)('%s on an existing stream', async (_name, body, message) => {
    const s = uniq('bad-old');
    await expectCreated(await append(t, s, [newEvent('Before')]), s, 0);
    const before = await events(s);
    await expectBadRequest(await post(s, body(), { 'Content-Type': EVENTS_JSON }), message);
    await expectNothingWritten(s, before);
    // the stream still takes the next event at the next number
    await expectCreated(await append(t, s, [newEvent('After')]), s, 1);
  });
});

describe('single-body forms', () => {
  it('application/json with type and id headers: 201, data stored as sent, isJson', async () => {
    const s = uniq('single-json');
    const id = randomUUID();
    const body = '{ "name" : "amy",  "n": [1, 2, 3] }';
    const res = await post(s, body, { 'Content-Type': 'application/json', 'SVC-EventType': 'UserCreated', 'SVC-EventId': id });
    await expectCreated(res, s, 0);
    const envelope = await eventEnvelope(s, 0);
    expect(envelope).toMatchObject({ eventStreamId: s, eventNumber: 0, eventType: 'UserCreated', eventId: id, data: { name: 'amy', n: [1, 2, 3] } });
    const bare = await http(t, `/streams/${enc(s)}/0`, { headers: { Accept: 'application/json' } });
    expect(bare.status).toBe(200);
    expect(await bare.text()).toBe(body);
    expect((await events(s))![0].isJson).toBe(true);
  });

  it('text/xml and application/xml bodies are stored verbatim as non-JSON events', async () => {
    const s = uniq('single-xml');
    const xml1 = '<?xml version="1.0"?><order id="1"><line qty="2">widget</line></order>';
    const xml2 = '<note>caf\u00e9 \u2603</note>';
    await expectCreated(await post(s, xml1, { 'Content-Type': 'text/xml', 'SVC-EventType': 'XmlA', 'SVC-EventId': randomUUID() }), s, 0);
    await expectCreated(await post(s, xml2, { 'Content-Type': 'application/xml', 'SVC-EventType': 'XmlB', 'SVC-EventId': randomUUID() }), s, 1);
    expect((await rawData(s, 0)).toString('utf8')).toBe(xml1);
    expect((await rawData(s, 1)).toString('utf8')).toBe(xml2);
    expect((await events(s))!.map((e) => [e.eventType, e.isJson])).toEqual([['XmlA', false], ['XmlB', false]]);
  });

  it('application/octet-stream stores the raw bytes exactly', async () => {
    const s = uniq('single-bin');
    const bytes = Buffer.concat([Buffer.from([0x00, 0xff, 0xfe, 0xc3, 0x28, 0x0a, 0x0d]), randomBytes(4096)]);
    const id = randomUUID();
    await expectCreated(await post(s, bytes, { 'Content-Type': 'application/octet-stream', 'SVC-EventType': 'Blob', 'SVC-EventId': id }), s, 0);
    expect((await rawData(s, 0)).equals(bytes)).toBe(true);
    const stored = (await events(s))!;
    expect(stored.map((e) => [e.eventId, e.eventType, e.isJson])).toEqual([[id, 'Blob', false]]);
  });

  it.each(['ES', 'Kurrent', 'SVC'])('accepts the %s- spelling of the event type and id headers', async (prefix) => {
    const s = uniq('single-spell');
    const id = randomUUID();
    const headers = { 'Content-Type': 'application/json', [`${prefix}-EventType`]: `${prefix}Type`, [`${prefix}-EventId`]: id };
    await expectCreated(await post(s, '{"a":1}', headers), s, 0);
    expect((await events(s))!.map((e) => [e.eventId, e.eventType])).toEqual([[id, `${prefix}Type`]]);
  });

  it('accepts braced and unhyphenated GUIDs in the event id header', async () => {
    const s = uniq('single-guid');
    const id1 = randomUUID();
    const id2 = randomUUID();
    await expectCreated(await post(s, '{}', { 'Content-Type': 'application/json', 'SVC-EventType': 'A', 'SVC-EventId': `{${id1}}` }), s, 0);
    await expectCreated(await post(s, '{}', { 'Content-Type': 'application/json', 'SVC-EventType': 'A', 'SVC-EventId': id2.replace(/-/g, '') }), s, 1);
    expect((await events(s))!.map((e) => e.eventId)).toEqual([id1, id2]);
  });

  it.each([
    ['application/json; charset=utf-8', '{"a":1}'], ['text/xml; charset=utf-8', '<a/>'], ['application/octet-stream', 'raw'],
  ])('accepts %s', async (contentType, body) => {
    const s = uniq('single-charset');
    await expectCreated(await post(s, body, { 'Content-Type': contentType, 'SVC-EventType': 'C', 'SVC-EventId': randomUUID() }), s, 0);
    expect((await rawData(s, 0)).toString()).toBe(body);
  });

  it.each(['application/json; charset=iso-8859-1', 'text/plain', 'application/x-www-form-urlencoded'])(
    'answers 415 for a single body sent as %s, writing nothing', async (contentType) => {
      const s = uniq('single-415');
      const res = await post(s, '{"a":1}', { 'Content-Type': contentType, 'SVC-EventType': 'C', 'SVC-EventId': randomUUID() });
      expect(res.status).toBe(415);
      await expectNothingWritten(s);
    });

  it.each(['application/json', 'text/xml', 'application/xml', 'application/octet-stream'])(
    'without an event type header (%s): 400 with a message, nothing written', async (contentType) => {
      const s = uniq('single-notype');
      const body = contentType.includes('json') ? '{"a":1}' : '<a/>';
      await expectBadRequest(await post(s, body, { 'Content-Type': contentType, 'SVC-EventId': randomUUID() }),
        /^Must include an event type with the request either in body or as (SVC|Kurrent)-EventType header\.$/);
      await expectNothingWritten(s);
    });

  it.each(['not-a-guid', '1234', '00000000-0000-0000-0000-000000000000'])(
    'with a bad event id header %s: 400, nothing written', async (id) => {
      const s = uniq('single-badid');
      await expectBadRequest(await post(s, '{"a":1}', { 'Content-Type': 'application/json', 'SVC-EventType': 'A', 'SVC-EventId': id }));
      await expectNothingWritten(s);
    });
});

describe('no event id: 307 to /incoming/{guid}', () => {
  it.each(['application/json', 'text/xml', 'application/xml', 'application/octet-stream'])(
    '%s without an id redirects to an idempotent URL and writes nothing', async (contentType) => {
      const s = uniq('redir');
      const res = await post(s, contentType.includes('json') ? '{"a":1}' : '<a/>', { 'Content-Type': contentType, 'SVC-EventType': 'A' });
      expect(res.status).toBe(307);
      expect(await res.text()).toBe('Forwarding to idempotent URI');
      const location = res.headers.get('location')!;
      expect(location).toMatch(new RegExp(`^${t.url.replace(/[.]/g, '\\.')}/streams/${s}/incoming/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`));
      await expectNothingWritten(s);
    });

  it('each redirect carries a fresh guid', async () => {
    const s = uniq('redir-fresh');
    const guids = new Set<string>();
    for (let i = 0; i < 5; i++) {
      const res = await post(s, '{}', { 'Content-Type': 'application/json', 'SVC-EventType': 'A' });
      expect(res.status).toBe(307);
      guids.add(res.headers.get('location')!.split('/').pop()!);
    }
    expect(guids.size).toBe(5);
  });

  it('re-POSTing to the Location appends the event with that guid as its id, idempotently', async () => {
    const s = uniq('redir-follow');
    const body = '{"step":"follow"}';
    const headers = { 'Content-Type': 'application/json', 'SVC-EventType': 'Followed' };
    const redirect = await post(s, body, headers);
    expect(redirect.status).toBe(307);
    const location = redirect.headers.get('location')!;
    const guid = location.split('/').pop()!;

    const created = await fetch(location, { method: 'POST', headers: { ...headers, Authorization: adminAuth() }, body, redirect: 'manual' });
    await expectCreated(created, s, 0);
    const again = await fetch(location, { method: 'POST', headers: { ...headers, Authorization: adminAuth() }, body, redirect: 'manual' });
    await expectCreated(again, s, 0);

    expect(await events(s)).toEqual([
      { eventNumber: 0, eventId: guid, eventType: 'Followed', isJson: true, data: body, metaData: null },
    ]);
  });

  it('accepts text/xml and application/xml at /incoming/{guid}', async () => {
    const s = uniq('incoming-xml');
    const g1 = randomUUID();
    const g2 = randomUUID();
    await expectCreated(await post(s, '<a>1</a>', { 'Content-Type': 'text/xml', 'SVC-EventType': 'X' }, `/incoming/${g1}`), s, 0);
    await expectCreated(await post(s, '<a>2</a>', { 'Content-Type': 'application/xml', 'SVC-EventType': 'X' }, `/incoming/${g2}`), s, 1);
    expect((await events(s))!.map((e) => e.eventId)).toEqual([g1, g2]);
    expect((await rawData(s, 1)).toString()).toBe('<a>2</a>');
  });

  it.each([EVENTS_JSON, 'application/vnd.kurrent.events+json', 'application/octet-stream', 'text/plain'])(
    '/incoming/{guid} answers 415 for %s and writes nothing', async (contentType) => {
      const s = uniq('incoming-415');
      const res = await post(s, JSON.stringify([newEvent('A')]), { 'Content-Type': contentType, 'SVC-EventType': 'A' }, `/incoming/${randomUUID()}`);
      expect(res.status).toBe(415);
      await expectNothingWritten(s);
    });

  it('/incoming/{bad guid} answers 400 "Invalid request. Unable to parse guid"', async () => {
    const s = uniq('incoming-badguid');
    await expectBadRequest(await post(s, '{}', { 'Content-Type': 'application/json', 'SVC-EventType': 'A' }, '/incoming/not-a-guid'),
      'Invalid request. Unable to parse guid');
    await expectNothingWritten(s);
  });

  it('/incoming/{guid} still requires the event type header', async () => {
    const s = uniq('incoming-notype');
    await expectBadRequest(await post(s, '{}', { 'Content-Type': 'application/json' }, `/incoming/${randomUUID()}`),
      /^Must include an event type with the request either in body or as (SVC|Kurrent)-EventType header\.$/);
    await expectNothingWritten(s);
  });
});

function adminAuth(): string {
  return 'Basic ' + Buffer.from('admin:changeit').toString('base64');
}

describe('unsupported content types: 415, nothing written', () => {
  it.each([
    ['no Content-Type', undefined],
    ['text/plain', 'text/plain'],
    ['application/x-www-form-urlencoded', 'application/x-www-form-urlencoded'],
    ['a non-utf-8 charset', 'application/vnd.eventstore.events+json; charset=iso-8859-1'],
    ['an unknown application type', 'application/garbage'],
  ])('%s', async (_name, contentType) => {
    const s = uniq('ct415');
    const headers: Record<string, string> = { 'SVC-EventType': 'A', 'SVC-EventId': randomUUID() };
    if (contentType) headers['Content-Type'] = contentType;
    // a Uint8Array body: fetch adds no Content-Type of its own
    const body = new Uint8Array(Buffer.from(JSON.stringify([newEvent('A')])));
    const res = await http(t, `/streams/${enc(s)}`, { method: 'POST', headers, body });
    expect(res.status).toBe(415);
    await expectNothingWritten(s);
  });
});

describe('event size limit (4 MiB of data + metadata per event)', () => {
  const LIMIT = 4 * MiB;

  it('array form: an event with data > 4 MiB answers 413 and writes nothing', async () => {
    const s = uniq('big-arr');
    const e = { eventId: randomUUID(), eventType: 'Big', data: 'x'.repeat(LIMIT + 1) };
    const res = await post(s, JSON.stringify([e]), { 'Content-Type': EVENTS_JSON });
    expect(res.status).toBe(413);
    await expectNothingWritten(s);
  });

  it('array form: data + metadata together > 4 MiB answers 413; the other events of the batch are not written', async () => {
    const s = uniq('big-sum');
    const batch = [
      newEvent('Small', { ok: 1 }),
      { eventId: randomUUID(), eventType: 'Big', data: 'd'.repeat(3 * MiB), metadata: 'm'.repeat(MiB + 1) },
    ];
    const res = await post(s, JSON.stringify(batch), { 'Content-Type': EVENTS_JSON });
    expect(res.status).toBe(413);
    await expectNothingWritten(s);
  });

  it('array form: exactly 4 MiB is accepted, and a batch larger than 4 MiB in total is fine', async () => {
    const s = uniq('big-ok');
    const exact = { eventId: randomUUID(), eventType: 'Exact', data: 'd'.repeat(3 * MiB), metadata: 'm'.repeat(MiB) };
    await expectCreated(await post(s, JSON.stringify([exact]), { 'Content-Type': EVENTS_JSON }), s, 0);
    const two = [
      { eventId: randomUUID(), eventType: 'Half', data: 'a'.repeat(3 * MiB) },
      { eventId: randomUUID(), eventType: 'Half', data: 'b'.repeat(3 * MiB) },
    ];
    await expectCreated(await post(s, JSON.stringify(two), { 'Content-Type': EVENTS_JSON }), s, 1);
    expect((await rawData(s, 0)).length).toBe(3 * MiB);
    expect((await rawData(s, 2)).equals(Buffer.from('b'.repeat(3 * MiB)))).toBe(true);
  });

  it('octet-stream: 4 MiB + 1 byte answers 413, exactly 4 MiB is accepted', async () => {
    const s = uniq('big-bin');
    const tooBig = randomBytes(LIMIT + 1);
    const res = await post(s, tooBig, { 'Content-Type': 'application/octet-stream', 'SVC-EventType': 'Blob', 'SVC-EventId': randomUUID() });
    expect(res.status).toBe(413);
    await expectNothingWritten(s);

    const exact = randomBytes(LIMIT);
    await expectCreated(await post(s, exact, { 'Content-Type': 'application/octet-stream', 'SVC-EventType': 'Blob', 'SVC-EventId': randomUUID() }), s, 0);
    expect((await rawData(s, 0)).equals(exact)).toBe(true);
  });

  it('/incoming/{guid}: a body > 4 MiB answers 413', async () => {
    const s = uniq('big-incoming');
    const res = await post(s, `"${'x'.repeat(LIMIT)}"`, { 'Content-Type': 'application/json', 'SVC-EventType': 'Big' }, `/incoming/${randomUUID()}`);
    expect(res.status).toBe(413);
    await expectNothingWritten(s);
  });
});

describe('expected version', () => {
  it('-1 (no stream): succeeds on a new stream, then conflicts with current version 0 and writes nothing', async () => {
    const s = uniq('ev-nostream');
    await expectCreated(await append(t, s, [newEvent('First')], { 'SVC-ExpectedVersion': '-1' }), s, 0);
    await expectWrongVersion(await append(t, s, [newEvent('Second')], { 'SVC-ExpectedVersion': '-1' }), 0);
    expect((await events(s))!.map((e) => e.eventType)).toEqual(['First']);
  });

  it('-4 (stream exists): conflicts with current version -1 on a new stream (creating nothing), succeeds once it exists', async () => {
    const s = uniq('ev-exists');
    await expectWrongVersion(await append(t, s, [newEvent('Early')], { 'SVC-ExpectedVersion': '-4' }), -1);
    await expectNothingWritten(s);
    await expectCreated(await append(t, s, [newEvent('A')]), s, 0);
    await expectCreated(await append(t, s, [newEvent('B')], { 'SVC-ExpectedVersion': '-4' }), s, 1);
    await expectCreated(await append(t, s, [newEvent('C'), newEvent('D')], { 'SVC-ExpectedVersion': '-4' }), s, 2);
    expect((await events(s))!.map((e) => e.eventType)).toEqual(['A', 'B', 'C', 'D']);
  });

  it('-4 succeeds on a stream that so far only has metadata', async () => {
    const s = uniq('ev-exists-meta');
    const meta = await http(t, `/streams/${enc(s)}/metadata`, {
      method: 'POST', headers: { 'Content-Type': 'application/json', 'SVC-EventId': randomUUID() }, body: '{"custom":1}',
    });
    expect(meta.status).toBe(201);
    await expectCreated(await append(t, s, [newEvent('A')], { 'SVC-ExpectedVersion': '-4' }), s, 0);
    expect((await events(s))!.map((e) => e.eventType)).toEqual(['A']);
  });

  it('-2 (any) and no header always append', async () => {
    const s = uniq('ev-any');
    await expectCreated(await append(t, s, [newEvent('A')], { 'SVC-ExpectedVersion': '-2' }), s, 0);
    await expectCreated(await append(t, s, [newEvent('B')], { 'SVC-ExpectedVersion': '-2' }), s, 1);
    await expectCreated(await append(t, s, [newEvent('C')]), s, 2);
    expect((await events(s))!.map((e) => e.eventType)).toEqual(['A', 'B', 'C']);
  });

  it('N: succeeds when N is the last event number; a stale or future N conflicts with the current version and writes nothing', async () => {
    const s = uniq('ev-exact');
    await expectWrongVersion(await append(t, s, [newEvent('Early')], { 'SVC-ExpectedVersion': '0' }), -1);
    await expectNothingWritten(s);
    await expectCreated(await append(t, s, [newEvent('A'), newEvent('B')], { 'SVC-ExpectedVersion': '-1' }), s, 0);
    await expectCreated(await append(t, s, [newEvent('C')], { 'SVC-ExpectedVersion': '1' }), s, 2);
    await expectCreated(await append(t, s, [newEvent('D'), newEvent('E')], { 'SVC-ExpectedVersion': '2' }), s, 3);
    const before = await events(s);
    await expectWrongVersion(await append(t, s, [newEvent('Stale')], { 'SVC-ExpectedVersion': '2' }), 4);
    await expectWrongVersion(await append(t, s, [newEvent('Stale0')], { 'SVC-ExpectedVersion': '0' }), 4);
    await expectWrongVersion(await append(t, s, [newEvent('Future')], { 'SVC-ExpectedVersion': '5' }), 4);
    await expectWrongVersion(await append(t, s, [newEvent('Future')], { 'SVC-ExpectedVersion': '100' }), 4);
    await expectNothingWritten(s, before);
    await expectCreated(await append(t, s, [newEvent('F')], { 'SVC-ExpectedVersion': '4' }), s, 5);
  });

  it('applies to single-body and /incoming appends too', async () => {
    const s = uniq('ev-single');
    const h = (v: string) => ({ 'Content-Type': 'application/json', 'SVC-EventType': 'A', 'SVC-EventId': randomUUID(), 'SVC-ExpectedVersion': v });
    await expectCreated(await post(s, '{}', h('-1')), s, 0);
    await expectWrongVersion(await post(s, '{}', h('-1')), 0);
    await expectWrongVersion(await post(s, '{}', h('3')), 0);
    await expectCreated(await post(s, '{}', h('0')), s, 1);
    const incoming = { 'Content-Type': 'application/json', 'SVC-EventType': 'B', 'SVC-ExpectedVersion': '0' };
    await expectWrongVersion(await post(s, '{}', incoming, `/incoming/${randomUUID()}`), 1);
    await expectCreated(await post(s, '{}', { ...incoming, 'SVC-ExpectedVersion': '1' }, `/incoming/${randomUUID()}`), s, 2);
    expect((await events(s))!.map((e) => e.eventType)).toEqual(['A', 'A', 'B']);
  });

  it.each(['ES-ExpectedVersion', 'Kurrent-ExpectedVersion', 'SVC-ExpectedVersion'])('is read from %s', async (header) => {
    const s = uniq('ev-spell');
    await expectCreated(await append(t, s, [newEvent('A')], { [header]: '-1' }), s, 0);
    await expectWrongVersion(await append(t, s, [newEvent('B')], { [header]: '-1' }), 0);
    await expectCreated(await append(t, s, [newEvent('B')], { [header]: '0' }), s, 1);
  });

  it('Kurrent- wins over ES- when both are sent', async () => {
    const s = uniq('ev-both');
    await expectCreated(await append(t, s, [newEvent('A')]), s, 0);
    await expectCreated(await append(t, s, [newEvent('B')], { 'Kurrent-ExpectedVersion': '0', 'ES-ExpectedVersion': '7' }), s, 1);
    await expectWrongVersion(await append(t, s, [newEvent('C')], { 'Kurrent-ExpectedVersion': '7', 'ES-ExpectedVersion': '1' }), 1);
  });

  it.each(['-5', '-100', 'abc', '1.5', ''])('a malformed expected version %j answers 400 and writes nothing', async (value) => {
    const s = uniq('ev-bad');
    await expectCreated(await append(t, s, [newEvent('A')]), s, 0);
    const before = await events(s);
    const res = await append(t, s, [newEvent('B')], { 'SVC-ExpectedVersion': value });
    await expectBadRequest(res, /ExpectedVersion header in wrong format\./);
    await expectNothingWritten(s, before);
  });
});

describe('idempotent retries', () => {
  it('array, -2: re-posting the same batch answers 201 with the original Location and appends nothing', async () => {
    const s = uniq('idem-any');
    const batch = [newEvent('A', { n: 1 }), newEvent('B', { n: 2 })];
    await expectCreated(await append(t, s, batch), s, 0);
    await expectCreated(await append(t, s, [newEvent('C')]), s, 2);
    for (let i = 0; i < 3; i++) await expectCreated(await append(t, s, batch), s, 0);
    await expectCreated(await append(t, s, batch, { 'SVC-ExpectedVersion': '-2' }), s, 0);
    expect((await events(s))!.map((e) => e.eventType)).toEqual(['A', 'B', 'C']);
  });

  it('array, -4: a retry is idempotent', async () => {
    const s = uniq('idem-exists');
    await expectCreated(await append(t, s, [newEvent('Z')]), s, 0);
    const batch = [newEvent('A'), newEvent('B')];
    await expectCreated(await append(t, s, batch, { 'SVC-ExpectedVersion': '-4' }), s, 1);
    await expectCreated(await append(t, s, batch, { 'SVC-ExpectedVersion': '-4' }), s, 1);
    expect((await events(s))!.map((e) => e.eventType)).toEqual(['Z', 'A', 'B']);
  });

  it('array, -1: a retry of the creating batch is idempotent; other events conflict', async () => {
    const s = uniq('idem-nostream');
    const batch = [newEvent('A'), newEvent('B')];
    await expectCreated(await append(t, s, batch, { 'SVC-ExpectedVersion': '-1' }), s, 0);
    await expectCreated(await append(t, s, batch, { 'SVC-ExpectedVersion': '-1' }), s, 0);
    await expectWrongVersion(await append(t, s, [newEvent('Other')], { 'SVC-ExpectedVersion': '-1' }), 1);
    expect((await events(s))!.map((e) => e.eventType)).toEqual(['A', 'B']);
  });

  it('array, N: a retry with the same expected version is idempotent even after later writes', async () => {
    const s = uniq('idem-exact');
    await expectCreated(await append(t, s, [newEvent('A')], { 'SVC-ExpectedVersion': '-1' }), s, 0);
    const batch = [newEvent('B'), newEvent('C')];
    await expectCreated(await append(t, s, batch, { 'SVC-ExpectedVersion': '0' }), s, 1);
    await expectCreated(await append(t, s, batch, { 'SVC-ExpectedVersion': '0' }), s, 1);
    await expectCreated(await append(t, s, [newEvent('D')], { 'SVC-ExpectedVersion': '2' }), s, 3);
    await expectCreated(await append(t, s, batch, { 'SVC-ExpectedVersion': '0' }), s, 1);
    // the same ids at a different expected version are not a retry of that write
    await expectWrongVersion(await append(t, s, batch, { 'SVC-ExpectedVersion': '1' }), 3);
    expect((await events(s))!.map((e) => e.eventType)).toEqual(['A', 'B', 'C', 'D']);
  });

  it('a batch that only partially matches earlier ids is refused and writes nothing', async () => {
    const s = uniq('idem-partial');
    const a = newEvent('A');
    const b = newEvent('B');
    await expectCreated(await append(t, s, [a, b]), s, 0);
    const res = await append(t, s, [a, newEvent('New')]);
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(res.status).toBeLessThan(500);
    expect((await events(s))!.map((e) => e.eventType)).toEqual(['A', 'B']);
  });

  it('single body, -2: same id re-posted answers the original Location, one event', async () => {
    const s = uniq('idem-single');
    const id = randomUUID();
    const h = { 'Content-Type': 'application/json', 'SVC-EventType': 'Once', 'SVC-EventId': id };
    await expectCreated(await post(s, '{"v":1}', h), s, 0);
    await expectCreated(await append(t, s, [newEvent('Next')]), s, 1);
    await expectCreated(await post(s, '{"v":1}', h), s, 0);
    await expectCreated(await post(s, '{"v":1}', { ...h, 'SVC-ExpectedVersion': '-2' }), s, 0);
    const stored = (await events(s))!;
    expect(stored.map((e) => e.eventType)).toEqual(['Once', 'Next']);
    expect(stored[0].eventId).toBe(id);
  });

  it('single body, N: a retry with the original expected version is idempotent', async () => {
    const s = uniq('idem-single-n');
    const id = randomUUID();
    const h = { 'Content-Type': 'application/octet-stream', 'SVC-EventType': 'Bin', 'SVC-EventId': id, 'SVC-ExpectedVersion': '-1' };
    const bytes = randomBytes(64);
    await expectCreated(await post(s, bytes, h), s, 0);
    await expectCreated(await post(s, bytes, h), s, 0);
    const id2 = randomUUID();
    const h2 = { ...h, 'SVC-EventId': id2, 'SVC-ExpectedVersion': '0' };
    await expectCreated(await post(s, bytes, h2), s, 1);
    await expectCreated(await post(s, bytes, h2), s, 1);
    expect((await events(s))!.map((e) => e.eventId)).toEqual([id, id2]);
  });

  it('an id already written by the array form makes a single-body post with that id idempotent (mixed forms)', async () => {
    const s = uniq('idem-mixed');
    const e = newEvent('Mixed', { a: 1 });
    await expectCreated(await append(t, s, [e]), s, 0);
    await expectCreated(await post(s, '{"a":1}', { 'Content-Type': 'application/json', 'SVC-EventType': 'Mixed', 'SVC-EventId': e.eventId }), s, 0);
    await expectCreated(await post(s, '{"a":1}', { 'Content-Type': 'application/json', 'SVC-EventType': 'Mixed' }, `/incoming/${e.eventId}`), s, 0);
    expect((await events(s))!.length).toBe(1);
  });

  it('the same event id may be used in two different streams', async () => {
    const s1 = uniq('idem-s1');
    const s2 = uniq('idem-s2');
    const e = newEvent('Shared');
    await expectCreated(await append(t, s1, [e]), s1, 0);
    await expectCreated(await append(t, s2, [newEvent('Other')]), s2, 0);
    await expectCreated(await append(t, s2, [e]), s2, 1);
    expect((await events(s2))!.map((x) => x.eventId)).toEqual([expect.any(String), e.eventId]);
  });

  it('ops (non-admin) may append to a user stream and its retries are idempotent', async () => {
    const s = uniq('idem-ops');
    const batch = [newEvent('A')];
    const send = () => http(t, `/streams/${enc(s)}`, {
      method: 'POST', authorization: OPS, headers: { 'Content-Type': EVENTS_JSON }, body: JSON.stringify(batch),
    });
    await expectCreated(await send(), s, 0);
    await expectCreated(await send(), s, 0);
    expect((await events(s))!.length).toBe(1);
  });
});
