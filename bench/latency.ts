import { Agent, request } from 'node:http';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { benchConfig, envNumber, type BenchConfig } from './config.js';
import { measure } from './load.js';
import { NODE_MAIN, startServer, type Server } from './processes.js';
import { AUTHORIZATION, EVENTS_JSON, SCENARIOS, WRITE_STREAMS, appendBody } from './workload.js';
import { QUERIES, prewrite, projections } from './scale.js';
import { CHUNK as SCAVENGE_CHUNK, EVENTS as SCAVENGE_EVENTS, build as buildScavengeLog } from './scavenge.js';

// Append latency under a steady load (issue 13, target 6): the highest single-event append rate
// the node sustains (scenario (a): 64 connections as fast as they go), then appends paced evenly
// at 25%, 50% and 75% of it, each answer's time counted from when its request was due (a late
// send counts as latency: no coordinated omission). autocannon's rate limit sends each second's
// requests in a burst at the start of the second, which measures the burst, not the load; this
// paced client sends every millisecond what is due. Target: p99 ≤ 5 ms at 50%, with the node's
// system projections running (issue 33); BENCH_LATENCY_PROJECTIONS=None measures the node with
// no projections at all, as before. Then half of the maximum twice more, each on a node of its own
// with a log of its own and its system projections caught up, and each the maximum of that node
// (measured there first, then half of it for a quiet baseline) (target: p99 ≤ 10 ms): while twenty
// projections of the scale bench's four kinds catch up over BENCH_LATENCY_CATCHUP_EVENTS events
// (default 500,000 over 50,000 streams), and during a scavenge (threads=1) of the scavenge
// bench's log (BENCH_SCAVENGE_EVENTS, default 1,000,000, half removable), for as long as it runs.
// BENCH_LATENCY_BUSY=0 skips those two; BENCH_LATENCY_ONLY=twenty or =scavenge runs only that
// one; BENCH_LATENCY_RATE sets their rate instead of measuring it.

const TARGET_P99_MS = 5;
const TARGET_BUSY_P99_MS = 10;
const CATCHUP_EVENTS = envNumber('BENCH_LATENCY_CATCHUP_EVENTS', 500_000, 1000);
const FRACTIONS = [0.25, 0.5, 0.75];
const log = (line: string) => process.stdout.write(`${line}\n`);

interface Paced {
  p50: number; p99: number; sent: number; failed: number; achieved: number;
  /** The client's own event-loop delay, p99 in ms: a late client shows as latency it did not measure of the server. */
  clientDelayP99: number;
  /** Its longest delay, ms: one stall of the client shows here and hardly in its p99. */
  clientDelayMax: number;
}

/**
 * Sends single-event appends at `rate` per second for `seconds` (or until `until` says so),
 * evenly, over keep-alive connections.
 */
async function paced(url: string, rate: number, seconds: number, until: () => boolean = () => false): Promise<Paced> {
  const { hostname, port } = new URL(url);
  const agent = new Agent({ keepAlive: true, maxSockets: 128 });
  const latencies: number[] = [];
  let failed = 0;
  let sent = 0;
  let inFlight = 0;
  const delay = monitorEventLoopDelay({ resolution: 1 });
  delay.enable();
  const start = performance.now();
  let end = start + seconds * 1000;
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
      if (now < end && until()) end = now;
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
  return { p50: at(0.5), p99: at(0.99), sent, failed, achieved: latencies.length / ((end - start) / 1000), clientDelayP99: delay.percentile(99) / 1e6, clientDelayMax: delay.max / 1e6 };
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

function latencyCell(r: Paced): string {
  return `p50 ${r.p50.toFixed(1)} ms, p99 ${r.p99.toFixed(1)} ms${r.failed ? `, ${r.failed} failed` : ''}`;
}

function judge(r: Paced, target: number): string {
  return r.p99 <= target && r.failed === 0 ? 'PASS' : 'MISS';
}

/**
 * Half of this node's own maximum (scenario (a) on it, then its projections given time to catch up
 * with those appends), or BENCH_LATENCY_RATE when set.
 */
async function halfOfMaximum(server: Server, config: BenchConfig): Promise<number> {
  const fixed = envNumber('BENCH_LATENCY_RATE', 0, 0);
  if (fixed > 0) return fixed;
  const max = await measure(server.url, SCENARIOS.a, { seconds: config.seconds, warmupSeconds: config.warmupSeconds, connections: config.connections, pid: server.pid });
  const rate = Math.round(max.measured.reqPerSec / 2);
  const settled = await settle(server.url, 600);
  log(`  this node's maximum: ${Math.round(max.measured.reqPerSec)} appends/s; its projections caught up ${settled.toFixed(1)} s later`);
  return rate;
}

/** Half this node's maximum while twenty projections catch up over a prewritten log; its row. */
async function whileTwentyCatchUp(config: BenchConfig): Promise<string[]> {
  const seconds = config.seconds;
  const dir = mkdtempSync(join(config.dataParent, 'svc-bench-latency-twenty-'));
  try {
    let t = performance.now();
    await prewrite(dir, CATCHUP_EVENTS, CATCHUP_EVENTS / 10);
    log(`  twenty projections: ${CATCHUP_EVENTS.toLocaleString('en-US')} events written in ${((performance.now() - t) / 1000).toFixed(1)} s`);
    const server = await startServer('node', NODE_MAIN, ['--db', dir, '--log-level', 'warn', '--run-projections', 'All', '--start-standard-projections', 'true']);
    try {
      t = performance.now();
      const settled = await settle(server.url, 600);
      log(`  the system projections caught up in ${((performance.now() - t) / 1000).toFixed(1)} s${settled === Infinity ? ' (not within 600 s)' : ''}`);
      const rate = await halfOfMaximum(server, config);
      const quiet = await paced(server.url, rate, seconds);
      log(`  the same node before the twenty: ${rate}/s asked, ${Math.round(quiet.achieved)}/s answered, ${latencyCell(quiet)}; client delay max ${quiet.clientDelayMax.toFixed(0)} ms`);
      for (let i = 0; i < 20; i++) {
        const res = await fetch(`${server.url}/projections/continuous?name=lat-${i}`, { method: 'POST', headers: { Authorization: AUTHORIZATION }, body: QUERIES[i % QUERIES.length](i) });
        if (res.status !== 201) throw new Error(`creating lat-${i}: ${res.status} ${await res.text()}`);
      }
      const r = await paced(server.url, rate, seconds);
      const twenty = (await projections(server)).filter((p) => p.name.startsWith('lat-'));
      const notRunning = twenty.filter((p) => !p.status.startsWith('Running'));
      if (notRunning.length > 0) throw new Error(`the twenty must be running: ${notRunning.map((p) => `${p.name} ${p.status}`).join(', ')}`);
      const handled = twenty.reduce((sum, p) => sum + p.eventsProcessedAfterRestart, 0);
      // The category projections (every fourth) read a tenth of the log; the others all of it.
      const total = twenty.reduce((sum, p) => sum + (Number(p.name.slice(4)) % QUERIES.length === 2 ? CATCHUP_EVENTS / 10 : CATCHUP_EVENTS), 0);
      const share = `${((handled / total) * 100).toFixed(0)}%`;
      log(`  while twenty catch up: ${rate}/s asked, ${Math.round(r.achieved)}/s answered, ${latencyCell(r)}; client delay p99 ${r.clientDelayP99.toFixed(1)} ms, max ${r.clientDelayMax.toFixed(0)} ms; the twenty had handled ${share} of their ${total.toLocaleString('en-US')} events by its end`);
      if (handled >= total) log('  (the twenty caught up within the phase: part of it measured a quiet node)');
      return [`50% of this node's maximum (${rate}/s) while 20 projections catch up over ${CATCHUP_EVENTS.toLocaleString('en-US')} events (${share} of them handled by the end; the same node before them: ${latencyCell(quiet)})`, latencyCell(r), `p99 ≤ ${TARGET_BUSY_P99_MS} ms`, judge(r, TARGET_BUSY_P99_MS)];
    } finally {
      await server.stop();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Half this node's maximum for as long as a scavenge (threads=1) of a half-removable log runs; its row. */
async function duringScavenge(config: BenchConfig): Promise<string[]> {
  const dir = mkdtempSync(join(config.dataParent, 'svc-bench-latency-scavenge-'));
  try {
    let t = performance.now();
    await buildScavengeLog(dir);
    log(`  scavenge: ${SCAVENGE_EVENTS.toLocaleString('en-US')} events, half removable, written in ${((performance.now() - t) / 1000).toFixed(1)} s`);
    const server = await startServer('node', NODE_MAIN, ['--db', dir, '--log-level', 'warn', '--chunk-size', String(SCAVENGE_CHUNK),
      '--run-projections', 'System', '--start-standard-projections', 'true']);
    try {
      t = performance.now();
      const settled = await settle(server.url, 600);
      log(`  the system projections caught up in ${((performance.now() - t) / 1000).toFixed(1)} s${settled === Infinity ? ' (not within 600 s)' : ''}`);
      const headers = { Authorization: AUTHORIZATION };
      const rate = await halfOfMaximum(server, config);
      const quiet = await paced(server.url, rate, config.seconds);
      log(`  the same node before the scavenge: ${rate}/s asked, ${Math.round(quiet.achieved)}/s answered, ${latencyCell(quiet)}; client delay max ${quiet.clientDelayMax.toFixed(0)} ms`);
      const started = await fetch(`${server.url}/admin/scavenge?threads=1&threshold=0&throttlePercent=100`, { method: 'POST', headers });
      if (started.status !== 200) throw new Error(`starting the scavenge: ${started.status} ${await started.text()}`);
      t = performance.now();
      let running = true;
      let scavengeSeconds = NaN;
      const watching = (async () => {
        while (running) {
          const current = (await (await fetch(`${server.url}/admin/scavenge/current`, { headers })).json()) as { scavengeId: string };
          if (current.scavengeId === '') {
            scavengeSeconds = (performance.now() - t) / 1000;
            running = false;
          } else {
            await new Promise((r) => setTimeout(r, 100));
          }
        }
      })();
      const r = await paced(server.url, rate, 600, () => !running);
      running = false;
      await watching;
      const last = (await (await fetch(`${server.url}/admin/scavenge/last`, { headers })).json()) as { scavengeResult?: string };
      const took = Number.isNaN(scavengeSeconds) ? 'not finished within 600 s' : `${scavengeSeconds.toFixed(1)} s`;
      log(`  during the scavenge (${last.scavengeResult ?? '?'}, ${took}): ${rate}/s asked, ${Math.round(r.achieved)}/s answered, ${latencyCell(r)}; client delay p99 ${r.clientDelayP99.toFixed(1)} ms, max ${r.clientDelayMax.toFixed(0)} ms`);
      return [`50% of this node's maximum (${rate}/s) during a scavenge of ${SCAVENGE_EVENTS.toLocaleString('en-US')} events, half removable (${took}; the same node before it: ${latencyCell(quiet)})`, latencyCell(r), `p99 ≤ ${TARGET_BUSY_P99_MS} ms`, judge(r, TARGET_BUSY_P99_MS)];
    } finally {
      await server.stop();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const config = benchConfig();
  const only = process.env.BENCH_LATENCY_ONLY;
  if (only !== undefined) {
    if (only !== 'twenty' && only !== 'scavenge') throw new Error(`BENCH_LATENCY_ONLY: 'twenty' or 'scavenge', not '${only}'`);
    const row = only === 'twenty' ? await whileTwentyCatchUp(config) : await duringScavenge(config);
    log(`| ${row.join(' | ')} |`);
    return;
  }
  const dir = mkdtempSync(join(config.dataParent, 'svc-bench-latency-'));
  const rows: string[][] = [];
  let maxRate = 0;
  try {
    const projections = process.env.BENCH_LATENCY_PROJECTIONS === 'None' ? ['--run-projections', 'None']
      : ['--run-projections', 'System', '--start-standard-projections', 'true'];
    const server = await startServer('node', NODE_MAIN, ['--db', dir, '--log-level', 'warn', ...projections]);
    try {
      log(`latency bench (${projections.join(' ')}): maximum single-event append rate (${config.connections} connections, ${config.seconds} s), then paced appends`);
      const max = await measure(server.url, SCENARIOS.a, { seconds: config.seconds, warmupSeconds: config.warmupSeconds, connections: config.connections, pid: server.pid });
      maxRate = max.measured.reqPerSec;
      log(`  maximum: ${Math.round(maxRate)} appends/s (p50 ${max.measured.p50} ms, p99 ${max.measured.p99} ms)`);
      for (const fraction of FRACTIONS) {
        const rate = Math.round(maxRate * fraction);
        const settled = await settle(server.url);
        const r = await paced(server.url, rate, config.seconds);
        log(`  ${fraction * 100}%: ${rate}/s asked, ${Math.round(r.achieved)}/s answered, p50 ${r.p50.toFixed(1)} ms, p99 ${r.p99.toFixed(1)} ms, ${r.failed} failed; the client's own event-loop delay p99 ${r.clientDelayP99.toFixed(1)} ms, max ${r.clientDelayMax.toFixed(0)} ms; the projections caught up ${settled.toFixed(1)} s before it`);
        const judged = fraction === 0.5;
        rows.push([`${fraction * 100}% of the maximum (${rate}/s)`, latencyCell(r),
          judged ? `p99 ≤ ${TARGET_P99_MS} ms` : 'reported', judged ? judge(r, TARGET_P99_MS) : '']);
      }
    } finally {
      await server.stop();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  if (process.env.BENCH_LATENCY_BUSY !== '0' && process.env.BENCH_LATENCY_PROJECTIONS !== 'None') {
    rows.push(await whileTwentyCatchUp(config));
    rows.push(await duringScavenge(config));
  }
  log('\nResults');
  log(`| single-event appends, paced (maximum ${Math.round(maxRate)}/s) | latency | target | result |\n| --- | --- | --- | --- |`);
  for (const row of rows) log(`| ${row.join(' | ')} |`);
}

main().catch((err) => {
  process.stderr.write(`latency bench failed: ${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
