import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { BUSY_CEILING, QUIET_SHARE, SCAVENGE_FLOOR, Throttle, WINDOW_MS, restForClients } from '../src/scavenge/throttle.js';

/** Holds the event loop for `ms`, as a synchronous step does. */
function busy(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) { /* the loop is held */ }
}

/** Steps of `stepMs` on the run's account, each followed by yieldToClients, for about `totalMs`. */
async function run(throttle: Throttle, stepMs: number, totalMs: number): Promise<void> {
  const until = performance.now() + totalMs;
  while (performance.now() < until) {
    throttle.timed(() => busy(stepMs));
    await throttle.yieldToClients();
  }
}

// The scavenge's share of the event loop beside the clients' work (src/scavenge/throttle.ts):
// alone it never rests; beside busy clients it rests so that the loop's total use stays under
// BUSY_CEILING, keeping at least SCAVENGE_FLOOR of the loop itself.

describe('a scavenge beside the clients', () => {
  it('never rests when the rest of the node leaves the loop quiet', () => {
    expect(restForClients(100, 100, 100)).toBe(0); // the run alone, flat out
    expect(restForClients(100, 100 * QUIET_SHARE + 60, 60)).toBe(0);
    expect(restForClients(100, 5, 0)).toBe(0);
  });

  it('holds its share to what leaves the loop under the ceiling', () => {
    // Others 50 of 100 ms: the run may have 0.9 - 0.5 = 0.4 of the loop; 50 ms of its own needs 125 ms.
    expect(BUSY_CEILING).toBe(0.9);
    expect(restForClients(100, 100, 50)).toBeCloseTo(25, 6);
    // Within its share: no rest.
    expect(restForClients(100, 80, 30)).toBe(0);
  });

  it('keeps the floor however busy the clients are, and rests at most a second at a time', () => {
    expect(SCAVENGE_FLOOR).toBe(0.1);
    // Others 90 of 100 ms: the floor, 0.1; 20 ms of its own needs 200 ms.
    expect(restForClients(100, 110, 20)).toBeCloseTo(100, 6);
    expect(restForClients(100, 300, 200)).toBe(1000);
  });

  it('owes nothing for an empty window', () => {
    expect(restForClients(0, 0, 0)).toBe(0);
  });
});

describe('a run on the event loop', () => {
  const quiet = pino({ level: 'silent' });

  it('alone, hardly rests for clients (only for what else its process does)', async () => {
    const throttle = new Throttle(100, quiet);
    await run(throttle, 5, 10 * WINDOW_MS);
    expect(throttle.restedForClients).toBeLessThan(WINDOW_MS);
  });

  it('beside other work holding the loop, rests for it', async () => {
    const throttle = new Throttle(100, quiet);
    // Other work: 6 ms of every 10 the run does not count as its own.
    const other = setInterval(() => busy(6), 1);
    try {
      await run(throttle, 5, 8 * WINDOW_MS);
    } finally {
      clearInterval(other);
    }
    // (~190 ms measured here, against ~15 ms alone in a run 10/8 as long)
    expect(throttle.restedForClients).toBeGreaterThan(WINDOW_MS);
  });

  it('a stop ends a rest for clients at once', async () => {
    const throttle = new Throttle(100, quiet);
    const other = setInterval(() => busy(8), 1);
    try {
      // One window of its own work beside the other work: the next yield owes a rest.
      throttle.timed(() => busy(WINDOW_MS));
      const resting = throttle.yieldToClients();
      setTimeout(() => throttle.interrupt(), 5);
      const started = performance.now();
      await resting;
      expect(performance.now() - started).toBeLessThan(500);
    } finally {
      clearInterval(other);
    }
  });
});
