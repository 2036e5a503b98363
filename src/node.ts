import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Config } from './config/index.js';
import { Store } from './store/index.js';
import { UserStore } from './auth/users.js';
import { AccessControl } from './auth/access.js';
import { buildApp, markDraining } from './api/app.js';
import { createLogger } from './logger.js';

// Wires the subsystems together: the store, users and access control, then the HTTP API.
// Shutdown runs in the opposite order: stop accepting, finish the writes in flight, close RocksDB.

export interface RunningNode {
  readonly url: string;
  readonly port: number;
  readonly store: Store;
  readonly log: Logger;
  close(): Promise<void>;
}

export async function startNode(config: Config, log: Logger = createLogger(config.logLevel)): Promise<RunningNode> {
  const store = await Store.open({ dir: config.db, inMemory: config.memDb, chunkSize: config.chunkSize, log: log.child({ subsystem: 'store' }) });
  const users = new UserStore(store, log.child({ subsystem: 'users' }));
  let app: FastifyInstance | undefined;
  try {
    await users.start({ adminPassword: config.defaultAdminPassword, opsPassword: config.defaultOpsPassword });
    const access = new AccessControl(store, config.allowAnonymousStreamAccess);
    app = buildApp({ store, users, access, config, log: log.child({ subsystem: 'http' }) });
    await app.listen({ host: config.httpIp, port: config.httpPort });
  } catch (err) {
    await app?.close();
    await store.close();
    throw err;
  }
  const { port } = app.server.address() as AddressInfo;
  const host = config.httpIp.includes(':') ? `[${config.httpIp}]` : config.httpIp;
  const url = `http://${host}:${port}`;
  log.info({ url, db: config.memDb ? '(in memory)' : store.location, events: store.recordCount, streams: store.streamCount },
    `node listening on ${url}, data in ${config.memDb ? 'memory' : store.location}, ${store.recordCount} events loaded`);

  let closing: Promise<void> | undefined;
  const server = app;
  return {
    url, port, store, log,
    close() {
      closing ??= (async () => {
        log.info('shutting down: no new requests; finishing the writes in flight');
        markDraining(server);
        await server.close();
        users.stop();
        await store.close();
        log.info('shut down cleanly');
      })();
      return closing;
    },
  };
}
