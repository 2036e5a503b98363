import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import pino from 'pino';
import { ExpectedVersion, METADATA_EVENT_TYPE, metastreamOf, newUuid, Store, type ProposedEvent } from '../src/store/index.js';
import { Scavenger } from '../src/scavenge/scavenger.js';
import type { ScavengeRequest } from '../src/scavenge/types.js';

// The scavenge bench (issue 12): a log of BENCH_SCAVENGE_EVENTS events (default 1,000,000) over
// streams of 100 events, half of them removable (every other stream soft-deleted, which keeps its
// last event). The same data is scavenged with threads=1, threads=4 and throttlePercent=50, while
// an appender writes 200 single-event appends per second and measures their latency. Reports log
// records covered per second (target ≥ 200,000 with threads=1), records removed, logical bytes
// freed, and RocksDB's on-disk figures before, right after, and after a reopen.
// BENCH_SCAVENGE_ONE_ONLY=1 runs only threads=1; BENCH_SCAVENGE_LOG=info shows the scavenge's log.

export const EVENTS = Number(process.env.BENCH_SCAVENGE_EVENTS ?? 1_000_000);
const PER_STREAM = 100;
// Chunks of 16 MB (the default is 256 MB) so that a million events make a dozen: threads have chunks to share.
export const CHUNK = 16 * 1024 * 1024;
const TARGET_EXAMINED_PER_SECOND = 200_000;
const log = (line: string) => process.stdout.write(`${line}\n`);
const quiet = pino({ level: process.env.BENCH_SCAVENGE_LOG ?? 'silent' });

export function event(i: number): ProposedEvent {
  return {
    eventId: newUuid(), eventType: 'Added', isJson: true,
    data: Buffer.from(`{"v":${i},"pad":"${'x'.repeat(100)}"}`), metadata: Buffer.alloc(0),
  };
}

/** Builds the bench's log in `dir` (also used by bench/space.ts). */
export async function build(dir: string): Promise<void> {
  const store = await Store.open({ dir, inMemory: false, chunkSize: CHUNK });
  const streams = EVENTS / PER_STREAM;
  const inFlight: Promise<unknown>[] = [];
  // Ten events per append, round-robin over the streams so every chunk mixes removable and kept records.
  for (let round = 0; round < PER_STREAM / 10; round++) {
    for (let s = 0; s < streams; s++) {
      inFlight.push(store.append(`s-${s}`, ExpectedVersion.any, Array.from({ length: 10 }, (_, j) => event(round * 10 + j))));
      if (inFlight.length >= 200) await Promise.all(inFlight.splice(0));
    }
  }
  await Promise.all(inFlight.splice(0));
  for (let s = 0; s < streams; s += 2) inFlight.push(store.deleteStream(`s-${s}`, ExpectedVersion.any, false));
  await Promise.all(inFlight);
  await store.close();
}

function mb(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

function percentile(sorted: number[], p: number): number {
  return sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];
}

/** A scavenger over `store` (in `dir`) with the node's default options, opened. */
export async function openScavenger(store: Store, dir: string, log = quiet): Promise<Scavenger> {
  const scavenger = new Scavenger(store, {
    stateDir: join(dir, 'scavenging'), chunkSize: CHUNK, disableMerging: false, historyMaxAgeDays: 30,
    backendPageSize: 16 * 1024, backendCacheSize: 64 * 1024 * 1024, streamCacheCapacity: 100_000, nodeEndpoint: () => 'bench',
  }, log);
  await scavenger.open();
  return scavenger;
}

/**
 * Single-event appends to `live`, one every 5 ms or so, until stopped: their latencies show what a
 * scavenge costs the writers beside it. `take` hands over the latencies so far and starts anew.
 */
export function liveAppender(store: Store): { take(): number[]; stop(): Promise<number[]> } {
  let latencies: number[] = [];
  let appending = true;
  const running = (async () => {
    for (let i = 0; appending; i++) {
      const started = performance.now();
      await store.append('live', ExpectedVersion.any, [event(i)]);
      latencies.push(performance.now() - started);
      await new Promise((r) => setTimeout(r, 5));
    }
  })();
  return {
    take() {
      const taken = latencies;
      latencies = [];
      return taken;
    },
    async stop() {
      appending = false;
      await running;
      return latencies;
    },
  };
}

async function scenario(source: string, name: string, request: Partial<ScavengeRequest>) {
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-scavenge-'));
  cpSync(source, dir, { recursive: true });
  let store = await Store.open({ dir, inMemory: false, chunkSize: CHUNK });
  const scavenger = await openScavenger(store, dir);
  const records = store.recordCount;
  const before = store.diskUsage();
  const appender = liveAppender(store);
  const started = performance.now();
  scavenger.start({ threads: 1, threshold: 0, throttlePercent: 100, syncOnly: false, startFromChunk: 0, ...request });
  let progress = scavenger.current()!.progress;
  while (scavenger.current()) {
    progress = scavenger.current()!.progress;
    await new Promise((r) => setTimeout(r, 50));
  }
  const seconds = (performance.now() - started) / 1000;
  const latencies = await appender.stop();
  const after = store.diskUsage();
  const result = scavenger.last()!.result;
  await scavenger.close();
  await store.close();
  store = await Store.open({ dir, inMemory: false, chunkSize: CHUNK });
  const reopened = store.diskUsage();
  const left = store.recordCount;
  await store.close();
  rmSync(dir, { recursive: true, force: true });
  latencies.sort((a, b) => a - b);
  const perSecond = records / seconds;
  log(`scavenge ${name}: ${result} in ${seconds.toFixed(1)} s; ${records.toLocaleString('en-US')} log records covered = ${Math.round(perSecond).toLocaleString('en-US')} records/s`
    + `${(request.threads ?? 1) === 1 && (request.throttlePercent ?? 100) === 100 ? ` (target ${TARGET_EXAMINED_PER_SECOND.toLocaleString('en-US')}/s: ${perSecond >= TARGET_EXAMINED_PER_SECOND ? 'PASS' : 'MISS'})` : ''}`);
  log(`  read ${progress.eventsExamined.toLocaleString('en-US')} records in accumulation + execution; removed ${(records + latencies.length - left).toLocaleString('en-US')}; logical bytes freed ${mb(progress.spaceSaved)}`);
  log(`  on disk (total-sst-files-size / estimate-live-data-size): before ${mb(before.sstFilesBytes)} / ${mb(before.liveDataBytes)}, `
    + `after ${mb(after.sstFilesBytes)} / ${mb(after.liveDataBytes)}, after a reopen ${mb(reopened.sstFilesBytes)} / ${mb(reopened.liveDataBytes)}`);
  log(`  appends during the run (200/s, in process): ${latencies.length}, p50 ${percentile(latencies, 0.5).toFixed(2)} ms, p99 ${percentile(latencies, 0.99).toFixed(2)} ms`);
  return seconds;
}

async function main(): Promise<void> {
  const source = mkdtempSync(join(tmpdir(), 'svc-bench-scavenge-src-'));
  const buildStarted = performance.now();
  await build(source);
  log(`scavenge bench: ${EVENTS.toLocaleString('en-US')} events over ${(EVENTS / PER_STREAM).toLocaleString('en-US')} streams, half of them soft-deleted, built in ${((performance.now() - buildStarted) / 1000).toFixed(1)} s`);
  const one = await scenario(source, 'threads=1', { threads: 1 });
  if (process.env.BENCH_SCAVENGE_ONE_ONLY !== '1') {
    const four = await scenario(source, 'threads=4', { threads: 4 });
    const half = await scenario(source, 'throttlePercent=50', { threads: 1, throttlePercent: 50 });
    log(`scavenge: threads=4 took ${(four / one).toFixed(2)}x the time of threads=1; throttlePercent=50 took ${(half / one).toFixed(2)}x (expected ~2x)`);
  }
  rmSync(source, { recursive: true, force: true });
}

// Run only as the entry point, not when bench/space.ts imports the build.
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main();
