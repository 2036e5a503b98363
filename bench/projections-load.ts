import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import autocannon from 'autocannon';
import { NODE_MAIN, startServer } from './processes.js';

// Projections under load (issue 5): 20 continuous projections plus the system projections
// while writers append at a steady rate over HTTP. Reports the append rate reached, append
// latency, GET /projections/any latency (target ≤ 50 ms), and how long the slowest projection
// takes to catch up once the writers stop.

const RATE = Number(process.env.BENCH_LOAD_RATE ?? 1000);
const SECONDS = Number(process.env.BENCH_LOAD_SECONDS ?? 15);
const WARMUP_SECONDS = 3;
const AUTH = { Authorization: `Basic ${Buffer.from('admin:changeit').toString('base64')}` };
const QUERIES = [
  `fromAll().when({ $init: () => ({ n: 0 }), $any: (s) => { s.n++; } })`,
  `fromCategory('order').foreachStream().when({ $init: () => ({ n: 0 }), Placed: (s, e) => { s.n += e.body.v; } })`,
  `fromAll().partitionBy(e => e.body && e.body.region).when({ $init: () => ({ n: 0 }), Placed: (s) => { s.n++; } })`,
  `fromAll().when({ Placed: (s, e) => { if (e.body.v % 10 === 0) emit('big-' + e.body.region, 'Big', { v: e.body.v }); } })`,
];

const log = (line: string) => process.stdout.write(`${line}\n`);

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(process.env.BENCH_DATA_DIR ?? '/tmp', 'svc-bench-load-'));
  const prof = process.env.BENCH_CPU_PROF;
  const server = await startServer('node', NODE_MAIN, ['--db', dir, '--log-level', 'warn'],
    prof ? ['--cpu-prof', '--cpu-prof-dir', prof] : []);
  try {
    const url = server.url;
    for (let i = 0; i < 20; i++) {
      const res = await fetch(`${url}/projections/continuous?name=load-${i}&emit=yes`, { method: 'POST', headers: AUTH, body: QUERIES[i % QUERIES.length].replace("'big-'", `'big${i}-'`) });
      if (res.status !== 201) throw new Error(`creating load-${i}: ${res.status} ${await res.text()}`);
    }
    const listLatency: number[] = [];
    let failures = 0;
    // autocannon paces the appends (fetch in the bench process cost ~0.8 ms of CPU per request,
    // which on 2 cores starved the node it measures).
    let sent = 0;
    const appenders = (seconds: number) => autocannon({
      url, connections: 32, overallRate: RATE, duration: seconds,
      // The p99 of the answers themselves: with a rate, autocannon's correction assumes a 1 ms send
      // interval (ceil(1 / per-connection rate)), so an answer of N ms counted N times.
      ignoreCoordinatedOmission: true,
      requests: [{
        method: 'POST', headers: { ...AUTH, 'Content-Type': 'application/vnd.eventstore.events+json' },
        setupRequest: (request) => {
          const i = sent++;
          return {
            ...request, path: `/streams/order-${i % 200}`,
            body: JSON.stringify([{ eventId: randomUUID(), eventType: 'Placed', data: { v: i, region: `r${i % 5}` } }]),
          };
        },
      }],
    });
    // Warm-up at the same rate (isolates compiling, JIT, first partitions), not measured.
    const warmup = await appenders(WARMUP_SECONDS);
    failures += warmup.non2xx + warmup.errors;
    const end = Date.now() + SECONDS * 1000;
    const started = performance.now();
    const writers = appenders(SECONDS);
    const poller = (async () => {
      while (Date.now() < end) {
        const t = performance.now();
        const res = await fetch(`${url}/projections/any`, { headers: AUTH });
        await res.arrayBuffer();
        if (res.status === 200) listLatency.push(performance.now() - t);
        else failures++;
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    const [appends] = await Promise.all([writers, poller]);
    failures += appends.non2xx + appends.errors;
    const writeSeconds = (performance.now() - started) / 1000;
    const stopped = performance.now();
    let caughtUp = false;
    while (!caughtUp && performance.now() - stopped < 120_000) {
      const res = await fetch(`${url}/projections/any`, { headers: AUTH });
      const { projections } = await res.json() as { projections: { status: string; progress: number }[] };
      if (projections.some((p) => p.status.startsWith('Faulted'))) throw new Error('a projection faulted under load');
      caughtUp = projections.every((p) => p.progress >= 100);
      if (!caughtUp) await new Promise((r) => setTimeout(r, 50));
    }
    const catchUpMs = performance.now() - stopped;
    const stats = await (await fetch(`${url}/stats`, { headers: AUTH })).json() as
      { svc: { writer: { meanFlushSize: number }; queue: { writer: { totalItemsProcessed: number; avgProcessingTime: number } } } };
    const items = stats.svc.queue.writer.totalItemsProcessed;
    const flushes = stats.svc.writer.meanFlushSize > 0 ? items / stats.svc.writer.meanFlushSize : 0;
    const p99List = percentile(listLatency, 99);
    log(`\nProjections under load: 20 continuous + the system projections, ${RATE} appends/s offered for ${SECONDS} s`);
    log('| measure | value | target | result |\n| --- | --- | --- | --- |');
    const acknowledged = appends['2xx'] / writeSeconds;
    log(`| appends acknowledged | ${Math.round(acknowledged)}/s (failures ${failures}) | ${RATE}/s | ${acknowledged >= RATE * 0.95 && failures === 0 ? 'PASS' : 'MISS'} |`);
    log(`| append latency | p50 ${appends.latency.p50.toFixed(1)} ms, p99 ${appends.latency.p99.toFixed(1)} ms | reported | |`);
    log(`| GET /projections/any | p50 ${percentile(listLatency, 50).toFixed(1)} ms, p99 ${p99List.toFixed(1)} ms | ≤ 50 ms | ${p99List <= 50 ? 'PASS' : 'MISS'} |`);
    log(`| durable writes (all appends and checkpoints) | ${Math.round(flushes / writeSeconds)} flushes/s, ${(items / Math.max(1, flushes)).toFixed(1)} writes each, ${stats.svc.queue.writer.avgProcessingTime} ms busy per write | reported | |`);
    log(`| all projections caught up after the writers stopped | ${caughtUp ? `${Math.round(catchUpMs)} ms` : 'NOT within 120 s'} | no stall | ${caughtUp ? 'PASS' : 'MISS'} |`);
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  process.stderr.write(`load bench failed: ${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
