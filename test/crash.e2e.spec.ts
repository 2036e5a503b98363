import { existsSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { CrashHarness } from './support/crash-harness.js';
import { MAIN } from './support/process.js';

// kill -9 at random moments under load (issue 14): 64 writers, two continuous projections and a
// persistent subscription consumer run against a node process that is killed and started again
// on the same data directory, five times; after each restart every acknowledged event is there
// once at its number, $all is in commit order, the projections equal a recomputation over the
// log and their emitted streams hold no duplicate, and the subscription delivered every event
// without redelivering what its checkpoint settled. `npm run soak:crash` runs 50 cycles.

describe('kill -9 under load', () => {
  let harness: CrashHarness | undefined;
  afterAll(() => harness?.dispose());

  it('after each of five kills, the log, the projections and the subscription keep every promise made', async () => {
    expect(existsSync(MAIN), 'build first: npm run build').toBe(true);
    harness = await CrashHarness.start();
    let acknowledged = 0;
    for (let i = 0; i < 5; i++) {
      const report = await harness.cycle();
      expect(report.checks.length).toBe(7);
      expect(report.checks.filter((c) => c.failures.length > 0), `cycle ${report.cycle}`).toEqual([]);
      expect(report.acknowledged, `cycle ${report.cycle} acknowledged new appends`).toBeGreaterThan(acknowledged);
      acknowledged = report.acknowledged;
    }
    // the kills landed among appends in flight: some were retried with the same event ids
    expect(harness.retriedAppends).toBeGreaterThan(0);
  }, 90_000);
});
