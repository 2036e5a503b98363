import { createServer } from 'node:net';
import { constants } from 'node:http2';
import { Metadata, type ServiceError } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  KurrentDBClient, jsonEvent, AccessDeniedError, LoginConflictError, LoginNotFoundError, NotFoundError, ScavengeNotFoundError,
  UnknownError, convertToCommandError,
} from '@kurrent/kurrentdb-client';
import { UsersClient } from '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v1/usermanagement_grpc_pb.js';
import * as users from '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v1/usermanagement_pb.js';
import { OperationsClient } from '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v1/operations_grpc_pb.js';
import * as operations from '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v1/operations_pb.js';
import { Empty } from '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v1/shared_pb.js';
import { ADMIN, append, basic, eventually, http, newEvent, newUser, startTestNode, uniq, type TestNode } from './support/node.js';
import { call, frame, openSession, startCall } from './support/grpc.js';
import { methodOf } from '../src/api/grpc/codecs.js';

// The management services over gRPC with @kurrent/kurrentdb-client 1.3.1 (issue 32): projections
// through the client's own calls, created on one door and read on the other; users and operations
// through the client's gRPC channel with its generated messages (the Node clients have no calls of
// their own for them: the .NET, Java, Go and Python clients do); gossip discovery with several
// hosts and with +discover; Monitoring.Stats with a bare client (the Node clients have no generated
// Monitoring client). The node is plain: the client's calls run as system unless a test puts
// a user's `authorization` in the metadata itself. @eventstore/db-client 6.2.1 has its own file
// (grpc-admin-client6.e2e.spec.ts): the two clients cannot share a process.

let t: TestNode;
let client: KurrentDBClient;
let port: string;

beforeAll(async () => {
  t = await startTestNode();
  port = new URL(t.url).port;
  client = KurrentDBClient.connectionString(`kurrentdb://admin:changeit@127.0.0.1:${port}?tls=false`);
});
afterAll(async () => {
  await client?.dispose();
  await t?.dispose();
});

const PROJECTIONS = 'event_store.client.projections.Projections';
const MONITORING = 'event_store.client.monitoring.Monitoring';
const COUNTER = (stream: string) => `fromStream('${stream}').when({ $init: function () { return { count: 0 }; }, $any: function (s, e) { s.count += 1; return s; } })`;

async function httpJson(path: string): Promise<any> {
  const res = await http(t, path);
  expect(res.status, `${path}: ${await res.clone().text()}`).toBe(200);
  return res.json();
}

async function collect<T>(iterable: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of iterable) out.push(item);
  return out;
}

async function appendEvents(stream: string, n: number): Promise<void> {
  await client.appendToStream(stream, Array.from({ length: n }, (_, i) => jsonEvent({ type: 'Counted', data: { i } })));
}

/** A call of the client's gRPC channel with its generated messages, as the clients that have these calls make them. */
function unary<C, R>(Client: new (...args: never[]) => C, method: keyof C & string, request: unknown, authorization?: string): Promise<R> {
  const metadata = new Metadata();
  if (authorization) metadata.set('authorization', authorization);
  const execute = (client as unknown as { execute: (c: unknown, name: string, action: (g: any) => Promise<R>) => Promise<R> }).execute;
  return execute(Client, method, (grpc) => new Promise<R>((resolve, reject) => {
    grpc[method](request, metadata, { deadline: Date.now() + 10_000 }, (error: ServiceError | null, response: R) => {
      if (error) reject(convertToCommandError(error));
      else resolve(response);
    });
  }));
}

function serverStream<T>(Client: new (...args: never[]) => unknown, method: string, request: unknown, authorization?: string): Promise<T[]> {
  const metadata = new Metadata();
  if (authorization) metadata.set('authorization', authorization);
  const execute = (client as unknown as { execute: (c: unknown, name: string, action: (g: any) => Promise<T[]>) => Promise<T[]> }).execute;
  return execute(Client, method, (grpc) => new Promise<T[]>((resolve, reject) => {
    const out: T[] = [];
    const stream = grpc[method](request, metadata, { deadline: Date.now() + 10_000 });
    stream.on('data', (m: T) => out.push(m));
    stream.on('error', (error: ServiceError) => reject(convertToCommandError(error)));
    stream.on('end', () => resolve(out));
  }));
}

/** A continuous projection created over gRPC, counting the events of its stream, once it has counted two. */
async function countedTwice(prefix: string): Promise<{ stream: string; name: string }> {
  const stream = uniq(prefix);
  const name = uniq(prefix);
  await client.createProjection(name, COUNTER(stream));
  await appendEvents(stream, 2);
  await eventually(async () => expect(await client.getProjectionState(name)).toEqual({ count: 2 }), 10_000);
  return { stream, name };
}

describe('projections', () => {
  it('a projection created over gRPC (emitting, tracking its emitted streams) counts, and HTTP reads its state', async () => {
    const stream = uniq('counted');
    const name = uniq('grpc-counter');
    const target = uniq('emitted');
    const query = `fromStream('${stream}').when({ $init: function () { return { count: 0 }; }, $any: function (s, e) { s.count += 1; emit('${target}', 'Seen', { n: s.count }); return s; } })`;
    await client.createProjection(name, query, { emitEnabled: true, trackEmittedStreams: true });
    await appendEvents(stream, 3);
    await eventually(async () => expect(await httpJson(`/projection/${name}/state`)).toEqual({ count: 3 }), 10_000);
    expect(await client.getProjectionState(name)).toEqual({ count: 3 });
    const status = await client.getProjectionStatus(name);
    expect(status).toMatchObject({ name, projectionStatus: 'Running', effectiveName: name });
    expect((await httpJson(`/projection/${name}`)).mode).toBe('Continuous');
    const tracked = await eventually(async () => {
      const [first] = await collect(client.readStream(`$projections-${name}-emittedstreams`));
      expect(first?.event?.type).toBe('$StreamTracked');
      return first;
    }, 10_000);
    expect(Buffer.from(tracked.event!.data as Uint8Array).toString()).toBe(target);
    const config = await httpJson(`/projection/${name}/query?config=yes`);
    expect(config).toMatchObject({ emitEnabled: true, trackEmittedStreams: true, checkpointsEnabled: true });
  });

  it('a projection created over HTTP is read over gRPC: state per partition, result, status, listing', async () => {
    // fromCategory reads the category streams $by_category writes (the test node leaves the system projections stopped).
    await client.enableProjection('$by_category');
    const category = uniq('cat').replace(/-/g, '');
    const name = uniq('http-partitioned');
    const query = `fromCategory('${category}').foreachStream().when({ $init: function () { return 0; }, $any: function (s, e) { return s + 1; } })`
      + '.transformBy(function (s) { return { seen: s }; })';
    const res = await http(t, `/projections/continuous?name=${name}&enabled=yes&emit=no`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: query });
    expect(res.status).toBe(201);
    expect((await append(t, `${category}-MrWhiskers`, [newEvent('Meow'), newEvent('Meow'), newEvent('Meow')])).status).toBe(201);
    expect((await append(t, `${category}-Tom`, [newEvent('Meow')])).status).toBe(201);
    await eventually(async () => expect(await client.getProjectionState(name, { partition: `${category}-MrWhiskers` })).toBe(3), 10_000);
    await eventually(async () => expect(await client.getProjectionState(name, { partition: `${category}-Tom` })).toBe(1), 10_000);
    expect(await client.getProjectionResult(name, { partition: `${category}-MrWhiskers` })).toEqual({ seen: 3 });
    // A partition with nothing yet: an empty object, as the established server answers.
    expect(await client.getProjectionState(name, { partition: `${category}-Nobody` })).toEqual({});
    const listed = await client.listProjections();
    expect(listed.map((p) => p.name)).toContain(name);
    expect(listed.every((p) => p.projectionStatus !== undefined)).toBe(true);
    const status = await client.getProjectionStatus(name);
    expect(status.projectionStatus).toBe('Running');
    expect(status.eventsProcessedAfterRestart).toBeGreaterThanOrEqual(4n);
  });

  it('disable, abort, enable, reset, update and delete, each seen by the other door', async () => {
    const { stream, name } = await countedTwice('lifecycle');

    await client.disableProjection(name);
    expect((await client.getProjectionStatus(name)).projectionStatus).toBe('Stopped');
    expect((await httpJson(`/projection/${name}`)).status).toBe('Stopped');
    await client.enableProjection(name);
    expect((await client.getProjectionStatus(name)).projectionStatus).toBe('Running');
    await client.abortProjection(name);
    expect((await httpJson(`/projection/${name}`)).status).toBe('Aborted');
    await client.enableProjection(name);
    await eventually(async () => expect(await client.getProjectionState(name)).toEqual({ count: 2 }), 10_000);

    // A reset counts from the start again, in a new epoch.
    const before = await httpJson(`/projection/${name}`);
    await client.resetProjection(name);
    await eventually(async () => expect(await client.getProjectionState(name)).toEqual({ count: 2 }), 10_000);
    expect((await httpJson(`/projection/${name}`)).epoch).toBeGreaterThan(before.epoch);

    // A new query (counting by ten) restarts the running projection with it.
    await client.updateProjection(name, COUNTER(stream).replace('s.count += 1', 's.count += 10'));
    await appendEvents(stream, 1);
    const text = await (await http(t, `/projection/${name}/query`)).text();
    expect(text).toContain('s.count += 10');
    await eventually(async () => expect((await client.getProjectionState(name)).count).toBeGreaterThanOrEqual(12), 10_000);

    // Deleting a running projection is refused with the reason; stopped, it goes.
    await expect(client.deleteProjection(name)).rejects.toThrow(/stopped/);
    await client.disableProjection(name);
    await client.deleteProjection(name, { deleteCheckpointStream: true, deleteStateStream: true });
    await expect(client.getProjectionStatus(name)).rejects.toBeInstanceOf(NotFoundError);
    expect((await http(t, `/projection/${name}`)).status).toBe(404);
  });

  it('answers a missing projection NOT_FOUND, a duplicate name and a bad query with the reason', async () => {
    await expect(client.getProjectionState(uniq('none'))).rejects.toBeInstanceOf(NotFoundError);
    await expect(client.enableProjection(uniq('none'))).rejects.toBeInstanceOf(NotFoundError);
    const name = uniq('twice');
    await client.createProjection(name, COUNTER(uniq('s')));
    await expect(client.createProjection(name, COUNTER(uniq('s')))).rejects.toThrow(/Duplicate projection names/);
    await expect(client.createProjection(uniq('broken'), 'fromAll().when({')).rejects.toThrow(/3 INVALID_ARGUMENT/);
  });

  it('one-time and transient projections, and statistics filtered by mode and name', async () => {
    const stream = uniq('modes');
    await appendEvents(stream, 2);
    const transient = uniq('transient');
    const created = await call(t.url, PROJECTIONS, 'Create', [{ options: { transient: { name: transient }, query: COUNTER(stream) } }]);
    expect(created.status, created.message).toBe(0);
    const oneTime = await call(t.url, PROJECTIONS, 'Create', [{ options: { one_time: {}, query: COUNTER(stream) } }]);
    expect(oneTime.status, oneTime.message).toBe(0);
    const byMode = async (mode: string) => (await call(t.url, PROJECTIONS, 'Statistics', [{ options: { [mode]: {} } }])).responses
      .map((r) => (r.details as { name: string; mode: string }));
    expect((await byMode('transient')).map((d) => d.name)).toContain(transient);
    expect(new Set((await byMode('transient')).map((d) => d.mode))).toEqual(new Set(['Transient']));
    const oneTimes = await byMode('one_time');
    expect(oneTimes.length).toBeGreaterThanOrEqual(1);
    expect(new Set(oneTimes.map((d) => d.mode))).toEqual(new Set(['OneTime']));
    const all = await byMode('all');
    expect(all.length).toBeGreaterThanOrEqual(oneTimes.length + 1);
    const one = await call(t.url, PROJECTIONS, 'Statistics', [{ options: { name: transient } }]);
    expect(one.responses).toHaveLength(1);
    const missing = await call(t.url, PROJECTIONS, 'Statistics', [{ options: { name: uniq('none') } }]);
    expect(missing.status).toBe(5);
    // A transient projection's state, over HTTP too.
    await eventually(async () => expect(await httpJson(`/projection/${transient}/state`)).toEqual({ count: 2 }), 10_000);
    // Disable without a checkpoint aborts (a transient one has completed by now: it stays so).
    const continuous = uniq('raw-continuous');
    expect((await call(t.url, PROJECTIONS, 'Create', [{ options: { continuous: { name: continuous }, query: COUNTER(stream) } }])).status).toBe(0);
    expect((await call(t.url, PROJECTIONS, 'Disable', [{ options: { name: continuous, write_checkpoint: false } }])).status).toBe(0);
    expect((await httpJson(`/projection/${continuous}`)).status).toBe('Aborted');
    expect((await call(t.url, PROJECTIONS, 'Disable', [{ options: { name: continuous, write_checkpoint: true } }])).status).toBe(0);
    expect((await httpJson(`/projection/${continuous}`)).status).toBe('Stopped');
    // Tracking emitted streams takes emitting.
    const refused = await call(t.url, PROJECTIONS, 'Create', [{ options: { continuous: { name: uniq('c'), track_emitted_streams: true }, query: COUNTER(stream) } }]);
    expect([refused.status, refused.message]).toEqual([3, 'EmitEnabled must be set to true to track emitted streams.']);
  });

  it('restarts the subsystem: the projections come back as they were', async () => {
    const { stream, name } = await countedTwice('survivor');
    await client.restartSubsystem();
    await eventually(async () => expect((await client.getProjectionStatus(name)).projectionStatus).toBe('Running'), 10_000);
    await appendEvents(stream, 1);
    await eventually(async () => expect(await client.getProjectionState(name)).toEqual({ count: 3 }), 10_000);
  });
});

describe('users', () => {
  const options = <T extends { setLoginName(l: string): unknown }>(o: T, login: string) => {
    o.setLoginName(login);
    return o;
  };

  it('creates, reads, updates, disables, enables, resets and changes passwords, and deletes an account; HTTP sees each', async () => {
    const login = uniq('grpc-user');
    const create = new users.CreateReq.Options().setLoginName(login).setPassword('first-pw').setFullName('Grpc User').setGroupsList(['readers']);
    await unary(UsersClient, 'create', new users.CreateReq().setOptions(create));
    expect((await httpJson(`/users/${login}`)).data).toMatchObject({ loginName: login, fullName: 'Grpc User', groups: ['readers'], disabled: false });

    const details = await serverStream<users.DetailsResp>(UsersClient, 'details', new users.DetailsReq().setOptions(options(new users.DetailsReq.Options(), login)));
    expect(details).toHaveLength(1);
    const d = details[0].getUserDetails()!;
    expect([d.getLoginName(), d.getFullName(), d.getGroupsList(), d.getDisabled()]).toEqual([login, 'Grpc User', ['readers'], false]);
    const ticks = BigInt(d.getLastUpdated()!.getTicksSinceEpoch());
    expect(Math.abs(Number(ticks / 10_000n) - Date.now())).toBeLessThan(60_000);
    const everyone = await serverStream<users.DetailsResp>(UsersClient, 'details', new users.DetailsReq().setOptions(new users.DetailsReq.Options()));
    expect(everyone.map((r) => r.getUserDetails()!.getLoginName())).toEqual(expect.arrayContaining(['admin', 'ops', login]));

    const update = options(new users.UpdateReq.Options(), login).setFullName('Renamed').setGroupsList(['writers', 'readers']);
    await unary(UsersClient, 'update', new users.UpdateReq().setOptions(update));
    expect((await httpJson(`/users/${login}`)).data).toMatchObject({ fullName: 'Renamed', groups: ['writers', 'readers'] });

    await unary(UsersClient, 'disable', new users.DisableReq().setOptions(options(new users.DisableReq.Options(), login)));
    expect((await http(t, '/users/$current', { authorization: basic(login, 'first-pw') })).status).toBe(401);
    await unary(UsersClient, 'enable', new users.EnableReq().setOptions(options(new users.EnableReq.Options(), login)));
    expect((await http(t, '/users/$current', { authorization: basic(login, 'first-pw') })).status).toBe(200);

    await unary(UsersClient, 'resetPassword', new users.ResetPasswordReq().setOptions(options(new users.ResetPasswordReq.Options(), login).setNewPassword('second-pw')));
    expect((await http(t, '/users/$current', { authorization: basic(login, 'second-pw') })).status).toBe(200);
    // Changing a password is the account's own user's, who must know the current one.
    const change = (current: string) => new users.ChangePasswordReq().setOptions(options(new users.ChangePasswordReq.Options(), login)
      .setCurrentPassword(current).setNewPassword('third-pw'));
    await expect(unary(UsersClient, 'changePassword', change('wrong'), basic(login, 'second-pw'))).rejects.toBeInstanceOf(AccessDeniedError);
    await unary(UsersClient, 'changePassword', change('second-pw'), basic(login, 'second-pw'));
    expect((await http(t, '/users/$current', { authorization: basic(login, 'third-pw') })).status).toBe(200);

    await unary(UsersClient, 'delete', new users.DeleteReq().setOptions(options(new users.DeleteReq.Options(), login)));
    expect((await http(t, `/users/${login}`)).status).toBe(404);
  });

  it('answers an unknown login user-not-found, a different re-create user-conflict, a bad name with the reason, a plain user access-denied', async () => {
    const missing = uniq('nobody');
    const notFound = await unary(UsersClient, 'enable', new users.EnableReq().setOptions(options(new users.EnableReq.Options(), missing))).catch((e) => e);
    expect(notFound).toBeInstanceOf(LoginNotFoundError);
    expect(notFound.LoginName).toBe(missing);
    const login = await newUser(t, [], 'pw');
    const again = new users.CreateReq.Options().setLoginName(login).setPassword('other').setFullName('Other');
    await expect(unary(UsersClient, 'create', new users.CreateReq().setOptions(again))).rejects.toBeInstanceOf(LoginConflictError);
    const badName = new users.CreateReq.Options().setLoginName('has space').setPassword('pw');
    await expect(unary(UsersClient, 'create', new users.CreateReq().setOptions(badName))).rejects.toThrow(/LoginName must not contain spaces, slashes or colons/);
    const asUser = new users.CreateReq.Options().setLoginName(uniq('x')).setPassword('pw');
    await expect(unary(UsersClient, 'create', new users.CreateReq().setOptions(asUser), basic(login, 'pw'))).rejects.toBeInstanceOf(AccessDeniedError);
    // A user reads its own account, not another's, nor the list.
    const details = (of: string) => new users.DetailsReq().setOptions(options(new users.DetailsReq.Options(), of));
    expect(await serverStream(UsersClient, 'details', details(login), basic(login, 'pw'))).toHaveLength(1);
    await expect(serverStream(UsersClient, 'details', details('admin'), basic(login, 'pw'))).rejects.toBeInstanceOf(AccessDeniedError);
    await expect(serverStream(UsersClient, 'details', details(''), basic(login, 'pw'))).rejects.toBeInstanceOf(AccessDeniedError);
  });
});

describe('operations', () => {
  it('starts a scavenge with threads, answers a second start InProgress with its id, and stops it', async () => {
    await appendEvents(uniq('scavenged'), 10);
    const start = (threads: number) => new operations.StartScavengeReq().setOptions(new operations.StartScavengeReq.Options().setThreadCount(threads));
    const started = await unary<unknown, operations.ScavengeResp>(OperationsClient, 'startScavenge', start(2));
    expect(started.getScavengeResult()).toBe(operations.ScavengeResp.ScavengeResult.STARTED);
    const id = started.getScavengeId();
    const second = await unary<unknown, operations.ScavengeResp>(OperationsClient, 'startScavenge', start(1)).catch(() => undefined);
    if (second) {
      // Unless the first finished meanwhile: then the second is a new one.
      if (second.getScavengeResult() === operations.ScavengeResp.ScavengeResult.INPROGRESS) expect(second.getScavengeId()).toBe(id);
      const stop = new operations.StopScavengeReq().setOptions(new operations.StopScavengeReq.Options().setScavengeId(second.getScavengeId()));
      const stopped = await unary<unknown, operations.ScavengeResp>(OperationsClient, 'stopScavenge', stop).catch((e) => e);
      if (!(stopped instanceof ScavengeNotFoundError)) expect(stopped.getScavengeResult()).toBe(operations.ScavengeResp.ScavengeResult.STOPPED);
    }
    await eventually(async () => expect((await httpJson('/admin/scavenge/current')).scavengeId).toBe(''), 20_000);
    expect((await httpJson('/admin/scavenge/last')).scavengeResult).toMatch(/Success|Stopped/);
  });

  it('takes a start chunk; refuses more threads than four; an unknown stop is scavenge-not-found', async () => {
    const options = new operations.StartScavengeReq.Options().setStartFromChunk(3);
    const started = await unary<unknown, operations.ScavengeResp>(OperationsClient, 'startScavenge', new operations.StartScavengeReq().setOptions(options));
    expect(started.getScavengeResult()).toBe(operations.ScavengeResp.ScavengeResult.STARTED);
    await eventually(async () => expect((await httpJson('/admin/scavenge/current')).scavengeId).toBe(''), 20_000);
    expect((await httpJson('/admin/scavenge/last')).scavengeResult).toBe('Success');
    const threads = new operations.StartScavengeReq.Options().setThreadCount(9);
    await expect(unary(OperationsClient, 'startScavenge', new operations.StartScavengeReq().setOptions(threads))).rejects.toThrow(/threads must be 4 or below/);
    const unknown = crypto.randomUUID();
    const stop = new operations.StopScavengeReq().setOptions(new operations.StopScavengeReq.Options().setScavengeId(unknown));
    const error = await unary(OperationsClient, 'stopScavenge', stop).catch((e) => e);
    expect(error).toBeInstanceOf(ScavengeNotFoundError);
    expect(error.scavengeId).toBe(unknown);
    expect((await httpJson('/admin/scavenge/current')).scavengeId).toBe('');
  });

  it('merges indexes and resigns (a single node has nothing to give up); a plain user is refused', async () => {
    await unary(OperationsClient, 'mergeIndexes', new Empty());
    await unary(OperationsClient, 'resignNode', new Empty());
    const login = await newUser(t, [], 'pw');
    await expect(unary(OperationsClient, 'mergeIndexes', new Empty(), basic(login, 'pw'))).rejects.toBeInstanceOf(AccessDeniedError);
    await expect(unary(OperationsClient, 'shutdown', new Empty(), basic(login, 'pw'))).rejects.toBeInstanceOf(AccessDeniedError);
    expect((await http(t, '/ping')).status).toBe(200);
  });

  it('shuts the node down once it has answered', async () => {
    const own = await startTestNode();
    const ownClient = KurrentDBClient.connectionString(`kurrentdb://127.0.0.1:${new URL(own.url).port}?tls=false`);
    try {
      const execute = (ownClient as unknown as { execute: (c: unknown, name: string, action: (g: any) => Promise<void>) => Promise<void> }).execute;
      await execute(OperationsClient, 'shutdown', (grpc) => new Promise<void>((resolve, reject) => {
        grpc.shutdown(new Empty(), new Metadata(), (error: ServiceError | null) => (error ? reject(error) : resolve()));
      }));
      await eventually(async () => { await expect(fetch(`${own.url}/ping`)).rejects.toThrow(); }, 10_000);
    } finally {
      await ownClient.dispose();
      await own.dispose().catch(() => undefined);
    }
  });

  it('sets the node priority (gossip shows it); a plain user is refused and a malformed request is INVALID_ARGUMENT, neither changes it', async () => {
    const priority = async () => ((await httpJson('/gossip')).members as { nodePriority: number }[])[0].nodePriority;
    await unary(OperationsClient, 'setNodePriority', new operations.SetNodePriorityReq().setPriority(12));
    expect(await priority()).toBe(12);
    await unary(OperationsClient, 'setNodePriority', new operations.SetNodePriorityReq().setPriority(-2147483648));
    expect(await priority()).toBe(-2147483648);
    const login = await newUser(t, [], 'pw');
    await expect(unary(OperationsClient, 'setNodePriority', new operations.SetNodePriorityReq().setPriority(5), basic(login, 'pw')))
      .rejects.toBeInstanceOf(AccessDeniedError);
    // Field 1's varint cut off: no int32 at all.
    const malformed = await call(t.url, 'event_store.client.operations.Operations', 'SetNodePriority', [Buffer.from([0x08, 0xff])], { authorization: ADMIN });
    expect(malformed.status).toBe(3);
    expect(await priority()).toBe(-2147483648);
    // proto3 sends a 0 priority as an empty message.
    await unary(OperationsClient, 'setNodePriority', new operations.SetNodePriorityReq().setPriority(0));
    expect(await priority()).toBe(0);
  });
});

describe('discovery', () => {
  async function deadPort(): Promise<number> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port: free } = server.address() as { port: number };
    await new Promise((resolve) => server.close(resolve));
    return free;
  }

  it('a connection string with several hosts finds the node through gossip (a dead seed is passed over)', async () => {
    const seeds = KurrentDBClient.connectionString(`kurrentdb://admin:changeit@127.0.0.1:${await deadPort()},127.0.0.1:${port}?tls=false&discoveryInterval=50`);
    try {
      const stream = uniq('gossiped');
      await seeds.appendToStream(stream, jsonEvent({ type: 'Found', data: {} }));
      expect((await collect(seeds.readStream(stream))).map((e) => e.event?.type)).toEqual(['Found']);
      expect(await seeds.getProjectionStatus('$by_category')).toMatchObject({ name: '$by_category' });
    } finally {
      await seeds.dispose();
    }
  });

  it('+discover finds the node through gossip too', async () => {
    const discover = KurrentDBClient.connectionString(`kurrentdb+discover://admin:changeit@127.0.0.1:${port}?tls=false`);
    try {
      const result = await discover.appendToStream(uniq('discovered'), jsonEvent({ type: 'Found', data: {} }));
      expect(result.success).toBe(true);
    } finally {
      await discover.dispose();
    }
  });

  it('Gossip.Read names this node alone, Leader and alive, at the address clients dial', async () => {
    const { status, responses } = await call(t.url, 'event_store.client.gossip.Gossip', 'Read', [{}]);
    expect(status).toBe(0);
    const members = (responses[0] as { members: Record<string, any>[] }).members;
    expect(members).toHaveLength(1);
    expect(members[0]).toMatchObject({ state: 'Leader', is_alive: true, http_end_point: { address: '127.0.0.1', port: Number(port) } });
    expect(members[0].instance_id.structured).toBeDefined();
  });
});

describe('monitoring', () => {
  /** Reads `count` messages of Monitoring.Stats, then cancels the call. */
  async function statsMessages(count: number, period: string, authorization?: string): Promise<{ at: number; stats: Record<string, string> }[] | number> {
    const session = openSession(t.url);
    try {
      const codec = methodOf(MONITORING, 'Stats');
      const stream = startCall(session, `/${MONITORING}/Stats`, authorization ? { authorization } : {});
      stream.end(frame(codec.requestSerialize({ refresh_time_period_in_ms: period })));
      return await new Promise((resolve, reject) => {
        const out: { at: number; stats: Record<string, string> }[] = [];
        let pending = Buffer.alloc(0);
        stream.on('data', (chunk: Buffer) => {
          pending = Buffer.concat([pending, chunk]);
          while (pending.length >= 5 && pending.length >= 5 + pending.readUInt32BE(1)) {
            const body = pending.subarray(5, 5 + pending.readUInt32BE(1));
            pending = pending.subarray(5 + body.length);
            out.push({ at: Date.now(), stats: codec.responseDeserialize(Buffer.from(body)).stats as Record<string, string> });
            if (out.length === count) {
              stream.close(constants.NGHTTP2_CANCEL);
              resolve(out);
            }
          }
        });
        stream.on('trailers', (trailers) => resolve(Number(trailers['grpc-status'])));
        stream.on('response', (headers) => { if (headers['grpc-status'] !== undefined) resolve(Number(headers['grpc-status'])); });
        stream.on('error', reject);
      });
    } finally {
      session.close();
    }
  }

  it('Monitoring.Stats streams the flat statistics, as text, once a period until the client cancels; the node goes on', async () => {
    const messages = await statsMessages(3, '200', ADMIN);
    if (typeof messages === 'number') throw new Error(`status ${messages}`);
    expect(messages).toHaveLength(3);
    const { stats } = messages[0];
    expect(Number(stats['proc-mem'])).toBeGreaterThan(0);
    expect(stats['proc-startTime']).toMatch(/^\d{4}-/);
    expect(Object.keys(stats).some((k) => k.startsWith('sys-'))).toBe(true);
    expect(Object.values(stats).every((v) => typeof v === 'string')).toBe(true);
    // The same keys as GET /stats?group=false.
    const flat = await httpJson('/stats?group=false');
    expect(Object.keys(stats).filter((k) => !(k in flat))).toEqual([]);
    expect(messages[2].at - messages[0].at).toBeGreaterThanOrEqual(300);
    expect((await http(t, '/ping')).status).toBe(200);
  });

  it('takes any authenticated user, as GET /stats does (anonymous calls: the auth matrix)', async () => {
    expect(await statsMessages(1, '100', basic('admin', 'wrong'))).toBe(16);
    const login = await newUser(t, [], 'pw');
    expect(Array.isArray(await statsMessages(1, '0', basic(login, 'pw')))).toBe(true);
  });
});

describe('errors the clients classify', () => {
  it('an UnknownError stays for what has no typed error', async () => {
    // A continuous projection needs a name: refused with the reason (FAILED_PRECONDITION, no typed error in the client).
    await expect(client.createProjection('', COUNTER('x'))).rejects.toBeInstanceOf(UnknownError);
  });
});
