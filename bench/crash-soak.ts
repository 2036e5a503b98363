import { CrashHarness } from '../test/support/crash-harness.js';
import { NODE_MAIN } from './processes.js';

// The crash soak (issue 14): the harness of test/crash.e2e.spec.ts for SOAK_CYCLES cycles
// (default 50) on one data directory: load, SIGKILL at a random moment, restart, check. Prints a
// line per cycle and a summary; exits 1 if any check failed. `npm run soak:crash`.

const CYCLES = Number(process.env.SOAK_CYCLES ?? 50);
const log = (line: string) => process.stdout.write(`${line}\n`);

async function main(): Promise<void> {
  const started = performance.now();
  const harness = await CrashHarness.start({ main: NODE_MAIN });
  let passed = 0;
  let failed = 0;
  try {
    for (let i = 0; i < CYCLES; i++) {
      const report = await harness.cycle();
      const bad = report.checks.filter((c) => c.failures.length > 0);
      passed += report.checks.length - bad.length;
      failed += bad.length;
      log(`cycle ${report.cycle}: ${report.acknowledged} events acknowledged, ${report.checks.length - bad.length}/${report.checks.length} checks passed, ${((performance.now() - started) / 1000).toFixed(1)} s`);
      for (const c of bad) log(`  FAILED ${c.name}:\n    ${c.failures.join('\n    ')}`);
    }
  } finally {
    await harness.dispose();
  }
  const deliveries = [...harness.ledger.delivered.values()];
  log('');
  log(`crash soak: ${CYCLES} kill -9 cycles, ${harness.acknowledgedEvents} events acknowledged in ${harness.ledger.acked.length} appends`
    + ` (${harness.retriedAppends} retried after a kill or timeout, ${harness.ledger.rejected.length} rejected by expected version),`
    + ` subscription: ${deliveries.length} events delivered, ${deliveries.filter((n) => n > 1).length} of them more than once;`
    + ` checks ${passed} passed, ${failed} failed; ${((performance.now() - started) / 1000).toFixed(1)} s`);
  if (failed > 0) process.exitCode = 1;
}

await main();
