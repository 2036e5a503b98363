import {
  chunkName, dropChunkEntry, encodeChunk, isMetastream, originalStreamOf, type EventRecord, type PhysicalChunk,
} from '../store/index.js';
import { lastChunk, type RunContext } from './context.js';
import { timeSpan } from './history.js';

// Chunk execution: every physical chunk from the checkpoint to the scavenge point whose weight is
// above the point's threshold (-1: every chunk) is read, and its removable records go — with
// their index and event-id entries, in store batches in order with all other writes. The chunk's
// version then goes up by one and its weights to zero. With threads > 1, that many chunks are
// read at once (RocksDB reads on libuv's thread pool); the checkpoint trails the contiguous
// prefix of finished chunks.
//
// Merging: adjacent executed chunks whose remaining bytes fit in one chunk size become one
// physical chunk (one entry of the chunk table; no record moves).

const PAGE = 1024;
const REMOVE_BATCH = 1024;

export interface ExecutionTotals {
  spaceSaved: number;
  maxChunkScavenged: number;
}

export async function executeChunks(ctx: RunContext, fromChunk: number, totals: ExecutionTotals): Promise<void> {
  const { store, state, point, progress, log } = ctx;
  const chunks = store.physicalChunks(fromChunk, lastChunk(ctx)).filter((c) => c.end >= fromChunk);
  progress.chunksDone = 0;
  progress.chunksTotal = chunks.length;
  const finished = new Set<number>();
  let next = 0;
  let contiguous = 0; // chunks[0..contiguous) are finished

  const executeOne = async (chunk: PhysicalChunk): Promise<void> => {
    let weight = 0;
    for (const w of state.weights(chunk.start, chunk.end).values()) weight += w;
    const name = chunkName(chunk);
    if (!(weight > point.threshold)) {
      log.info(`SCAVENGING: Skipped physical chunk: ${name} with weight ${weight}. The threshold is ${point.threshold}.`);
      return;
    }
    log.info(`SCAVENGING: Started to scavenge physical chunk: ${name} with weight ${weight}. ${chunk.start} - ${chunk.end}`);
    const started = performance.now();
    const result = await scavengeChunk(ctx, chunk);
    const zero: number[] = [];
    for (let c = chunk.start; c <= chunk.end; c++) zero.push(c);
    state.commit({ zeroWeights: zero });
    totals.spaceSaved += result.spaceSaved;
    totals.maxChunkScavenged = Math.max(totals.maxChunkScavenged, chunk.end);
    log.info(`SCAVENGING: Scavenged physical chunk: ${name} -> ${chunkName(result.chunk)}: ${result.removed} of ${result.examined} records removed, ${result.spaceSaved} bytes`);
    await ctx.history.chunkCompleted({
      chunkStartNumber: chunk.start, chunkEndNumber: chunk.end, timeTaken: timeSpan(performance.now() - started),
      wasScavenged: true, spaceSaved: result.spaceSaved, errorMessage: null,
      eventsExamined: result.examined, eventsRemoved: result.removed, chunkVersion: result.chunk.version,
    });
  };

  const worker = async (): Promise<void> => {
    while (next < chunks.length) {
      const index = next++;
      ctx.checkStop();
      await executeOne(chunks[index]);
      finished.add(index);
      progress.chunksDone++;
      let moved = false;
      while (finished.has(contiguous)) {
        finished.delete(contiguous);
        contiguous++;
        moved = true;
      }
      if (moved) {
        state.commit({ checkpoint: { scavengeId: ctx.scavengeId, point, stage: 'ExecutingChunks', doneChunk: chunks[contiguous - 1].end } });
      }
      if (ctx.threads === 1) await ctx.throttle.rest();
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, ctx.threads) }, worker));
}

/** Removes the chunk's removable records; returns its new entry and what was done. */
async function scavengeChunk(ctx: RunContext, chunk: PhysicalChunk) {
  const { store, chunkSize, point, progress } = ctx;
  let pending: EventRecord[] = [];
  // One removal in flight while the next page is read (reads run on the thread pool, the removal on the loop).
  let inFlight: Promise<void> = Promise.resolve();
  let examined = 0;
  let removed = 0;
  let spaceSaved = 0;
  let liveBytes = 0;
  const { throttle } = ctx;
  await store.scanLog(chunk.start * chunkSize, Math.min((chunk.end + 1) * chunkSize, point.position), PAGE, async (records) => {
    throttle.timed(() => {
      for (const r of records) {
        if (isRemovable(ctx, r)) {
          pending.push(r);
          removed++;
          spaceSaved += r.size;
        } else {
          liveBytes += r.size;
        }
      }
    });
    examined += records.length;
    progress.eventsExamined += records.length;
    if (pending.length >= REMOVE_BATCH) {
      const batch = pending;
      pending = [];
      await inFlight;
      inFlight = store.remove({ records: batch, chunkOps: [], sync: false }).then((ms) => {
        throttle.spent(ms);
        progress.eventsRemoved += batch.length;
        progress.spaceSaved += batch.reduce((sum, r) => sum + r.size, 0);
      });
    }
    ctx.checkStop();
    await throttle.yieldToClients();
    return true;
  }, (ms) => throttle.spent(ms)).finally(() => inFlight);
  const next: PhysicalChunk = { start: chunk.start, end: chunk.end, version: chunk.version + 1, liveBytes };
  // The last batch is synced: everything removed before it is durable with it, then the checkpoint may pass the chunk.
  throttle.spent(await store.remove({ records: pending, chunkOps: [encodeChunk(next)], sync: true }));
  progress.eventsRemoved += pending.length;
  progress.spaceSaved += pending.reduce((sum, r) => sum + r.size, 0);
  return { chunk: next, examined, removed, spaceSaved };
}

/** Whether a record below the scavenge point goes (what reads already hide, but never a stream's last event or a tombstone). */
export function isRemovable(ctx: RunContext, r: EventRecord): boolean {
  if (r.position >= ctx.point.position || r.tombstone) return false;
  if (isMetastream(r.streamId)) {
    const data = ctx.state.stream(originalStreamOf(r.streamId));
    if (!data) return false;
    return data.tombstoned === true || (data.metaLast !== undefined && r.eventNumber < data.metaLast);
  }
  const data = ctx.state.stream(r.streamId);
  if (!data) return false;
  if (data.tombstoned) return true;
  if (r.eventNumber < data.discardPoint) return true;
  return r.eventNumber < data.maybeDiscardPoint && data.maxAge !== undefined
    && r.created < ctx.point.effectiveNow - data.maxAge * 1_000_000;
}

/** Joins runs of adjacent executed chunks whose remaining bytes fit in one chunk size. */
export async function mergeChunks(ctx: RunContext): Promise<void> {
  const { store, chunkSize, log } = ctx;
  for (;;) {
    const chunks = store.physicalChunks(0, lastChunk(ctx));
    const groups: PhysicalChunk[][] = [];
    let group: PhysicalChunk[] = [];
    let bytes = 0;
    for (const c of chunks) {
      if (c.liveBytes !== undefined && bytes + c.liveBytes <= chunkSize && group.length > 0) {
        group.push(c);
        bytes += c.liveBytes;
        continue;
      }
      if (group.length >= 2) groups.push(group);
      group = c.liveBytes !== undefined ? [c] : [];
      bytes = c.liveBytes ?? 0;
    }
    if (group.length >= 2) groups.push(group);
    if (groups.length === 0) return;
    for (const g of groups) {
      ctx.checkStop();
      const started = performance.now();
      const merged: PhysicalChunk = {
        start: g[0].start, end: g[g.length - 1].end, version: Math.max(...g.map((c) => c.version)) + 1,
        liveBytes: g.reduce((sum, c) => sum + (c.liveBytes ?? 0), 0),
      };
      await store.remove({ records: [], chunkOps: [encodeChunk(merged), ...g.slice(1).map((c) => dropChunkEntry(c.start))], sync: true });
      log.info(`SCAVENGING: Merged ${g.map(chunkName).join(', ')} into ${chunkName(merged)} (${merged.liveBytes} bytes)`);
      await ctx.history.mergeCompleted({
        chunkStartNumber: merged.start, chunkEndNumber: merged.end, timeTaken: timeSpan(performance.now() - started),
        wasMerged: true, spaceSaved: 0, errorMessage: null,
      });
      await ctx.throttle.rest();
    }
  }
}
