import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startLocalCluster, type LocalNode } from '../src/cli/local-cluster.js';
import { allRecords, startWriters, streamIds } from './cluster-writers.js';
import { freePort } from './processes.js';

// `npm run soak:cluster`: a three-node cluster under 32 writers whose leader is SIGKILLed every
// SOAK_INTERVAL_SECONDS (8) for SOAK_CYCLES (20) cycles, the killed node started again each
// time. At the end every writer's stream must hold exactly the events it got 201 for, in
// order, on every node, and the nodes' $all must be the same record for record. Prints the
// failover times (kill → first acknowledged write sent after it) and exits 1 on any mismatch.

const log = (line: string) => process.stdout.write(`${line}\n`);
const cycles = Number(process.env.SOAK_CYCLES ?? 20);
const intervalMs = Number(process.env.SOAK_INTERVAL_SECONDS ?? 8) * 1000;

function alive(n: LocalNode): boolean {
  return n.child !== undefined && n.child.exitCode === null && n.child.signalCode === null;
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(process.env.BENCH_DATA_DIR || tmpdir(), 'svc-soak-cluster-'));
  const ports = await Promise.all(Array.from({ length: 8 }, () => freePort()));
  const cluster = await startLocalCluster({
    dir, httpPorts: ports.slice(0, 3), intPorts: ports.slice(3, 6), etcdPorts: [ports[6], ports[7]], stdio: 'files',
    args: ['--log-level', 'warn'],
  });
  let failed = true;
  try {
    await cluster.leader();
    const writers = startWriters(() => cluster.nodes.filter(alive).map((n) => n.url), 32);
    const failovers: number[] = [];
    for (let i = 0; i < cycles; i++) {
      await new Promise((r) => setTimeout(r, intervalMs));
      const leader = await cluster.leader();
      const killedAt = Date.now();
      await leader.kill();
      failovers.push(await writers.firstAckAfter(killedAt) - killedAt);
      await leader.start();
      log(`cycle ${i + 1}/${cycles}: killed ${leader.name}, first acknowledged write after ${failovers[i]} ms; ${writers.acked} acknowledged so far`);
    }
    const results = await writers.stop();
    await cluster.leader();
    // Let the last restarted node catch up, then compare.
    await new Promise((r) => setTimeout(r, 3000));
    const problems = [...results.unexpected];
    for (const node of cluster.nodes) {
      for (const [stream, acked] of results.acknowledged) {
        const ids = await streamIds(node.url, stream);
        if (JSON.stringify(ids) !== JSON.stringify(acked)) problems.push(`${stream} on ${node.name}: ${ids.length} events, ${acked.length} acknowledged`);
      }
    }
    const logs = await Promise.all(cluster.nodes.map((n) => allRecords(n.url)));
    for (let i = 1; i < logs.length; i++) {
      if (JSON.stringify(logs[i]) !== JSON.stringify(logs[0])) problems.push(`$all of ${cluster.nodes[i].name} differs from ${cluster.nodes[0].name}'s`);
    }
    const sorted = [...failovers].sort((a, b) => a - b);
    log(`soak: ${cycles} leader kills, ${results.ackTimes.length} events acknowledged by 32 writers, `
      + `failover median ${sorted[Math.floor(sorted.length / 2)]} ms, max ${sorted[sorted.length - 1]} ms; `
      + `${problems.length === 0 ? 'every acknowledged event on every node exactly once, $all identical' : `${problems.length} PROBLEMS`}`);
    for (const p of problems.slice(0, 20)) log(`  ${p}`);
    failed = problems.length > 0;
  } finally {
    await cluster.stop();
    // The nodes' logs stay (in the data directory) when something went wrong.
    if (failed) log(`logs and data kept in ${dir}`);
    else rmSync(dir, { recursive: true, force: true });
  }
  process.exit(failed ? 1 : 0);
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
