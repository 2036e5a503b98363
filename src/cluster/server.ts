import type { AddressInfo, Server, Socket } from 'node:net';
import type { Logger } from 'pino';
import { encodeFrame, FRAME, FrameError, frameName, ProtocolVersionError, readFrames, type Frame } from './frames.js';
import type { LeaderReplication } from './leader.js';
import type { Transport } from './transport.js';

// The internal replication server (--int-ip/--int-port). Every node listens; a follower connects
// to the node etcd names leader and says HELLO with the term it expects. Only the leader of
// exactly that term takes it: anyone else refuses, so a deposed leader can never collect acks.
// A HELLO of another protocol version is refused (REFUSED names both versions, and so does this
// node's log); a malformed frame closes its connection with the reason logged. Either way only
// that connection ends: the node goes on.

/** A connection that has not said HELLO within this long is closed. */
const HELLO_TIMEOUT_MS = 5000;
/** Connections at most (each follower keeps one; a few more ride out reconnections). */
const MAX_CONNECTIONS = 32;

export class ReplicationServer {
  private server: Server | undefined;
  /** The leader's replication while this node leads. */
  leading: LeaderReplication | undefined;
  private readonly sockets = new Set<Socket>();

  constructor(private readonly transport: Transport, private readonly log: Logger) {}

  async listen(host: string, port: number): Promise<number> {
    const server = this.transport.createServer((socket) => this.accept(socket));
    server.on('tlsClientError', (err: Error) => this.log.warn({ err: err.message }, 'a node connection failed its TLS handshake'));
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host, port }, () => {
        server.off('error', reject);
        resolve();
      });
    });
    return (server.address() as AddressInfo).port;
  }

  private accept(socket: Socket): void {
    if (this.sockets.size >= MAX_CONNECTIONS) {
      socket.destroy();
      return;
    }
    this.sockets.add(socket);
    socket.setNoDelay(true);
    socket.on('close', () => this.sockets.delete(socket));
    socket.on('error', (err) => this.log.debug({ err: err.message }, 'replication connection error'));
    const timer = setTimeout(() => socket.destroy(), HELLO_TIMEOUT_MS);
    const peer = `${socket.remoteAddress}:${socket.remotePort}`;
    let handler: ((frame: Frame) => void) | undefined;
    readFrames(socket, (frame) => {
      if (handler) {
        handler(frame);
        return;
      }
      clearTimeout(timer);
      if (frame.type !== FRAME.HELLO) throw new FrameError(`the first frame is ${frameName(frame.type)}, not HELLO`);
      const hello = frame.body;
      const leading = this.leading;
      if (!leading || leading.term !== hello.term) {
        socket.end(encodeFrame(FRAME.REFUSED, { message: leading ? `this node leads term ${leading.term}, not ${hello.term}` : 'this node does not lead' }));
        return;
      }
      leading.attach(socket, hello, (h) => { handler = h; });
      handler ??= (f) => { throw new FrameError(`a ${frameName(f.type)} frame where none is expected`); };
    }, (err) => {
      clearTimeout(timer);
      if (err instanceof ProtocolVersionError) {
        this.log.warn({ peer, theirs: err.theirs ?? null, ours: err.ours }, err.message);
        socket.end(encodeFrame(FRAME.REFUSED, { message: err.message }));
        return;
      }
      if (err instanceof FrameError) this.log.warn({ peer, reason: err.message }, 'a replication connection was closed: it sent a frame that does not fit the protocol');
      else this.log.error({ peer, err }, 'a replication connection was closed: handling its frame failed');
    });
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    if (this.server) await new Promise<void>((resolve) => this.server!.close(() => resolve()));
  }
}
