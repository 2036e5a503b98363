import { cpSync, existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { ExpectedVersion, Store } from '../src/store/index.js';
import { SPACE_RECLAIM } from '../src/store/space-reclaim.js';
import { build, CHUNK, event, EVENTS, liveAppender, openScavenger } from './scavenge.js';

// The space bench: how promptly RocksDB gives back the space a scavenge frees. The scavenge
// bench's log (BENCH_SCAVENGE_EVENTS events, half removable) is built once, copied per variant,
// and scavenged (threads=1); each variant prints RocksDB's total-sst-files-size, its
// estimate-live-data-size and `du -sb` of the store's directory (without the scavenge's own state
// under scavenging/) right after the scavenge, after 10 s idle, after appending about 50 MB of
// new events, and after a close and reopen, with the latency of 200 single-event appends a second
// made during the scavenge and the 10 s after it. Variants: `off` (the writer never forces the
// space back: RocksDB's own flushes and compactions only) and `reclaim` (the writer's
// Rocks.reclaimSpace a few seconds after the last removal). BENCH_SPACE_VARIANTS picks them
// (comma separated); BENCH_SPACE_SOURCE keeps the built log in that directory across runs. The
// variants measured before (RocksDB's compaction presets, range deletes of the removed log and
// index keys, a forced flush from the bench) are in this file's history (the commit before the
// one that added Rocks.reclaimSpace), with their hooks.

interface Variant { reclaim: boolean }

const VARIANTS: Record<string, Variant> = {
  off: { reclaim: false },
  reclaim: { reclaim: true },
};

const APPEND_BYTES = Number(process.env.BENCH_SPACE_APPEND_MB ?? 50) * 1024 * 1024;
const IDLE_MS = Number(process.env.BENCH_SPACE_IDLE_SECONDS ?? 10) * 1000;
const log = (line: string) => process.stdout.write(`${line}\n`);
const quiet = pino({ level: 'silent' });

const RECLAIM_DEFAULT = { ...SPACE_RECLAIM };

function use(variant: Variant): void {
  SPACE_RECLAIM.minRemovedBytes = variant.reclaim ? RECLAIM_DEFAULT.minRemovedBytes : Infinity;
}

function mb(bytes: number): string {
  return (bytes / 1024 / 1024).toFixed(1);
}

interface Figures { sst: number; live: number; du: number; wal: number; mem: number; l0: number; levels: string }

function du(dir: string, exclude: string[]): number {
  const out = execFileSync('du', ['-sb', ...exclude.map((e) => `--exclude=${e}`), dir], { encoding: 'utf8' });
  return Number(out.split(/\s/)[0]);
}

function measure(store: Store, dir: string): Figures {
  const rocks = (store as unknown as { rocks: { property(name: string): string } }).rocks;
  const wal = readdirSync(dir).filter((f) => f.endsWith('.log')).reduce((sum, f) => sum + statSync(join(dir, f)).size, 0);
  const files = rocks.property('rocksdb.levelstats').split('\n').slice(2).map((l) => l.trim().split(/\s+/))
    .filter((c) => c.length >= 2 && Number(c[1]) > 0).map((c) => `L${c[0]}:${c[1]}`).join(' ');
  return {
    sst: Number(rocks.property('rocksdb.total-sst-files-size')),
    live: Number(rocks.property('rocksdb.estimate-live-data-size')),
    du: du(dir, ['scavenging']),
    wal,
    mem: Number(rocks.property('rocksdb.cur-size-all-mem-tables')),
    l0: Number(rocks.property('rocksdb.num-files-at-level0')),
    levels: files,
  };
}

function show(label: string, f: Figures): string {
  return `${label.padEnd(22)} sst ${mb(f.sst).padStart(6)}  live ${mb(f.live).padStart(6)}  du ${mb(f.du).padStart(6)}  (wal ${mb(f.wal)}, memtables ${mb(f.mem)}, files ${f.levels})`;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Appends about `bytes` of new events, ten per append over 1,000 new streams, 200 appends in flight; returns events/s. */
async function appendBytes(store: Store, bytes: number, tag: string): Promise<number> {
  const perEvent = 180; // what one bench event takes in the log
  const events = Math.ceil(bytes / perEvent / 10) * 10;
  const started = performance.now();
  const inFlight: Promise<unknown>[] = [];
  for (let i = 0; i < events / 10; i++) {
    inFlight.push(store.append(`${tag}-${i % 1000}`, ExpectedVersion.any, Array.from({ length: 10 }, (_, j) => event(i * 10 + j))));
    if (inFlight.length >= 200) await Promise.all(inFlight.splice(0));
  }
  await Promise.all(inFlight);
  return events / ((performance.now() - started) / 1000);
}

function percentiles(values: number[]): string {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (p: number) => (sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]);
  return `${sorted.length} appends, p50 ${at(0.5).toFixed(2)} ms, p99 ${at(0.99).toFixed(2)} ms, max ${at(1).toFixed(2)} ms`;
}

async function variantRun(source: string, name: string, variant: Variant): Promise<void> {
  use(variant);
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-space-'));
  cpSync(source, dir, { recursive: true });
  let store = await Store.open({ dir, inMemory: false, chunkSize: CHUNK });
  const scavenger = await openScavenger(store, dir, quiet);
  const records = store.recordCount;
  const before = measure(store, dir);
  // 200 single-event appends a second from the scavenge's start to the end of the idle time after it.
  const appender = liveAppender(store);
  const started = performance.now();
  scavenger.start({ threads: 1, threshold: 0, throttlePercent: 100, syncOnly: false, startFromChunk: 0 });
  let progress = scavenger.current()!.progress;
  while (scavenger.current()) {
    progress = scavenger.current()!.progress;
    await sleep(20);
  }
  const seconds = (performance.now() - started) / 1000;
  const result = scavenger.last()!.result;
  const after = measure(store, dir);
  const removed = records - store.recordCount;
  const duringScavenge = appender.take();
  await sleep(IDLE_MS);
  const afterIdle = await appender.stop();
  const idle = measure(store, dir);
  const rate = await appendBytes(store, APPEND_BYTES, 'new');
  const appended = measure(store, dir);
  await sleep(IDLE_MS);
  const appendedIdle = measure(store, dir);
  await scavenger.close();
  await store.close();
  store = await Store.open({ dir, inMemory: false, chunkSize: CHUNK });
  const reopened = measure(store, dir);
  await sleep(IDLE_MS);
  const reopenedIdle = measure(store, dir);
  await store.close();
  rmSync(dir, { recursive: true, force: true });
  log(`variant ${name}: scavenge ${result} in ${seconds.toFixed(1)} s, ${removed.toLocaleString('en-US')} records removed, ${mb(progress.spaceSaved)} MB logical;`
    + ` then ${mb(APPEND_BYTES)} MB appended at ${Math.round(rate).toLocaleString('en-US')} events/s (MB below)`);
  log(`  ${show('before', before)}`);
  log(`  ${show('right after', after)}`);
  log(`  ${show(`after ${IDLE_MS / 1000} s idle`, idle)}`);
  log(`  ${show('after appending', appended)}`);
  log(`  ${show(`  + ${IDLE_MS / 1000} s idle`, appendedIdle)}`);
  log(`  ${show('after reopen', reopened)}`);
  log(`  ${show(`  + ${IDLE_MS / 1000} s idle`, reopenedIdle)}`);
  log(`  appends (200/s, in process) during the scavenge: ${percentiles(duringScavenge)}; in the ${IDLE_MS / 1000} s after it: ${percentiles(afterIdle)}`);
}

async function main(): Promise<void> {
  const names = (process.env.BENCH_SPACE_VARIANTS ?? 'off,reclaim').split(',');
  for (const n of names) if (!VARIANTS[n]) throw new Error(`unknown variant ${n}; known: ${Object.keys(VARIANTS).join(', ')}`);
  const keep = process.env.BENCH_SPACE_SOURCE;
  const source = keep ?? mkdtempSync(join(tmpdir(), 'svc-bench-space-src-'));
  if (!keep || !existsSync(join(source, 'CURRENT'))) {
    const started = performance.now();
    await build(source);
    log(`space bench: ${EVENTS.toLocaleString('en-US')} events built in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  }
  for (const n of names) await variantRun(source, n, VARIANTS[n]);
  if (!keep) rmSync(source, { recursive: true, force: true });
}

await main();
