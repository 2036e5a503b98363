import { HandleThread } from './handle-thread.js';
import { decodeRecord, type EventRecord } from './record.js';

// Reads of the log off the event loop, on a thread of their own. A catch-up that reads much of
// the log from RocksDB (a subscription from the start of $all) spent most of the node's time in
// the binding: ~1 µs a row in querySync, two Buffers per row (each an ArrayBuffer of its own) and
// the garbage collection of both. On this thread the rows are read through the same RocksDB
// handle and packed into one buffer that is handed over whole; the event loop decodes records
// from it (views into it, as the log tail's slabs) and goes on with the previous page meanwhile.
// Measured with bench/grpc.ts's catch-up (see the commit): the event loop's work per event fell
// by about a third, and reading overlaps encoding and sending.
//
// The thread attaches to the open handle (handle-thread.ts); when it cannot run or fails, reads
// go on on the event loop as before.

/** Records read on the thread: positions, and each record's bytes at offsets[i]..offsets[i+1] of `bytes`. */
export interface PackedRows {
  readonly count: number;
  readonly positions: Float64Array;
  readonly offsets: Uint32Array;
  readonly bytes: Buffer;
}

/** The records of packed rows, as views into their one buffer. */
export function recordsOf(rows: PackedRows): EventRecord[] {
  const records = new Array<EventRecord>(rows.count);
  for (let i = 0; i < rows.count; i++) records[i] = decodeRecord(rows.positions[i], rows.bytes, rows.offsets[i], rows.offsets[i + 1]);
  return records;
}

export interface ForwardRead {
  readonly from: number;
  /** Rows at most (undefined: every row up to `to`). */
  readonly limit: number | undefined;
  readonly to: number;
  /** The records of user streams only (log-spaces.ts: LogSpaces.forward's `userOnly`). */
  readonly userOnly?: boolean;
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
  private readonly thread: HandleThread<ThreadAnswer, Waiting>;

  constructor(handle: () => bigint, splitFrom: number) {
    this.thread = new HandleThread('log-read-thread-main', () => ({ handle: handle(), splitFrom }),
      (waiting, answer) => {
        if ('error' in answer) return waiting.resolve(undefined);
        waiting.resolve({
          count: answer.count, positions: new Float64Array(answer.positions), offsets: new Uint32Array(answer.offsets),
          bytes: Buffer.from(answer.bytes),
        });
      },
      // Reads go on on the event loop from now on.
      (waiting) => waiting.resolve(undefined));
  }

  /** The rows of [from, to), at most `limit`, read on the thread; undefined: read them here instead. */
  forward(read: ForwardRead): Promise<PackedRows | undefined> | undefined {
    if (this.thread.inFlight >= MAX_IN_FLIGHT) return undefined;
    const worker = this.thread.usable();
    if (!worker) return undefined;
    return new Promise((resolve) => {
      const id = this.thread.register({ resolve });
      worker.postMessage({ id, ...read });
    });
  }

  /** Stops the thread (before the database closes); reads in flight resolve undefined. */
  close(): Promise<void> {
    return this.thread.close();
  }
}
