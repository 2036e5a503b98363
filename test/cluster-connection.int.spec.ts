import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ExpectedVersion, NotLeaderError, jsonEvent, Store } from '../src/store/index.js';
import { encodeFrame, FRAME, PROTOCOL_VERSION, readFrames, type Frame, type WriteRequest } from '../src/cluster/frames.js';
import { FollowerReplication } from '../src/cluster/follower.js';
import { ReplicationServer } from '../src/cluster/server.js';
import { plainTransport } from '../src/cluster/transport.js';

// Replication connections over real sockets, without etcd: a node's replication server refuses a
// HELLO of another protocol version and closes a connection that sends a malformed frame, logging
// why, and goes on serving; a follower's own append resolves the moment its copy shows the write
// (the commit bus), and fails as before when the connection closes first.

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const HELLO = { version: PROTOCOL_VERSION, name: 'n2', instanceId: 'i2', term: 5, epochs: [], logEnd: 0 };

function rawFrame(type: number, payload: string): Buffer {
  const body = Buffer.from(payload, 'utf8');
  const header = Buffer.alloc(5);
  header.writeUInt32BE(body.length + 1, 0);
  header[4] = type;
  return Buffer.concat([header, body]);
}

async function replicationServer(): Promise<{ port: number; logged: Record<string, unknown>[] }> {
  const logged: Record<string, unknown>[] = [];
  const log = pino({ level: 'debug' }, { write: (line: string) => { logged.push(JSON.parse(line) as Record<string, unknown>); } });
  const server = new ReplicationServer(plainTransport, log);
  const port = await server.listen('127.0.0.1', 0);
  cleanups.push(() => server.close());
  return { port, logged };
}

/** Connects, sends `bytes`, and resolves the frames received once the server closes the connection. */
async function converse(port: number, bytes: Buffer): Promise<Frame[]> {
  const socket = createConnection({ host: '127.0.0.1', port });
  socket.on('error', () => undefined);
  const received: Frame[] = [];
  readFrames(socket, (frame) => received.push(frame), (err) => { throw err; });
  socket.write(bytes);
  await once(socket, 'close');
  return received;
}

describe('a node\'s replication server', () => {
  it('refuses a HELLO of another protocol version, naming both versions to the peer and in its log, and goes on serving', async () => {
    const { port, logged } = await replicationServer();
    const other = PROTOCOL_VERSION + 1;
    const refused = await converse(port, encodeFrame(FRAME.HELLO, { ...HELLO, version: other } as never));
    expect(refused).toHaveLength(1);
    expect(refused[0].type).toBe(FRAME.REFUSED);
    const message = (refused[0].body as { message: string }).message;
    expect(message).toContain(`protocol version ${other}`);
    expect(message).toContain(`version ${PROTOCOL_VERSION}`);
    expect(logged.find((l) => l.msg === message)).toMatchObject({ level: 40, theirs: other, ours: PROTOCOL_VERSION });

    const { version: _, ...unversioned } = HELLO;
    const old = await converse(port, rawFrame(FRAME.HELLO, JSON.stringify(unversioned)));
    expect(old).toMatchObject([{ type: FRAME.REFUSED, body: { message: expect.stringMatching(/without a replication protocol version/) } }]);

    // The node still serves: a HELLO of its version is heard (and refused only because it does not lead).
    expect(await converse(port, encodeFrame(FRAME.HELLO, HELLO))).toEqual([{ type: FRAME.REFUSED, body: { message: 'this node does not lead' } }]);
  });

  it('closes a connection whose frame does not fit the protocol, logging the reason, and goes on serving', async () => {
    const { port, logged } = await replicationServer();
    const oversized = Buffer.alloc(5);
    oversized.writeUInt32BE(0xffffffff, 0);
    const malformed: [Buffer, RegExp][] = [
      [rawFrame(FRAME.HELLO, '{"version":1,"name":'), /HELLO frame that is not JSON/],
      [rawFrame(FRAME.HELLO, JSON.stringify({ ...HELLO, term: 'five' })), /HELLO frame whose term/],
      [encodeFrame(FRAME.ACK, 10), /first frame is ACK, not HELLO/],
      [rawFrame(FRAME.ACK, 'x'), /ACK frame of 1 bytes/],
      [rawFrame(99, ''), /unknown type 99/],
      [oversized, /frame of 4294967295 bytes/],
    ];
    for (const [bytes, reason] of malformed) {
      expect(await converse(port, bytes)).toEqual([]);
      expect(logged.at(-1)).toMatchObject({ level: 40, reason: expect.stringMatching(reason) });
    }
    expect(await converse(port, encodeFrame(FRAME.HELLO, HELLO))).toEqual([{ type: FRAME.REFUSED, body: { message: 'this node does not lead' } }]);
  });
});

/** A leader played by the test: it answers HELLO with START, hands the test each WRITE, and sends what the test says. */
async function fakeLeader(term: number) {
  const writes: WriteRequest[] = [];
  let connection: Socket | undefined;
  const server: Server = createServer((socket) => {
    connection = socket;
    socket.on('error', () => undefined);
    readFrames(socket, (frame) => {
      if (frame.type === FRAME.HELLO) socket.write(encodeFrame(FRAME.START, { term, common: frame.body.logEnd }));
      if (frame.type === FRAME.WRITE) writes.push(frame.body);
    }, (err) => { throw err; });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  cleanups.push(() => new Promise<void>((resolve) => { connection?.destroy(); server.close(() => resolve()); }));
  return {
    port: (server.address() as { port: number }).port,
    nextWrite: () => vi.waitFor(() => writes.shift() ?? Promise.reject(new Error('no WRITE yet'))),
    send: (frame: Buffer) => connection!.write(frame),
    hangUp: () => connection!.destroy(),
  };
}

async function openStore(boundedReads: boolean): Promise<Store> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-conn-'));
  const store = await Store.open({ dir, inMemory: false, chunkSize: 64 * 1024, boundedReads });
  cleanups.push(async () => {
    await store.close().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });
  return store;
}

async function following(leaderPort: number, store: Store) {
  const events = { started: vi.fn(), caughtUp: vi.fn(), truncate: vi.fn(), closed: vi.fn() };
  const follower = new FollowerReplication(store, { name: 'leader', intHost: '127.0.0.1', intPort: leaderPort, term: 3 },
    { name: 'f', instanceId: 'f' }, plainTransport, events, pino({ level: 'silent' }), 60_000);
  follower.start();
  cleanups.push(() => follower.stop());
  await vi.waitFor(() => expect(events.started).toHaveBeenCalled());
  return { follower, events };
}

/** The leader's store appends a WRITE as LeaderReplication.appendFor does. */
function appendFor(leader: Store, write: WriteRequest) {
  return leader.append(write.stream, ExpectedVersion.fromNumber(write.expected)!, write.events.map((e) => ({
    eventId: Buffer.from(e.eventId, 'base64'), eventType: e.eventType, isJson: e.isJson,
    data: Buffer.from(e.data, 'base64'), metadata: Buffer.from(e.metadata, 'base64'),
  })));
}

function settledYet(promise: Promise<unknown>): () => boolean {
  let settled = false;
  promise.then(() => { settled = true; }, () => { settled = true; });
  return () => settled;
}

describe('a follower\'s own append', () => {
  it('resolves once its copy shows the write: WRITTEN alone is not enough, nor records not yet committed', async () => {
    const [leaderStore, followerStore] = [await openStore(false), await openStore(true)];
    const leader = await fakeLeader(3);
    const { follower } = await following(leader.port, followerStore);
    const appending = follower.append('scavenges', ExpectedVersion.any, [jsonEvent('T', { n: 1 })]);
    const settled = settledYet(appending);
    const written = await appendFor(leaderStore, await leader.nextWrite());
    leader.send(encodeFrame(FRAME.WRITTEN, { id: 1, firstEventNumber: written.firstEventNumber, position: written.position }));
    await new Promise((r) => setTimeout(r, 50));
    expect(settled()).toBe(false);
    leader.send(encodeFrame(FRAME.RECORDS, leaderStore.logRows(0, 100)));
    await vi.waitFor(() => expect(followerStore.logEnd).toBe(leaderStore.logEnd));
    expect(settled()).toBe(false);
    leader.send(encodeFrame(FRAME.COMMIT, leaderStore.logEnd));
    expect(await appending).toEqual({ firstEventNumber: 0, position: written.position });
    expect(followerStore.readEvent('scavenges', 0).status).toBe('ok');
  });

  it('fails as not connected when the connection closes before its copy shows the write', async () => {
    const [leaderStore, followerStore] = [await openStore(false), await openStore(true)];
    const leader = await fakeLeader(3);
    const { follower, events } = await following(leader.port, followerStore);
    const appending = follower.append('scavenges', ExpectedVersion.any, [jsonEvent('T', { n: 1 })]);
    const written = await appendFor(leaderStore, await leader.nextWrite());
    leader.send(encodeFrame(FRAME.WRITTEN, { id: 1, firstEventNumber: written.firstEventNumber, position: written.position }));
    await new Promise((r) => setTimeout(r, 50));
    leader.hangUp();
    await expect(appending).rejects.toBeInstanceOf(NotLeaderError);
    await expect(appending).rejects.toThrow(/closed before the write was replicated/);
    expect(events.closed).toHaveBeenCalledTimes(1);
  });

  it('closes the connection with the reason when the leader sends a malformed frame', async () => {
    const followerStore = await openStore(true);
    const leader = await fakeLeader(3);
    const { events } = await following(leader.port, followerStore);
    leader.send(rawFrame(FRAME.WRITTEN, '{"id":"one"}'));
    await vi.waitFor(() => expect(events.closed).toHaveBeenCalledWith(expect.stringMatching(/does not fit the protocol: a WRITTEN frame whose id/)));
  });
});
