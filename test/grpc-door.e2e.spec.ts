import { once } from 'node:events';
import { connect, constants, type ClientHttp2Session } from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { methodOf } from '../src/api/grpc/codecs.js';
import { ADMIN, OPS, basic, http, startTestNode, uniq, type TestNode } from './support/node.js';
import { call, finish, frame, startCall, STREAMS, streamId } from './support/grpc.js';

// The gRPC door from outside, with a bare HTTP/2 client (issue 29): one port for both protocols,
// the server features the clients choose their paths by, the auth rules, and input no official
// client sends: malformed messages, unknown methods, oversized and endless appends, calls cut
// off mid-append or cancelled mid-subscription, a thousand idle connections. Every bad call
// fails alone with a status; the node goes on and nothing is half-written.

const MAX_APPEND = 16 * 1024;
let t: TestNode;

beforeAll(async () => {
  // anonymous: a call without credentials gets the HTTP door's anonymous rules (the default, system, is tested by the clients' suite).
  t = await startTestNode({ maxAppendSize: MAX_APPEND, insecureGrpcUser: 'anonymous' } as never);
});
afterAll(async () => { await t?.dispose(); });

const uuid = () => ({ string: crypto.randomUUID() });
const proposed = (type: string, data: unknown = {}) => ({
  proposed_message: { id: uuid(), metadata: { type, 'content-type': 'application/json' }, data: Buffer.from(JSON.stringify(data)), custom_metadata: Buffer.alloc(0) },
});
const appendOptions = (name: string, expected: Record<string, unknown> = { any: {} }) => ({ options: { stream_identifier: streamId(name), ...expected } });
const readStream = (name: string, extra: Record<string, unknown> = {}) => ({
  options: { stream: { stream_identifier: streamId(name), start: {} }, count: '100', uuid_option: { string: {} }, no_filter: {}, ...extra },
});

async function readEvents(name: string, auth = ADMIN) {
  return call(t.url, STREAMS, 'Read', [readStream(name)], { authorization: auth });
}

const SERVICES = [
  STREAMS, 'event_store.client.server_features.ServerFeatures', 'event_store.client.projections.Projections', 'event_store.client.users.Users',
  'event_store.client.operations.Operations', 'event_store.client.gossip.Gossip', 'event_store.client.monitoring.Monitoring',
  'event_store.client.persistent_subscriptions.PersistentSubscriptions',
];

describe('one port, two protocols', () => {
  it('serves HTTP/1.1 and gRPC over HTTP/2 on the same port', async () => {
    expect((await http(t, '/info')).status).toBe(200);
    const features = await call(t.url, 'event_store.client.server_features.ServerFeatures', 'GetSupportedMethods', [{}]);
    expect(features.status).toBe(0);
    expect((await http(t, '/info')).status).toBe(200);
  });

  it('reports the 24.10 version line and exactly the methods it serves', async () => {
    const { responses } = await call(t.url, 'event_store.client.server_features.ServerFeatures', 'GetSupportedMethods', [{}]);
    const answer = responses[0] as { event_store_server_version: string; methods: { method_name: string; service_name: string; features?: string[] }[] };
    expect(answer.event_store_server_version).toBe('24.10.0');
    const methods = answer.methods.map((m) => `${m.service_name}/${m.method_name}${m.features ? `:${m.features.join(',')}` : ''}`).sort();
    const ps = 'event_store.client.persistent_subscriptions.persistentsubscriptions';
    const projections = ['create:track_emitted_streams', 'delete', 'disable', 'enable', 'reset', 'restartsubsystem', 'result', 'state', 'statistics', 'update'];
    const users = ['changepassword', 'create', 'delete', 'details', 'disable', 'enable', 'resetpassword', 'update'];
    expect(methods).toEqual([
      'event_store.client.gossip.gossip/read',
      'event_store.client.monitoring.monitoring/stats',
      ...['mergeindexes', 'resignnode', 'restartpersistentsubscriptions', 'setnodepriority', 'shutdown', 'startscavenge', 'stopscavenge']
        .map((m) => `event_store.client.operations.operations/${m}`),
      ...['create', 'delete', 'getinfo', 'list', 'read', 'replayparked', 'restartsubsystem', 'update'].map((m) => `${ps}/${m}:stream,all`),
      ...projections.map((m) => `event_store.client.projections.projections/${m}`),
      'event_store.client.server_features.serverfeatures/getsupportedmethods',
      'event_store.client.streams.streams/append',
      'event_store.client.streams.streams/batchappend:deadline_duration',
      'event_store.client.streams.streams/delete',
      'event_store.client.streams.streams/read:position,events',
      'event_store.client.streams.streams/tombstone',
      ...users.map((m) => `event_store.client.users.users/${m}`),
    ]);
    // Every method listed answers (none is UNIMPLEMENTED). Without credentials (anonymous on this
    // node): the management methods refuse, so none of them acts (a shutdown, a scavenge).
    const { protoRoot } = await import('../src/api/grpc/codecs.js');
    for (const m of answer.methods) {
      const svc = SERVICES.find((name) => name.toLowerCase() === m.service_name)!;
      const name = Object.keys(protoRoot().lookupService(svc).methods).find((n) => n.toLowerCase() === m.method_name)!;
      const r = await call(t.url, svc, name, [Buffer.alloc(0)]);
      expect(r.status, `${svc}/${name}`).not.toBe(12);
      expect(r.status, `${svc}/${name}`).not.toBe(13);
    }
  });

  it('answers a method it does not serve UNIMPLEMENTED, and goes on', async () => {
    // No .proto names it, so no codec: sent as bare bytes.
    const session = connect(t.url);
    try {
      const stream = startCall(session, '/event_store.client.operations.Operations/SetNodeColour', { authorization: ADMIN });
      stream.end(frame(Buffer.alloc(0)));
      expect((await finish(stream)).status).toBe(12);
    } finally {
      session.close();
    }
    expect((await http(t, '/info')).status).toBe(200);
  });
});

describe('auth', () => {
  it('takes Basic credentials, refuses wrong ones UNAUTHENTICATED, and applies the $all rule to anonymous calls', async () => {
    const all = { options: { all: { start: {} }, count: '5', uuid_option: { string: {} }, no_filter: {} } };
    expect((await call(t.url, STREAMS, 'Read', [all], { authorization: ADMIN })).status).toBe(0);
    const wrong = await call(t.url, STREAMS, 'Read', [all], { authorization: basic('admin', 'nope') });
    expect([wrong.status, wrong.message]).toEqual([16, 'Unauthenticated']);
    const anonymous = await call(t.url, STREAMS, 'Read', [all]);
    expect([anonymous.status, anonymous.message, anonymous.trailers.exception]).toEqual([7, 'Access Denied', 'access-denied']);
    const ops = await call(t.url, STREAMS, 'Read', [all], { authorization: OPS });
    expect(ops.trailers.exception).toBe('access-denied');
  });

  it('applies a stream ACL as the HTTP door does', async () => {
    const name = uniq('acl');
    const meta = { options: { stream_identifier: streamId(`$$${name}`), any: {} } };
    const set = await call(t.url, STREAMS, 'Append', [meta, proposed('$metadata', { $acl: { $w: 'admin', $r: 'admin' } })], { authorization: ADMIN });
    expect(set.status).toBe(0);
    const refused = await call(t.url, STREAMS, 'Append', [appendOptions(name), proposed('E')], { authorization: OPS });
    expect(refused.trailers.exception).toBe('access-denied');
    expect((await call(t.url, STREAMS, 'Append', [appendOptions(name), proposed('E')], { authorization: ADMIN })).status).toBe(0);
    expect((await readEvents(name, OPS)).trailers.exception).toBe('access-denied');
    expect((await http(t, `/streams/${name}`, { authorization: OPS, headers: { Accept: 'application/json' } })).status).toBe(401);
  });
});

describe('bad input fails alone', () => {
  it('a malformed message, a missing uuid option, an invalid combination: INVALID_ARGUMENT', async () => {
    const garbage = await call(t.url, STREAMS, 'Read', [Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f])], { authorization: ADMIN });
    expect(garbage.status).toBe(3);
    const noUuid = await call(t.url, STREAMS, 'Read', [readStream('x', { uuid_option: undefined })], { authorization: ADMIN });
    expect([noUuid.status, noUuid.message]).toEqual([3, "'uuidOption' is a required argument of type UUIDOption"]);
    const combination = await call(t.url, STREAMS, 'Read', [readStream('x', { filter: { event_type: { prefix: ['a'] }, max: 32, checkpointIntervalMultiplier: 1 }, no_filter: undefined })],
      { authorization: ADMIN });
    expect(combination.status).toBe(3);
    expect(combination.message).toMatch(/The combination of/);
  });

  it('an append whose first message is not its options, or whose event lacks its content type', async () => {
    const name = uniq('bad-append');
    const first = await call(t.url, STREAMS, 'Append', [proposed('E')], { authorization: ADMIN });
    expect(first.status).toBe(2);
    const noType = await call(t.url, STREAMS, 'Append', [appendOptions(name), { proposed_message: { id: uuid(), metadata: { type: 'E' }, data: Buffer.from('{}') } }],
      { authorization: ADMIN });
    expect(noType.trailers.exception).toBe('missing-required-metadata-property');
    expect(noType.trailers['required-metadata-properties']).toBe('type,content-type');
    expect((await readEvents(name)).responses[0]).toHaveProperty('stream_not_found');
  });

  it('an event larger than maxAppendSize: maximum-append-size-exceeded, nothing written', async () => {
    const name = uniq('big');
    const r = await call(t.url, STREAMS, 'Append', [appendOptions(name), proposed('Big', { pad: 'x'.repeat(MAX_APPEND + 10) })], { authorization: ADMIN });
    expect(r.status).toBe(3);
    expect(r.trailers.exception).toBe('maximum-append-size-exceeded');
    expect(r.trailers['maximum-append-size']).toBe(String(MAX_APPEND));
    expect((await readEvents(name)).responses[0]).toHaveProperty('stream_not_found');
  });

  it('a million tiny messages in one append: refused at the append bound, nothing written, the node goes on', async () => {
    const name = uniq('endless');
    const session = connect(t.url);
    const stream = startCall(session, `/${STREAMS}/Append`, { authorization: ADMIN });
    const done = finish(stream);
    const codec = methodOf(STREAMS, 'Append');
    stream.write(frame(codec.requestSerialize(appendOptions(name))));
    const one = frame(codec.requestSerialize(proposed('T')));
    const chunk = Buffer.concat(Array.from({ length: 1000 }, () => one));
    for (let i = 0; i < 1000 && !stream.closed && !stream.destroyed; i++) {
      if (!stream.write(chunk)) await Promise.race([once(stream, 'drain'), once(stream, 'close')]);
    }
    if (!stream.closed) stream.end();
    const r = await done;
    session.close();
    expect(r.trailers.exception).toBe('maximum-append-size-exceeded');
    expect((await readEvents(name)).responses[0]).toHaveProperty('stream_not_found');
    expect((await http(t, '/info')).status).toBe(200);
  }, 120_000);

  it('a connection dropped mid-append writes nothing', async () => {
    const name = uniq('dropped');
    const session = connect(t.url);
    const stream = startCall(session, `/${STREAMS}/Append`, { authorization: ADMIN });
    stream.on('error', () => undefined);
    const codec = methodOf(STREAMS, 'Append');
    stream.write(frame(codec.requestSerialize(appendOptions(name))));
    for (let i = 0; i < 10; i++) stream.write(frame(codec.requestSerialize(proposed('Half'))));
    await new Promise((resolve) => setTimeout(resolve, 100));
    session.destroy();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect((await readEvents(name)).responses[0]).toHaveProperty('stream_not_found');
  });

  it('a subscription cancelled mid-stream ends alone', async () => {
    const name = uniq('cancelled');
    await call(t.url, STREAMS, 'Append', [appendOptions(name), ...Array.from({ length: 50 }, () => proposed('E'))], { authorization: ADMIN });
    const session = connect(t.url);
    const stream = startCall(session, `/${STREAMS}/Read`, { authorization: ADMIN });
    stream.on('error', () => undefined);
    stream.end(frame(methodOf(STREAMS, 'Read').requestSerialize(readStream(name, { count: undefined, subscription: {} }))));
    await once(stream, 'data');
    stream.close(constants.NGHTTP2_CANCEL);
    await once(stream, 'close');
    session.close();
    const again = await readEvents(name);
    expect(again.status).toBe(0);
    expect(again.responses).toHaveLength(50);
  });

  it('a thousand idle HTTP/2 connections: the node still answers both protocols', async () => {
    const sessions: ClientHttp2Session[] = [];
    try {
      for (let i = 0; i < 1000; i++) {
        const s = connect(t.url);
        s.on('error', () => undefined);
        sessions.push(s);
      }
      await Promise.all(sessions.map((s) => once(s, 'connect')));
      const r = await call(t.url, 'event_store.client.server_features.ServerFeatures', 'GetSupportedMethods', [{}]);
      expect(r.status).toBe(0);
      expect((await http(t, '/info')).status).toBe(200);
    } finally {
      for (const s of sessions) s.destroy();
    }
  }, 60_000);
});

describe('deletes and wrong expected versions over the wire', () => {
  it('a delete with the wrong expected revision: FAILED_PRECONDITION with the trailers the clients read', async () => {
    const name = uniq('del');
    await call(t.url, STREAMS, 'Append', [appendOptions(name), proposed('A'), proposed('B')], { authorization: ADMIN });
    const r = await call(t.url, STREAMS, 'Delete', [{ options: { stream_identifier: streamId(name), revision: '5' } }], { authorization: ADMIN });
    expect(r.status).toBe(9);
    expect(r.trailers).toMatchObject({ exception: 'wrong-expected-version', 'stream-name': name, 'expected-version': '5', 'actual-version': '1' });
    const ok = await call(t.url, STREAMS, 'Delete', [{ options: { stream_identifier: streamId(name), revision: '1' } }], { authorization: ADMIN });
    expect(ok.status).toBe(0);
    expect(ok.responses[0]).toHaveProperty('position');
  });

  it('an append of no events: no_stream on a missing stream, the current revision on an existing one', async () => {
    const name = uniq('empty');
    const missing = await call(t.url, STREAMS, 'Append', [appendOptions(name)], { authorization: ADMIN });
    expect(missing.responses[0]).toMatchObject({ success: { no_stream: {}, no_position: {} } });
    await call(t.url, STREAMS, 'Append', [appendOptions(name), proposed('A'), proposed('B')], { authorization: ADMIN });
    const existing = await call(t.url, STREAMS, 'Append', [appendOptions(name)], { authorization: ADMIN });
    expect(existing.responses[0]).toMatchObject({ success: { current_revision: '1' } });
  });

  it('an append with the wrong expected revision answers in the message, both generations filled', async () => {
    const name = uniq('wev');
    await call(t.url, STREAMS, 'Append', [appendOptions(name), proposed('A')], { authorization: ADMIN });
    const r = await call(t.url, STREAMS, 'Append', [appendOptions(name, { no_stream: {} }), proposed('B')], { authorization: ADMIN });
    expect(r.status).toBe(0);
    expect(r.responses[0]).toMatchObject({
      wrong_expected_version: { current_revision: '0', current_revision_20_6_0: '0', expected_no_stream: {}, expected_revision_20_6_0: '18446744073709551615' },
    });
  });
});
