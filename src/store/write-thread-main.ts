import { parentPort, workerData } from 'node:worker_threads';
import { Rocks, type PackedBatch } from './rocks.js';
import type { WriteAnswer, WriteMessage } from './write-thread.js';
import { isStop } from './handle-thread.js';

// The write thread (write-thread.ts): puts the packed parts of a batch into one RocksDB write
// batch as they arrive, writes it as ONE atomic write through the store's open handle when told
// to, and answers once it is written. One batch at a time (the writer's pipeline writes in order).

const { handle } = workerData as { handle: bigint };
const rocks = await Rocks.attach(handle);
let open: { id: number; batch: PackedBatch; failure?: string } | undefined;

parentPort!.on('message', (message: WriteMessage) => {
  if (isStop(message)) {
    open?.batch.close();
    open = undefined;
    parentPort!.close();
    return;
  }
  if (open && open.id !== message.id) {
    open.batch.close(); // a batch its writer gave up (the thread is told nothing else of it)
    open = undefined;
  }
  open ??= { id: message.id, batch: rocks.packedBatch() };
  const current = open;
  if ('part' in message) {
    try {
      if (current.failure === undefined) current.batch.add(Buffer.from(message.part, 0, message.length));
    } catch (err) {
      current.failure = (err as Error).message;
    }
    return;
  }
  let answer: WriteAnswer = { id: current.id };
  try {
    if (current.failure !== undefined) throw new Error(current.failure);
    current.batch.write(message.sync);
  } catch (err) {
    answer = { id: current.id, error: (err as Error).message };
  } finally {
    current.batch.close();
    open = undefined;
  }
  parentPort!.postMessage(answer);
});
