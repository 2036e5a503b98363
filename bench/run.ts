import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, loadavg } from 'node:os';
import { join } from 'node:path';
import { benchConfig, type BenchConfig } from './config.js';
import { failures, measure, type Measurement } from './load.js';
import { CEILING_MAIN, NODE_MAIN, startServer, type Server } from './processes.js';
import { details, errorBanner, markdownTable, textTable, type Row } from './report.js';
import { sampleReads, seedReadStreams, type ReadSamples } from './seed.js';
import { SCENARIOS, type Scenario } from './workload.js';

// `npm run bench`: the node (real data dir, sync writes) and then the bare-fastify ceiling,
// each in its own child process, under identical autocannon load; then the verdicts.
// The two servers never run at the same time, so neither steals CPU from the other.

const log = (line: string) => process.stdout.write(`${line}\n`);

type Results = Map<Scenario, { measured: Measurement; warmupFailures: number }>;

async function runAll(server: Server, label: string, scenarios: Scenario[], config: BenchConfig): Promise<Results> {
  const results: Results = new Map();
  for (const scenario of scenarios) {
    log(`  ${label} (${scenario.id}) ${scenario.title}: ${config.warmupSeconds}s warm-up + ${config.seconds}s ...`);
    const result = await measure(server.url, scenario, { ...config, pid: server.pid });
    const failed = failures(result.measured) + result.warmupFailures;
    if (failed > 0) log(`  !!! ${label} (${scenario.id}): ${failed} requests FAILED`);
    results.set(scenario, result);
  }
  return results;
}

/** Node phase: returns its results and, if reads ran, the real answers the ceiling is to serve. */
async function benchNode(scenarios: Scenario[], config: BenchConfig): Promise<{ results: Results; samples: ReadSamples | undefined }> {
  const dir = mkdtempSync(join(config.dataParent, 'svc-bench-'));
  const nodeArgs = config.cpuProfDir ? ['--cpu-prof', '--cpu-prof-dir', config.cpuProfDir] : [];
  log(`node: data in ${dir}${config.cpuProfDir ? `, CPU profile to ${config.cpuProfDir}` : ''}`);
  try {
    // The streams API alone: the system projections' indexing is measured by the projection bench.
    const server = await startServer('node', NODE_MAIN, ['--db', dir, '--log-level', 'warn', '--run-projections', 'None'], nodeArgs);
    try {
      let samples: ReadSamples | undefined;
      if (scenarios.some((s) => s.id === 'c' || s.id === 'd')) {
        log('  seeding the read streams ...');
        await seedReadStreams(server.url);
        samples = await sampleReads(server.url);
      }
      return { results: await runAll(server, 'node', scenarios, config), samples };
    } finally {
      await server.stop();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function benchCeiling(scenarios: Scenario[], samples: ReadSamples | undefined, config: BenchConfig): Promise<Results> {
  const dir = mkdtempSync(join(config.dataParent, 'svc-bench-ceiling-'));
  try {
    const args: string[] = [];
    if (samples !== undefined) {
      writeFileSync(join(dir, 'page.json'), samples.page.body);
      writeFileSync(join(dir, 'event.json'), samples.event.body);
      args.push('--get-body', join(dir, 'page.json'), '--get-type', samples.page.type,
        '--get-event-body', join(dir, 'event.json'), '--get-event-type', samples.event.type);
      log(`ceiling: bare fastify, GET answers a captured ${samples.page.body.length}-byte page `
        + `and a ${samples.event.body.length}-byte event`);
    } else {
      log('ceiling: bare fastify');
    }
    const server = await startServer('ceiling', CEILING_MAIN, args);
    try {
      return await runAll(server, 'ceiling', scenarios, config);
    } finally {
      await server.stop();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const config = benchConfig();
  const scenarios = config.only.map((id) => SCENARIOS[id]);
  log(`bench: ${config.seconds}s per run (+${config.warmupSeconds}s warm-up), ${config.connections} connections, `
    + `${availableParallelism()} CPUs, node ${process.version}, loopback`);
  // Client and servers share the machine: anything else running skews every number.
  const [load] = loadavg();
  if (load > 0.5) log(`WARNING: load average is ${load.toFixed(2)} before the bench starts; results will be noisy`);

  const node = await benchNode(scenarios, config);
  const ceiling = await benchCeiling(scenarios, node.samples, config);

  const rows: Row[] = scenarios.map((scenario) => {
    const n = node.results.get(scenario)!;
    const c = ceiling.get(scenario)!;
    return { scenario, node: n.measured, ceiling: c.measured, warmupFailures: n.warmupFailures + c.warmupFailures };
  });

  log('\nDetails');
  log(details(rows));
  log('\nResults');
  log(textTable(rows));
  const banner = errorBanner(rows);
  if (banner) log(`\n${banner}`);
  log('\nMarkdown (for the README)\n');
  log(markdownTable(rows));
  if (banner) process.exitCode = 1;
}

main().catch((err) => {
  process.stderr.write(`bench failed: ${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
