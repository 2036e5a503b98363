import { Agent, request } from 'node:http';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { benchConfig } from './config.js';
import { measure } from './load.js';
import { NODE_MAIN, startServer } from './processes.js';
import { AUTHORIZATION, EVENTS_JSON, SCENARIOS, WRITE_STREAMS, appendBody } from './workload.js';

// Append latency under a steady load (issue 13, target 6): the highest single-event append rate
// the node sustains (scenario (a): 64 connections as fast as they go), then appends paced evenly
// at 25%, 50% and 75% of it, each answer's time counted from when its request was due (a late
// send counts as latency: no coordinated omission). autocannon's rate limit sends each second's
// requests in a burst at the start of the second, which measures the burst, not the load; this
// paced client sends every millisecond what is due. Target: p99 ≤ 5 ms at 50%, with the node's
// system projections running (issue 33); BENCH_LATENCY_PROJECTIONS=None measures the node with
// no projections at all, as before.

const TARGET_P99_MS = 5;
const FRACTIONS = [0.25, 0.5, 0.75];
const log = (line: string) => process.stdout.write(`${line}\n`);

interface Paced {
  p50: number; p99: number; sent: number; failed: number; achieved: number;
  /** The client's own event-loop delay, p99 in ms: a late client shows as latency it did not measure of the server. */
  clientDelayP99: number;
}

/** Sends single-event appends at `rate` per second for `seconds`, evenly, over keep-alive connections. */
async function paced(url: string, rate: number, seconds: number): Promise<Paced> {
  const { hostname, port } = new URL(url);
  const agent = new Agent({ keepAlive: true, maxSockets: 128 });
  const latencies: number[] = [];
  let failed = 0;
  let sent = 0;
  let inFlight = 0;
  const delay = monitorEventLoopDelay({ resolution: 1 });
  delay.enable();
  const start = performance.now();
  const end = start + seconds * 1000;
  const send = (due: number, n: number) => {
    inFlight++;
    const body = appendBody(1, n);
    const req = request({
      agent, hostname, port, method: 'POST', path: `/streams/bench-lat-${n % WRITE_STREAMS}`,
      headers: { Authorization: AUTHORIZATION, 'Content-Type': EVENTS_JSON, 'Content-Length': Buffer.byteLength(body) },
    }, (res) => {
      res.resume();
      res.on('end', () => {
        inFlight--;
        if (res.statusCode === 201) latencies.push(performance.now() - due);
        else failed++;
      });
    });
    req.on('error', () => { inFlight--; failed++; });
    req.end(body);
  };
  await new Promise<void>((resolve) => {
    const tick = () => {
      const now = performance.now();
      const due = Math.min(now, end);
      // Every request due by now, each timed from its own due time.
      while (sent < ((due - start) / 1000) * rate) {
        const at = start + (sent / rate) * 1000;
        send(at, sent);
        sent++;
      }
      if (now < end) setTimeout(tick, 1);
      else resolve();
    };
    tick();
  });
  while (inFlight > 0) await new Promise((r) => setTimeout(r, 5));
  delay.disable();
  agent.destroy();
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? NaN;
  return { p50: at(0.5), p99: at(0.99), sent, failed, achieved: latencies.length / seconds, clientDelayP99: delay.percentile(99) / 1e6 };
}

/**
 * Waits until every projection of the node has caught up with the log (progress 100), at most
 * `maxSeconds`; returns the seconds it took (Infinity: not within the bound). The maximum's run
 * leaves the system projections tens of thousands of events behind, and a paced phase started
 * at once measures that catch-up, not the load it asks for.
 */
async function settle(url: string, maxSeconds = 120): Promise<number> {
  const started = performance.now();
  while (performance.now() - started < maxSeconds * 1000) {
    const res = await fetch(`${url}/projections/any`, { headers: { Authorization: AUTHORIZATION } });
    const list = ((await res.json()) as { projections: { status: string; progress: number }[] }).projections;
    if (list.every((p) => !p.status.startsWith('Running') || p.progress >= 100)) return (performance.now() - started) / 1000;
    await new Promise((r) => setTimeout(r, 100));
  }
  return Infinity;
}

async function main(): Promise<void> {
  const config = benchConfig();
  const dir = mkdtempSync(join(config.dataParent, 'svc-bench-latency-'));
  try {
    const projections = process.env.BENCH_LATENCY_PROJECTIONS === 'None' ? ['--run-projections', 'None']
      : ['--run-projections', 'System', '--start-standard-projections', 'true'];
    const server = await startServer('node', NODE_MAIN, ['--db', dir, '--log-level', 'warn', ...projections],
      process.env.BENCH_NODE_FLAGS ? process.env.BENCH_NODE_FLAGS.split(' ') : []);
    try {
      log(`latency bench (${projections.join(' ')}): maximum single-event append rate (${config.connections} connections, ${config.seconds} s), then paced appends`);
      const max = await measure(server.url, SCENARIOS.a, { seconds: config.seconds, warmupSeconds: config.warmupSeconds, connections: config.connections, pid: server.pid });
      const maxRate = max.measured.reqPerSec;
      log(`  maximum: ${Math.round(maxRate)} appends/s (p50 ${max.measured.p50} ms, p99 ${max.measured.p99} ms)`);
      const rows: string[][] = [];
      for (const fraction of FRACTIONS) {
        const rate = Math.round(maxRate * fraction);
        const settled = await settle(server.url);
        const r = await paced(server.url, rate, config.seconds);
        log(`  ${fraction * 100}%: ${rate}/s asked, ${Math.round(r.achieved)}/s answered, p50 ${r.p50.toFixed(1)} ms, p99 ${r.p99.toFixed(1)} ms, ${r.failed} failed; the client's own event-loop delay p99 ${r.clientDelayP99.toFixed(1)} ms; the projections caught up ${settled.toFixed(1)} s before it`);
        const judged = fraction === 0.5;
        rows.push([`${fraction * 100}% of the maximum (${rate}/s)`, `p50 ${r.p50.toFixed(1)} ms, p99 ${r.p99.toFixed(1)} ms${r.failed ? `, ${r.failed} failed` : ''}`,
          judged ? `p99 ≤ ${TARGET_P99_MS} ms` : 'reported', judged ? (r.p99 <= TARGET_P99_MS && r.failed === 0 ? 'PASS' : 'MISS') : '']);
      }
      log('\nResults');
      log(`| single-event appends, paced (maximum ${Math.round(maxRate)}/s) | latency | target | result |\n| --- | --- | --- | --- |`);
      for (const row of rows) log(`| ${row.join(' | ')} |`);
    } finally {
      await server.stop();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  process.stderr.write(`latency bench failed: ${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
