import { createServer as createTcpServer, type Server as TcpServer, type Socket } from 'node:net';
import { createServer as createTlsServer, type SecureContextOptions, type Server as TlsServer, type TLSSocket } from 'node:tls';
import type { Server as HttpServer } from 'node:http';
import type { Http2Server, Http2Session } from 'node:http2';
import type { AddressInfo } from 'node:net';

// One port, two protocols, as the established server serves them on 2113: HTTP/1.1 (the HTTP
// API, fastify) and gRPC over HTTP/2 (grpc/server.ts). With TLS the client's ALPN offer decides
// (`h2` alone: gRPC; `http/1.1` offered, or nothing: HTTP/1.1). In cleartext each connection is told apart by its
// first bytes: HTTP/2 with prior knowledge opens with the 24-byte connection preface, anything
// else is HTTP/1.1 (no `Upgrade: h2c`). The bytes read to decide are given back to the socket
// before the chosen server takes it.

const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
/** A connection that sends nothing for this long before its protocol is known is closed. */
const SNIFF_TIMEOUT_MS = 60_000;
/** Open HTTP/2 sessions get this long to finish their calls after a GOAWAY when the node closes. */
const SESSION_GRACE_MS = 2_000;

export interface Listener {
  /** The outer server (TCP or TLS): every connection arrives here first. */
  readonly server: TcpServer | TlsServer;
  listen(host: string, port: number): Promise<number>;
  /** Replaces the TLS certificate for new connections (a reload). */
  setSecureContext(options: SecureContextOptions): void;
  /** Stops accepting; asks HTTP/2 sessions to finish (GOAWAY) and closes them after a grace period. */
  close(): Promise<void>;
}

export function createListener(http: HttpServer, grpc: Http2Server, tls?: SecureContextOptions): Listener {
  const sessions = new Set<Http2Session>();
  /** Connections whose protocol is not known yet (closed with the listener: no server owns them). */
  const undecided = new Set<Socket>();
  grpc.on('session', (session) => {
    sessions.add(session);
    session.once('close', () => sessions.delete(session));
  });
  let server: TcpServer | TlsServer;
  if (tls) {
    // No Nagle delay: an answer is one small write the client waits for (an append's status).
    const tlsServer = createTlsServer({ ...tls, ALPNCallback: chooseProtocol, noDelay: true } as Parameters<typeof createTlsServer>[0]);
    tlsServer.on('secureConnection', (socket: TLSSocket) => {
      (socket.alpnProtocol === 'h2' ? grpc : http).emit('connection', socket);
    });
    tlsServer.on('tlsClientError', (_err, socket) => socket.destroy());
    server = tlsServer;
  } else {
    server = createTcpServer({ noDelay: true }, (socket) => {
      undecided.add(socket);
      socket.once('close', () => undecided.delete(socket));
      sniff(socket, http, grpc, () => undecided.delete(socket));
    });
  }
  return {
    server,
    listen: (host, port) => new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        // The HTTP server never listens itself: its connection tracking (request and headers
        // timeouts, closeIdleConnections) starts on its 'listening' event, so it gets one.
        http.emit('listening');
        resolve((server.address() as AddressInfo).port);
      });
    }),
    setSecureContext: (options) => {
      if (!tls) throw new Error('the node serves plain HTTP; TLS needs a restart');
      (server as TlsServer).setSecureContext(options);
    },
    close: async () => {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of undecided) socket.destroy();
      // Stops the HTTP server's timers and closes its idle keep-alive connections (it answers
      // ERR_SERVER_NOT_RUNNING for the listen it never did: nothing to do).
      http.close(() => undefined);
      for (const session of sessions) session.close();
      const grace = setTimeout(() => { for (const session of sessions) session.destroy(); }, SESSION_GRACE_MS);
      await closed;
      clearTimeout(grace);
    },
  };
}

/**
 * The protocol of a TLS connection. gRPC clients offer `h2` alone; browsers and curl offer both
 * `h2` and `http/1.1`, and get HTTP/1.1, where the HTTP API and the console are served (the HTTP/2
 * side of the port serves gRPC only: a browser sent there would get 415 for every page).
 */
function chooseProtocol({ protocols }: { protocols: string[] }): string | undefined {
  if (protocols.includes('http/1.1')) return 'http/1.1';
  return protocols.includes('h2') ? 'h2' : undefined;
}

/** Hands a cleartext connection to the HTTP/2 server when it opens with the preface, else to HTTP/1.1. */
function sniff(socket: Socket, http: HttpServer, grpc: Http2Server, decided: () => void): void {
  let seen: Buffer = Buffer.alloc(0);
  const give = (h2: boolean) => {
    decided();
    socket.off('data', onData);
    socket.off('error', onError);
    socket.setTimeout(0);
    socket.pause();
    if (seen.length > 0) socket.unshift(seen);
    (h2 ? grpc : http).emit('connection', socket);
    if (!h2) socket.resume(); // the HTTP/2 session reads the unshifted bytes itself
  };
  const onData = (chunk: Buffer) => {
    seen = seen.length === 0 ? chunk : Buffer.concat([seen, chunk]);
    const n = Math.min(seen.length, PREFACE.length);
    const matches = seen.subarray(0, n).equals(PREFACE.subarray(0, n));
    if (matches && seen.length < PREFACE.length) return; // a prefix of the preface so far: wait for more
    give(matches);
  };
  const onError = () => socket.destroy();
  socket.on('data', onData);
  socket.on('error', onError);
  socket.setTimeout(SNIFF_TIMEOUT_MS, () => socket.destroy());
}
