import { Metadata, type ServiceError } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EventStoreDBClient, jsonEvent, LoginNotFoundError, NotFoundError, ScavengeNotFoundError, convertToCommandError } from '@eventstore/db-client';
import { UsersClient } from '@eventstore/db-client/generated/users_grpc_pb.js';
import * as users from '@eventstore/db-client/generated/users_pb.js';
import { OperationsClient } from '@eventstore/db-client/generated/operations_grpc_pb.js';
import * as operations from '@eventstore/db-client/generated/operations_pb.js';
import { MonitoringClient } from '@eventstore/db-client/generated/monitoring_grpc_pb.js';
import * as monitoring from '@eventstore/db-client/generated/monitoring_pb.js';
import { Empty } from '@eventstore/db-client/generated/shared_pb.js';
import { eventually, http, startTestNode, uniq, type TestNode } from './support/node.js';

// The management services with the older published client, @eventstore/db-client 6.2.1 (issue 32):
// projections through its own calls, created over gRPC and read over HTTP and the other way round,
// statistics, enable/disable/reset/delete; users, operations and Monitoring.Stats through its gRPC
// channel and generated messages (it has no calls of its own for them); discovery by gossip
// (esdb+discover://). Its own file: it registers the same global protobuf classes as
// @kurrent/kurrentdb-client (grpc-admin.e2e.spec.ts).

let t: TestNode;
let client: EventStoreDBClient;
let port: string;

beforeAll(async () => {
  t = await startTestNode();
  port = new URL(t.url).port;
  client = EventStoreDBClient.connectionString(`esdb://admin:changeit@127.0.0.1:${port}?tls=false`);
});
afterAll(async () => {
  await client?.dispose();
  await t?.dispose();
});

const COUNTER = (stream: string) => `fromStream('${stream}').when({ $init: function () { return { count: 0 }; }, $any: function (s, e) { s.count += 1; return s; } })`;

type Execute = <R>(Client: unknown, name: string, action: (grpc: any) => Promise<R>) => Promise<R>;
const execute: Execute = (Client, name, action) => (client as unknown as { execute: Execute }).execute(Client, name, action);

function unary<R>(Client: unknown, method: string, request: unknown): Promise<R> {
  return execute(Client, method, (grpc) => new Promise<R>((resolve, reject) => {
    grpc[method](request, new Metadata(), { deadline: Date.now() + 10_000 }, (error: ServiceError | null, response: R) =>
      (error ? reject(convertToCommandError(error)) : resolve(response)));
  }));
}

async function httpJson(path: string): Promise<any> {
  const res = await http(t, path);
  expect(res.status, `${path}: ${await res.clone().text()}`).toBe(200);
  return res.json();
}

describe('@eventstore/db-client 6.2.1: projections', () => {
  it('created over gRPC, its state read over HTTP; created over HTTP, its state read over gRPC', async () => {
    const stream = uniq('six-counted');
    const viaGrpc = uniq('six-grpc');
    await client.createProjection(viaGrpc, COUNTER(stream));
    const viaHttp = uniq('six-http');
    const res = await http(t, `/projections/continuous?name=${viaHttp}&enabled=yes`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: COUNTER(stream) });
    expect(res.status).toBe(201);
    await client.appendToStream(stream, [jsonEvent({ type: 'A', data: {} }), jsonEvent({ type: 'B', data: {} })]);
    await eventually(async () => expect(await httpJson(`/projection/${viaGrpc}/state`)).toEqual({ count: 2 }), 10_000);
    await eventually(async () => expect(await client.getProjectionState(viaHttp)).toEqual({ count: 2 }), 10_000);
    expect(await client.getProjectionResult(viaHttp)).toEqual({ count: 2 });
  });

  it('statistics, disable, enable, reset and delete', async () => {
    const name = uniq('six-lifecycle');
    await client.createProjection(name, COUNTER(uniq('six-s')));
    expect((await client.getProjectionStatus(name)).projectionStatus).toBe('Running');
    expect((await client.listProjections()).map((p) => p.name)).toContain(name);
    await client.disableProjection(name);
    expect((await client.getProjectionStatus(name)).projectionStatus).toBe('Stopped');
    await client.enableProjection(name);
    expect((await httpJson(`/projection/${name}`)).status).toBe('Running');
    const epoch = (await httpJson(`/projection/${name}`)).epoch;
    await client.resetProjection(name);
    expect((await httpJson(`/projection/${name}`)).epoch).toBeGreaterThan(epoch);
    await client.abortProjection(name);
    expect((await client.getProjectionStatus(name)).projectionStatus).toBe('Aborted');
    await client.deleteProjection(name);
    await expect(client.getProjectionStatus(name)).rejects.toBeInstanceOf(NotFoundError);
  });
});

describe('@eventstore/db-client 6.2.1: users, operations, monitoring', () => {
  it('manages an account', async () => {
    const login = uniq('six-user');
    await unary(UsersClient, 'create', new users.CreateReq().setOptions(new users.CreateReq.Options().setLoginName(login).setPassword('pw').setFullName('Six')));
    expect((await httpJson(`/users/${login}`)).data).toMatchObject({ loginName: login, fullName: 'Six' });
    await unary(UsersClient, 'disable', new users.DisableReq().setOptions(new users.DisableReq.Options().setLoginName(login)));
    expect((await httpJson(`/users/${login}`)).data.disabled).toBe(true);
    await unary(UsersClient, 'delete', new users.DeleteReq().setOptions(new users.DeleteReq.Options().setLoginName(login)));
    await expect(unary(UsersClient, 'enable', new users.EnableReq().setOptions(new users.EnableReq.Options().setLoginName(login))))
      .rejects.toBeInstanceOf(LoginNotFoundError);
  });

  it('starts and stops scavenges, merges indexes', async () => {
    const started = await unary<operations.ScavengeResp>(OperationsClient, 'startScavenge',
      new operations.StartScavengeReq().setOptions(new operations.StartScavengeReq.Options().setThreadCount(1)));
    expect(started.getScavengeId()).toMatch(/^[0-9a-f-]{36}$/);
    await eventually(async () => expect((await httpJson('/admin/scavenge/current')).scavengeId).toBe(''), 20_000);
    await expect(unary(OperationsClient, 'stopScavenge', new operations.StopScavengeReq().setOptions(new operations.StopScavengeReq.Options().setScavengeId(started.getScavengeId()))))
      .rejects.toBeInstanceOf(ScavengeNotFoundError);
    await unary(OperationsClient, 'mergeIndexes', new Empty());
  });

  it('streams the statistics until it cancels', async () => {
    const messages = await execute(MonitoringClient, 'stats', (grpc) => new Promise<Record<string, string>[]>((resolve, reject) => {
      const out: Record<string, string>[] = [];
      const call = grpc.stats(new monitoring.StatsReq().setRefreshTimePeriodInMs('150'), new Metadata());
      call.on('data', (m: monitoring.StatsResp) => {
        out.push(Object.fromEntries(m.getStatsMap().getEntryList()));
        if (out.length === 2) {
          call.cancel();
          resolve(out);
        }
      });
      call.on('error', (e: ServiceError) => { if (out.length < 2) reject(e); });
    }));
    expect(messages).toHaveLength(2);
    expect(Number(messages[1]['proc-mem'])).toBeGreaterThan(0);
    expect((await http(t, '/ping')).status).toBe(200);
  });
});

describe('@eventstore/db-client 6.2.1: discovery', () => {
  it('esdb+discover:// finds the node through gossip', async () => {
    const discover = EventStoreDBClient.connectionString(`esdb+discover://admin:changeit@127.0.0.1:${port}?tls=false`);
    try {
      const result = await discover.appendToStream(uniq('six-discovered'), jsonEvent({ type: 'Found', data: {} }));
      expect(result.success).toBe(true);
    } finally {
      await discover.dispose();
    }
  });
});
