import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { methodOf } from '../src/api/grpc/codecs.js';
import { Encoded, GrpcServer } from '../src/api/grpc/server.js';
import { call, STREAMS } from './support/grpc.js';

// The gRPC server itself, with handlers of its own: what a handler answers reaches the client as
// it was made, and an answer that cannot be encoded (a fault of the node, not of the client's
// input) fails that call alone with INTERNAL, before any header went out; the next call is served.

let server: GrpcServer;
let url = '';

beforeAll(async () => {
  server = new GrpcServer({ log: pino({ level: 'silent' }), statusOf: () => undefined, keepAliveIntervalMs: 0 });
  // Delete answers by what the request's stream is named.
  server.add(methodOf(STREAMS, 'Delete'), {
    kind: 'unary',
    handle: async (request) => {
      const name = Buffer.from(((request as { options: { stream_identifier: { stream_name: Uint8Array } } }).options.stream_identifier.stream_name)).toString();
      if (name === 'unencodable') return { position: 5 }; // protobufjs: "position: object expected"
      if (name === 'encoded') return new Encoded(Buffer.from([0x0a, 0x04, 0x08, 0x07, 0x10, 0x07])); // position { 7, 7 }
      return { position: { commit_position: '9', prepare_position: '9' } };
    },
  });
  server.http2.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.http2.once('listening', resolve));
  url = `http://127.0.0.1:${(server.http2.address() as AddressInfo).port}`;
});
afterAll(() => server?.close());

const deleting = (name: string) => call(url, STREAMS, 'Delete', [{ options: { stream_identifier: { stream_name: Buffer.from(name) }, any: {} } }]);

describe('the gRPC server', () => {
  it('sends a message object encoded by the method, and an Encoded one as it is', async () => {
    expect(await deleting('plain')).toMatchObject({ status: 0, responses: [{ position: { commit_position: '9', prepare_position: '9' } }] });
    expect(await deleting('encoded')).toMatchObject({ status: 0, responses: [{ position: { commit_position: '7', prepare_position: '7' } }] });
  });

  it('fails a call whose answer cannot be encoded with INTERNAL and no message, and serves the next', async () => {
    const failed = await deleting('unencodable');
    expect(failed.status).toBe(13);
    expect(failed.responses).toEqual([]);
    expect((await deleting('plain')).status).toBe(0);
  });
});
