import { describe, expect, it } from 'vitest';
import { BUSY_CEILING, QUIET_SHARE, SCAVENGE_FLOOR, restForClients } from '../src/scavenge/throttle.js';

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
