import { isMetastream, SOFT_DELETED_TB, visibilityOf } from '../store/index.js';
import { addWeight, chunkOf, type RunContext } from './context.js';
import type { StreamData } from './state.js';

// Calculation: for every stream whose rules changed or still bite ($maxAge, $maxCount, an unspent
// $tb), in name order, moves its discard points forward over the index entries below the scavenge
// point: each removable event adds 2 to its chunk's weight, each event $maxAge may remove (its
// chunk spans the cut-off) adds 1. The last event before the point always stays. One state batch
// and checkpoint per batch of streams.

const STREAMS_PER_BATCH = 1000;
const SLICE = 8192;
const YIELD_EVERY = 32;
/**
 * Ranges of fewer events than this are weighed by one scan of their index entries' positions,
 * without first reading where the range's ends are (two point reads, 5-20 µs each). The scan reads
 * values only: the binding makes a Buffer per key and per value, and the event numbers are not
 * needed to weigh (~1.0 µs an entry against ~1.8 with the keys).
 */
const WALK_BELOW = 128;

export async function calculate(ctx: RunContext, after: string | undefined): Promise<void> {
  const { state, point, progress } = ctx;
  for (;;) {
    const names = state.activeStreams(after, STREAMS_PER_BATCH);
    if (names.length === 0) return;
    const changed = new Map<string, StreamData>();
    const active = new Map<string, boolean>();
    const weights = new Map<number, number>();
    for (let i = 0; i < names.length; i++) {
      const name = names[i];
      const data = { ...state.stream(name)! };
      ctx.throttle.timed(() => calculateStream(ctx, name, data, weights));
      changed.set(name, data);
      if (data.status !== 'Active') active.set(name, false);
      ctx.checkStop();
      // Index reads are synchronous: let requests in between (appends wait on the event loop).
      if (i % YIELD_EVERY === YIELD_EVERY - 1) await ctx.throttle.yieldToClients();
    }
    after = names[names.length - 1];
    ctx.throttle.timed(() => state.commit({ streams: changed, active, weightDeltas: weights,
      checkpoint: { scavengeId: ctx.scavengeId, point, stage: 'Calculating', doneStream: after } }));
    progress.streamsCalculated = (progress.streamsCalculated ?? 0) + names.length;
    await ctx.throttle.rest();
  }
}

function calculateStream(ctx: RunContext, name: string, data: StreamData, weights: Map<number, number>): void {
  const { store, point } = ctx;
  if (isMetastream(name)) {
    // `$$x` as an original stream: only its own metastream's records are removable, decided by metaLast.
    data.status = 'Spent';
    return;
  }
  const last = store.lastEventBefore(name, point.position);
  if (last < 0) {
    data.status = data.tombstoned ? 'Archived' : 'Spent';
    return;
  }
  // What a read would hide at the scavenge point (visibility.ts: the stream's last event before the
  // point, its metadata then, the point's time) is removable, with two rules of the scavenge's own:
  // the last event always stays (the stream's version lives on in it), and a hard-deleted stream
  // loses every event (its tombstone, which is not an indexed event, stays).
  const hidden = visibilityOf({ lastEventNumber: last, tombstoned: data.tombstoned === true },
    { truncateBefore: data.tb, maxCount: data.maxCount, maxAge: data.maxAge }, point.effectiveNow);
  const target = data.tombstoned ? last + 1 : Math.min(hidden.firstEventNumber, last);
  // Definitely removable: [discardPoint, target).
  weigh(ctx, name, data.discardPoint, target - 1, weights);
  data.discardPoint = Math.max(data.discardPoint, target);

  if (!data.tombstoned && data.maxAge !== undefined) {
    const cutoff = hidden.oldestCreated;
    let maybe = false;
    walk(ctx, name, data.discardPoint, last - 1, (position, eventNumber) => {
      const range = ctx.state.timeRange(chunkOf(ctx, position));
      if (!range || range[0] >= cutoff) return false; // kept: so is everything newer
      if (range[1] < cutoff && !maybe) {
        addWeight(weights, chunkOf(ctx, position), 2);
        data.discardPoint = eventNumber + 1;
      } else {
        // The chunk spans the cut-off: the record's own time decides at execution.
        maybe = true;
        addWeight(weights, chunkOf(ctx, position), 1);
        data.maybeDiscardPoint = eventNumber + 1;
      }
      return true;
    });
    data.maybeDiscardPoint = Math.max(data.maybeDiscardPoint, data.discardPoint);
  }

  if (data.tombstoned) data.status = 'Archived';
  else if (data.maxAge !== undefined || data.maxCount !== undefined) data.status = 'Active';
  else if (data.tb !== undefined && data.tb < SOFT_DELETED_TB && last < data.tb) data.status = 'Active';
  else data.status = 'Spent';
}

/**
 * Adds 2 per event numbered [from, to] to its chunk's weight without reading every index entry:
 * positions grow with event numbers, so when the first and the last of a range are in one chunk
 * all of it is; otherwise the range is halved. (Entries a maxAge execution already removed
 * inside the range still count: a weight is an estimate, as the established servers' is.)
 */
function weigh(ctx: RunContext, name: string, from: number, to: number, weights: Map<number, number>): void {
  if (to < from) return;
  if (to - from < WALK_BELOW) {
    // One scan of the range's positions (no event numbers needed: every entry weighs the same).
    for (const position of ctx.store.indexPositionsBetween(name, from, to, to - from + 1)) addWeight(weights, chunkOf(ctx, position), 2);
    return;
  }
  const [first, last] = ctx.store.indexPositions(name, [from, to]);
  if (first === undefined || last === undefined) {
    walk(ctx, name, from, to, (position) => {
      addWeight(weights, chunkOf(ctx, position), 2);
      return true;
    });
    return;
  }
  if (chunkOf(ctx, first) === chunkOf(ctx, last)) {
    addWeight(weights, chunkOf(ctx, first), 2 * (to - from + 1));
    return;
  }
  const middle = Math.floor((from + to) / 2);
  weigh(ctx, name, from, middle, weights);
  weigh(ctx, name, middle + 1, to, weights);
}

/** Visits the stream's index entries numbered [from, to], oldest first, until `visit` returns false. */
function walk(ctx: RunContext, name: string, from: number, to: number, visit: (position: number, eventNumber: number) => boolean): void {
  for (let n = from; n <= to;) {
    const entries = ctx.store.indexEntries(name, n, to, SLICE);
    for (const e of entries) if (!visit(e.position, e.eventNumber)) return;
    if (entries.length < SLICE) return;
    n = entries[entries.length - 1].eventNumber + 1;
  }
}
