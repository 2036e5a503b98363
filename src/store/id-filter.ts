import type { Rocks } from './rocks.js';
import { SPACE, spaceEnd } from './keys.js';

// An idempotency check reads the event-id key of the append's first event, and for a new id —
// nearly every append — that read is a miss through the memtables and every level of RocksDB
// (~13 µs through the binding, 16% of the node's CPU under single-event appends). This Bloom
// filter of the stored event-id keys answers most misses from memory: "not there" is certain,
// "maybe" reads RocksDB as before. Its size is fixed (--event-id-filter-size): beyond ~1 key per
// 10 bits its false positives grow and it reads more often, never wrongly. It answers "maybe"
// until it has read the keys already stored, which a start does in the background (one scan of
// the EVENT_ID key space, keys only); keys written from the start on are added as they are
// written. Keys a scavenge removes stay in it (a false positive at worst).

const HASHES = 7;

export class EventIdFilter {
  private readonly bits: Uint32Array;
  private readonly mask: number;
  private loaded = false;
  private stopping = false;
  private loading: Promise<void> | undefined;
  /** Keys added (an estimate of its fill: stored keys plus those written since the start). */
  count = 0;

  /** `bytes`: the filter's size, rounded down to a power of two (0: no filter, every check reads RocksDB). */
  constructor(bytes: number) {
    const words = bytes >= 8 ? 2 ** Math.floor(Math.log2(bytes / 4)) : 0;
    this.bits = new Uint32Array(words);
    this.mask = words * 32 - 1;
  }

  get enabled(): boolean {
    return this.bits.length > 0;
  }

  /** Whether the answers are complete (the stored keys were read). */
  get ready(): boolean {
    return this.loaded;
  }

  /** Reads the stored event-id keys in the background. */
  load(rocks: Rocks): void {
    if (!this.enabled) return;
    this.loading = rocks.scanPages({ gte: Buffer.of(SPACE.EVENT_ID), lt: spaceEnd(SPACE.EVENT_ID) }, 4096, (keys) => {
      for (const key of keys) this.add(key);
      return !this.stopping;
    }, false).then(() => { this.loaded = !this.stopping; });
  }

  /** Stops a load still running (before the database closes). */
  async stop(): Promise<void> {
    this.stopping = true;
    await this.loading?.catch(() => {});
  }

  add(key: Buffer): void {
    if (!this.enabled) return;
    this.count++;
    let [h1, h2] = hashes(key);
    for (let i = 0; i < HASHES; i++, h1 = (h1 + h2) | 0) {
      const bit = h1 & this.mask;
      this.bits[bit >>> 5] |= 1 << (bit & 31);
    }
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
