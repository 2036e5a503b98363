import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import type { BatchOp } from './rocks.js';

// A second thread for the large writes whose fsync may wait for the next synced write (the links
// and checkpoints of projections catching up): their memtable inserts would otherwise hold the
// event loop for milliseconds at a time, and an fsync of their own per batch doubled the time a
// client append waited behind them. Client appends stay on the main thread, where the hand-off would cost more than it
// saves (measured earlier: 35k vs 58k events/s for 100-event appends when every write crossed).
// The batch crosses as ONE transferred buffer: [u32 key length][key][i32 value length|-1][value]...

const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const binding = require(workerData.bindingPath);
const db = binding.db_init(workerData.handle);
const NO_OPTIONS = {};
parentPort.on('message', ({ id, buffer, count }) => {
  let error = null;
  try {
    const bytes = Buffer.from(buffer);
    const batch = binding.batch_init();
    let o = 0;
    for (let i = 0; i < count; i++) {
      const keyLength = bytes.readUInt32BE(o); o += 4;
      const key = bytes.subarray(o, o + keyLength); o += keyLength;
      const valueLength = bytes.readInt32BE(o); o += 4;
      if (valueLength < 0) binding.batch_del(batch, key, NO_OPTIONS);
      else { binding.batch_put(batch, key, bytes.subarray(o, o + valueLength), NO_OPTIONS); o += valueLength; }
    }
    binding.batch_write(db, batch, { sync: false });
    binding.batch_clear(batch);
  } catch (err) {
    error = String((err && err.message) || err);
  }
  parentPort.postMessage({ id, error });
});
`;

export class WriteThread {
  private readonly worker: Worker;
  private readonly pending = new Map<number, { resolve: () => void; reject: (e: Error) => void }>();
  private nextId = 1;

  constructor(handle: bigint) {
    const bindingPath = createRequire(import.meta.url).resolve('@nxtedition/rocksdb/binding.js');
    this.worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { handle, bindingPath } });
    this.worker.on('message', ({ id, error }: { id: number; error: string | null }) => {
      const p = this.pending.get(id);
      this.pending.delete(id);
      if (!p) return;
      if (error) p.reject(new Error(`write failed: ${error}`));
      else p.resolve();
    });
    this.worker.on('error', (err) => {
      for (const p of this.pending.values()) p.reject(err);
      this.pending.clear();
    });
  }

  /** Resolves once every operation is written (one atomic batch, not fsynced). */
  write(ops: readonly BatchOp[]): Promise<void> {
    let size = 0;
    for (const op of ops) size += 8 + op[0].length + (op.length === 2 ? op[1].length : 0);
    const bytes = Buffer.allocUnsafeSlow(size);
    let o = 0;
    for (const op of ops) {
      o = bytes.writeUInt32BE(op[0].length, o);
      o += op[0].copy(bytes, o);
      if (op.length === 2) {
        o = bytes.writeInt32BE(op[1].length, o);
        o += op[1].copy(bytes, o);
      } else {
        o = bytes.writeInt32BE(-1, o);
      }
    }
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ id, buffer: bytes.buffer, count: ops.length }, [bytes.buffer]);
    });
  }

  async stop(): Promise<void> {
    await this.worker.terminate();
  }
}
