import { Agent, request } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NODE_MAIN, startServer } from './processes.js';
import { AUTHORIZATION, EVENTS_JSON, appendBody } from './workload.js';

// The backup's cost (issue 14): a node (child process, real fsync) holding BENCH_BACKUP_EVENTS
// events (200,000) in chunks of BENCH_BACKUP_CHUNK_SIZE bytes (4 MiB), appended to at a paced BENCH_BACKUP_RATE single-event appends a second (500),
// each timed from when it was due. First BENCH_BACKUP_SECONDS (8) of those appends alone, then
// the same load with a full backup taken meanwhile, then with a differential one (nothing but the
// load's own appends changed). Prints the backup's MB/s and the appends' p50/p99 during each.
// Then (issue 33) a node started on a restore of that backup against one started on the original
// data directory, alternately, twice each: the start until a read answers, and a read of the
// whole of $all in pages of 1,000; target: the restored node as fast as the original (ratio ≥ 0.90
// for the noise of one run).
// Run: npm run bench:backup

const EVENTS = Number(process.env.BENCH_BACKUP_EVENTS ?? 200_000);
const RATE = Number(process.env.BENCH_BACKUP_RATE ?? 500);
const SECONDS = Number(process.env.BENCH_BACKUP_SECONDS ?? 8);
/** Small chunks, so that a differential backup has complete chunks to skip (the default 256 MiB would hold the whole log). */
const CHUNK_SIZE = Number(process.env.BENCH_BACKUP_CHUNK_SIZE ?? 4 * 1024 * 1024);
const SEED_BATCH = 100;
/** Restored ÷ original, for the start and the read of $all: the restored node as fast (within one run's noise). */
const RESTORED_TARGET = 0.9;
const log = (line: string) => process.stdout.write(`${line}\n`);

function post(url: string, path: string, body: string, agent: Agent): Promise<{ status: number; text: string }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request({
      agent, hostname, port, method: 'POST', path,
      headers: { Authorization: AUTHORIZATION, 'Content-Type': path.startsWith('/admin') ? 'application/json' : EVENTS_JSON, 'Content-Length': Buffer.byteLength(body) },
    }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => { text += d; });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function seed(url: string): Promise<void> {
  const agent = new Agent({ keepAlive: true, maxSockets: 8 });
  let next = 0;
  const started = performance.now();
  await Promise.all(Array.from({ length: 8 }, async () => {
    while (next < EVENTS / SEED_BATCH) {
      const n = next++;
      const res = await post(url, `/streams/bench-backup-${n % 1000}`, appendBody(SEED_BATCH, n * SEED_BATCH), agent);
      if (res.status !== 201) throw new Error(`seed append answered ${res.status}`);
    }
  }));
  agent.destroy();
  log(`seeded ${EVENTS} events in ${((performance.now() - started) / 1000).toFixed(1)} s`);
}

interface Sample { due: number; ms: number }

/** Single-event appends at RATE/s for `seconds`, evenly, each timed from its due time; `during` runs meanwhile. */
async function pacedAppends(url: string, seconds: number, during?: () => Promise<void>): Promise<{ samples: Sample[]; failed: number }> {
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });
  const samples: Sample[] = [];
  let failed = 0;
  let sent = 0;
  const start = performance.now();
  const end = start + seconds * 1000;
  const pending: Promise<void>[] = [];
  const work = during ? (async () => { await new Promise((r) => setTimeout(r, 1000)); await during(); })() : Promise.resolve();
  await new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      const now = Math.min(performance.now(), end);
      while (start + (sent * 1000) / RATE <= now) {
        const due = start + (sent * 1000) / RATE;
        const n = sent++;
        pending.push(post(url, `/streams/bench-backup-live-${n % 100}`, appendBody(1, n), agent).then((res) => {
          if (res.status === 201) samples.push({ due, ms: performance.now() - due });
          else failed++;
        }, () => { failed++; }));
      }
      if (now >= end) {
        clearInterval(timer);
        resolve();
      }
    }, 1);
  });
  await work;
  await Promise.all(pending);
  agent.destroy();
  return { samples, failed };
}

function percentile(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

function summary(samples: Sample[], from = -Infinity, to = Infinity): string {
  const ms = samples.filter((s) => s.due >= from && s.due <= to).map((s) => s.ms);
  return `${ms.length} appends, p50 ${percentile(ms, 50).toFixed(1)} ms, p99 ${percentile(ms, 99).toFixed(1)} ms, max ${Math.max(...ms).toFixed(1)} ms`;
}

async function withBackup(url: string, to: string, differential: boolean): Promise<void> {
  let window = { from: 0, to: 0 };
  let result: { bytes: number; seconds: number; copied: number; chunks: string[] } | undefined;
  const { samples, failed } = await pacedAppends(url, SECONDS, async () => {
    const agent = new Agent({ keepAlive: false });
    window = { from: performance.now(), to: 0 };
    const res = await post(url, '/admin/backup', JSON.stringify({ to, differential }), agent);
    window.to = performance.now();
    if (res.status !== 200) throw new Error(`backup answered ${res.status} ${res.text}`);
    result = JSON.parse(res.text);
  });
  const r = result!;
  const mb = r.bytes / 1024 / 1024;
  log(`${differential ? 'differential' : 'full'} backup: ${mb.toFixed(1)} MB written (${r.copied} of ${r.chunks.length} chunk files) in ${r.seconds.toFixed(2)} s`
    + ` = ${(mb / r.seconds).toFixed(1)} MB/s; appends meanwhile: ${summary(samples, window.from, window.to)}; whole run: ${summary(samples)}, ${failed} failed`);
}

/** A node on `db`: seconds until a read of $all answers, and events/s reading the whole of $all forward in pages of 1,000. */
async function startAndRead(db: string): Promise<{ startSeconds: number; readPerSecond: number }> {
  const started = performance.now();
  const server = await startServer('node', NODE_MAIN, ['--db', db, '--run-projections', 'None', '--log-level', 'warn', '--chunk-size', String(CHUNK_SIZE)]);
  try {
    const headers = { Authorization: AUTHORIZATION, Accept: 'application/vnd.eventstore.atom+json' };
    for (;;) {
      const res = await fetch(`${server.url}/streams/%24all/head/backward/1`, { headers });
      if (res.status === 200) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    const startSeconds = (performance.now() - started) / 1000;
    const t = performance.now();
    let events = 0;
    let path = '/streams/%24all/00000000000000000000000000000000/forward/1000';
    for (;;) {
      const res = await fetch(`${server.url}${path}?embed=body`, { headers });
      if (res.status !== 200) throw new Error(`reading $all: ${res.status}`);
      const page = await res.json() as { entries: unknown[]; links: { relation: string; uri: string }[] };
      events += page.entries.length;
      const previous = page.links.find((l) => l.relation === 'previous');
      if (page.entries.length === 0 || !previous) break;
      path = new URL(previous.uri).pathname;
    }
    if (events < EVENTS) throw new Error(`read ${events} events of $all, expected at least ${EVENTS}`);
    return { startSeconds, readPerSecond: events / ((performance.now() - t) / 1000) };
  } finally {
    await server.stop();
  }
}

/** The original data directory and a restore of the full backup in `from`, started alternately. */
async function restoredAgainstOriginal(db: string, from: string): Promise<void> {
  const restored = mkdtempSync(join(tmpdir(), 'svc-bench-backup-restored-'));
  try {
    const { spawnSync } = await import('node:child_process');
    const run = spawnSync(process.execPath, [NODE_MAIN, 'restore', '--from', from, '--db', restored], { encoding: 'utf8' });
    if (run.status !== 0) throw new Error(`restore failed: ${run.stderr}`);
    const best = { original: { startSeconds: Infinity, readPerSecond: 0 }, restored: { startSeconds: Infinity, readPerSecond: 0 } };
    for (let round = 0; round < 2; round++) {
      for (const [name, dir] of [['original', db], ['restored', restored]] as const) {
        const r = await startAndRead(dir);
        best[name].startSeconds = Math.min(best[name].startSeconds, r.startSeconds);
        best[name].readPerSecond = Math.max(best[name].readPerSecond, r.readPerSecond);
      }
    }
    const startRatio = best.original.startSeconds / best.restored.startSeconds;
    const readRatio = best.restored.readPerSecond / best.original.readPerSecond;
    const verdict = (r: number) => (r >= RESTORED_TARGET ? 'PASS' : 'MISS');
    log(`\n| node on | start to a read (s) | $all read (events/s) |\n| --- | ---: | ---: |`);
    log(`| the original data directory | ${best.original.startSeconds.toFixed(2)} | ${Math.round(best.original.readPerSecond).toLocaleString('en-US')} |`);
    log(`| a restore of its full backup | ${best.restored.startSeconds.toFixed(2)} | ${Math.round(best.restored.readPerSecond).toLocaleString('en-US')} |`);
    log(`restored ÷ original (best of 2 each, faster is higher): start ${startRatio.toFixed(2)} ${verdict(startRatio)}, read ${readRatio.toFixed(2)} ${verdict(readRatio)} (target ≥ ${RESTORED_TARGET})`);
  } finally {
    rmSync(restored, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const db = mkdtempSync(join(tmpdir(), 'svc-bench-backup-db-'));
  const to = mkdtempSync(join(tmpdir(), 'svc-bench-backup-to-'));
  const server = await startServer('node', NODE_MAIN, ['--db', db, '--run-projections', 'None', '--log-level', 'warn', '--chunk-size', String(CHUNK_SIZE)]);
  try {
    await seed(server.url);
    const alone = await pacedAppends(server.url, SECONDS);
    log(`appends alone at ${RATE}/s: ${summary(alone.samples)}, ${alone.failed} failed`);
    await withBackup(server.url, to, false);
    await withBackup(server.url, to, true);
  } finally {
    await server.stop();
  }
  try {
    await restoredAgainstOriginal(db, to);
  } finally {
    rmSync(db, { recursive: true, force: true });
    rmSync(to, { recursive: true, force: true });
  }
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack}\n`);
  process.exit(1);
});
