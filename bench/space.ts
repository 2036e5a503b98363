import { cpSync, existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { ExpectedVersion, Store } from '../src/store/index.js';
import { Scavenger } from '../src/scavenge/scavenger.js';
import { rocksExperiment } from '../src/store/rocks.js';
import { removalExperiment } from '../src/store/writer.js';
import { build, CHUNK, event, EVENTS } from './scavenge.js';

// The space bench: how promptly RocksDB gives back the space a scavenge frees. The scavenge
// bench's log (BENCH_SCAVENGE_EVENTS events, half removable) is built once, copied per variant,
// and scavenged (threads=1); each variant prints RocksDB's total-sst-files-size, its
// estimate-live-data-size and `du -sb` of the store's directory (without the scavenge's own state
// under scavenging/) right after the scavenge, after 10 s idle, after appending about 50 MB of
// new events, and after a close and reopen. BENCH_SPACE_VARIANTS picks variants (comma
// separated, names below); BENCH_SPACE_SOURCE keeps the built log in that directory across runs;
// BENCH_SPACE_APPEND=1 measures in-process append throughput on an empty store per variant instead.

interface Variant { open: Record<string, unknown>; minRangeRecords: number; indexRanges?: boolean; forceCompaction?: boolean }

const VARIANTS: Record<string, Variant> = {
  today: { open: {}, minRangeRecords: Infinity },
  level: { open: { compaction: 'level' }, minRangeRecords: Infinity },
  level64: { open: { compaction: 'level', memtableMemoryBudget: 64 * 1024 * 1024 }, minRangeRecords: Infinity },
  level16: { open: { compaction: 'level', memtableMemoryBudget: 16 * 1024 * 1024 }, minRangeRecords: Infinity },
  level32: { open: { compaction: 'level', memtableMemoryBudget: 32 * 1024 * 1024 }, minRangeRecords: Infinity },
  universal: { open: { compaction: 'universal' }, minRangeRecords: Infinity },
  compensated: { open: { compactionPriority: 'byCompensatedSize' }, minRangeRecords: Infinity },
  range: { open: {}, minRangeRecords: 2 },
  filler: { open: {}, minRangeRecords: Infinity, forceCompaction: true },
  'range2+filler': { open: {}, minRangeRecords: 2, indexRanges: true, forceCompaction: true },
  range4: { open: {}, minRangeRecords: 4 },
  range2: { open: {}, minRangeRecords: 2, indexRanges: true },
  'range2+level32': { open: { compaction: 'level', memtableMemoryBudget: 32 * 1024 * 1024 }, minRangeRecords: 2, indexRanges: true },
  'range2+level64': { open: { compaction: 'level', memtableMemoryBudget: 64 * 1024 * 1024 }, minRangeRecords: 2, indexRanges: true },
  'range+level': { open: { compaction: 'level' }, minRangeRecords: 2 },
  'range+level64': { open: { compaction: 'level', memtableMemoryBudget: 64 * 1024 * 1024 }, minRangeRecords: 2 },
  'range+level32': { open: { compaction: 'level', memtableMemoryBudget: 32 * 1024 * 1024 }, minRangeRecords: 2 },
};

const APPEND_BYTES = Number(process.env.BENCH_SPACE_APPEND_MB ?? 50) * 1024 * 1024;
const IDLE_MS = Number(process.env.BENCH_SPACE_IDLE_SECONDS ?? 10) * 1000;
const log = (line: string) => process.stdout.write(`${line}\n`);
const quiet = pino({ level: 'silent' });

function use(variant: Variant): void {
  rocksExperiment.open = variant.open;
  removalExperiment.minRangeRecords = variant.minRangeRecords;
  removalExperiment.indexRanges = variant.indexRanges ?? false;
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

async function variantRun(source: string, name: string, variant: Variant): Promise<void> {
  use(variant);
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-space-'));
  cpSync(source, dir, { recursive: true });
  let store = await Store.open({ dir, inMemory: false, chunkSize: CHUNK });
  const scavenger = new Scavenger(store, {
    stateDir: join(dir, 'scavenging'), chunkSize: CHUNK, disableMerging: false, historyMaxAgeDays: 30,
    backendPageSize: 16 * 1024, backendCacheSize: 64 * 1024 * 1024, streamCacheCapacity: 100_000, nodeEndpoint: () => 'bench',
  }, quiet);
  await scavenger.open();
  const records = store.recordCount;
  const before = measure(store, dir);
  const started = performance.now();
  scavenger.start({ threads: 1, threshold: 0, throttlePercent: 100, syncOnly: false });
  let progress = scavenger.current()!.progress;
  while (scavenger.current()) {
    progress = scavenger.current()!.progress;
    await sleep(20);
  }
  const seconds = (performance.now() - started) / 1000;
  const result = scavenger.last()!.result;
  let forced = '';
  if (variant.forceCompaction) {
    const t = performance.now();
    const cpu = process.cpuUsage();
    const flushes = await forceCompaction(store);
    const used = process.cpuUsage(cpu);
    forced = `; forced ${flushes} flushes in ${((performance.now() - t) / 1000).toFixed(2)} s (${((used.user + used.system) / 1000).toFixed(0)} ms CPU of this process)`;
  }
  const after = measure(store, dir);
  const removed = records - store.recordCount;
  await sleep(IDLE_MS);
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
  log(`variant ${name} (${JSON.stringify(variant.open)}${Number.isFinite(variant.minRangeRecords) ? `, ${variant.indexRanges ? 'log and index' : 'log'} range deletes for runs >= ${variant.minRangeRecords}` : ''}):`
    + ` scavenge ${result} in ${seconds.toFixed(1)} s${forced}, ${removed.toLocaleString('en-US')} records removed, ${mb(progress.spaceSaved)} MB logical;`
    + ` then ${mb(APPEND_BYTES)} MB appended at ${Math.round(rate).toLocaleString('en-US')} events/s (MB below)`);
  log(`  ${show('before', before)}`);
  log(`  ${show('right after', after)}`);
  log(`  ${show(`after ${IDLE_MS / 1000} s idle`, idle)}`);
  log(`  ${show('after appending', appended)}`);
  log(`  ${show(`  + ${IDLE_MS / 1000} s idle`, appendedIdle)}`);
  log(`  ${show('after reopen', reopened)}`);
  log(`  ${show(`  + ${IDLE_MS / 1000} s idle`, reopenedIdle)}`);
}

const FILLER = Buffer.alloc(80 * 1024 * 1024);
const FILLER_KEY = Buffer.from('\x05space-bench-filler', 'latin1');

/** EXPERIMENT: fills the memtable with one large zero value (and deletes it) until RocksDB flushes; repeats until L0 has 4 files (the compaction trigger). */
async function forceCompaction(store: Store): Promise<number> {
  const rocks = (store as unknown as { rocks: { property(name: string): string; writeUnsynced(ops: unknown[]): void } }).rocks;
  let flushes = 0;
  while (Number(rocks.property('rocksdb.num-files-at-level0')) < 4 && flushes < 4) {
    const active = Number(rocks.property('rocksdb.cur-size-active-mem-table'));
    rocks.writeUnsynced([[FILLER_KEY, FILLER.subarray(0, Math.max(1024, 72 * 1024 * 1024 - active))]]);
    rocks.writeUnsynced([[FILLER_KEY]]);
    flushes++;
    while (Number(rocks.property('rocksdb.num-immutable-mem-table')) > 0 || rocks.property('rocksdb.mem-table-flush-pending') !== '0') await sleep(5);
  }
  return flushes;
}

/** Append throughput on an empty store: bulk (ten events an append, 200 in flight) and single events (100 in flight). */
async function appendRun(name: string, variant: Variant): Promise<void> {
  use(variant);
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-space-append-'));
  const store = await Store.open({ dir, inMemory: false, chunkSize: CHUNK });
  const bulk = await appendBytes(store, Number(process.env.BENCH_SPACE_APPEND_BULK_MB ?? 150) * 1024 * 1024, 'bulk');
  const singles = Number(process.env.BENCH_SPACE_APPEND_SINGLES ?? 30_000);
  const latencies: number[] = [];
  const started = performance.now();
  let next = 0;
  await Promise.all(Array.from({ length: 100 }, async () => {
    while (next < singles) {
      const i = next++;
      const t = performance.now();
      await store.append(`single-${i % 1000}`, ExpectedVersion.any, [event(i)]);
      latencies.push(performance.now() - t);
    }
  }));
  const singleRate = singles / ((performance.now() - started) / 1000);
  latencies.sort((a, b) => a - b);
  const f = measure(store, dir);
  await store.close();
  rmSync(dir, { recursive: true, force: true });
  log(`append ${name.padEnd(14)} bulk ${Math.round(bulk).toLocaleString('en-US').padStart(8)} events/s; single-event appends (100 in flight) `
    + `${Math.round(singleRate).toLocaleString('en-US').padStart(7)}/s, p50 ${latencies[Math.floor(latencies.length / 2)].toFixed(2)} ms, `
    + `p99 ${latencies[Math.floor(latencies.length * 0.99)].toFixed(2)} ms; then sst ${mb(f.sst)} MB, files ${f.levels}`);
}

async function main(): Promise<void> {
  const names = (process.env.BENCH_SPACE_VARIANTS ?? 'today,level,level32,range,range+level32').split(',');
  for (const n of names) if (!VARIANTS[n]) throw new Error(`unknown variant ${n}; known: ${Object.keys(VARIANTS).join(', ')}`);
  if (process.env.BENCH_SPACE_APPEND === '1') {
    for (const n of names) await appendRun(n, VARIANTS[n]);
    return;
  }
  const keep = process.env.BENCH_SPACE_SOURCE;
  const source = keep ?? mkdtempSync(join(tmpdir(), 'svc-bench-space-src-'));
  if (!keep || !existsSync(join(source, 'CURRENT'))) {
    use(VARIANTS.today);
    const started = performance.now();
    await build(source);
    log(`space bench: ${EVENTS.toLocaleString('en-US')} events built in ${((performance.now() - started) / 1000).toFixed(1)} s (today's options)`);
  }
  for (const n of names) await variantRun(source, n, VARIANTS[n]);
  if (!keep) rmSync(source, { recursive: true, force: true });
}

await main();
