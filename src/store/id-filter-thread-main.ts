import { parentPort, workerData } from 'node:worker_threads';
import { Rocks } from './rocks.js';
import { setBits } from './id-filter.js';

// The event-id filter's load (id-filter.ts): reads the stored event-id keys through the store's
// open handle, page by page, sets their bits in the filter's shared words, and answers with how
// many it read. The filter's owner terminates the thread once answered, or before the database
// closes (a page read is one synchronous call: no iterator stays open across it).

const { handle, bits, gte, lt } = workerData as { handle: bigint; bits: Uint32Array; gte: Uint8Array; lt: Uint8Array };
const PAGE = 4096;
const mask = bits.length * 32 - 1;

try {
  const rocks = await Rocks.attach(handle);
  const end = Buffer.from(lt);
  let count = 0;
  let keys = rocks.scanKeys({ gte: Buffer.from(gte), lt: end, limit: PAGE });
  while (keys.length > 0) {
    for (const key of keys) setBits(bits, mask, key);
    count += keys.length;
    keys = rocks.scanKeys({ gt: keys[keys.length - 1], lt: end, limit: PAGE });
  }
  parentPort!.postMessage({ count });
} catch (err) {
  parentPort!.postMessage({ error: (err as Error).message });
}
