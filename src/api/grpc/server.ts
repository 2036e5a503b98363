import { createServer, constants, type Http2Server, type ServerHttp2Stream, type IncomingHttpHeaders } from 'node:http2';
import type { Logger } from 'pino';
import { GrpcStatus, StatusError, encodeGrpcMessage, type Status } from './status.js';
import { RequestReader } from './request-reader.js';
import type { LatencyObserver } from '../../metrics/index.js';

// A lean gRPC server on node:http2: routing by path, the 5-byte message framing, deadlines
// (`grpc-timeout`), cancellation, status trailers with custom keys, and write back-pressure.
//
// Why not @grpc/grpc-js's server: measured on this machine (node 20, one server-streaming call of
// 300,000 messages of 180 bytes to the same raw HTTP/2 reader), grpc-js sent 71,000-73,000
// messages/s, a plain HTTP/2 stream writing the same frames 1,100,000-1,270,000/s: its per-message
// interceptor chain costs ~13 µs, which alone would hold a catch-up subscription far below the
// 300,000 events/s it must reach. Here a page of events goes out as one write of many frames.
// Codecs come from the project's .proto files (protos.ts, @grpc/proto-loader's serializers).

/** A method as @grpc/proto-loader defines it. */
export interface MethodDefinition {
  readonly path: string;
  readonly requestStream: boolean;
  readonly responseStream: boolean;
  readonly requestDeserialize: (bytes: Buffer) => unknown;
  readonly responseSerialize: (value: unknown) => Buffer;
}

/** A response message already encoded (a hand encoder's, append-codec.ts): written as it is. */
export class Encoded {
  constructor(readonly bytes: Buffer) {}
}

/** What a handler knows of its call. */
export interface CallContext {
  readonly metadata: IncomingHttpHeaders;
  /** Aborts when the client cancels, the deadline passes or the server closes. */
  readonly signal: AbortSignal;
  /** Whether `signal` has aborted (asking does not make the signal: most calls never need one). */
  readonly aborted: boolean;
  /** Milliseconds since the epoch (Date.now()) when the call's deadline passes; Infinity: none. */
  readonly deadline: number;
  /** The connection is TLS (credentials may travel). */
  readonly secure: boolean;
}

/** The messages a client sends on a streaming call, in order; ends when the client half-closes. */
export type RequestStream<T = unknown> = AsyncIterable<T>;

export interface ResponseWriter<T = unknown> {
  /** Sends one message; false when the write buffer is full (await `drained()`). */
  write(message: T): boolean;
  /** Sends already-serialized messages in one write (each framed here). */
  writeSerialized(messages: readonly Buffer[]): boolean;
  /** Sends messages already framed (read-codec.ts encodes a page so), as one write. */
  writeFramed(frames: Buffer): boolean;
  /** Resolves when the write buffer has room again, or the call has ended. */
  drained(): Promise<void>;
  readonly ended: boolean;
}

export type Handler =
  | { kind: 'unary'; handle: (request: unknown, call: CallContext) => Promise<unknown> }
  | { kind: 'clientStream'; handle: (requests: RequestStream, call: CallContext) => Promise<unknown> }
  | { kind: 'serverStream'; handle: (request: unknown, call: CallContext, out: ResponseWriter) => Promise<void> }
  | { kind: 'bidi'; handle: (requests: RequestStream, call: CallContext, out: ResponseWriter) => Promise<void> };

export interface GrpcServerOptions {
  log: Logger;
  /** The status for an error a handler throws (domain errors); undefined: an internal fault. */
  statusOf: (error: unknown) => Status | undefined;
  /** PING interval and the wait for its answer (the established server's defaults: 10 s each). */
  keepAliveIntervalMs?: number;
  keepAliveTimeoutMs?: number;
  /** Where a method's call durations go (GET /metrics); asked once per method, when it is added. */
  latencyOf?: (path: string) => LatencyObserver;
  /** Told when a unary or client-streaming call ends. */
  onAnswered?: () => void;
}

interface Route {
  method: MethodDefinition;
  handler: Handler;
  maxMessageBytes: number;
  tooLarge?: (bytes: number) => Status;
  /** Unary and client-streaming calls only: a streaming answer lasts as long as its reader or subscription. */
  latency?: LatencyObserver;
  /** A unary or client-streaming call (its answer is one message). */
  timed: boolean;
}

const DEFAULT_MAX_MESSAGE = 4 * 1024 * 1024;
/** Why a finished call's signal aborts (one object: an Error made per call cost its stack trace each time). */
const CALL_ENDED = new StatusError({ code: GrpcStatus.CANCELLED, message: 'The call has ended' });
const OK: Status = { code: GrpcStatus.OK, message: '' };
/** What a client may send on one call, and on one connection, before the node reads it. */
const STREAM_WINDOW = 1024 * 1024;
const CONNECTION_WINDOW = 8 * 1024 * 1024;
const TIMEOUT_UNITS: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 0.001, n: 0.000001 };

export class GrpcServer {
  readonly http2: Http2Server;
  private readonly routes = new Map<string, Route>();
  private readonly calls = new Set<Call>();

  constructor(private readonly options: GrpcServerOptions) {
    this.http2 = createServer({
      // Kestrel's default; a client's subscriptions share one connection. The receive windows:
      // HTTP/2's default of 64 KiB per connection made 32 concurrent 100-event appends (~30 KB
      // each) on one connection wait on WINDOW_UPDATE round trips (measured: the node 25% idle,
      // 0.64 of the HTTP door's append rate).
      settings: { maxConcurrentStreams: 100, initialWindowSize: STREAM_WINDOW },
      maxSessionMemory: 64,
    });
    this.http2.on('stream', (stream, headers) => this.onStream(stream, headers));
    this.http2.on('session', (session) => {
      session.once('connect', () => { if (!session.destroyed) session.setLocalWindowSize(CONNECTION_WINDOW); });
      const interval = options.keepAliveIntervalMs ?? 10_000;
      const timeout = options.keepAliveTimeoutMs ?? 10_000;
      if (interval <= 0) return;
      const timer = setInterval(() => {
        if (session.destroyed || session.closed) return;
        const waiting = setTimeout(() => session.destroy(), timeout).unref();
        try {
          session.ping((err) => {
            clearTimeout(waiting);
            if (err && !session.destroyed) session.destroy();
          });
        } catch {
          clearTimeout(waiting);
        }
      }, interval).unref();
      session.once('close', () => clearInterval(timer));
      session.on('error', () => { /* the session closes; its calls see their streams close */ });
    });
  }

  /** Serves `method` with `handler`; `maxMessageBytes` bounds one request message (`tooLarge` answers above it). */
  add(method: MethodDefinition, handler: Handler, limits: { maxMessageBytes?: number; tooLarge?: (bytes: number) => Status } = {}): void {
    const kind = method.requestStream ? (method.responseStream ? 'bidi' : 'clientStream') : (method.responseStream ? 'serverStream' : 'unary');
    if (kind !== handler.kind) throw new Error(`${method.path} is ${kind}, the handler ${handler.kind}`);
    const timed = kind === 'unary' || kind === 'clientStream';
    this.routes.set(method.path, {
      method, handler, maxMessageBytes: limits.maxMessageBytes ?? DEFAULT_MAX_MESSAGE, tooLarge: limits.tooLarge, timed,
      latency: timed ? this.options.latencyOf?.(method.path) : undefined,
    });
  }

  /** The paths served (for the server-features list). */
  paths(): string[] {
    return [...this.routes.keys()];
  }

  /** Ends every call (UNAVAILABLE) and every session. */
  close(): void {
    for (const call of this.calls) call.shutDown(new StatusError({ code: GrpcStatus.UNAVAILABLE, message: 'Server Is Shutting Down' }));
    this.http2.close();
  }

  private onStream(stream: ServerHttp2Stream, headers: IncomingHttpHeaders): void {
    stream.on('error', () => { /* a reset stream: the call's signal aborts on close */ });
    const path = headers[':path'] ?? '';
    const route = this.routes.get(path);
    const contentType = String(headers['content-type'] ?? '');
    if (headers[':method'] !== 'POST' || !contentType.startsWith('application/grpc')) {
      if (!stream.headersSent) stream.respond({ ':status': 415, 'content-type': 'text/plain' }, { endStream: true });
      return;
    }
    if (!route) {
      trailersOnly(stream, { code: GrpcStatus.UNIMPLEMENTED, message: `Method ${path} is not served by this node` });
      return;
    }
    const encoding = String(headers['grpc-encoding'] ?? 'identity');
    if (!['identity', 'gzip', 'deflate'].includes(encoding)) {
      trailersOnly(stream, { code: GrpcStatus.UNIMPLEMENTED, message: `Message encoding ${encoding} is not supported` });
      return;
    }
    const deadline = parseTimeout(headers['grpc-timeout']);
    if (deadline === null) {
      trailersOnly(stream, { code: GrpcStatus.INVALID_ARGUMENT, message: 'Invalid grpc-timeout header' });
      return;
    }
    new Call(stream, headers, route, encoding, deadline, this.options, this.calls).run();
  }
}

/** One call: reads its requests, runs the handler, writes the answer and the status. */
class Call implements ResponseWriter, CallContext {
  readonly deadline: number;
  readonly secure: boolean;
  /**
   * Made when a handler first asks for `signal`: a unary append never does, and an
   * AbortController with its listener was ~5% of the node's CPU per call in a profile of 1-event appends.
   */
  private controller: AbortController | undefined;
  private abortReason: unknown;
  private isAborted = false;
  private readonly startedAt = performance.now();
  private finished = false;
  private timer: NodeJS.Timeout | undefined;
  private readonly reader: RequestReader;

  constructor(private readonly stream: ServerHttp2Stream, readonly metadata: IncomingHttpHeaders, private readonly route: Route,
    encoding: string, timeoutMs: number, private readonly options: GrpcServerOptions, private readonly calls: Set<Call>) {
    this.deadline = timeoutMs === Infinity ? Infinity : Date.now() + timeoutMs;
    this.secure = Boolean((stream.session?.socket as { encrypted?: boolean } | undefined)?.encrypted);
    this.reader = new RequestReader(stream, route, encoding);
    if (timeoutMs !== Infinity) {
      this.timer = setTimeout(() => this.fail(new StatusError({ code: GrpcStatus.DEADLINE_EXCEEDED, message: 'Deadline Exceeded' })), Math.min(timeoutMs, 2 ** 31 - 1));
    }
    stream.once('close', () => {
      // The client reset the stream (cancelled), or its connection dropped.
      if (!this.finished) this.abortWith(new StatusError({ code: GrpcStatus.CANCELLED, message: 'Cancelled' }));
      this.cleanup();
    });
    calls.add(this);
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.isAborted) this.controller.abort(this.abortReason);
    }
    return this.controller.signal;
  }

  get aborted(): boolean {
    return this.isAborted;
  }

  /** The server is closing: the call ends with `reason`'s status. */
  shutDown(reason: StatusError): void {
    this.abortWith(reason);
    this.fail(reason);
  }

  private abortWith(reason: unknown): void {
    if (this.isAborted) return;
    this.isAborted = true;
    this.abortReason = reason;
    this.controller?.abort(reason);
  }

  get ended(): boolean {
    return this.finished || this.stream.destroyed || this.stream.closed;
  }

  run(): void {
    const { handler } = this.route;
    const finish = (response?: unknown) => this.succeed(response);
    const failed = (err: unknown) => this.fail(err);
    try {
      switch (handler.kind) {
        case 'unary':
          void this.reader.single().then((req) => handler.handle(req, this)).then(finish, failed);
          break;
        case 'serverStream':
          void this.reader.single().then((req) => handler.handle(req, this, this)).then(() => finish(), failed);
          break;
        case 'clientStream':
          handler.handle(this.reader.messages(), this).then(finish, failed);
          break;
        case 'bidi':
          handler.handle(this.reader.messages(), this, this).then(() => finish(), failed);
          break;
      }
    } catch (err) {
      this.fail(err);
    }
  }

  write(message: unknown): boolean {
    return this.writeSerialized([this.serialized(message)]);
  }

  writeSerialized(messages: readonly Buffer[]): boolean {
    if (this.ended) return false;
    this.respondHeaders();
    return this.stream.write(framed(messages));
  }

  writeFramed(frames: Buffer): boolean {
    if (this.ended) return false;
    this.respondHeaders();
    return this.stream.write(frames);
  }

  drained(): Promise<void> {
    if (this.ended || !this.stream.writableNeedDrain) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        this.stream.off('drain', done);
        this.stream.off('close', done);
        resolve();
      };
      this.stream.once('drain', done);
      this.stream.once('close', done);
    });
  }

  private respondHeaders(): void {
    if (this.stream.headersSent) return;
    this.stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-accept-encoding': 'identity,gzip,deflate' },
      { waitForTrailers: true });
  }

  private serialized(message: unknown): Buffer {
    return message instanceof Encoded ? message.bytes : this.route.method.responseSerialize(message);
  }

  private succeed(response?: unknown): void {
    if (this.ended) return this.cleanup();
    if (response === undefined) return this.end(OK);
    let last: Buffer;
    try {
      last = framed([this.serialized(response)]);
    } catch (err) {
      return this.fail(err); // an answer protobufjs cannot encode: INTERNAL, logged, before any header went out
    }
    // The answer and the end of the stream in one write (the status follows as trailers).
    this.respondHeaders();
    this.end(OK, last);
  }

  private fail(err: unknown): void {
    if (this.ended) return this.cleanup();
    let status: Status | undefined = err instanceof StatusError ? err.status : this.options.statusOf(err);
    if (!status) {
      this.options.log.error({ err, path: this.route.method.path }, 'gRPC call failed');
      status = { code: GrpcStatus.INTERNAL, message: 'Internal error' };
    }
    this.end(status);
  }

  /** Ends the call with `status`, after `last` (framed messages) if given. */
  private end(status: Status, last?: Buffer): void {
    this.finished = true;
    this.route.latency?.observe((performance.now() - this.startedAt) / 1000);
    if (this.route.timed) this.options.onAnswered?.();
    this.cleanup();
    if (!this.stream.headersSent) {
      trailersOnly(this.stream, status);
      this.stopRequest();
      return;
    }
    this.stream.once('wantTrailers', () => {
      try {
        this.stream.sendTrailers(statusTrailers(status));
      } catch {
        // the stream closed meanwhile
      }
      this.stopRequest();
    });
    this.stream.end(last);
    this.abortWith(CALL_ENDED);
  }

  /** A client still sending when its call has ended is told to stop (RST_STREAM NO_ERROR once the status is out). */
  private stopRequest(): void {
    if (this.reader.complete) return;
    setImmediate(() => {
      if (!this.stream.destroyed) this.stream.close(constants.NGHTTP2_NO_ERROR);
    });
  }

  private cleanup(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.calls.delete(this);
    if (this.finished) this.abortWith(CALL_ENDED);
  }
}

/** Messages in gRPC's framing (uncompressed flag, 4-byte length), as one buffer. */
function framed(messages: readonly Buffer[]): Buffer {
  let total = 0;
  for (const m of messages) total += 5 + m.length;
  const out = Buffer.allocUnsafe(total);
  let at = 0;
  for (const m of messages) {
    out[at] = 0;
    out.writeUInt32BE(m.length, at + 1);
    m.copy(out, at + 5);
    at += 5 + m.length;
  }
  return out;
}

function statusTrailers(status: Status): Record<string, string> {
  const trailers = { 'grpc-status': String(status.code), 'grpc-message': encodeGrpcMessage(status.message) };
  return status.trailers ? { ...trailers, ...asciiValues(status.trailers) } : trailers;
}

function trailersOnly(stream: ServerHttp2Stream, status: Status): void {
  if (stream.destroyed || stream.closed) return;
  try {
    stream.respond({ ':status': 200, 'content-type': 'application/grpc', ...statusTrailers(status) }, { endStream: true });
  } catch {
    // the client reset the stream meanwhile
  }
}

/** Metadata values must be printable ASCII: other characters are percent-encoded (a stream name in a trailer). */
function asciiValues(values: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(values)) out[key] = /^[\x20-\x7e]*$/.test(value) ? value : encodeGrpcMessage(value);
  return out;
}

/** `grpc-timeout` (an integer of up to 8 digits and a unit) in ms; Infinity when absent; null when malformed. */
export function parseTimeout(value: string | string[] | undefined): number | null {
  if (value === undefined) return Infinity;
  const m = /^(\d{1,8})([HMSmun])$/.exec(String(value));
  if (!m) return null;
  return Number(m[1]) * TIMEOUT_UNITS[m[2]];
}

