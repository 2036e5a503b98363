import { isMetastream, originalStreamOf, parseMetadata, type EventRecord } from '../store/index.js';
import { addWeight, chunkOf, lastChunk, type RunContext } from './context.js';
import type { StreamData } from './state.js';

// Accumulation: reads each chunk added since the last run, once ever, up to the scavenge point,
// and keeps what decides removals: tombstones, every stream's latest metadata ($maxAge,
// $maxCount, $tb), the last record of each metastream (every earlier one is removable: +2 to
// the weight of its chunk), and each chunk's oldest and newest record time. One state batch and
// checkpoint per chunk. Only metastream records and tombstones matter, and the writer leaves a
// hint at each (store keys.ts) and the chunk's time range: a chunk is read through them, not
// whole — except chunks written before the store kept hints, which are read record by record.

const PAGE = 1024;

export function emptyStreamData(): StreamData {
  return { discardPoint: 0, maybeDiscardPoint: 0, status: 'Active' };
}

export async function accumulate(ctx: RunContext): Promise<void> {
  const { store, state, point, chunkSize, progress } = ctx;
  const first = state.nextChunkToAccumulate();
  const last = lastChunk(ctx);
  progress.chunksDone = 0;
  progress.chunksTotal = Math.max(0, last - first + 1);
  for (let chunk = first; chunk <= last; chunk++) {
    const changed = new Map<string, StreamData>();
    const weights = new Map<number, number>();
    const dataOf = (name: string): StreamData => {
      let data = changed.get(name);
      if (!data) {
        const stored = state.stream(name);
        data = stored ? { ...stored } : emptyStreamData();
        changed.set(name, data);
      }
      return data;
    };
    let oldest = Infinity;
    let newest = -Infinity;
    const visit = (records: EventRecord[]) => {
      for (const r of records) {
        if (r.created < oldest) oldest = r.created;
        if (r.created > newest) newest = r.created;
        if (r.tombstone) {
          const data = dataOf(r.streamId);
          data.tombstoned = true;
          data.status = 'Active';
          // Its metastream goes whole: the last record too.
          if (data.metaLastPosition !== undefined) addWeight(weights, chunkOf(ctx, data.metaLastPosition), 2);
        } else if (isMetastream(r.streamId)) {
          const data = dataOf(originalStreamOf(r.streamId));
          // The record it replaces becomes removable (event numbers grow with positions: always in order here).
          if (data.metaLastPosition !== undefined) addWeight(weights, chunkOf(ctx, data.metaLastPosition), 2);
          data.metaLast = r.eventNumber;
          data.metaLastPosition = r.position;
          // `$$$$x` moves the discard point of `$$x`'s own metastream records but sets no metadata.
          if (!isMetastream(originalStreamOf(r.streamId))) {
            const metadata = parseMetadata(r.data);
            data.maxAge = metadata.maxAge;
            data.maxCount = metadata.maxCount;
            data.tb = metadata.truncateBefore;
          }
          data.status = 'Active';
        }
      }
      progress.eventsExamined += records.length;
    };
    const from = chunk * chunkSize;
    const to = Math.min((chunk + 1) * chunkSize, point.position);
    if (from >= store.hintsFrom) {
      ctx.throttle.timed(() => visit(store.hintedRecords(from, to)));
      const range = store.chunkTimeRange(chunk);
      if (range) [oldest, newest] = [Math.min(oldest, range[0]), Math.max(newest, range[1])];
      ctx.checkStop();
      await ctx.throttle.rest();
      await ctx.throttle.yieldToClients();
    } else {
      await store.scanLog(from, to, PAGE, async (records) => {
        ctx.throttle.timed(() => visit(records));
        ctx.checkStop();
        await ctx.throttle.rest();
        await ctx.throttle.yieldToClients();
        return true;
      }, (ms) => ctx.throttle.spent(ms));
    }
    const active = new Map<string, boolean>();
    for (const name of changed.keys()) active.set(name, true);
    ctx.throttle.timed(() => state.commit({
      streams: changed, active, weightDeltas: weights, nextChunk: chunk + 1,
      ...(oldest <= newest ? { ranges: new Map([[chunk, [oldest, newest] as [number, number]]]) } : {}),
      checkpoint: { scavengeId: ctx.scavengeId, point, stage: 'Accumulating', doneChunk: chunk },
    }));
    progress.chunksDone++;
  }
}
