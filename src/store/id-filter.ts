import { Worker } from 'node:worker_threads';
import type { Rocks } from './rocks.js';
import { SPACE, spaceEnd } from './keys.js';
import { stopThread, threadScript } from './handle-thread.js';

// An idempotency check reads the event-id key of the append's first event, and for a new id —
// nearly every append — that read is a miss through the memtables and every level of RocksDB
// (~13 µs through the binding, 16% of the node's CPU under single-event appends). This Bloom
// filter of the stored event-id keys answers most misses from memory: "not there" is certain,
// "maybe" reads RocksDB as before. Its size is fixed (--event-id-filter-size): beyond ~1 key per
// 10 bits its false positives grow and it reads more often, never wrongly. It answers "maybe"
// until it has read the keys already stored, which a start does in the background (one scan of
// the EVENT_ID key space, keys only); keys written from the start on are added as they are
// written. Keys a scavenge removes stay in it (a false positive at worst).
//
// The stored keys are read on a thread of their own (id-filter-thread-main.ts, through the
// store's open handle), which sets their bits in the filter's shared memory: on the event loop
// that read was ~160 ms of a start at a million events, taken from the sandboxes being made and
// the doors opening (a node now starts it once it serves: StoreOptions.deferIdFilterLoad). Both sides set bits with Atomics.or, so a bit the thread sets is never lost to
// an append setting another bit of the same word. Where the thread cannot run (no built script),
// the keys are read on the event loop as before.

const HASHES = 7;

export class EventIdFilter {
  private readonly bits: Uint32Array;
  private readonly mask: number;
  private loaded = false;
  private stopping = false;
  private loading: Promise<void> | undefined;
  /** The thread reading the stored keys, while it runs. */
  private thread: Worker | undefined;
  /** Set to 1 to stop the thread between two pages (stop: stopThread). */
  private readonly stopFlag = new Int32Array(new SharedArrayBuffer(4));
  /** Keys added (an estimate of its fill: stored keys plus those written since the start). */
  count = 0;

  /** `bytes`: the filter's size, rounded down to a power of two (0: no filter, every check reads RocksDB). */
  constructor(bytes: number) {
    const words = bytes >= 8 ? 2 ** Math.floor(Math.log2(bytes / 4)) : 0;
    this.bits = new Uint32Array(new SharedArrayBuffer(words * 4));
    this.mask = words * 32 - 1;
  }

  get enabled(): boolean {
    return this.bits.length > 0;
  }

  /** Whether the answers are complete (the stored keys were read). */
  get ready(): boolean {
    return this.loaded;
  }

  /** Reads the stored event-id keys in the background (on a thread, when one can run). */
  load(rocks: Rocks): void {
    if (!this.enabled || this.loading || this.stopping) return;
    this.loading = this.loadOnThread(rocks.handle).then((loaded) => (loaded || this.stopping ? undefined : this.loadHere(rocks)))
      .then(() => { this.loaded = !this.stopping; }, () => { /* not loaded: every answer stays "maybe" (a read of RocksDB) */ });
  }

  /** Stops a load still running (before the database closes): the thread ends after the page it reads. */
  async stop(): Promise<void> {
    this.stopping = true;
    const ask = () => Atomics.store(this.stopFlag, 0, 1);
    if (this.thread) await stopThread(this.thread, ask);
    else ask();
    await this.loading?.catch(() => {});
  }

  /** Whether the thread read every stored key (false: it could not run, or failed). */
  private loadOnThread(handle: bigint): Promise<boolean> {
    const script = threadScript('id-filter-thread-main');
    if (!script) return Promise.resolve(false);
    return new Promise((resolve) => {
      const worker = new Worker(script, {
        workerData: { handle, bits: this.bits, stop: this.stopFlag, gte: Buffer.of(SPACE.EVENT_ID), lt: spaceEnd(SPACE.EVENT_ID) },
      });
      this.thread = worker;
      worker.unref();
      let done = false;
      // Its one answer is its last act: it reads nothing after it, and may be terminated then.
      worker.once('message', (answer: { count: number } | { stopped: true } | { error: string }) => {
        done = 'count' in answer;
        if ('count' in answer) this.count += answer.count;
        void worker.terminate();
      });
      worker.once('error', () => { /* exit follows */ });
      worker.once('exit', () => {
        this.thread = undefined;
        resolve(done);
      });
    });
  }

  private loadHere(rocks: Rocks): Promise<void> {
    return rocks.scanPages({ gte: Buffer.of(SPACE.EVENT_ID), lt: spaceEnd(SPACE.EVENT_ID) }, 4096, (keys) => {
      for (const key of keys) this.add(key);
      return !this.stopping;
    }, false);
  }

  add(key: Buffer): void {
    if (!this.enabled) return;
    this.count++;
    setBits(this.bits, this.mask, key);
  }

  /** False: the key is certainly not stored. True: it may be (read it). */
  mightContain(key: Buffer): boolean {
    if (!this.loaded) return true;
    let [h1, h2] = hashes(key);
    for (let i = 0; i < HASHES; i++, h1 = (h1 + h2) | 0) {
      const bit = h1 & this.mask;
      if ((this.bits[bit >>> 5] & (1 << (bit & 31))) === 0) return false;
    }
    return true;
  }
}

/** Sets the key's bits in `bits` (a filter's shared words; its thread sets them too). */
export function setBits(bits: Uint32Array, mask: number, key: Buffer): void {
  let [h1, h2] = hashes(key);
  for (let i = 0; i < HASHES; i++, h1 = (h1 + h2) | 0) {
    const bit = h1 & mask;
    Atomics.or(bits, bit >>> 5, 1 << (bit & 31));
  }
}

/** Two independent 32-bit hashes of the key (FNV-1a with two offsets, finalised by murmur3's mix). */
function hashes(key: Buffer): [number, number] {
  let a = 0x811c9dc5;
  let b = 0x01000193 ^ 0x5bd1e995;
  for (let i = 0; i < key.length; i++) {
    a = Math.imul(a ^ key[i], 0x01000193);
    b = Math.imul(b ^ key[i], 0x5bd1e995);
  }
  return [mix(a), mix(b) | 1];
}

function mix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return h ^ (h >>> 16);
}
