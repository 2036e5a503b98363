import { parentPort, workerData } from 'node:worker_threads';
import { Rocks } from './rocks.js';
import { setBits } from './id-filter.js';

// The event-id filter's load (id-filter.ts): reads the stored event-id keys through the store's
// open handle, page by page, sets their bits in the filter's shared words, and answers with how
// many it read, and ends. Before the database closes its owner sets `stop`, which it reads
// between two pages (a page read is one synchronous call: no iterator stays open across it), and
// waits for it to end: it is never terminated inside a read.

const { handle, bits, stop, gte, lt } = workerData as { handle: bigint; bits: Uint32Array; stop: Int32Array; gte: Uint8Array; lt: Uint8Array };
const stopped = () => Atomics.load(stop, 0) === 1;
const PAGE = 4096;
const mask = bits.length * 32 - 1;

try {
  const rocks = stopped() ? undefined : await Rocks.attach(handle);
  const end = Buffer.from(lt);
  let count = 0;
  let after: Buffer | undefined;
  for (;;) {
    if (!rocks || stopped()) {
      parentPort!.postMessage({ stopped: true });
      break;
    }
    const keys = rocks.scanKeys({ ...(after ? { gt: after } : { gte: Buffer.from(gte) }), lt: end, limit: PAGE });
    if (keys.length === 0) {
      parentPort!.postMessage({ count });
      break;
    }
    for (const key of keys) setBits(bits, mask, key);
    count += keys.length;
    after = keys[keys.length - 1];
  }
} catch (err) {
  parentPort!.postMessage({ error: (err as Error).message });
}
