import type { Rocks } from './rocks.js';

// Giving back the space of what a scavenge removed. RocksDB keeps a removal's tombstones in its
// memtable and compacts them with the removed data only once L0 holds four files: measured, half
// of a 1M-event log removed left total-sst-files-size at 61 MB (77 MB once the tombstones were
// flushed) until ~50 MB more was appended or the store was reopened; with this, 31 MB within 10 s
// of the scavenge's end (bench/space.ts).

/**
 * When the space of removed records is given back (Rocks.reclaimSpace): this long after the last
 * removal (a scavenge sends them back to back; this is after its end, or a long throttle rest),
 * once at least this many record bytes were removed since the last time (smaller removals come
 * back with the next compactions anyway). Benches and tests may change them.
 */
export const SPACE_RECLAIM = { afterMs: 3000, minRemovedBytes: 16 * 1024 * 1024 };

export class SpaceReclaimer {
  /** Record bytes removed since the space was last given back, the timer that will, and the reclaim running. */
  private removedBytes = 0;
  private timer: NodeJS.Timeout | undefined;
  private reclaiming: Promise<void> | undefined;
  private closed = false;

  constructor(private readonly rocks: Rocks) {}

  /** A removal of records of these sizes was written: (re)arms the timer once enough was removed. */
  removed(sizes: readonly { size: number }[]): void {
    for (const r of sizes) this.removedBytes += r.size;
    if (this.removedBytes < SPACE_RECLAIM.minRemovedBytes || this.closed) return;
    this.arm();
  }

  /** Disarms the timer and waits for a reclaim running (which stops early: it is told the store closes). */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    await this.reclaiming;
  }

  private arm(): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.reclaim(), SPACE_RECLAIM.afterMs);
    this.timer.unref();
  }

  private reclaim(): void {
    this.timer = undefined;
    if (this.closed) return;
    if (this.reclaiming) {
      this.arm(); // still giving back the space of earlier removals: once that is done
      return;
    }
    this.removedBytes = 0;
    // Best effort: a failure here loses nothing (the space comes back with later compactions).
    this.reclaiming = this.rocks.reclaimSpace(() => this.closed).then(() => undefined, () => undefined)
      .finally(() => { this.reclaiming = undefined; });
  }
}
