import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ExpectedVersion, newUuid, Store, type ProposedEvent } from '../src/store/index.js';
import { Rocks, type BatchOp } from '../src/store/rocks.js';
import { encodeRecord } from '../src/store/record.js';
import { eventIdKey, indexKey, logKey, streamKey, u64Value } from '../src/store/keys.js';
import { encodeStreamInfo, encodeWriterCheckpoint, WRITER_CHECKPOINT_KEY } from '../src/store/stream-state.js';

// What each key the store writes per appended event costs (LOG record, INDEX stream+number ->
// position, EVENT_ID stream+id -> number), without HTTP in the way.
//   1. Store.append as bench (b) drives it: 100-event appends, 10 concurrent appenders,
//      round-robin over 1,000 streams; once with ids indexed as the writer does (every event's
//      until de30bde, the first of each append since), once with `idempotent: false` (no
//      EVENT_ID key written, no id lookup per append).
//   2. Batches of the first layout (three keys per event) written straight to RocksDB
//      (Rocks.writeDurable): all three keys interleaved event by event, the same grouped by key
//      space, without EVENT_ID, without EVENT_ID and INDEX, and all three without the fsync.
//   3. The id lookup the writer makes per append (a miss: a new id), on the database of step 2.
// Usage: node dist/bench/keys.js   (KEYS_EVENTS=300000, KEYS_RUNS=3, KEYS_BATCH=1000, BENCH_DATA_DIR)

const EVENTS = Number(process.env.KEYS_EVENTS ?? 300_000);
const RUNS = Number(process.env.KEYS_RUNS ?? 3);
const PER_APPEND = 100;
const APPENDERS = 10;
const STREAMS = 1000;
/** Events per RocksDB batch in step 2: what the store's group commit gathered in step 1 (10 appends). */
const BATCH = Number(process.env.KEYS_BATCH ?? PER_APPEND * APPENDERS);
const PARENT = process.env.BENCH_DATA_DIR || tmpdir();

const log = (line: string) => process.stdout.write(`${line}\n`);
const streamName = (i: number) => `bench-b-${i % STREAMS}`;

/** The event bench (b) sends, as the API hands it to the store (~150 bytes of JSON data). */
function event(seq: number, idempotent: boolean): ProposedEvent {
  const data = `{"orderId":"o-${seq}","customerId":"c-${seq % 977}","amount":${(seq % 10_000) / 100},"currency":"EUR","lines":3}`;
  return {
    eventId: newUuid(), eventType: 'OrderPlaced', isJson: true, dataIsJson: true,
    data: Buffer.from(data, 'utf8'), metadata: Buffer.alloc(0), ...(idempotent ? {} : { idempotent: false }),
  };
}

async function withDir<T>(prefix: string, run: (dir: string) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(PARENT, prefix));
  try {
    return await run(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

interface StoreFigures { eventsPerSec: number; eventsPerFlush: number; writeShare: number; writeMsPerFlush: number }

async function storeRun(idempotent: boolean): Promise<StoreFigures> {
  return withDir('svc-keys-store-', async (dir) => {
    const store = await Store.open({ dir, inMemory: false, chunkSize: 256 * 1024 * 1024 });
    let next = 0;
    const appends = EVENTS / PER_APPEND;
    const appender = async () => {
      for (let n = next++; n < appends; n = next++) {
        const events = Array.from({ length: PER_APPEND }, (_, i) => event(n * PER_APPEND + i, idempotent));
        await store.append(streamName(n), ExpectedVersion.any, events);
      }
    };
    const started = performance.now();
    await Promise.all(Array.from({ length: APPENDERS }, appender));
    const seconds = (performance.now() - started) / 1000;
    const stats = store.writerStats;
    const flushes = stats.totalItemsProcessed / stats.meanFlushSize;
    const writeMs = stats.meanFlushDelayMs * flushes;
    await store.close();
    return {
      eventsPerSec: EVENTS / seconds, eventsPerFlush: (stats.meanFlushSize * PER_APPEND),
      writeShare: writeMs / (seconds * 1000), writeMsPerFlush: stats.meanFlushDelayMs,
    };
  });
}

/** µs per lookup of an id the stream never had: what the writer's retry check costs each append. */
function lookupMisses(rocks: Rocks): number {
  const n = 20_000;
  const started = performance.now();
  for (let i = 0; i < n; i++) rocks.get(eventIdKey(1 + (i % STREAMS), newUuid()));
  return ((performance.now() - started) * 1000) / n;
}

type Layout = 'log+index+id' | 'log+index' | 'log' | 'grouped';

/**
 * One batch as the writer builds it for BATCH events over BATCH/100 streams: each event's keys
 * one after the other; `grouped` writes the same keys space by space (all log records, then the
 * index entries, then the ids), so consecutive memtable inserts land next to each other.
 */
function batch(first: number, positionBase: number, layout: Layout, lastNumbers: number[]): { ops: BatchOp[]; bytes: number } {
  const ops: BatchOp[] = [];
  const indexOps: BatchOp[] = layout === 'grouped' ? [] : ops;
  const idOps: BatchOp[] = layout === 'grouped' ? [] : ops;
  let position = positionBase;
  const touched = new Set<number>();
  for (let a = 0; a < BATCH / PER_APPEND; a++) {
    const appendNo = first / PER_APPEND + a;
    const stream = appendNo % STREAMS;
    touched.add(stream);
    for (let i = 0; i < PER_APPEND; i++) {
      const e = event(first + a * PER_APPEND + i, true);
      const number = ++lastNumbers[stream];
      const bytes = encodeRecord(streamName(stream), number, e, Date.now() * 1000, false);
      ops.push([logKey(position), bytes]);
      if (layout !== 'log') indexOps.push([indexKey(stream + 1, number), u64Value(position)]);
      if (layout === 'log+index+id' || layout === 'grouped') idOps.push([eventIdKey(stream + 1, e.eventId), u64Value(number)]);
      position += bytes.length;
    }
  }
  if (layout === 'grouped') ops.push(...indexOps, ...idOps);
  for (const s of touched) {
    ops.push([streamKey(streamName(s)), encodeStreamInfo({ streamNumber: s + 1, lastEventNumber: lastNumbers[s], tombstoned: false })]);
  }
  ops.push([WRITER_CHECKPOINT_KEY, encodeWriterCheckpoint({ nextPosition: position, nextStreamNumber: STREAMS + 1, recordCount: first })]);
  return { ops, bytes: position - positionBase };
}

interface RocksFigures { eventsPerSec: number; msPerBatch: number; missLookupUs: number }

async function rocksRun(layout: Layout, sync: boolean): Promise<RocksFigures> {
  return withDir('svc-keys-rocks-', async (dir) => {
    const rocks = await Rocks.open(dir, false);
    const lastNumbers = new Array<number>(STREAMS).fill(-1);
    let position = 0;
    let writing = 0;
    for (let first = 0; first < EVENTS; first += BATCH) {
      const { ops, bytes } = batch(first, position, layout, lastNumbers);
      position += bytes;
      const started = performance.now();
      if (sync) rocks.writeDurable(ops);
      else rocks.writeUnsynced(ops);
      writing += performance.now() - started;
    }
    const missLookupUs = lookupMisses(rocks);
    await rocks.close();
    // Only the write is timed: building the batch is the writer's work, measured in step 1.
    return { eventsPerSec: EVENTS / (writing / 1000), msPerBatch: writing / (EVENTS / BATCH), missLookupUs };
  });
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const range = (xs: number[]) => `${fmt(Math.min(...xs))}–${fmt(Math.max(...xs))}`;

async function main(): Promise<void> {
  log(`keys bench: ${fmt(EVENTS)} events, ${PER_APPEND} per append, ${APPENDERS} appenders, ${STREAMS} streams, ${RUNS} runs, data in ${PARENT}`);
  const storeRows: [string, StoreFigures[]][] = [['Store.append, ids indexed as the writer does', []], ['Store.append, idempotent: false (no event-id key)', []]];
  const rocksCases: [string, Layout, boolean][] = [
    ['RocksDB batch, log+index+id, fsync', 'log+index+id', true],
    ['RocksDB batch, log+index+id grouped by key space, fsync', 'grouped', true],
    ['RocksDB batch, log+index, fsync', 'log+index', true],
    ['RocksDB batch, log only, fsync', 'log', true],
    ['RocksDB batch, log+index+id, no fsync', 'log+index+id', false],
  ];
  const rocksRows = rocksCases.map(([title]) => [title, [] as RocksFigures[]] as const);
  // Interleaved runs: the machine's drift spreads over every variant instead of favouring one.
  for (let run = 0; run < RUNS; run++) {
    storeRows[0][1].push(await storeRun(true));
    storeRows[1][1].push(await storeRun(false));
    for (let i = 0; i < rocksCases.length; i++) rocksRows[i][1].push(await rocksRun(rocksCases[i][1], rocksCases[i][2]));
    log(`  run ${run + 1}/${RUNS} done`);
  }
  log('\n| variant | events/s (median) | range | notes |');
  log('| --- | ---: | --- | --- |');
  for (const [title, runs] of storeRows) {
    const eps = runs.map((r) => r.eventsPerSec);
    log(`| ${title} | ${fmt(median(eps))} | ${range(eps)} | ${fmt(median(runs.map((r) => r.eventsPerFlush)))} events/flush, `
      + `write ${median(runs.map((r) => r.writeMsPerFlush)).toFixed(1)} ms/flush = ${(100 * median(runs.map((r) => r.writeShare))).toFixed(0)}% of the time |`);
  }
  for (const [title, runs] of rocksRows) {
    const eps = runs.map((r) => r.eventsPerSec);
    log(`| ${title} | ${fmt(median(eps))} | ${range(eps)} | ${median(runs.map((r) => r.msPerBatch)).toFixed(2)} ms per ${fmt(BATCH)}-event batch (write only); `
      + `id lookup miss afterwards ${median(runs.map((r) => r.missLookupUs)).toFixed(1)} µs |`);
  }
}

main().catch((err) => {
  process.stderr.write(`keys bench failed: ${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
