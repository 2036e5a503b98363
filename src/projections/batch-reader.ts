import { LINK_EVENT_TYPE, parseLinkTarget, type AllPage, type EventRecord, type Store } from '../store/index.js';
import type { Engine } from './engine.js';
import { selectEvent, type Selected } from './source.js';
import { StreamSourceReader } from './stream-source.js';
import { eventFilterOf, type EventFilter } from './definition.js';
import type { SourceDefinition } from './language/source-definition.js';

// How one run of a projection reads: from its position, the next page of its source (the log, or
// its named streams and categories through the stream index), keeping the events its query
// selects, encoded for its engine as one batch. A read over the log joins the convoy of readers
// that share its decoded blocks (store/shared-blocks.ts); this reader is its member there.

/**
 * One batch for the engine: the selected events, encoded for it, their log positions, and the log
 * bytes of the records it read that the query does not select (unhandled bytes).
 */
export interface PreparedBatch {
  encoded: unknown; count: number; positions: number[]; nextPosition: number; caughtUp: boolean; unhandledBytes: number;
  /** Records the engine's sieve left out undecoded (it counts them as processed: see Engine.sieve). */
  sieved: number;
}

/** Where a batch ends at the latest (the projection's policy, see Projection.batchLimits). */
export interface BatchLimits { maxSelected: number; maxUnhandledBytes: number }

/**
 * Records read per batch at most: big enough to amortise a sandbox call, small enough to keep the
 * event loop responsive. A projection's pendingEventsThreshold lowers it (see Projection.batchLimits).
 */
const READ_BATCH = 2000;
/**
 * A live projection reads the log at most this often. Every read and sandbox call has a fixed
 * cost; with many projections and a busy log, one call per commit per projection saturated the
 * node (measured: 20 projections at 1,000 appends/s). Under light load nothing waits: the first
 * commit after a quiet period is read at once.
 */
const LIVE_READ_INTERVAL_MS = 10;
/** A projection waits this long at most for slower ones in the convoy (see joinConvoy); then it reads on its own. */
const CONVOY_WAIT_MS = 30_000;
/**
 * A sieved reader (a system projection) that waited for its turn reads on at this many records a
 * millisecond of the wait, up to SIEVED_GROWTH times its batch size, and keeps up to
 * SIEVED_KEPT_PER_WAITED_MS a millisecond of what its sieve passes (at least one batch size, at
 * most SIEVED_KEPT_GROWTH times). A refused record costs ~1 µs, but a turn is a turn: at 250 records
 * each, while twenty catching-up projections held the event loop ~10 ms a turn, the five system
 * projections moved ~1,250 records a second against the ~20,000 a second the twenty's checkpoints
 * wrote, and finished 25 s after them. An event loop that is not that busy gives a short wait, and
 * the batch stays as it was.
 */
const SIEVED_RECORDS_PER_WAITED_MS = 40;
const SIEVED_GROWTH = 32;
const SIEVED_KEPT_PER_WAITED_MS = 10;
const SIEVED_KEPT_GROWTH = 4;

export class BatchReader {
  private readonly definition: SourceDefinition;
  private readonly filter: EventFilter;
  /** Reads a query's named streams or categories, made at the first read. */
  private sourceReader: StreamSourceReader | undefined;
  private lastLiveReadAt = 0;

  constructor(private readonly store: Store, private readonly engine: Engine) {
    this.definition = engine.definition;
    this.filter = eventFilterOf(this.definition);
  }

  /** A query over $all never reads system streams: the log's reads leave them out (log-spaces.ts). */
  private get skipsSystem(): boolean {
    return !this.engine.select && this.definition.allStreams;
  }

  /** A query over named streams or categories reads them through the stream index, not the log. */
  private streamSource(): StreamSourceReader | undefined {
    const def = this.definition;
    if (this.engine.select || def.allStreams) return undefined;
    return (this.sourceReader ??= new StreamSourceReader(this.store, [...def.streams, ...def.categories.map((c) => `$ce-${c}`)]));
  }

  /**
   * Reads the next page from `position`, keeps what the query selects and encodes it for the engine.
   * `waitedMs`: how long the projection waited for this turn of the event loop.
   */
  read(position: number, limits: BatchLimits, waitedMs = 0): PreparedBatch {
    const base = this.engine.readBatchSize ?? READ_BATCH;
    const source = this.streamSource();
    const sieve = source ? undefined : this.engine.sieve;
    const grown = (perMs: number, most: number) => Math.min(base * most, Math.max(base, Math.round(waitedMs * perMs)));
    const size = sieve ? grown(SIEVED_RECORDS_PER_WAITED_MS, SIEVED_GROWTH) : base;
    const keep = sieve ? grown(SIEVED_KEPT_PER_WAITED_MS, SIEVED_KEPT_GROWTH) : base;
    const page = source ? source.read(position, size) : this.store.readAllForward(position, size, this, this.skipsSystem, sieve, keep);
    // A category's links are resolved one by one (select): their streams' informations, then the
    // records they point to, are read at once first.
    if (source) this.store.prefetchStreamInfos(linkTargets(page.records));
    const { selected, positions, nextPosition, cut, unhandledBytes, sieved } = source
      ? this.store.resolvingLinks(page.records, () => this.keep(page, limits))
      : this.keep(page, limits);
    const encoded = selected.length > 0 ? this.engine.encode(selected) : undefined;
    return { encoded, count: selected.length, positions, nextPosition, caughtUp: !cut && page.isEnd, unhandledBytes, sieved };
  }

  /** What a batch keeps of `page`: the events the query selects, up to where the batch ends (limits). */
  private keep(page: AllPage, limits: BatchLimits):
    { selected: Selected[]; positions: number[]; nextPosition: number; cut: boolean; unhandledBytes: number; sieved: number } {
    const { maxSelected, maxUnhandledBytes } = limits;
    const selected: Selected[] = [];
    const positions: number[] = [];
    const { gaps, sieved: refused } = page;
    let unhandledBytes = 0;
    let sieved = 0;
    let nextPosition = page.nextPosition;
    let cut = false;
    for (let i = 0; i < page.records.length; i++) {
      const record = page.records[i];
      if (gaps) unhandledBytes += gaps[i];
      if (refused) sieved += refused[i];
      const s = this.select(record);
      if (s !== undefined) {
        selected.push(s);
        positions.push(record.position);
      } else unhandledBytes += record.size;
      if (selected.length >= maxSelected || unhandledBytes > maxUnhandledBytes) {
        // The batch ends here, so that a checkpoint can follow at this very point.
        nextPosition = record.position + record.size;
        cut = i < page.records.length - 1;
        break;
      }
    }
    if (gaps && !cut) unhandledBytes += gaps[page.records.length];
    if (refused && !cut) sieved += refused[page.records.length];
    return { selected, positions, nextPosition, cut, unhandledBytes, sieved };
  }

  /** Whether the next batch from `position` may be read ahead now: not while slower readers still need the blocks it would push out. */
  mayReadAhead(position: number): boolean {
    if (this.streamSource() !== undefined) return true;
    // Its block is still on its way from the log-read thread: read it after this batch (joinConvoy waits for it).
    if (this.store.blocks.landingAt(position, this.skipsSystem)) return false;
    return !this.store.blocks.mustWait(this, position, this.store.headPosition, this.skipsSystem);
  }

  /**
   * Catching up in the convoy of projections that share the log's decoded blocks (shared-blocks.ts):
   * waits while slower ones have still to read the blocks that reading here would push out.
   */
  async joinConvoy(position: number, stopRequested: () => boolean): Promise<void> {
    const until = performance.now() + CONVOY_WAIT_MS;
    if (this.streamSource()) return; // it reads no shared blocks
    // The block to read is on its way from the log-read thread: wait for it rather than read it again.
    const landing = this.store.blocks.landingAt(position, this.skipsSystem);
    if (landing) await landing;
    while (!stopRequested() && performance.now() < until && this.store.blocks.mustWait(this, position, this.store.headPosition, this.skipsSystem)) {
      await this.store.blocks.progress(50);
    }
  }

  /** Live, caught up: waits until LIVE_READ_INTERVAL_MS have passed since the last live read. */
  async paceLiveReads(): Promise<void> {
    const wait = this.lastLiveReadAt + LIVE_READ_INTERVAL_MS - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    this.lastLiveReadAt = performance.now();
  }

  /** Leaves the convoy (caught up, or done): nobody waits for this reader. */
  leave(): void {
    this.store.blocks.leave(this);
  }

  /** The event the query reads for this record, or undefined when it reads none. */
  private select(record: EventRecord): Selected | undefined {
    if (this.engine.select) return this.engine.select(record);
    return selectEvent(this.definition, this.filter, this.store, record);
  }
}

/** The streams the links among `records` point to. */
function* linkTargets(records: readonly EventRecord[]): Generator<string> {
  for (const r of records) {
    if (r.eventType !== LINK_EVENT_TYPE) continue;
    const target = parseLinkTarget(r.data);
    if (target) yield target.streamId;
  }
}
