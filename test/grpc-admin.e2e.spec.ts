import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  KurrentDBClient, jsonEvent, NotFoundError, UnknownError,
} from '@kurrent/kurrentdb-client';
import { append, eventually, http, newEvent, startTestNode, uniq, type TestNode } from './support/node.js';
import { call } from './support/grpc.js';

// The management services over gRPC with @kurrent/kurrentdb-client 1.3.1 (issue 32): projections
// through the client's own calls, created on one door and read on the other. The node is plain:
// the client's calls run as system.

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
    expect(await client.getProjectionState(name, { partition: `${category}-Tom` })).toBe(1);
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
    const stream = uniq('lifecycle');
    const name = uniq('lifecycle');
    await client.createProjection(name, COUNTER(stream));
    await appendEvents(stream, 2);
    await eventually(async () => expect(await client.getProjectionState(name)).toEqual({ count: 2 }), 10_000);

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
    const stream = uniq('restart');
    const name = uniq('survivor');
    await client.createProjection(name, COUNTER(stream));
    await appendEvents(stream, 2);
    await eventually(async () => expect(await client.getProjectionState(name)).toEqual({ count: 2 }), 10_000);
    await client.restartSubsystem();
    await eventually(async () => expect((await client.getProjectionStatus(name)).projectionStatus).toBe('Running'), 10_000);
    await appendEvents(stream, 1);
    await eventually(async () => expect(await client.getProjectionState(name)).toEqual({ count: 3 }), 10_000);
  });
});

describe('errors the clients classify', () => {
  it('an UnknownError stays for what has no typed error', async () => {
    // A continuous projection needs a name: refused with the reason (FAILED_PRECONDITION, no typed error in the client).
    await expect(client.createProjection('', COUNTER('x'))).rejects.toBeInstanceOf(UnknownError);
  });
});
