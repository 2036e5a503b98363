import type { ServerHttp2Stream } from 'node:http2';
import { gunzipSync, inflateSync } from 'node:zlib';
import { GrpcStatus, StatusError, type Status } from './status.js';

// The request side of a gRPC call: the HTTP/2 body split into length-prefixed messages, each
// bounded in size (a larger one ends the call with the method's own answer, or
// RESOURCE_EXHAUSTED), decompressed within that bound when the client compressed it, and decoded
// by the method's deserializer; a malformed one ends the call INVALID_ARGUMENT. A streaming
// request is read as the handler pulls it: past REQUEST_QUEUE unread messages the stream pauses
// and HTTP/2 flow control holds the client.

/** Messages a streaming request may queue unread before the stream pauses. */
const REQUEST_QUEUE = 64;

export interface RequestLimits {
  readonly method: { readonly requestDeserialize: (bytes: Buffer) => unknown };
  readonly maxMessageBytes: number;
  readonly tooLarge?: (bytes: number) => Status;
}

/** Splits the request body into messages, bounded in size, decoded by the method's deserializer. */
export class RequestReader {
  private pending: Buffer = Buffer.alloc(0);
  private readonly queue: unknown[] = [];
  private done = false;
  private error: unknown;
  private wake: (() => void) | undefined;

  constructor(private readonly stream: ServerHttp2Stream, private readonly route: RequestLimits, private readonly encoding: string) {
    stream.on('data', (chunk: Buffer) => this.push(chunk));
    stream.once('end', () => this.finish());
    stream.once('close', () => this.finish());
  }

  private push(chunk: Buffer): void {
    if (this.done) return;
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    let at = 0;
    try {
      while (this.pending.length - at >= 5) {
        const compressed = this.pending[at];
        const length = this.pending.readUInt32BE(at + 1);
        if (length > this.route.maxMessageBytes) {
          throw new StatusError(this.route.tooLarge?.(length)
            ?? { code: GrpcStatus.RESOURCE_EXHAUSTED, message: `Received message larger than max (${length} vs. ${this.route.maxMessageBytes})` });
        }
        if (this.pending.length - at < 5 + length) break;
        let body = this.pending.subarray(at + 5, at + 5 + length);
        at += 5 + length;
        if (compressed === 1) body = this.decompress(body);
        else if (compressed !== 0) throw new StatusError({ code: GrpcStatus.INTERNAL, message: 'Invalid message compression flag' });
        this.queue.push(this.decode(body));
      }
    } catch (err) {
      this.error = err;
      this.finish();
      return;
    }
    this.pending = at === this.pending.length ? Buffer.alloc(0) : this.pending.subarray(at);
    if (this.queue.length >= REQUEST_QUEUE) this.stream.pause();
    this.signal();
  }

  private decompress(body: Buffer): Buffer {
    const maxOutputLength = this.route.maxMessageBytes;
    try {
      if (this.encoding === 'gzip') return gunzipSync(body, { maxOutputLength });
      if (this.encoding === 'deflate') return inflateSync(body, { maxOutputLength });
    } catch {
      throw new StatusError({ code: GrpcStatus.RESOURCE_EXHAUSTED, message: 'A compressed message could not be decompressed within the message size limit' });
    }
    throw new StatusError({ code: GrpcStatus.INTERNAL, message: 'A compressed message on a call that declared no encoding' });
  }

  private decode(body: Buffer): unknown {
    try {
      return this.route.method.requestDeserialize(body);
    } catch (err) {
      throw new StatusError({ code: GrpcStatus.INVALID_ARGUMENT, message: `Malformed request message: ${(err as Error).message}` });
    }
  }

  /** The client has half-closed (or the stream is gone): nothing more will arrive. */
  get complete(): boolean {
    return this.stream.readableEnded || this.stream.destroyed;
  }

  private finish(): void {
    if (!this.done && this.pending.length > 0 && !this.error) {
      this.error = new StatusError({ code: GrpcStatus.INTERNAL, message: 'The request ended inside a message' });
    }
    this.done = true;
    this.signal();
  }

  private signal(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  private async next(): Promise<{ value: unknown } | undefined> {
    for (;;) {
      if (this.queue.length > 0) {
        const value = this.queue.shift();
        if (this.queue.length < REQUEST_QUEUE / 2 && this.stream.isPaused()) this.stream.resume();
        return { value };
      }
      if (this.error) throw this.error;
      if (this.done) return undefined;
      await new Promise<void>((resolve) => { this.wake = resolve; });
    }
  }

  /** The one request of a unary or server-streaming call. */
  async single(): Promise<unknown> {
    const first = await this.next();
    if (!first) throw new StatusError({ code: GrpcStatus.UNIMPLEMENTED, message: 'The request carried no message' });
    const extra = await this.next();
    if (extra) throw new StatusError({ code: GrpcStatus.UNIMPLEMENTED, message: 'The request carried more than one message' });
    return first.value;
  }

  async *messages(): AsyncGenerator<unknown> {
    for (;;) {
      const item = await this.next();
      if (!item) return;
      yield item.value;
    }
  }
}

