import { parentPort, workerData } from 'node:worker_threads';
import { LogSpaces } from './log-spaces.js';
import { Rocks } from './rocks.js';
import type { ForwardRead, ThreadAnswer } from './log-read-thread.js';

// The log-read thread (log-read-thread.ts): reads rows of the log through the store's open
// RocksDB handle and answers with them packed into three transferable buffers.

const { handle, splitFrom } = workerData as { handle: bigint; splitFrom: number };
const spaces = new LogSpaces(await Rocks.attach(handle), splitFrom);

parentPort!.on('message', ({ id, from, limit, to, userOnly }: ForwardRead & { id: number }) => {
  let answer: ThreadAnswer;
  try {
    const rows = spaces.forward(from, limit, to, userOnly === true);
    const count = rows.positions.length;
    let total = 0;
    for (const v of rows.values) total += v.length;
    const bytes = new Uint8Array(total);
    const offsets = new Uint32Array(count + 1);
    const positions = Float64Array.from(rows.positions);
    let at = 0;
    for (let i = 0; i < count; i++) {
      offsets[i] = at;
      bytes.set(rows.values[i], at);
      at += rows.values[i].length;
    }
    offsets[count] = at;
    answer = { id, count, positions: positions.buffer, offsets: offsets.buffer, bytes: bytes.buffer };
    parentPort!.postMessage(answer, [positions.buffer, offsets.buffer, bytes.buffer]);
  } catch (err) {
    answer = { id, error: (err as Error).message };
    parentPort!.postMessage(answer);
  }
});
