import type { Logger } from 'pino';
import type { Server as TcpServer } from 'node:net';
import type { SecureContextOptions, Server as TlsServer } from 'node:tls';
import { buildApp, markDraining, routesOf, type Route } from './app.js';
import type { ApiContext } from './context.js';
import type { LeaderRouting } from './leader-routing.js';
import { createGrpcDoor, type GrpcServer } from './grpc/index.js';
import { createListener, type Listener } from './listener.js';

// Both doors on the node's one port: the HTTP API (fastify, app.ts) and the gRPC door
// (grpc/index.ts), handed their connections by the listener (listener.ts). Closing is one step a
// shutdown and a failed start share: no new requests, those in flight answered, then the port freed.

/**
 * A client that keeps an idle keep-alive connection open this long into a shutdown is cut off
 * rather than holding it (answers in flight close their connections themselves).
 */
const IDLE_CONNECTION_GRACE_MS = 5000;

export interface Doors {
  readonly port: number;
  /** Every method and URL template the HTTP API answers. */
  readonly routes: readonly Route[];
  /** Replaces the TLS certificate for new connections (a reload). */
  setSecureContext(options: SecureContextOptions): void;
  /** Stops taking requests, lets those in flight answer and frees the port; once, however often it is called. */
  close(): Promise<void>;
}

export interface DoorsOptions {
  /** What the HTTP plugins get; its log is the HTTP door's. */
  api: ApiContext;
  grpcLog: Logger;
  /** A cluster node's leader routing (followers forward or redirect writes). */
  cluster?: LeaderRouting;
  /** Undefined: plain HTTP. */
  tls?: SecureContextOptions;
  /** Sees the outer server before it listens (the stats count its connections). */
  watch(server: TcpServer | TlsServer): void;
}

/** Builds both doors and listens on the configured address; if that fails, closes what it built before rethrowing. */
export async function openDoors(options: DoorsOptions): Promise<Doors> {
  const { api, cluster } = options;
  const app = buildApp(api, { cluster });
  const grpc = createGrpcDoor({ verbs: api.verbs, users: api.users, config: api.config, log: options.grpcLog, cluster, latency: api.metrics.latency,
    onAnswered: () => api.sends.noteAnswered() });
  let listener: Listener | undefined;
  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= closeDoors(app, grpc, listener);
    return closing;
  };
  try {
    await app.ready();
    // One port: HTTP/1.1 for the HTTP API, HTTP/2 for gRPC (listener.ts).
    listener = createListener(app.server, grpc.http2, options.tls);
    options.watch(listener.server);
    const port = await listener.listen(api.config.httpIp, api.config.httpPort);
    const { setSecureContext } = listener;
    return { port, routes: routesOf(app), setSecureContext, close };
  } catch (err) {
    await close();
    throw err;
  }
}

async function closeDoors(app: ReturnType<typeof buildApp>, grpc: GrpcServer, listener: Listener | undefined): Promise<void> {
  markDraining(app);
  const server = app.server;
  const force = setTimeout(() => server.closeAllConnections(), IDLE_CONNECTION_GRACE_MS).unref();
  grpc.close();
  const stopped = listener?.close();
  server.closeIdleConnections();
  await app.close();
  await stopped;
  clearTimeout(force);
}
