import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { benchConfig } from './config.js';
import { failures, measure, type Measurement } from './load.js';
import { freePort, NODE_MAIN, startServer } from './processes.js';
import { AUTHORIZATION, EVENTS_JSON, SCENARIOS } from './workload.js';
import { startLocalCluster, type LocalCluster } from '../src/cli/local-cluster.js';

// `npm run bench:cluster`: append throughput and p99 of a three-node cluster (its leader takes
// the load; each answer waits for a quorum) against a single node, in the same run on the same
// machine (1 event/request and 100 events/request), and failover: the leader SIGKILLed under 8
// writers, to the first acknowledged write sent after the kill. BENCH_SECONDS,
// BENCH_WARMUP_SECONDS and BENCH_CONNECTIONS as for `npm run bench`; BENCH_FAILOVERS cycles (3).

const log = (line: string) => process.stdout.write(`${line}\n`);
const scenarios = [SCENARIOS.a, SCENARIOS.b];

async function benchSingle(config: ReturnType<typeof benchConfig>): Promise<Measurement[]> {
  const dir = mkdtempSync(join(config.dataParent, 'svc-bench-single-'));
  const server = await startServer('node', NODE_MAIN, ['--db', dir, '--log-level', 'warn', '--run-projections', 'None']);
  try {
    const out: Measurement[] = [];
    for (const s of scenarios) {
      log(`  single node (${s.id}) ${s.title} ...`);
      const r = await measure(server.url, s, { ...config, pid: server.pid });
      if (failures(r.measured) + r.warmupFailures > 0) log(`  !!! ${failures(r.measured) + r.warmupFailures} requests FAILED`);
      out.push(r.measured);
    }
    return out;
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function startBenchCluster(dir: string): Promise<LocalCluster> {
  const ports = await Promise.all(Array.from({ length: 8 }, () => freePort()));
  return startLocalCluster({
    dir, httpPorts: ports.slice(0, 3), intPorts: ports.slice(3, 6), etcdPorts: [ports[6], ports[7]], stdio: 'ignore',
    args: ['--log-level', 'warn', '--run-projections', 'None'],
  });
}

async function benchCluster(config: ReturnType<typeof benchConfig>, cluster: LocalCluster): Promise<Measurement[]> {
  const leader = await cluster.leader();
  const out: Measurement[] = [];
  for (const s of scenarios) {
    log(`  cluster leader (${s.id}) ${s.title} ...`);
    const r = await measure(leader.url, s, { ...config, pid: leader.child!.pid });
    if (failures(r.measured) + r.warmupFailures > 0) log(`  !!! ${failures(r.measured) + r.warmupFailures} requests FAILED`);
    out.push(r.measured);
  }
  return out;
}

/** Kills the leader under 8 writers; ms from the kill to the first 201 of a request sent after it. */
async function failover(cluster: LocalCluster): Promise<number> {
  const leader = await cluster.leader();
  let stopping = false;
  let firstAfterKill: number | undefined;
  let killedAt = Infinity;
  const writers = Array.from({ length: 8 }, async (_, i) => {
    let turn = i;
    while (!stopping) {
      const alive = cluster.nodes.filter((n) => n.child && n.child.exitCode === null && n.child.signalCode === null);
      const target = alive[turn++ % alive.length];
      const sent = Date.now();
      try {
        const res = await fetch(`${target.url}/streams/failover-${i}`, {
          method: 'POST', signal: AbortSignal.timeout(5000),
          headers: { Authorization: AUTHORIZATION, 'Content-Type': EVENTS_JSON },
          body: JSON.stringify([{ eventId: randomUUID(), eventType: 'written', data: {} }]),
        });
        await res.arrayBuffer();
        if (res.status === 201 && sent > killedAt && firstAfterKill === undefined) firstAfterKill = Date.now();
      } catch { /* the node went away: the next one */ }
      if (firstAfterKill === undefined && sent > killedAt) await new Promise((r) => setTimeout(r, 20));
    }
  });
  await new Promise((r) => setTimeout(r, 1000));
  killedAt = Date.now();
  await leader.kill();
  while (firstAfterKill === undefined && Date.now() - killedAt < 30_000) await new Promise((r) => setTimeout(r, 10));
  stopping = true;
  await Promise.all(writers);
  await leader.start();
  if (firstAfterKill === undefined) throw new Error('no write was acknowledged within 30 s of the kill');
  return firstAfterKill - killedAt;
}

function row(label: string, m: Measurement): string {
  return `| ${label} | ${Math.round(m.reqPerSec)} | ${Math.round(m.eventsPerSec)} | ${m.p50} | ${m.p99} | ${m.non2xx + m.errors} |`;
}

async function main(): Promise<void> {
  const config = benchConfig();
  const cycles = Number(process.env.BENCH_FAILOVERS ?? 3);
  log(`bench:cluster: ${config.seconds}s per run (+${config.warmupSeconds}s warm-up), ${config.connections} connections, ${cycles} failovers`);
  const single = await benchSingle(config);
  const dir = mkdtempSync(join(config.dataParent, 'svc-bench-cluster-'));
  const cluster = await startBenchCluster(dir);
  try {
    const clustered = await benchCluster(config, cluster);
    const failovers: number[] = [];
    for (let i = 0; i < cycles; i++) {
      failovers.push(await failover(cluster));
      log(`  failover ${i + 1}: ${failovers[i]} ms`);
    }
    log('\n| run | req/s | events/s | p50 ms | p99 ms | failed |\n|---|---|---|---|---|---|');
    scenarios.forEach((s, i) => {
      log(row(`single node, ${s.title}`, single[i]));
      log(row(`3-node cluster, ${s.title}`, clustered[i]));
    });
    scenarios.forEach((s, i) => log(`cluster/single (${s.title}): ${(clustered[i].eventsPerSec / single[i].eventsPerSec).toFixed(2)}`));
    const sorted = [...failovers].sort((a, b) => a - b);
    log(`failover (leader SIGKILL → first acknowledged write sent after it): ${failovers.join(', ')} ms; median ${sorted[Math.floor(sorted.length / 2)]} ms`);
  } finally {
    await cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
