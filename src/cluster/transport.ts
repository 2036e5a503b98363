import { createConnection, createServer, type Server, type Socket } from 'node:net';

// How nodes reach each other's replication port: plain TCP with --insecure (or --dev), otherwise
// mutual TLS with the node certificates (tls-transport.ts).

export interface Transport {
  createServer(onConnection: (socket: Socket) => void): Server;
  connect(host: string, port: number): Socket;
}

export const plainTransport: Transport = {
  createServer: (onConnection) => createServer(onConnection),
  connect: (host, port) => createConnection({ host, port }),
};
