import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { packageRoot } from '../version.js';

// Reads of the log off the event loop, on a thread of their own. A catch-up that reads much of
// the log from RocksDB (a subscription from the start of $all) spent most of the node's time in
// the binding: ~1 µs a row in querySync, two Buffers per row (each an ArrayBuffer of its own) and
// the garbage collection of both. On this thread the rows are read through the same RocksDB
// handle and packed into one buffer that is handed over whole; the event loop decodes records
// from it (views into it, as the log tail's slabs) and goes on with the previous page meanwhile.
// Measured with bench/grpc.ts's catch-up (see the commit): the event loop's work per event fell
// by about a third, and reading overlaps encoding and sending.
//
// The thread never opens nor closes the database: it attaches to the open handle, and is
// stopped before the store closes it. When it cannot run (no built script: a test run from the
// TypeScript sources before a build) or fails, reads go on on the event loop as before.

/** Records read on the thread: positions, and each record's bytes at offsets[i]..offsets[i+1] of `bytes`. */
export interface PackedRows {
  readonly count: number;
  readonly positions: Float64Array;
  readonly offsets: Uint32Array;
  readonly bytes: Buffer;
}

export interface ForwardRead {
  readonly from: number;
  readonly limit: number;
  readonly to: number;
}

/** The message the thread answers with. */
export type ThreadAnswer =
  | { id: number; count: number; positions: ArrayBuffer; offsets: ArrayBuffer; bytes: ArrayBuffer }
  | { id: number; error: string };

/** Reads in flight at most; past it a reader reads on the event loop (each catch-up has one or two). */
const MAX_IN_FLIGHT = 64;

interface Waiting {
  resolve: (rows: PackedRows | undefined) => void;
}

export class LogReadThread {
  private worker: Worker | undefined;
  private broken = false;
  private closed = false;
  private nextId = 0;
  private readonly waiting = new Map<number, Waiting>();

  constructor(private readonly handle: () => bigint, private readonly splitFrom: number) {}

  /** The rows of [from, to), at most `limit`, read on the thread; undefined: read them here instead. */
  forward(read: ForwardRead): Promise<PackedRows | undefined> | undefined {
    if (this.closed || this.broken || this.waiting.size >= MAX_IN_FLIGHT) return undefined;
    const worker = this.worker ?? this.start();
    if (!worker) return undefined;
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.waiting.set(id, { resolve });
      worker.postMessage({ id, ...read });
    });
  }

  /** Stops the thread (before the database closes); reads in flight resolve undefined. */
  async close(): Promise<void> {
    this.closed = true;
    this.settleAll();
    await this.worker?.terminate();
    this.worker = undefined;
  }

  private start(): Worker | undefined {
    const script = threadScript();
    if (!script) {
      this.broken = true;
      return undefined;
    }
    const worker = new Worker(script, { workerData: { handle: this.handle(), splitFrom: this.splitFrom } });
    worker.unref();
    worker.on('message', (answer: ThreadAnswer) => {
      const waiting = this.waiting.get(answer.id);
      if (!waiting) return;
      this.waiting.delete(answer.id);
      if ('error' in answer) return waiting.resolve(undefined);
      waiting.resolve({
        count: answer.count, positions: new Float64Array(answer.positions), offsets: new Uint32Array(answer.offsets),
        bytes: Buffer.from(answer.bytes),
      });
    });
    const fail = () => {
      // Reads go on on the event loop from now on.
      this.broken = true;
      this.worker = undefined;
      this.settleAll();
    };
    worker.on('error', fail);
    worker.on('exit', fail);
    this.worker = worker;
    return worker;
  }

  private settleAll(): void {
    for (const { resolve } of this.waiting.values()) resolve(undefined);
    this.waiting.clear();
  }
}

/** The thread's compiled script (from the TypeScript sources, the built one next to dist/src). */
function threadScript(): URL | undefined {
  const here = new URL('./log-read-thread-main.js', import.meta.url);
  if (existsSync(fileURLToPath(here))) return here;
  const built = join(packageRoot(), 'dist', 'src', 'store', 'log-read-thread-main.js');
  return existsSync(built) ? new URL(`file://${built}`) : undefined;
}
