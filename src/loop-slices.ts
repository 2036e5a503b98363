import { setImmediate as nextTurn } from 'node:timers/promises';

// Work too long for one turn of the event loop, done in slices: the worker checks `due()` between
// units of work and, once its slice has run SLICE_MS, awaits `next()`, which lets everything else
// waiting on the loop run (HTTP requests, reads, timers, other projections) before it goes on.
// By time, not by count: the same count of units took 3-4x longer on two busy cores than on an
// idle one, and the point is how long the loop is held. (Used by the writer's large operations
// and a projection's large checkpoint: one event that emitted 200,000 events held the loop for
// ~2.7 s in one piece.)

/** How long one slice may hold the event loop, in ms. */
export const SLICE_MS = 10;

export class LoopSlices {
  private sliceStart = performance.now();
  /** Turns of the event loop given up so far. */
  yields = 0;

  /** Whether this slice has run its time (performance.now() costs ~50 ns: checking it per unit is fine). */
  due(): boolean {
    return performance.now() - this.sliceStart >= SLICE_MS;
  }

  /** Lets the event loop run, then starts the next slice. */
  async next(): Promise<void> {
    await nextTurn();
    this.yields++;
    this.sliceStart = performance.now();
  }
}
