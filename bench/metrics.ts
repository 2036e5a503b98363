import { mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, loadavg } from 'node:os';
import { join } from 'node:path';
import { benchConfig } from './config.js';
import { failures, measure, type Measurement } from './load.js';
import { NODE_MAIN, startServer } from './processes.js';
import { AUTHORIZATION, SCENARIOS } from './workload.js';

// `npm run bench:metrics`: what GET /metrics costs the append path (issue 34, item 4). One node,
// scenario (a) (single-event appends, 64 connections: the path where a per-append cost shows
// most), run alternately without and with a scraper asking for /metrics every second, as a
// Prometheus server would; BENCH_METRICS_ROUNDS pairs (default 2), alternated so that a drift of
// the machine (page cache, RocksDB compactions, a neighbour's load) falls on both sides alike.
// The counters of appends and request durations run in both: they are always on; what the
// scraper adds is the work of a scrape (reading every figure, formatting the text) in the
// node's event loop. Prints both rates, their ratio, the node's CPU per append, and the scrapes'
// own time and size.

const log = (line: string) => process.stdout.write(`${line}\n`);
const SCRAPE_INTERVAL_MS = 1000;

interface Scrapes {
  count: number;
  failed: number;
  durationsMs: number[];
  bytes: number;
}

/** Scrapes /metrics every second until stopped, as Prometheus does (one at a time, never overlapping). */
function scraper(url: string): { stop(): Promise<Scrapes> } {
  const scrapes: Scrapes = { count: 0, failed: 0, durationsMs: [], bytes: 0 };
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const started = performance.now();
      try {
        const res = await fetch(`${url}/metrics`, { headers: { Authorization: AUTHORIZATION }, signal: AbortSignal.timeout(10_000) });
        const text = await res.text();
        if (res.status === 200) {
          scrapes.count++;
          scrapes.bytes = text.length;
          scrapes.durationsMs.push(performance.now() - started);
        } else {
          scrapes.failed++;
        }
      } catch {
        scrapes.failed++;
      }
      const wait = SCRAPE_INTERVAL_MS - (performance.now() - started);
      if (wait > 0 && !stopped) await new Promise((r) => setTimeout(r, wait));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      return scrapes;
    },
  };
}

interface Round { without: Measurement; with: Measurement; scrapes: Scrapes }

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const percentile = (xs: number[], p: number) => {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
};
const int = (n: number) => Math.round(n).toLocaleString('en-US');

async function main(): Promise<void> {
  const config = benchConfig();
  const rounds = Number(process.env.BENCH_METRICS_ROUNDS ?? 2);
  if (!Number.isInteger(rounds) || rounds < 1) throw new Error(`BENCH_METRICS_ROUNDS must be a whole number >= 1, got ${process.env.BENCH_METRICS_ROUNDS}`);
  const scenario = SCENARIOS.a;
  log(`bench:metrics: (${scenario.id}) ${scenario.title}, ${rounds} rounds of ${config.seconds}s without and ${config.seconds}s with `
    + `a scrape of /metrics every ${SCRAPE_INTERVAL_MS / 1000}s (+${config.warmupSeconds}s warm-up each), ${config.connections} connections, `
    + `${availableParallelism()} CPUs, node ${process.version}`);
  const [load] = loadavg();
  if (load > 0.5) log(`WARNING: load average is ${load.toFixed(2)} before the bench starts; results will be noisy`);

  const dir = mkdtempSync(join(config.dataParent, 'svc-bench-metrics-'));
  const results: Round[] = [];
  let failed = 0;
  try {
    const server = await startServer('node', NODE_MAIN, ['--db', dir, '--log-level', 'warn', '--run-projections', 'None']);
    try {
      const run = async (label: string) => {
        const { measured, warmupFailures } = await measure(server.url, scenario, { ...config, pid: server.pid });
        failed += failures(measured) + warmupFailures;
        log(`  ${label}: ${int(measured.reqPerSec)} appends/s, p50 ${measured.p50} ms, p99 ${measured.p99} ms, `
          + `${measured.cpuPerRequestUs.toFixed(1)} µs node CPU/append`);
        return measured;
      };
      for (let i = 1; i <= rounds; i++) {
        const without = await run(`round ${i} without scraping`);
        const scraping = scraper(server.url);
        const withScrapes = await run(`round ${i} scraped every second`);
        const scrapes = await scraping.stop();
        failed += scrapes.failed;
        results.push({ without, with: withScrapes, scrapes });
      }
    } finally {
      await server.stop();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }

  const rate = (pick: (r: Round) => Measurement) => mean(results.map((r) => pick(r).reqPerSec));
  const cpu = (pick: (r: Round) => Measurement) => mean(results.map((r) => pick(r).cpuPerRequestUs));
  const durations = results.flatMap((r) => r.scrapes.durationsMs);
  const [withoutRate, withRate] = [rate((r) => r.without), rate((r) => r.with)];
  const [withoutCpu, withCpu] = [cpu((r) => r.without), cpu((r) => r.with)];
  log('\nResults (means over the rounds)');
  log(`  without scraping:      ${int(withoutRate)} appends/s, ${withoutCpu.toFixed(1)} µs node CPU/append`);
  log(`  scraped every second:  ${int(withRate)} appends/s, ${withCpu.toFixed(1)} µs node CPU/append`);
  log(`  ratio with/without:    ${(withRate / withoutRate).toFixed(3)} of the rate, ${(withCpu / withoutCpu).toFixed(3)} of the CPU per append`);
  log(`  scrapes under load:    ${durations.length}, ${int(results[results.length - 1].scrapes.bytes)} bytes each, `
    + `answered in p50 ${percentile(durations, 50).toFixed(1)} ms, max ${Math.max(...durations).toFixed(1)} ms`);
  if (failed > 0) {
    log(`\n!!! ${failed} requests or scrapes FAILED: the figures prove nothing`);
    process.exitCode = 1;
  }
}

main().catch((err) => {
  process.stderr.write(`bench:metrics failed: ${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
