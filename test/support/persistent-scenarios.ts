import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { append, eventually, http, newEvent, sleep, startTestNode, uniq, type TestNode } from './node.js';
import { startTlsTestNode, type TlsTestNode } from './tls-node.js';

// Persistent subscriptions over gRPC with a published Node client (issue 32), written once for
// both: @kurrent/kurrentdb-client 1.3.1 and @eventstore/db-client 6.2.1 have the same API here but
// register the same global protobuf classes, so each runs in its own file
// (grpc-persistent.e2e.spec.ts, grpc-persistent-client6.e2e.spec.ts) and hands its module in.
// The groups are the HTTP door's groups: what one door creates the other consumes, and both
// show the same settings and figures. The ACL cases run on a TLS node: over a plain connection
// the clients send no credentials (and run as system, --insecure-grpc-user).

/* eslint-disable @typescript-eslint/no-explicit-any -- the two clients' modules, used through their common API */
type ClientModule = any;
type Client = any;

export interface PublishedClient {
  readonly name: string;
  readonly lib: ClientModule;
  /** `kurrentdb` or `esdb`. */
  readonly scheme: string;
}

const COMPETING_JSON = 'application/vnd.eventstore.competingatom+json';

/** Reads a subscription one message at a time, without ever leaving a read behind that would eat the next message. */
function reader(sub: any) {
  const it = sub[Symbol.asyncIterator]();
  let pending: Promise<IteratorResult<any>> | undefined;
  const nextResult = () => (pending ??= it.next());
  return {
    async next(ms = 10_000): Promise<any> {
      const timeout = sleep(ms).then(() => { throw new Error(`no message within ${ms} ms`); });
      const r = await Promise.race([nextResult(), timeout]);
      pending = undefined;
      if (r.done) throw new Error('the subscription ended');
      return r.value;
    },
    /** Nothing arrives within `ms`. */
    async quiet(ms = 400): Promise<void> {
      expect(await Promise.race([nextResult().then(() => 'a message'), sleep(ms).then(() => 'quiet')])).toBe('quiet');
    },
    /** The subscription ends with an error (its call was ended by the node). */
    async failure(ms = 10_000): Promise<unknown> {
      const timeout = sleep(ms).then(() => 'no failure');
      return Promise.race([nextResult().then(() => 'a message', (err) => err), timeout]);
    },
  };
}

async function httpJson(t: TestNode, path: string): Promise<any> {
  const res = await http(t, path, { headers: { Accept: 'application/json' } });
  if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${await res.text()}`);
  return res.json();
}

/** What a client's info and the HTTP door's /info both say, side by side in the client's terms. */
function sameFigures(info: any, h: any): void {
  expect({
    status: info.status, totalItems: info.stats.totalItems, readBufferCount: info.stats.readBufferCount,
    liveBufferCount: info.stats.liveBufferCount, retryBufferCount: info.stats.retryBufferCount,
    totalInFlightMessages: info.stats.totalInFlightMessages, outstandingMessagesCount: info.stats.outstandingMessagesCount,
    parkedMessageCount: info.stats.parkedMessageCount, averagePerSecond: info.stats.averagePerSecond,
    countSinceLastMeasurement: info.stats.countSinceLastMeasurement, messageTimeout: info.settings.messageTimeout,
    maxRetryCount: info.settings.maxRetryCount, historyBufferSize: info.settings.historyBufferSize,
    consumerStrategyName: info.settings.consumerStrategyName, extraStatistics: info.settings.extraStatistics,
    connections: info.connections.map((c: any) => [c.username, c.connectionName, c.inFlightMessages, c.availableSlots, c.totalItems]),
  }).toEqual({
    status: h.status, totalItems: BigInt(h.totalItemsProcessed), readBufferCount: h.readBufferCount,
    liveBufferCount: BigInt(h.liveBufferCount), retryBufferCount: h.retryBufferCount,
    totalInFlightMessages: h.totalInFlightMessages, outstandingMessagesCount: h.outstandingMessagesCount,
    parkedMessageCount: BigInt(h.parkedMessageCount), averagePerSecond: h.averageItemsPerSecond,
    countSinceLastMeasurement: BigInt(h.countSinceLastMeasurement), messageTimeout: h.config.messageTimeoutMilliseconds,
    maxRetryCount: h.config.maxRetryCount, historyBufferSize: h.config.bufferSize,
    consumerStrategyName: h.config.namedConsumerStrategy, extraStatistics: h.config.extraStatistics,
    connections: h.connections.map((c: any) => [c.username, c.connectionName, c.inFlightMessages, c.availableSlots, BigInt(c.totalItemsProcessed)]),
  });
}

export function persistentSubscriptionScenarios(published: PublishedClient): void {
  const { lib } = published;
  const Client = lib.KurrentDBClient ?? lib.EventStoreDBClient;
  const connect = (node: TestNode, query: string, who = 'admin:changeit@', host = '127.0.0.1'): Client =>
    Client.connectionString(`${published.scheme}://${who}${host}:${new URL(node.url).port}?${query}`);
  const events = (types: string[]) => types.map((type, n) => lib.jsonEvent({ type, data: { n } }));
  const streamSettings = (changes: Record<string, unknown> = {}) => lib.persistentSubscriptionToStreamSettingsFromDefaults({ startFrom: lib.START, ...changes });

  describe(`persistent subscriptions with ${published.name}`, () => {
    let t: TestNode;
    let client: Client;
    beforeAll(async () => {
      t = await startTestNode();
      client = connect(t, 'tls=false&connectionName=ps-e2e');
    });
    afterAll(async () => {
      await client?.dispose();
      await t?.dispose();
    });

    it('a group on a stream: its consumer gets the events (retry count 0) and acks them; settings and figures read back as over HTTP', async () => {
      const stream = uniq('orders');
      const group = uniq('g');
      await client.appendToStream(stream, events(['A', 'B', 'C']));
      const settings = streamSettings({ extraStatistics: true, maxRetryCount: 3, checkPointLowerBound: 1, checkPointUpperBound: 1, messageTimeout: 20_000 });
      await client.createPersistentSubscriptionToStream(stream, group, settings);
      const sub = client.subscribeToPersistentSubscriptionToStream(stream, group);
      const r = reader(sub);
      const got = [await r.next(), await r.next(), await r.next()];
      expect(got.map((e) => [e.event.type, e.retryCount])).toEqual([['A', 0], ['B', 0], ['C', 0]]);
      for (const e of got) await sub.ack(e);
      const info = await eventually(async () => {
        const i = await client.getPersistentSubscriptionToStreamInfo(stream, group);
        expect(i.stats.lastCheckpointedEventRevision).toBe(2n);
        return i;
      });
      expect(info.settings).toEqual(settings);
      expect(info.stats.lastKnownEventRevision).toBe(2n);
      expect(info.connections).toHaveLength(1);
      expect(info.connections[0].connectionName).toBe('ps-e2e');
      expect(info.connections[0].extraStatistics.has('quintile 3')).toBe(true);
      await eventually(async () => sameFigures(await client.getPersistentSubscriptionToStreamInfo(stream, group),
        await httpJson(t, `/subscriptions/${stream}/${group}/info`)));
      const listed = await client.listPersistentSubscriptionsToStream(stream);
      expect(listed.map((g: any) => g.groupName)).toEqual([group]);
      expect((await client.listAllPersistentSubscriptions()).map((g: any) => g.groupName)).toContain(group);
      await sub.unsubscribe();
    });

    it('a group on $all with a filter gets only the matching events, with their positions; refuses what it cannot honour', async () => {
      const tag = uniq('Ps').replace(/-/g, '');
      const group = uniq('all');
      const settings = lib.persistentSubscriptionToAllSettingsFromDefaults({ startFrom: lib.START });
      await client.createPersistentSubscriptionToAll(group, settings, { filter: lib.eventTypeFilter({ prefixes: [tag] }) });
      const written = await client.appendToStream(uniq('mixed'), events([`${tag}One`, 'Other', `${tag}Two`]));
      expect((await append(t, uniq('http'), [newEvent(`${tag}Http`)])).status).toBe(201);
      const sub = client.subscribeToPersistentSubscriptionToAll(group);
      const r = reader(sub);
      const got = [await r.next(), await r.next(), await r.next()];
      expect(got.map((e) => e.event.type)).toEqual([`${tag}One`, `${tag}Two`, `${tag}Http`]);
      expect(got[1].event.position).toEqual(written.position);
      for (const e of got) await sub.ack(e);
      const info = await client.getPersistentSubscriptionToAllInfo(group);
      expect(info.eventSource).toBe('$all');
      expect(info.settings).toEqual(settings);
      expect(info.stats.lastKnownEventPosition).toEqual(got[2].event.position);
      expect((await client.listPersistentSubscriptionsToAll()).map((g: any) => g.groupName)).toContain(group);
      await eventually(async () => sameFigures(await client.getPersistentSubscriptionToAllInfo(group),
        await httpJson(t, `/subscriptions/%24all/${group}/info`)));
      await sub.unsubscribe();

      // A checkpoint interval multiplier means nothing to a persistent subscription: refused with the reason, not ignored.
      const refused = await client.createPersistentSubscriptionToAll(uniq('all'), settings,
        { filter: lib.eventTypeFilter({ prefixes: [tag], checkpointInterval: 5 }) }).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(lib.PersistentSubscriptionFailedError);
      expect(String((refused as Error).message)).toMatch(/multiplier/);
    });

    it('nack retry counts the retries, park parks and replays (all, then below a stop-at), skip drops', async () => {
      const stream = uniq('nacks');
      const group = uniq('g');
      await client.appendToStream(stream, events(['Retried', 'Parked', 'Skipped', 'Acked']));
      await client.createPersistentSubscriptionToStream(stream, group, streamSettings());
      const sub = client.subscribeToPersistentSubscriptionToStream(stream, group);
      const r = reader(sub);
      const retries: number[] = [];
      for (let handled = 0; handled < 4;) {
        const e = await r.next();
        if (e.event.type === 'Retried') {
          retries.push(e.retryCount);
          if (e.retryCount < 2) {
            await sub.nack('retry', 'again', e);
          } else {
            await sub.ack(e);
            handled++;
          }
        } else if (e.event.type === 'Parked') {
          await sub.nack('park', 'poison', e);
          handled++;
        } else if (e.event.type === 'Skipped') {
          await sub.nack('skip', 'not for us', e);
          handled++;
        } else {
          await sub.ack(e);
          handled++;
        }
      }
      expect(retries).toEqual([0, 1, 2]);
      await eventually(async () => expect((await client.getPersistentSubscriptionToStreamInfo(stream, group)).stats.parkedMessageCount).toBe(1n));
      await r.quiet();

      await client.replayParkedMessagesToStream(stream, group);
      const replayed = await r.next();
      expect([replayed.event.type, replayed.retryCount]).toEqual(['Parked', 0]);
      await sub.ack(replayed);
      await r.quiet();

      // Two more parked (numbers 1 and 2 in the parked stream): a stop-at of 2 replays the first only.
      await client.appendToStream(stream, events(['P1', 'P2']));
      for (let i = 0; i < 2; i++) await sub.nack('park', 'later', await r.next());
      await eventually(async () => expect((await client.getPersistentSubscriptionToStreamInfo(stream, group)).stats.parkedMessageCount).toBe(2n));
      await client.replayParkedMessagesToStream(stream, group, { stopAt: 2 });
      const first = await r.next();
      expect(first.event.type).toBe('P1');
      await sub.ack(first);
      await r.quiet();
      await eventually(async () => expect((await client.getPersistentSubscriptionToStreamInfo(stream, group)).stats.parkedMessageCount).toBe(1n));
      await sub.unsubscribe();
    });

    it('a group created over gRPC is consumed over HTTP, and one created over HTTP over gRPC', async () => {
      const stream = uniq('doors');
      await client.appendToStream(stream, events(['One', 'Two']));
      const viaGrpc = uniq('g');
      await client.createPersistentSubscriptionToStream(stream, viaGrpc, streamSettings({ checkPointLowerBound: 1, checkPointUpperBound: 1 }));
      const res = await http(t, `/subscriptions/${stream}/${viaGrpc}/2`, { headers: { Accept: COMPETING_JSON } });
      const feed = await res.json();
      expect(feed.entries.map((e: any) => e.title).sort()).toEqual([`0@${stream}`, `1@${stream}`]);
      const ackAll = feed.links.find((l: any) => l.relation === 'ackAll').uri;
      expect((await http(t, new URL(ackAll).pathname + new URL(ackAll).search, { method: 'POST' })).status).toBe(200);
      await eventually(async () => expect((await client.getPersistentSubscriptionToStreamInfo(stream, viaGrpc)).stats.lastCheckpointedEventRevision).toBe(1n));

      const viaHttp = uniq('g');
      const created = await http(t, `/subscriptions/${stream}/${viaHttp}`, {
        method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ minCheckPointCount: 1, maxCheckPointCount: 1 }),
      });
      expect(created.status).toBe(200);
      const sub = client.subscribeToPersistentSubscriptionToStream(stream, viaHttp);
      const r = reader(sub);
      for (const type of ['One', 'Two']) {
        const e = await r.next();
        expect(e.event.type).toBe(type);
        await sub.ack(e);
      }
      await eventually(async () => expect((await httpJson(t, `/subscriptions/${stream}/${viaHttp}/info`)).lastCheckpointedEventPosition).toBe('1'));
      await sub.unsubscribe();
    });

    it('a gRPC and an HTTP consumer on one group at once: each message goes to one of them, once', async () => {
      const stream = uniq('shared');
      const group = uniq('g');
      const total = 300;
      for (let i = 0; i < total; i += 100) await client.appendToStream(stream, events(Array.from({ length: 100 }, () => 'Work')));
      await client.createPersistentSubscriptionToStream(stream, group, streamSettings({ messageTimeout: 60_000 }));
      const seen = new Map<string, string>();
      const duplicates: string[] = [];
      const note = (id: string, door: string) => {
        if (seen.has(id)) duplicates.push(`${id} (${seen.get(id)} then ${door})`);
        seen.set(id, door);
      };
      const sub = client.subscribeToPersistentSubscriptionToStream(stream, group, { bufferSize: 20 });
      const grpcConsumer = (async () => {
        const r = reader(sub);
        while (seen.size < total) {
          const e = await r.next(15_000).catch(() => undefined);
          if (!e) return;
          note(String(e.event.revision), 'gRPC');
          await sleep(1); // a little work per message, so the HTTP consumer gets its share
          await sub.ack(e);
        }
      })();
      const httpConsumer = (async () => {
        while (seen.size < total) {
          const res = await http(t, `/subscriptions/${stream}/${group}/10`, { headers: { Accept: COMPETING_JSON } });
          const feed = await res.json();
          if (feed.entries.length === 0) {
            await sleep(5);
            continue;
          }
          for (const e of feed.entries) note(String(e.title).split('@')[0], 'HTTP');
          const ackAll = new URL(feed.links.find((l: any) => l.relation === 'ackAll').uri);
          await http(t, ackAll.pathname + ackAll.search, { method: 'POST' });
        }
      })();
      await Promise.all([grpcConsumer, httpConsumer]);
      await sub.unsubscribe();
      expect(duplicates).toEqual([]);
      expect(seen.size).toBe(total);
      const byDoor = [...seen.values()];
      expect(byDoor.filter((d) => d === 'gRPC').length).toBeGreaterThan(0);
      expect(byDoor.filter((d) => d === 'HTTP').length).toBeGreaterThan(0);
    });

    it('update takes new settings and drops the consumers; delete ends them as not existing; the errors name the group', async () => {
      const stream = uniq('life');
      const group = uniq('g');
      await client.appendToStream(stream, events(['A']));
      await client.createPersistentSubscriptionToStream(stream, group, streamSettings());
      await expect(client.createPersistentSubscriptionToStream(stream, group, streamSettings()))
        .rejects.toBeInstanceOf(lib.PersistentSubscriptionExistsError);
      let r = reader(client.subscribeToPersistentSubscriptionToStream(stream, group));
      await r.next();
      const updated = streamSettings({ messageTimeout: 12_345, maxRetryCount: 7, consumerStrategyName: lib.DISPATCH_TO_SINGLE });
      await client.updatePersistentSubscriptionToStream(stream, group, updated);
      expect(await r.failure()).toBeInstanceOf(lib.PersistentSubscriptionDroppedError);
      expect((await client.getPersistentSubscriptionToStreamInfo(stream, group)).settings).toEqual(updated);

      r = reader(client.subscribeToPersistentSubscriptionToStream(stream, group));
      expect((await r.next()).event.type).toBe('A'); // the update lost nothing: it was never acked
      await client.deletePersistentSubscriptionToStream(stream, group);
      expect(await r.failure()).toBeInstanceOf(lib.PersistentSubscriptionDoesNotExistError);
      const missing = await client.getPersistentSubscriptionToStreamInfo(stream, group).catch((e: unknown) => e);
      expect(missing).toBeInstanceOf(lib.PersistentSubscriptionDoesNotExistError);
      expect((missing as Error).message).toBe(`5 NOT_FOUND: Subscription group ${group} on stream ${stream} does not exist.`);
      const none = await client.listPersistentSubscriptionsToStream(stream).catch((e: unknown) => e);
      expect((none as Error).message).toBe(`5 NOT_FOUND: Subscription group  on stream ${stream} does not exist.`);
      await expect(client.replayParkedMessagesToStream(stream, group)).rejects.toBeInstanceOf(lib.PersistentSubscriptionDoesNotExistError);
    });

    it('maxSubscriberCount turns away one consumer too many; a restart of the subsystem drops the consumers and keeps the groups', async () => {
      const stream = uniq('full');
      const group = uniq('g');
      await client.appendToStream(stream, events(['A']));
      await client.createPersistentSubscriptionToStream(stream, group, streamSettings({ maxSubscriberCount: 1 }));
      const first = reader(client.subscribeToPersistentSubscriptionToStream(stream, group));
      await first.next();
      const second = reader(client.subscribeToPersistentSubscriptionToStream(stream, group));
      expect(await second.failure()).toBeInstanceOf(lib.PersistentSubscriptionMaximumSubscribersReachedError);
      await client.restartPersistentSubscriptionSubsystem();
      expect(await first.failure()).toBeInstanceOf(lib.PersistentSubscriptionDroppedError);
      const again = reader(client.subscribeToPersistentSubscriptionToStream(stream, group));
      expect((await again.next()).event.type).toBe('A');
    });
  });

  describe(`persistent subscriptions with ${published.name}: who may (a TLS node, so credentials travel)`, () => {
    let t: TlsTestNode;
    const clients: Client[] = [];
    const as = (who: string) => {
      const c = connect(t, `tls=true&tlsCAFile=${t.caFile}`, who, 'localhost');
      clients.push(c);
      return c;
    };
    beforeAll(async () => {
      t = await startTlsTestNode();
    }, 60_000);
    afterAll(async () => {
      for (const c of clients) await c.dispose();
      await t?.dispose();
    });

    it('admin consumes as admin; anonymous and a wrong password are refused; ops manages but may not read a stream closed to it', async () => {
      const admin = as('admin:changeit@');
      const stream = uniq('guarded');
      const group = uniq('g');
      await admin.appendToStream(stream, events(['A']));
      await admin.createPersistentSubscriptionToStream(stream, group, streamSettings());
      const sub = admin.subscribeToPersistentSubscriptionToStream(stream, group);
      await reader(sub).next();
      const info = await admin.getPersistentSubscriptionToStreamInfo(stream, group);
      expect(info.connections.map((c: any) => c.username)).toEqual(['admin']);
      await sub.unsubscribe();

      for (const who of ['', 'admin:wrong-password@']) {
        const refused = as(who);
        await expect(refused.createPersistentSubscriptionToStream(stream, uniq('g'), streamSettings()), who || 'anonymous')
          .rejects.toBeInstanceOf(lib.AccessDeniedError);
        await expect(refused.getPersistentSubscriptionToStreamInfo(stream, group)).rejects.toBeInstanceOf(lib.AccessDeniedError);
        expect(await reader(refused.subscribeToPersistentSubscriptionToStream(stream, group)).failure()).toBeInstanceOf(lib.AccessDeniedError);
      }

      await admin.setStreamMetadata(stream, { acl: { readRoles: ['$admins'] } });
      const ops = as('ops:changeit@');
      const opsGroup = uniq('g');
      await ops.createPersistentSubscriptionToStream(stream, opsGroup, streamSettings());
      expect(await reader(ops.subscribeToPersistentSubscriptionToStream(stream, opsGroup)).failure()).toBeInstanceOf(lib.AccessDeniedError);
      await ops.deletePersistentSubscriptionToStream(stream, opsGroup);
    });
  });
}
