import { connect, type Socket } from 'node:net';
import { XMLParser } from 'fast-xml-parser';
import { KurrentDBClient, jsonEvent } from '@kurrent/kurrentdb-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN, append, eventually, http, newEvent, startTestNode, uniq, type TestNode } from './support/node.js';

// Big feed pages over real HTTP (issue 31, items 4 and 5): a page bigger than a part is written
// in parts (chunked) and says what the same events say on small pages, in every representation;
// a client that stops reading holds about a part and is dropped after --http-send-timeout while
// the node answers everyone else; the bytes all such clients hold are bounded
// (--http-send-buffer-size), and a page that finds the bound full waits until there is room.
// /stats svc.feedPages reports what the pages hold.

const ATOM_JSON = 'application/vnd.eventstore.atom+json';
const ATOM_XML = 'application/atom+xml';
const PLAIN_JSON = 'application/json';
const TIMEOUT_S = 2;
/** Events of ~40 KB: a page of 240 at embed=body is ~20 MB of JSON, more than a socket's kernel buffers take. */
const EVENTS = 240;
const PAD = 'x'.repeat(20_000) + 'é'.repeat(10_000);

interface FeedPages { pages: number; bufferedBytes: number; limitBytes: number; waiting: number; closedNotReading: number; yieldedMs: number }

async function feedPages(t: TestNode): Promise<FeedPages> {
  const res = await http(t, '/stats');
  return ((await res.json()) as { svc: { feedPages: FeedPages } }).svc.feedPages;
}

async function writeBigStream(t: TestNode): Promise<string> {
  const stream = uniq('big');
  for (let i = 0; i < EVENTS; i += 40) {
    const res = await append(t, stream, Array.from({ length: 40 }, (_, j) => newEvent('Big', { n: i + j, pad: PAD }, { m: i + j })));
    expect(res.status).toBe(201);
  }
  return stream;
}

/** A request that is sent and never read (the socket is paused: the kernel's buffers fill, then the node's). */
function unreadRequest(t: TestNode, path: string): Socket {
  const { port } = new URL(t.url);
  const socket = connect(Number(port), '127.0.0.1', () => {
    socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: ${ADMIN}\r\nAccept: ${PLAIN_JSON}\r\n\r\n`);
    socket.pause();
  });
  socket.on('error', () => undefined);
  return socket;
}

/** Reads what is left on a socket; true if the response ended properly (the last chunk of a chunked body). */
function drain(socket: Socket): Promise<boolean> {
  let tail = '';
  return new Promise((resolve) => {
    socket.on('data', (chunk: Buffer) => { tail = (tail + chunk.toString('latin1')).slice(-16); });
    socket.once('close', () => resolve(tail.endsWith('\r\n0\r\n\r\n')));
    socket.resume();
  });
}

async function pingMs(t: TestNode): Promise<number> {
  const started = performance.now();
  const res = await fetch(`${t.url}/ping`);
  expect(res.status).toBe(200);
  await res.arrayBuffer();
  return performance.now() - started;
}

describe('big pages', () => {
  let t: TestNode;
  let stream: string;
  beforeAll(async () => {
    t = await startTestNode({ httpSendTimeout: TIMEOUT_S });
    stream = await writeBigStream(t);
  });
  afterAll(async () => { await t?.dispose(); });

  async function get(path: string, accept: string): Promise<{ res: Response; text: string }> {
    const res = await http(t, path, { headers: { Accept: accept } });
    return { res, text: await res.text() };
  }

  /** The same events on pages of 20, followed by their `previous` links (forward: oldest page first). */
  async function pagesOf20(first: string, accept: string, pages: number, parse: (text: string) => any): Promise<any[]> {
    const entries: any[] = [];
    let path = first;
    for (let i = 0; i < pages; i++) {
      const doc = parse((await get(path, accept)).text);
      entries.unshift(...doc.entries);
      const previous = doc.links.find((l: any) => l.relation === 'previous').uri as string;
      path = previous.slice(t.url.length) + (first.includes('?') ? first.slice(first.indexOf('?')) : '');
    }
    return entries;
  }

  const json = (text: string) => JSON.parse(text);
  const xmlParser = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: '' });
  /** An Atom XML feed as the JSON feed's shape: entries (an array) and links ({ relation, uri }). */
  const xml = (text: string) => {
    const feed = xmlParser.parse(text).feed;
    const entries = [feed.entry ?? []].flat();
    return { ...feed, entries, links: [feed.link].flat().map((l: any) => ({ relation: l.rel, uri: l.href })) };
  };

  for (const [accept, parse, query] of [
    [ATOM_JSON, json, '?embed=body'], [ATOM_JSON, json, '?embed=tryharder'], [PLAIN_JSON, json, '?embed=rich'], [ATOM_XML, xml, ''],
  ] as const) {
    it(`a page of a stream in ${accept}${query}: in parts, with what pages of 20 of the same events show`, async () => {
      const { res, text } = await get(`/streams/${stream}/0/forward/${EVENTS}${query}`, accept);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe(`${accept}; charset=utf-8`);
      expect(res.headers.get('transfer-encoding')).toBe('chunked');
      expect(res.headers.get('content-length')).toBeNull();
      const big = parse(text);
      expect(big.entries).toHaveLength(EVENTS);
      expect(big.entries).toEqual(await pagesOf20(`/streams/${stream}/0/forward/20${query}`, accept, EVENTS / 20, parse));
      expect(big.title).toBe(`Event stream '${stream}'`);
    });
  }

  /** Reads the big page whole while `ask` is called again and again (5 ms apart); returns how many times it was. */
  async function readBigPageWhile(ask: () => Promise<void>): Promise<number> {
    let reading = true;
    let asked = 0;
    const asking = (async () => {
      while (reading) {
        await ask();
        asked++;
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    try {
      const { res, text } = await get(`/streams/${stream}/0/forward/${EVENTS}?embed=body`, ATOM_JSON);
      expect(res.headers.get('transfer-encoding')).toBe('chunked');
      expect(JSON.parse(text).entries).toHaveLength(EVENTS);
    } finally {
      reading = false;
      await asking;
    }
    return asked;
  }

  it('a big page stands back while other requests are answered: /stats svc.feedPages.yieldedMs grows, the page arrives whole', async () => {
    const before = (await feedPages(t)).yieldedMs;
    await readBigPageWhile(async () => {
      const res = await http(t, '/ping');
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    });
    expect((await feedPages(t)).yieldedMs).toBeGreaterThan(before);
  });

  it('a big page stands back while gRPC appends are answered too: BatchAppend (the clients\' default) and Append (a call with its own credentials)', async () => {
    const client = KurrentDBClient.connectionString(`kurrentdb://admin:changeit@127.0.0.1:${new URL(t.url).port}?tls=false`);
    const ticks = uniq('ticks');
    try {
      for (const options of [{}, { credentials: { username: 'admin', password: 'changeit' } }]) {
        await client.appendToStream(ticks, jsonEvent({ type: 'Tick', data: {} }), options); // (the connection and its first calls)
        const before = (await feedPages(t)).yieldedMs;
        await new Promise((r) => setTimeout(r, 400)); // the last HTTP answer (/stats) is older than the window (OTHERS_RECENT_MS) by now
        const appended = await readBigPageWhile(async () => {
          await client.appendToStream(ticks, jsonEvent({ type: 'Tick', data: {} }), options);
        });
        expect(appended).toBeGreaterThan(0);
        expect((await feedPages(t)).yieldedMs).toBeGreaterThan(before);
      }
    } finally {
      await client.dispose();
    }
  });

  it('a small page goes in one piece, with its Content-Length', async () => {
    const small = uniq('small');
    expect((await append(t, small, Array.from({ length: 20 }, (_, i) => newEvent('Small', { i })))).status).toBe(201);
    for (const accept of [ATOM_JSON, ATOM_XML, PLAIN_JSON]) {
      const { res, text } = await get(`/streams/${small}/0/forward/20?embed=body`, accept);
      expect(res.headers.get('content-length')).toBe(String(Buffer.byteLength(text)));
      expect(res.headers.get('transfer-encoding')).toBeNull();
    }
  });

  it('a page of $all forward and backward: in parts, the events pages of 20 show, newest first', async () => {
    const position = (doc: any, relation: string) => /\/([0-9A-F]{32})\/(?:forward|backward)\//.exec(doc.links.find((l: any) => l.relation === relation).uri)![1];
    // The position of the stream's first event: where the backward page that ends with it goes on.
    const recent = JSON.parse((await get('/streams/%24all/head/backward/400', ATOM_JSON)).text);
    const k = recent.entries.findIndex((e: any) => e.title === `0@${stream}`);
    expect(k).toBeGreaterThanOrEqual(EVENTS - 1);
    const start = position(JSON.parse((await get(`/streams/%24all/head/backward/${k + 1}`, ATOM_JSON)).text), 'next');

    const forward = await get(`/streams/%24all/${start}/forward/${EVENTS}?embed=body`, ATOM_JSON);
    expect(forward.res.headers.get('transfer-encoding')).toBe('chunked');
    const doc = JSON.parse(forward.text);
    expect(doc.entries.map((e: any) => e.title)).toEqual(Array.from({ length: EVENTS }, (_, i) => `${EVENTS - 1 - i}@${stream}`));
    expect(doc.entries).toEqual(await pagesOf20(`/streams/%24all/${start}/forward/20?embed=body`, ATOM_JSON, EVENTS / 20, json));

    const backward = await get(`/streams/%24all/${position(doc, 'previous')}/backward/${EVENTS}?embed=body`, ATOM_JSON);
    expect(backward.res.headers.get('transfer-encoding')).toBe('chunked');
    expect(JSON.parse(backward.text).entries).toEqual(doc.entries);
  });

  it('a client that stops reading holds about a part, is dropped after the timeout, and /ping answers meanwhile', async () => {
    const before = await feedPages(t);
    const socket = unreadRequest(t, `/streams/${stream}/0/forward/${EVENTS}?embed=body`);
    try {
      // The kernel's buffers fill, then the node holds what the socket has not taken.
      const stalled = await eventually(async () => {
        const now = await feedPages(t);
        expect(now.pages).toBe(1);
        expect(now.bufferedBytes).toBeGreaterThan(0);
        return now;
      }, 10_000);
      expect(stalled.bufferedBytes).toBeLessThan(512 * 1024);
      expect(await pingMs(t)).toBeLessThan(1000);
      await eventually(async () => {
        const now = await feedPages(t);
        expect(now.closedNotReading).toBe(before.closedNotReading + 1);
        expect(now.pages).toBe(0);
        expect(now.bufferedBytes).toBe(0);
      }, (TIMEOUT_S + 5) * 1000);
      expect(await drain(socket), 'the response was cut, not finished').toBe(false);
    } finally {
      socket.destroy();
    }
  });

  it('50 clients that never read: the node holds a bounded buffer, answers /ping, and drops them all after the timeout', async () => {
    const before = await feedPages(t);
    const sockets = Array.from({ length: 50 }, (_, i) => unreadRequest(t, `/streams/${stream}/${i % 4}/forward/${EVENTS / 2}?embed=body`));
    try {
      let mostHeld = 0;
      let slowestPing = 0;
      await eventually(async () => {
        const now = await feedPages(t);
        mostHeld = Math.max(mostHeld, now.bufferedBytes);
        slowestPing = Math.max(slowestPing, await pingMs(t));
        expect(now.closedNotReading).toBe(before.closedNotReading + 50);
        expect(now.pages).toBe(0);
        expect(now.bufferedBytes).toBe(0);
      }, 60_000);
      // About one part each (64 KiB, plus the HTTP framing), not their pages (5 MB each).
      expect(mostHeld).toBeGreaterThan(0);
      expect(mostHeld).toBeLessThan(50 * 256 * 1024);
      expect(slowestPing).toBeLessThan(1000);
      expect((await Promise.all(sockets.map(drain))).some((ended) => ended), 'every response was cut, none finished').toBe(false);
    } finally {
      for (const s of sockets) s.destroy();
    }
  });
});

describe('the bound on what all pages hold', () => {
  const STALLED = 4;
  let t: TestNode;
  let stream: string;
  beforeAll(async () => {
    t = await startTestNode({ httpSendTimeout: TIMEOUT_S, httpSendBufferSize: 64 * 1024 });
    stream = await writeBigStream(t);
  });
  afterAll(async () => { await t?.dispose(); });

  it('clients that stop reading fill it; a reading client\'s page waits until they are dropped, then arrives whole', async () => {
    // Each is dropped in turn: parts go to the next one only once one before it was dropped.
    const sockets = Array.from({ length: STALLED }, () => unreadRequest(t, `/streams/${stream}/0/forward/${EVENTS / 2}?embed=body`));
    try {
      await eventually(async () => expect((await feedPages(t)).bufferedBytes).toBeGreaterThanOrEqual(64 * 1024), 20_000);
      const reading = http(t, `/streams/${stream}/0/forward/${EVENTS}?embed=body`, { headers: { Accept: ATOM_JSON } });
      await eventually(async () => expect((await feedPages(t)).waiting).toBeGreaterThan(0), 2000);
      const doc = await (await reading).json();
      expect(doc.entries).toHaveLength(EVENTS);
      // Clients that do not read never give back what they hold: the page went on once some were dropped.
      expect((await feedPages(t)).closedNotReading).toBeGreaterThan(0);
      await eventually(async () => expect((await feedPages(t)).closedNotReading).toBe(STALLED), (STALLED * TIMEOUT_S + 5) * 1000);
    } finally {
      for (const s of sockets) s.destroy();
    }
  });
});
