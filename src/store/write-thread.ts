import type { LoopSlices } from '../loop-slices.js';
import { writeFailure, type BatchOp, type Rocks } from './rocks.js';
import { packOps } from './packed-ops.js';
import { HandleThread } from './handle-thread.js';

// Large writes off the event loop. The RocksDB write batch of a large operation (a projection
// checkpoint with 200,000 emitted events: ~400,000 keys) cost 1.1-1.6 s of puts into the batch
// and 0.6-0.9 s of writing it, measured in the binding on two busy cores, all of it on the event
// loop. Here the batch's operations are packed on the event loop, in slices, into parts of 1 MiB
// (packed-ops.ts) that are handed over as they fill, and this thread puts each part into ONE
// RocksDB write batch as it arrives (while the loop packs the next) and, told so after the last
// part, writes it: still one atomic write, and the loop answers meanwhile. Only large batches
// come here: handing a batch over and back costs 10-20 ms on two busy cores (see rocks.ts).
//
// The thread attaches to the store's open handle (handle-thread.ts), and is stopped once the
// writer has drained, before the database closes. When it cannot run or fails, the batch is
// written on the event loop instead: the same keys with the same values, so a batch the thread wrote just
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
  private readonly thread: HandleThread<WriteAnswer, Waiting>;

  constructor(private readonly rocks: Rocks) {
    this.thread = new HandleThread('write-thread-main', () => ({ handle: rocks.handle }),
      (waiting, answer) => {
        if ('error' in answer) waiting.reject(writeFailure(new Error(answer.error)));
        else waiting.resolve();
      },
      // Writes go on on the event loop from now on.
      (waiting) => waiting.fallback());
  }

  /** Writes `ops` as one atomic batch (synced with `sync`); resolves once written, rejects if RocksDB refused it. */
  async write(ops: readonly BatchOp[], sync: boolean, slices: LoopSlices): Promise<void> {
    const onLoop = () => {
      if (sync) this.rocks.writeDurable(ops);
      else this.rocks.writeUnsynced(ops);
    };
    const worker = this.thread.usable();
    if (!worker) return onLoop();
    let id = 0;
    const written = new Promise<void>((resolve, reject) => {
      id = this.thread.register({ resolve, reject, fallback: () => { try { onLoop(); resolve(); } catch (err) { reject(err as Error); } } });
    });
    // Once the thread failed (its waiting entries fell back to the loop), the rest is not sent.
    const live = () => this.thread.current(worker);
    await packOps(ops, slices, (part) => {
      if (!live()) return;
      const message: WriteMessage = { id, part: part.buffer as ArrayBuffer, length: part.length };
      worker.postMessage(message, [message.part]);
    });
    if (live()) worker.postMessage({ id, sync } satisfies WriteMessage);
    return written;
  }

  /** Stops the thread (once the writer has drained, before the database closes). */
  close(): Promise<void> {
    return this.thread.close();
  }
}
