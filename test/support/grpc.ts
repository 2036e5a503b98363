import { connect, type ClientHttp2Session, type ClientHttp2Stream } from 'node:http2';
import { methodOf } from '../../src/api/grpc/codecs.js';

// A bare gRPC client on node:http2 for the tests that must send what no official client sends
// (malformed messages, a call cut off mid-append, thousands of tiny messages) and read the
// status and trailers exactly as they arrive.

export interface CallResult {
  status: number;
  message: string;
  trailers: Record<string, string>;
  responses: Record<string, unknown>[];
}

export function frame(body: Buffer): Buffer {
  const out = Buffer.alloc(5 + body.length);
  out.writeUInt32BE(body.length, 1);
  body.copy(out, 5);
  return out;
}

export function openSession(url: string): ClientHttp2Session {
  return connect(url);
}

export function startCall(session: ClientHttp2Session, path: string, metadata: Record<string, string> = {}): ClientHttp2Stream {
  return session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers', ...metadata });
}

/** Reads a call to its end: the decoded responses (when `service`/`method` are given) and the status. */
export function finish(stream: ClientHttp2Stream, service?: string, method?: string): Promise<CallResult> {
  const decode = service && method ? methodOf(service, method).responseDeserialize : undefined;
  return new Promise((resolve, reject) => {
    let headers: Record<string, string> = {};
    let pending = Buffer.alloc(0);
    const responses: Record<string, unknown>[] = [];
    stream.on('response', (h) => { headers = h as Record<string, string>; });
    stream.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 5 && pending.length >= 5 + pending.readUInt32BE(1)) {
        const body = pending.subarray(5, 5 + pending.readUInt32BE(1));
        pending = pending.subarray(5 + body.length);
        if (decode) responses.push(decode(Buffer.from(body)));
      }
    });
    stream.on('trailers', (t) => { headers = { ...headers, ...(t as Record<string, string>) }; });
    stream.on('error', reject);
    stream.on('close', () => {
      resolve({ status: Number(headers['grpc-status']), message: decodeURIComponent(headers['grpc-message'] ?? ''), trailers: headers, responses });
    });
  });
}

/** One call: the request messages (objects encoded with the method's codec, or raw bytes), then half-close. */
export async function call(url: string, service: string, method: string, requests: (Record<string, unknown> | Buffer)[],
  metadata: Record<string, string> = {}): Promise<CallResult> {
  const session = openSession(url);
  try {
    const codec = methodOf(service, method);
    const stream = startCall(session, `/${service}/${method}`, metadata);
    const done = finish(stream, service, method);
    for (const r of requests) stream.write(frame(Buffer.isBuffer(r) ? r : codec.requestSerialize(r)));
    stream.end();
    return await done;
  } finally {
    session.close();
  }
}

export const STREAMS = 'event_store.client.streams.Streams';

export function streamId(name: string): { stream_name: Buffer } {
  return { stream_name: Buffer.from(name) };
}
