import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  KurrentDBClient, jsonEvent, binaryEvent, START, END, FORWARDS, BACKWARDS, NO_STREAM, STREAM_EXISTS, ANY,
  WrongExpectedVersionError, StreamNotFoundError, StreamDeletedError, eventTypeFilter, streamNameFilter,
  type ResolvedEvent as KResolvedEvent, type Position,
} from '@kurrent/kurrentdb-client';
import { append, newEvent, readFeed, startTestNode, uniq, http, type TestNode } from './support/node.js';

// The official Node clients against the node's own port (issue 29): appends (BatchAppend, the
// clients' default), reads of streams and $all every way, wrong expected versions, deletes and
// tombstones, metadata, catch-up subscriptions with filters, and what HTTP wrote read over gRPC
// and the other way round. The node is plain (--insecure): the grpc-js path sends no
// credentials and runs as system (--insecure-grpc-user), the Rust read path sends admin's.
// @eventstore/db-client 6.2.1 has its own file (grpc-client6.e2e.spec.ts): the two clients
// register the same global protobuf classes and cannot share a process.

let t: TestNode;
let client: KurrentDBClient;

beforeAll(async () => {
  t = await startTestNode();
  const port = new URL(t.url).port;
  client = KurrentDBClient.connectionString(`kurrentdb://admin:changeit@127.0.0.1:${port}?tls=false`);
});

afterAll(async () => {
  await client?.dispose();
  await t?.dispose();
});

async function collect<T>(iterable: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of iterable) out.push(item);
  return out;
}

const typesOf = (events: KResolvedEvent[]) => events.map((e) => e.event?.type);

describe('appends and stream reads', () => {
  it('appends with the default path and reads forwards, backwards, from a revision, with a count', async () => {
    const stream = uniq('orders');
    const result = await client.appendToStream(stream, [1, 2, 3, 4, 5].map((n) => jsonEvent({ type: `E${n}`, data: { n } })));
    expect(result.success).toBe(true);
    expect(result.nextExpectedRevision).toBe(4n);
    const forwards = await collect(client.readStream(stream, { direction: FORWARDS, fromRevision: START }));
    expect(typesOf(forwards)).toEqual(['E1', 'E2', 'E3', 'E4', 'E5']);
    expect(forwards[0].event?.data).toEqual({ n: 1 });
    expect(forwards[4].event?.position).toEqual(result.position);
    expect(typesOf(await collect(client.readStream(stream, { direction: BACKWARDS, fromRevision: END, maxCount: 2 })))).toEqual(['E5', 'E4']);
    expect(typesOf(await collect(client.readStream(stream, { direction: BACKWARDS, fromRevision: 1n })))).toEqual(['E2', 'E1']);
    expect(typesOf(await collect(client.readStream(stream, { direction: FORWARDS, fromRevision: 3n, maxCount: 10 })))).toEqual(['E4', 'E5']);
  });

  it('keeps binary data, user metadata and the created time', async () => {
    const stream = uniq('binary');
    const before = Date.now();
    await client.appendToStream(stream, binaryEvent({ type: 'Blob', data: Buffer.from([0, 1, 2, 255]), metadata: Buffer.from('{"k":"v"}') }));
    const [e] = await collect(client.readStream(stream));
    expect(e.event?.isJson).toBe(false);
    expect(Buffer.from(e.event!.data as Uint8Array)).toEqual(Buffer.from([0, 1, 2, 255]));
    expect(e.event?.created).toBeInstanceOf(Date);
    expect(Math.abs(e.event!.created.getTime() - before)).toBeLessThan(60_000);
  });

  it('appends through Append when the call carries credentials', async () => {
    const stream = uniq('explicit');
    await client.appendToStream(stream, jsonEvent({ type: 'A', data: {} }), { credentials: { username: 'admin', password: 'changeit' } });
    await client.appendToStream(stream, jsonEvent({ type: 'B', data: { two: true } }));
    const events = await collect(client.readStream(stream));
    expect(typesOf(events)).toEqual(['A', 'B']);
    expect(events[1].event?.data).toEqual({ two: true });
  });

  it('answers a wrong expected version with the current revision, on both append paths', async () => {
    const stream = uniq('wev');
    await client.appendToStream(stream, jsonEvent({ type: 'A', data: {} }));
    const refused = await client.appendToStream(stream, jsonEvent({ type: 'B', data: {} }), { streamState: NO_STREAM }).catch((e) => e);
    expect(refused).toBeInstanceOf(WrongExpectedVersionError);
    expect(refused.actualState).toBe(0n);
    const viaAppend = await client.appendToStream(stream, jsonEvent({ type: 'B', data: {} }),
      { streamState: 5n, credentials: { username: 'admin', password: 'changeit' } }).catch((e) => e);
    expect(viaAppend).toBeInstanceOf(WrongExpectedVersionError);
    expect(viaAppend.expectedState).toBe(5n);
    const missing = await client.appendToStream(uniq('missing'), jsonEvent({ type: 'B', data: {} }), { streamState: STREAM_EXISTS }).catch((e) => e);
    expect(missing).toBeInstanceOf(WrongExpectedVersionError);
    expect(missing.actualState).toBe('no_stream');
    const ok = await client.appendToStream(stream, jsonEvent({ type: 'C', data: {} }), { streamState: 0n });
    expect(ok.nextExpectedRevision).toBe(1n);
  });

  it('reports a stream that was never written as not found', async () => {
    await expect(collect(client.readStream(uniq('nothing')))).rejects.toBeInstanceOf(StreamNotFoundError);
  });
});

describe('deletes', () => {
  it('soft delete: reads find nothing, an append recreates the stream', async () => {
    const stream = uniq('soft');
    await client.appendToStream(stream, [jsonEvent({ type: 'A', data: {} }), jsonEvent({ type: 'B', data: {} })]);
    const wrong = await client.deleteStream(stream, { expectedRevision: 7n }).catch((e) => e);
    expect(wrong).toBeInstanceOf(WrongExpectedVersionError);
    expect(wrong.expectedState).toBe(7n);
    await client.deleteStream(stream, { expectedRevision: 1n });
    await expect(collect(client.readStream(stream))).rejects.toBeInstanceOf(StreamNotFoundError);
    await client.appendToStream(stream, jsonEvent({ type: 'C', data: {} }));
    const events = await collect(client.readStream(stream));
    expect(typesOf(events)).toEqual(['C']);
    expect(events[0].event?.revision).toBe(2n);
  });

  it('tombstone: reads and appends fail with the stream deleted, forever', async () => {
    const stream = uniq('hard');
    await client.appendToStream(stream, jsonEvent({ type: 'A', data: {} }));
    await client.tombstoneStream(stream, { expectedRevision: ANY });
    const read = await collect(client.readStream(stream)).catch((e) => e);
    expect(read).toBeInstanceOf(StreamDeletedError);
    const write = await client.appendToStream(stream, jsonEvent({ type: 'B', data: {} })).catch((e) => e);
    expect(write).toBeInstanceOf(StreamDeletedError);
    expect(write.streamName).toBe(stream);
    const again = await client.tombstoneStream(stream).catch((e) => e);
    expect(again).toBeInstanceOf(StreamDeletedError);
    expect((await http(t, `/streams/${stream}`, { headers: { Accept: 'application/json' } })).status).toBe(410);
  });
});

describe('metadata', () => {
  it('round-trips custom keys and applies $maxCount as reads over HTTP do', async () => {
    const stream = uniq('meta');
    await client.setStreamMetadata(stream, { maxCount: 2, custom: { team: 'blue' } } as never);
    const { metadata } = await client.getStreamMetadata(stream);
    expect(metadata).toMatchObject({ maxCount: 2, custom: { team: 'blue' } });
    for (let i = 0; i < 20; i++) await client.appendToStream(stream, jsonEvent({ type: `E${i}`, data: {} }));
    expect(typesOf(await collect(client.readStream(stream)))).toEqual(['E18', 'E19']);
    const feed = await readFeed(t, `/streams/${stream}`);
    expect(feed.entries.map((e: { summary: string }) => e.summary)).toEqual(['E19', 'E18']);
  });

  it('a read goes on past whole pages that $maxAge hides, to the events it still shows', async () => {
    const stream = uniq('aged');
    // More old events than one page of the node's read (512), all past $maxAge by the read.
    for (let i = 0; i < 3; i++) {
      await client.appendToStream(stream, Array.from({ length: 400 }, (_, n) => jsonEvent({ type: 'Old', data: { n } })));
    }
    await client.setStreamMetadata(stream, { maxAge: 1 } as never);
    await new Promise((r) => setTimeout(r, 1500));
    await client.appendToStream(stream, ['New1', 'New2'].map((type) => jsonEvent({ type, data: {} })));
    expect(typesOf(await collect(client.readStream(stream, { direction: FORWARDS, fromRevision: START, maxCount: 5000 })))).toEqual(['New1', 'New2']);
    expect(typesOf(await collect(client.readStream(stream, { direction: BACKWARDS, fromRevision: END, maxCount: 5000 })))).toEqual(['New2', 'New1']);
    const feed = await readFeed(t, `/streams/${stream}`);
    expect(feed.entries.map((e: { summary: string }) => e.summary)).toEqual(['New2', 'New1']);
  });

  it('refuses metadata that is not a metadata document with the write door\'s reason', async () => {
    const stream = uniq('badmeta');
    const refused = await client.appendToStream(`$$${stream}`, jsonEvent({ type: '$metadata', data: { $maxCount: 'two' } })).catch((e) => e);
    expect(refused).toBeInstanceOf(Error);
    expect(String(refused.message)).toMatch(/\$maxCount must be an integer/);
  });
});

describe('$all', () => {
  it('reads from an event\'s position (inclusive) and backwards from the end', async () => {
    const stream = uniq('all');
    const first = await client.appendToStream(stream, jsonEvent({ type: 'AllA', data: {} }));
    await client.appendToStream(stream, jsonEvent({ type: 'AllB', data: {} }));
    const from = await collect(client.readAll({ fromPosition: first.position!, maxCount: 2 }));
    expect(typesOf(from)).toEqual(['AllA', 'AllB']);
    const newest = await collect(client.readAll({ direction: BACKWARDS, fromPosition: END, maxCount: 1 }));
    expect(typesOf(newest)).toEqual(['AllB']);
    // The same positions the HTTP door shows for $all: its page from that position starts with that event.
    const hex = BigInt(newest[0].event!.position.commit).toString(16).toUpperCase().padStart(16, '0');
    const feed = await readFeed(t, `/streams/%24all/${hex}${hex}/forward/1`);
    expect(feed.entries.map((e: { summary: string }) => e.summary)).toEqual(['AllB']);
  });

  it('filters a read by event type', async () => {
    const tag = uniq('Filtered').replace(/-/g, '');
    const stream = uniq('filtered');
    await client.appendToStream(stream, [jsonEvent({ type: `${tag}1`, data: {} }), jsonEvent({ type: 'Other', data: {} }), jsonEvent({ type: `${tag}2`, data: {} })]);
    const events = await collect(client.readAll({ fromPosition: START, filter: eventTypeFilter({ prefixes: [tag] }), maxCount: 10 } as never));
    expect(typesOf(events as KResolvedEvent[])).toEqual([`${tag}1`, `${tag}2`]);
  });
});

describe('HTTP and gRPC see one log', () => {
  it('reads over gRPC what HTTP wrote, and over HTTP what gRPC wrote', async () => {
    const stream = uniq('both');
    expect((await append(t, stream, [newEvent('FromHttp', { via: 'http' })])).status).toBe(201);
    await client.appendToStream(stream, jsonEvent({ type: 'FromGrpc', data: { via: 'grpc' } }));
    const events = await collect(client.readStream(stream));
    expect(events.map((e) => [e.event?.type, e.event?.data])).toEqual([['FromHttp', { via: 'http' }], ['FromGrpc', { via: 'grpc' }]]);
    const feed = await readFeed(t, `/streams/${stream}`, { 'ES-ResolveLinkTos': 'true' });
    expect(feed.entries.map((e: { summary: string }) => e.summary)).toEqual(['FromGrpc', 'FromHttp']);
    const body = await (await http(t, `/streams/${stream}/1`, { headers: { Accept: 'application/json' } })).json();
    expect(body).toEqual({ via: 'grpc' });
  });
});

describe('catch-up subscriptions', () => {
  it('to a stream: catches up, says caught up once, then sees live events', async () => {
    const stream = uniq('sub');
    await client.appendToStream(stream, [1, 2, 3, 4].map((n) => jsonEvent({ type: `S${n}`, data: {} })));
    const sub = client.subscribeToStream(stream, { fromRevision: 1n });
    let caughtUp = 0;
    sub.on('caughtUp', () => { caughtUp++; });
    const seen: string[] = [];
    setTimeout(() => void client.appendToStream(stream, jsonEvent({ type: 'Live', data: {} })), 200);
    for await (const e of sub) {
      seen.push(e.event!.type);
      if (seen.length === 3) break;
    }
    expect(seen).toEqual(['S3', 'S4', 'Live']);
    expect(caughtUp).toBe(1);
  });

  it('from the end: only new events; to a stream that does not exist yet: waits for it', async () => {
    const stream = uniq('later');
    const sub = client.subscribeToStream(stream, { fromRevision: END });
    const confirmed = new Promise((resolve) => sub.once('confirmation', resolve));
    await confirmed;
    await client.appendToStream(stream, jsonEvent({ type: 'First', data: {} }));
    for await (const e of sub) {
      expect(e.event?.type).toBe('First');
      break;
    }
  });

  it('to $all with an event-type filter: matching events, checkpoints, live ones, over a long catch-up', async () => {
    const tag = uniq('Sub').replace(/-/g, '');
    const stream = uniq('allsub');
    for (let i = 0; i < 10; i++) {
      await client.appendToStream(stream, Array.from({ length: 100 }, (_, j) => jsonEvent({ type: j % 2 === 0 ? `${tag}Even` : 'Odd', data: { i, j } })));
    }
    const checkpoints: Position[] = [];
    const sub = client.subscribeToAll({
      fromPosition: START,
      filter: eventTypeFilter({ prefixes: [tag], checkpointInterval: 1, checkpointReached: (_s, p) => { checkpoints.push(p); } } as never),
    });
    let n = 0;
    let caughtUp = false;
    sub.on('caughtUp', () => {
      caughtUp = true;
      void client.appendToStream(stream, jsonEvent({ type: `${tag}Live`, data: {} }));
    });
    let last = '';
    for await (const e of sub) {
      last = e.event!.type;
      if (++n === 501) break;
    }
    expect(last).toBe(`${tag}Live`);
    expect(caughtUp).toBe(true);
    expect(checkpoints.length).toBeGreaterThan(5);
    for (let i = 1; i < checkpoints.length; i++) expect(checkpoints[i].commit > checkpoints[i - 1].commit).toBe(true);
  });

  it('to $all filtered on stream names from a position (exclusive)', async () => {
    const prefix = uniq('pfx');
    const first = await client.appendToStream(`${prefix}-a`, jsonEvent({ type: 'One', data: {} }));
    await client.appendToStream(`${prefix}-b`, jsonEvent({ type: 'Two', data: {} }));
    await client.appendToStream(uniq('elsewhere'), jsonEvent({ type: 'Three', data: {} }));
    await client.appendToStream(`${prefix}-c`, jsonEvent({ type: 'Four', data: {} }));
    const sub = client.subscribeToAll({ fromPosition: first.position!, filter: streamNameFilter({ prefixes: [prefix] }) });
    const seen: string[] = [];
    for await (const e of sub) {
      seen.push(e.event!.type);
      if (seen.length === 2) break;
    }
    expect(seen).toEqual(['Two', 'Four']);
  });
});
