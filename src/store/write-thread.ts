import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { packageRoot } from '../version.js';
import type { LoopSlices } from '../loop-slices.js';
import { writeFailure, type BatchOp, type Rocks } from './rocks.js';
import { packOps } from './packed-ops.js';

// Large writes off the event loop. The RocksDB write batch of a large operation (a projection
// checkpoint with 200,000 emitted events: ~400,000 keys) cost 1.1-1.6 s of puts into the batch
// and 0.6-0.9 s of writing it, measured in the binding on two busy cores, all of it on the event
// loop. Here the batch's operations are packed on the event loop, in slices, into parts of 1 MiB
// (packed-ops.ts) that are handed over as they fill, and this thread puts each part into ONE
// RocksDB write batch as it arrives (while the loop packs the next) and, told so after the last
// part, writes it: still one atomic write, and the loop answers meanwhile. Only large batches
// come here: handing a batch over and back costs 10-20 ms on two busy cores (see rocks.ts).
//
// The thread attaches to the store's open handle, as the log-read thread does, and is stopped
// once the writer has drained, before the database closes. When it cannot run (no built script:
// a test run from the TypeScript sources before a build) or fails, the batch is written on the
// event loop instead: the same keys with the same values, so a batch the thread wrote just
// before it failed is written twice to the same effect.

/** A part of batch `id`, or the word to write it (after its last part). */
export type WriteMessage = { id: number; part: ArrayBuffer; length: number } | { id: number; sync: boolean };
export type WriteAnswer = { id: number } | { id: number; error: string };

interface Waiting {
  resolve: () => void;
  reject: (err: Error) => void;
  /** Writes the batch on the event loop (the thread failed). */
  fallback: () => void;
}

export class WriteThread {
  private worker: Worker | undefined;
  private broken = false;
  private closed = false;
  private nextId = 0;
  private readonly waiting = new Map<number, Waiting>();

  constructor(private readonly rocks: Rocks) {}

  /** Writes `ops` as one atomic batch (synced with `sync`); resolves once written, rejects if RocksDB refused it. */
  async write(ops: readonly BatchOp[], sync: boolean, slices: LoopSlices): Promise<void> {
    const onLoop = () => {
      if (sync) this.rocks.writeDurable(ops);
      else this.rocks.writeUnsynced(ops);
    };
    const worker = this.closed || this.broken ? undefined : this.worker ?? this.start();
    if (!worker) return onLoop();
    const id = this.nextId++;
    const written = new Promise<void>((resolve, reject) => {
      this.waiting.set(id, { resolve, reject, fallback: () => { try { onLoop(); resolve(); } catch (err) { reject(err as Error); } } });
    });
    // Once the thread failed (its waiting entries fell back to the loop), the rest is not sent.
    const live = () => this.worker === worker;
    await packOps(ops, slices, (part) => {
      if (!live()) return;
      const message: WriteMessage = { id, part: part.buffer as ArrayBuffer, length: part.length };
      worker.postMessage(message, [message.part]);
    });
    if (live()) worker.postMessage({ id, sync } satisfies WriteMessage);
    return written;
  }

  /** Stops the thread (once the writer has drained, before the database closes). */
  async close(): Promise<void> {
    this.closed = true;
    this.fallBackAll();
    await this.worker?.terminate();
    this.worker = undefined;
  }

  private start(): Worker | undefined {
    const script = threadScript();
    if (!script) {
      this.broken = true;
      return undefined;
    }
    const worker = new Worker(script, { workerData: { handle: this.rocks.handle } });
    worker.unref();
    worker.on('message', (answer: WriteAnswer) => {
      const waiting = this.waiting.get(answer.id);
      if (!waiting) return;
      this.waiting.delete(answer.id);
      if ('error' in answer) waiting.reject(writeFailure(new Error(answer.error)));
      else waiting.resolve();
    });
    const fail = () => {
      // Writes go on on the event loop from now on.
      this.broken = true;
      this.worker = undefined;
      this.fallBackAll();
    };
    worker.on('error', fail);
    worker.on('exit', fail);
    this.worker = worker;
    return worker;
  }

  private fallBackAll(): void {
    const waiting = [...this.waiting.values()];
    this.waiting.clear();
    for (const w of waiting) w.fallback();
  }
}

/** The thread's compiled script (from the TypeScript sources, the built one next to dist/src). */
function threadScript(): URL | undefined {
  const here = new URL('./write-thread-main.js', import.meta.url);
  if (existsSync(fileURLToPath(here))) return here;
  const built = join(packageRoot(), 'dist', 'src', 'store', 'write-thread-main.js');
  return existsSync(built) ? new URL(`file://${built}`) : undefined;
}
