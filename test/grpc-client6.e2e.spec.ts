import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  EventStoreDBClient, jsonEvent, START, BACKWARDS, END, NO_STREAM, WrongExpectedVersionError, StreamNotFoundError, StreamDeletedError,
  eventTypeFilter,
} from '@eventstore/db-client';
import { append, newEvent, startTestNode, uniq, type TestNode } from './support/node.js';

// The older published client, @eventstore/db-client 6.2.1 (esdb:// connection strings, still what
// many applications run), against the node's gRPC door (issue 29). It has its own file: it
// registers the same global protobuf classes as @kurrent/kurrentdb-client.

let t: TestNode;
let client: EventStoreDBClient;

beforeAll(async () => {
  t = await startTestNode();
  client = EventStoreDBClient.connectionString(`esdb://admin:changeit@127.0.0.1:${new URL(t.url).port}?tls=false`);
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

describe('@eventstore/db-client 6.2.1', () => {
  it('appends and reads a stream both ways, and $all backwards', async () => {
    const stream = uniq('six');
    const result = await client.appendToStream(stream, [jsonEvent({ type: 'A', data: { n: 1 } }), jsonEvent({ type: 'B', data: { n: 2 } })]);
    expect(result.nextExpectedRevision).toBe(1n);
    expect((await collect(client.readStream(stream))).map((e) => e.event?.type)).toEqual(['A', 'B']);
    expect((await collect(client.readStream(stream, { direction: BACKWARDS, fromRevision: END, maxCount: 1 }))).map((e) => e.event?.data)).toEqual([{ n: 2 }]);
    const [newest] = await collect(client.readAll({ direction: BACKWARDS, fromPosition: END, maxCount: 1 }));
    expect(newest.event?.type).toBe('B');
    expect(newest.event?.position).toEqual(result.position);
  });

  it('raises its typed errors: wrong expected version, not found, deleted', async () => {
    const stream = uniq('six-errors');
    await client.appendToStream(stream, jsonEvent({ type: 'A', data: {} }));
    await expect(client.appendToStream(stream, jsonEvent({ type: 'B', data: {} }), { expectedRevision: NO_STREAM })).rejects.toBeInstanceOf(WrongExpectedVersionError);
    await expect(collect(client.readStream(uniq('six-none')))).rejects.toBeInstanceOf(StreamNotFoundError);
    await client.tombstoneStream(stream);
    await expect(client.appendToStream(stream, jsonEvent({ type: 'C', data: {} }))).rejects.toBeInstanceOf(StreamDeletedError);
  });

  it('subscribes to $all with a filter, past what HTTP wrote, into live events', async () => {
    const tag = uniq('Six').replace(/-/g, '');
    expect((await append(t, uniq('six-http'), [newEvent(`${tag}Http`)])).status).toBe(201);
    const sub = client.subscribeToAll({ fromPosition: START, filter: eventTypeFilter({ prefixes: [tag] }) });
    const seen: string[] = [];
    setTimeout(() => void client.appendToStream(uniq('six-live'), jsonEvent({ type: `${tag}Live`, data: {} })), 200);
    for await (const e of sub) {
      seen.push(e.event!.type);
      if (seen.length === 2) break;
    }
    expect(seen).toEqual([`${tag}Http`, `${tag}Live`]);
  });
});
