import type { Logger } from 'pino';
import {
  LINK_EVENT_TYPE, METADATA_EVENT_TYPE, metastreamOf, newUuid, shownName, type EventRecord, type Store,
} from '../store/index.js';
import type { BatchOutcome, ChangedPartition, EmittedEvent, StoredPartition } from './sandbox.js';
import type { Engine, EngineLimits } from './engine.js';
import { selectEvent, type Selected } from './source.js';
import { StreamSourceReader } from './stream-source.js';
import { eventFilterOf, type EventFilter } from './definition.js';
import type { SourceDefinition } from './language/source-definition.js';
import type { PersistedProjection } from './model.js';
import { newRunCounters, progressOf, type ProjectionStatistics, type ProjectionStatus } from './statistics.js';
import { event, WriteSet } from './write-set.js';
import {
  decodeCheckpointBody, encodeCheckpointBody, isOfEpoch, readTag, tagMetadata, tagVersion, type PartitionValue,
} from './checkpoint-codec.js';
import {
  checkpointStream, defaultResultStream, emittedStreamsStream, EVENT, partitionCheckpointStream,
  partitionResultStream, partitionsStream,
} from './streams.js';

// One projection at run time: it reads the log from its checkpoint, hands the events its query
// selects to its sandbox in batches, and writes checkpoint, changed partition states, results and
// emitted events together in ONE store transaction, so a crash resumes from the last checkpoint
// with nothing emitted twice and nothing lost. With checkpoints, partition states live in their
// checkpoint streams: the sandbox keeps --projection-partition-cache of them and asks for the
// others when an event needs them, and the host holds only those not yet written. A start reads
// the root checkpoint alone, whatever the number of partitions.

export interface RuntimeLimits {
  memoryLimitMb: number;
  executionTimeoutMs: number;
  /** Largest state + result of one partition in bytes (MaxProjectionStateSize); 0: no limit of its own. */
  maxStateBytes: number;
  /** Partitions a sandbox keeps resident when they can be read back from their checkpoints. */
  partitionCache: number;
}

/**
 * One batch for the engine: the selected events, encoded for it, their log positions, and the log
 * bytes of the records it read that the query does not select (unhandled bytes).
 */
interface PreparedBatch {
  encoded: unknown; count: number; positions: number[]; nextPosition: number; caughtUp: boolean; unhandledBytes: number;
}

/**
 * Records read per batch at most: big enough to amortise a sandbox call, small enough to keep the
 * event loop responsive. A projection's pendingEventsThreshold lowers it (see readBatchSize).
 */
const READ_BATCH = 2000;
/** A projection that handled events and then went quiet checkpoints its states after this long. */
const IDLE_CHECKPOINT_MS = 1000;
/** Bounds the streams this run remembers having claimed; a forgotten one is checked again from its last event. */
const OWNED_STREAMS_CACHE = 10_000;
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
 * Emitted events (to all streams together) that make a checkpoint due whatever the settings say:
 * each is a record of the checkpoint's one atomic write, and 1,000 of them held the event loop
 * long enough to show in client append latency (measured with the system projections under load).
 */
const MAX_EMITS_PER_CHECKPOINT = 250;
/**
 * Each changed partition is a stream write at the next checkpoint (two for a new one): a catch-up
 * over many partitions checkpoints as this many pile up, rather than once with all of them (10,000
 * partitions made one ~30,000-record write that held the event loop for ~1 s). At 500, a query
 * over 1,000 keys checkpointed every read batch, twice as often as checkpointHandledThreshold
 * asks, and wrote half of the scale scenario's log; 2,000 partitions are a write of 20-35 ms
 * (measured in process; ~70 ms the first time, when their streams are new).
 */
const MAX_PARTITIONS_PER_CHECKPOINT = 2000;

export class Projection {
  private runStatus: ProjectionStatus = 'Stopped';
  private stateReason = '';
  private readonly counters = newRunCounters();
  definition: SourceDefinition | undefined;

  private engine: Engine | undefined;
  private filter: EventFilter | undefined;
  /** Reads a query's named streams or categories (streamSource), made at the first read of a run. */
  private sourceReader: StreamSourceReader | undefined;
  /** The root partition ('', the state of an unpartitioned query and the shared state of a bi-state one). */
  private root: PartitionValue | undefined;
  /** Every partition, kept only by a run without checkpoints (nothing to read them back from). */
  private all: Map<string, PartitionValue> | undefined;
  /** Partitions collected since the last checkpoint began: the next checkpoint writes them. */
  private changed = new Map<string, PartitionValue>();
  /** Partitions of the checkpoint being written: read from here until it is. */
  private inFlight = new Map<string, PartitionValue>();
  private loop: Promise<void> | undefined;
  /** The checkpoint being written. */
  private writing: Promise<void> | undefined;
  private stopRequested = false;
  private wake: AbortController | undefined;
  private lastLiveReadAt = 0;
  // Since the last checkpoint:
  private pendingEmits: EmittedEvent[] = [];
  /** Result changes since the last checkpoint, one per change in event order: [partition, result JSON | null]. */
  private pendingResults: [string, string | null][] = [];
  private newPartitions: string[] = [];
  private handledSinceCheckpoint = 0;
  /** Log bytes of records the query did not select, since the last checkpoint or handled batch. */
  private unhandledBytes = 0;
  /** Partitions changed in the engine since the last collection (as it last reported). */
  private partitionsTouched = 0;
  private lastHandledPosition = 0;
  /** Some event was handled since the last checkpoint (its state changes are still in the sandbox). */
  private touchedSinceCheckpoint = false;
  private lastCheckpointAt = 0;
  /** Streams this run has checked it may write to (ownership, epoch truncation), least recently used first. */
  private readonly ownedStreams = new Map<string, true>();

  constructor(public persisted: PersistedProjection, readonly id: number, private readonly store: Store,
    private readonly log: Logger, private readonly limits: RuntimeLimits,
    /** Whether a projection id belongs to a projection that still exists. */
    private readonly isLiveProjection: (id: number) => boolean,
    /** Makes the engine that runs this projection's handlers (sandboxed JS, or native). */
    private readonly createEngine: (p: PersistedProjection, limits: EngineLimits, stored: Record<string, StoredPartition>, partitionCache: number) => Promise<Engine>,
    /** Told once when the projection faults (the manager keeps the reason across restarts). */
    private readonly onFault: (reason: string) => void = () => undefined) {}

  get name(): string {
    return this.persisted.name;
  }

  get tag(): string {
    return tagVersion(this.id, this.persisted.epoch, this.persisted.version);
  }

  get checkpoints(): boolean {
    return this.persisted.checkpointsEnabled && this.persisted.mode !== 'Transient';
  }

  get resultStreamName(): string {
    return this.definition?.resultStreamName?.trim() || defaultResultStream(this.name);
  }

  get status(): ProjectionStatus {
    return this.runStatus;
  }

  /** The projection's figures now: a copy, unaffected by what happens next. */
  snapshot(): ProjectionStatistics {
    return {
      ...this.counters,
      status: this.runStatus,
      stateReason: this.stateReason,
      progress: progressOf(this.runStatus, this.counters.position, this.store.headPosition),
      writePendingEventsAfterCheckpoint: this.pendingEmits.length + this.pendingResults.length,
      partitionsCached: this.engine && !this.engine.disposed ? this.engine.resident ?? 0 : (this.all?.size ?? 0) + (this.root ? 1 : 0),
    };
  }

  /** Raw state and result JSON of a partition ('' when none): live from the sandbox while it runs. */
  async read(partition: string): Promise<{ state: string; result: string }> {
    if (this.engine && !this.engine.disposed) {
      try {
        const live = await this.engine.partition(partition);
        if (live !== null) return { state: live[0] ?? '', result: live[1] ?? '' };
      } catch {
        // the sandbox went away meanwhile: answer from the last collected copy
      }
    }
    const v = this.valueOf(partition);
    return { state: v?.state ?? '', result: v?.result ?? '' };
  }

  /** The last collected state and result of a partition: the host's copy, else its checkpoint. */
  private valueOf(partition: string): PartitionValue | undefined {
    if (partition === '') return this.root;
    if (this.all) return this.all.get(partition);
    return this.changed.get(partition) ?? this.inFlight.get(partition) ?? this.readStored(partition);
  }

  /** The sandbox's lookup: the stored states of partitions it does not hold. */
  private readonly lookup = (partitions: string[]): Record<string, StoredPartition> => {
    const out: Record<string, StoredPartition> = {};
    for (const p of partitions) {
      const v = this.valueOf(p);
      out[p] = v ? [v.state, v.result] : null;
    }
    return out;
  };

  /** Loads the checkpoint, prepares the sandbox and starts following the log. */
  async start(): Promise<void> {
    if (this.loop) return;
    this.runStatus = 'Preparing';
    this.stateReason = '';
    this.stopRequested = false;
    this.counters.eventsProcessedAfterRestart = 0;
    this.lastCheckpointAt = Date.now(); // checkpointAfterMs counts from the start, where the last checkpoint was loaded
    // A run starts from its last checkpoint, or from the beginning: nothing of an aborted run survives.
    this.clear();
    let completed = false;
    try {
      const loaded = this.checkpoints ? this.loadCheckpoint() : undefined;
      const root = loaded?.root;
      completed = loaded?.completed === true && this.persisted.mode === 'OneTime';
      const engine = await this.createEngine(this.persisted, {
        memoryLimitMb: this.limits.memoryLimitMb,
        timeoutMs: this.persisted.config.projectionExecutionTimeout ?? this.limits.executionTimeoutMs,
      }, root ? { '': [root.state, root.result] } : {}, this.checkpoints ? this.limits.partitionCache : 0);
      this.engine = engine;
      this.definition = engine.definition;
      this.sourceReader = undefined;
      this.filter = eventFilterOf(engine.definition);
      this.root = root;
      this.all = this.checkpoints ? undefined : new Map();
    } catch (err) {
      this.fault((err as Error).message);
      return;
    }
    if (completed) {
      // A query that completed wrote its results and its last checkpoint: it stays as it ended.
      this.runStatus = 'Completed';
      this.release();
      return;
    }
    this.runStatus = 'Running';
    this.loop = this.run().catch((err) => this.fault(`The ${this.name} projection failed: ${(err as Error).message}`))
      .finally(() => { this.loop = undefined; });
  }

  /** Stops following the log; with `checkpoint`, saves progress first (disable), without it aborts. */
  async stop(checkpoint: boolean, finalStatus: ProjectionStatus = checkpoint ? 'Stopped' : 'Aborted'): Promise<void> {
    this.stopRequested = true;
    this.wake?.abort();
    if (this.runStatus === 'Running') this.runStatus = 'Stopping';
    await this.loop;
    await this.writing;
    if (checkpoint && this.engine && this.runStatus !== 'Faulted') await this.checkpoint().catch((err) => this.fault((err as Error).message));
    this.release();
    if (this.runStatus !== 'Faulted' && this.runStatus !== 'Completed') this.runStatus = finalStatus;
  }

  /** Forgets in-memory progress: the next start reads from its last checkpoint, or from the beginning (of a new epoch, after a reset). */
  clear(): void {
    this.root = undefined;
    this.all = undefined;
    this.changed = new Map();
    this.inFlight = new Map();
    this.counters.position = 0;
    this.counters.lastCheckpointPosition = -1;
    this.pendingEmits = [];
    this.pendingResults = [];
    this.newPartitions = [];
    this.handledSinceCheckpoint = 0;
    this.unhandledBytes = 0;
    this.partitionsTouched = 0;
    this.touchedSinceCheckpoint = false;
    this.ownedStreams.clear();
  }

  private release(): void {
    this.store.blocks.leave(this);
    this.engine?.dispose();
    this.engine = undefined;
  }

  /** A projection restored as faulted: it does not run until an operator enables or resets it. */
  restoreFault(reason: string): void {
    this.runStatus = 'Faulted';
    this.stateReason = reason;
  }

  private fault(reason: string): void {
    if (this.runStatus === 'Faulted') return; // the first reason is the cause; later ones are its echoes
    this.onFault(reason);
    this.runStatus = 'Faulted';
    this.stateReason = reason;
    this.stopRequested = true;
    this.log.warn({ projection: this.name, reason }, 'projection faulted');
    this.release();
  }

  /** A query over $all never reads system streams: the log's reads leave them out (log-spaces.ts). */
  private get skipsSystem(): boolean {
    return !this.engine?.select && this.definition!.allStreams;
  }

  /** A query over named streams or categories reads them through the stream index, not the log. */
  private streamSource(): StreamSourceReader | undefined {
    const def = this.definition!;
    if (this.engine?.select || def.allStreams) return undefined;
    return (this.sourceReader ??= new StreamSourceReader(this.store, [...def.streams, ...def.categories.map((c) => `$ce-${c}`)]));
  }

  /** Reads the next page of the log, keeps what the query selects and encodes it for the engine. */
  private prepare(position: number): PreparedBatch {
    const size = this.engine?.readBatchSize ?? READ_BATCH;
    const source = this.streamSource();
    const page = source ? source.read(position, size) : this.store.readAllForward(position, size, this, this.skipsSystem);
    const { maxSelected, maxUnhandledBytes } = this.batchLimits();
    const selected: Selected[] = [];
    const positions: number[] = [];
    const gaps = page.gaps;
    let unhandledBytes = 0;
    let nextPosition = page.nextPosition;
    let cut = false;
    for (let i = 0; i < page.records.length; i++) {
      const record = page.records[i];
      if (gaps) unhandledBytes += gaps[i];
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
    const encoded = selected.length > 0 ? this.engine!.encode(selected) : undefined;
    return { encoded, count: selected.length, positions, nextPosition, caughtUp: !cut && page.isEnd, unhandledBytes };
  }

  /**
   * A batch ends where the settings want the projection to be able to act between events:
   * - pendingEventsThreshold bounds the events read and not yet handled, which are this batch and
   *   the one read ahead of it: each holds at most half (reading pauses while both are held and
   *   goes on once the first is handled, below half);
   * - with checkpoints, at checkpointHandledThreshold selected events and past
   *   checkpointUnhandledBytesThreshold bytes of unselected records, so the checkpoint those
   *   suggest is written there and not a whole read page later.
   */
  private batchLimits(): { maxSelected: number; maxUnhandledBytes: number } {
    const config = this.persisted.config;
    let maxSelected = Math.max(1, Math.floor(config.pendingEventsThreshold / 2));
    let maxUnhandledBytes = Infinity;
    if (this.checkpoints) {
      maxSelected = Math.min(maxSelected, Math.max(1, config.checkpointHandledThreshold));
      maxUnhandledBytes = config.checkpointUnhandledBytesThreshold;
    }
    return { maxSelected, maxUnhandledBytes };
  }

  private async run(): Promise<void> {
    const engine = this.engine!;
    const endAtStart = this.store.headPosition;
    let next: PreparedBatch | undefined;
    while (!this.stopRequested) {
      if (!next) await this.joinConvoy(this.counters.position);
      const batch: PreparedBatch = next ?? this.prepare(this.counters.position);
      next = undefined;
      this.counters.readsInProgress = 0;
      this.counters.bufferedEvents = batch.count;
      this.unhandledBytes += batch.unhandledBytes;
      if (batch.count > 0) {
        const started = performance.now();
        // A checkpoint will follow this batch: collect the changed partitions with it (one sandbox call, not two).
        const collectNow = this.checkpoints && this.handledSinceCheckpoint + batch.count >= this.persisted.config.checkpointHandledThreshold;
        const processing = engine.process(batch.encoded, collectNow, this.lookup);
        // While the sandbox works on this batch, read the next one.
        if (!batch.caughtUp && (this.streamSource() || !this.store.blocks.mustWait(this, batch.nextPosition, this.store.headPosition, this.skipsSystem))) {
          next = this.prepare(batch.nextPosition);
          this.counters.readsInProgress = 1;
          this.counters.bufferedEvents += next.count;
        }
        const outcome = await processing;
        this.counters.coreProcessingTimeMs += performance.now() - started;
        if (outcome.emitted.length > 0 && !this.persisted.config.emitEnabled) {
          // The prelude refuses emits without emit enabled; this guards against a query that tampered with it.
          outcome.fault ??= { message: "'emit' is not allowed by the projection/configuration/mode", index: 0 };
          outcome.emitted = [];
        }
        this.apply(outcome);
        if (outcome.fault) {
          // Keep what the events before the failing one did, readable after the fault.
          await this.collect().catch(() => undefined);
          this.fault(handlerFailure(this.name, batch.positions[outcome.fault.index], outcome.fault.message));
          return;
        }
        this.lastHandledPosition = batch.positions[batch.positions.length - 1];
        if (outcome.handled > 0) this.unhandledBytes = 0;
      }
      this.counters.bufferedEvents = next?.count ?? 0;
      this.counters.position = batch.nextPosition;
      if (this.persisted.mode !== 'Continuous' && this.counters.position >= endAtStart) {
        await this.complete();
        return;
      }
      if (this.checkpointDue(batch.caughtUp)) await this.startCheckpoint();
      if (batch.caughtUp) {
        this.store.blocks.leave(this);
        await this.waitForCommit();
        await this.paceLiveReads();
      } else await new Promise<void>((resolve) => setImmediate(resolve)); // let HTTP requests in between batches
    }
  }

  /** Brings the host's copy of the changed partitions up to date from the sandbox. */
  private async collect(): Promise<void> {
    if (!this.engine || this.engine.disposed || this.partitionsTouched === 0) return; // nothing changed since the last collection
    const changed = await this.engine.collect();
    this.partitionsTouched = 0;
    this.applyChanges(changed);
  }

  private applyChanges(changed: readonly ChangedPartition[]): void {
    for (const [partition, state, result, , isNew] of changed) {
      this.checkStateSize(partition, state, result);
      const value = { state, result };
      if (partition === '') {
        this.root = value;
        continue;
      }
      if (isNew) this.newPartitions.push(partition);
      if (this.all) this.all.set(partition, value);
      else this.changed.set(partition, value);
    }
  }

  /** MaxProjectionStateSize: a partition whose state and result outgrow it faults the projection. */
  private checkStateSize(partition: string, state: string | null, result: string | null): void {
    const max = this.limits.maxStateBytes;
    if (max <= 0) return;
    const size = Buffer.byteLength(state ?? '', 'utf8') + (result === state ? 0 : Buffer.byteLength(result ?? '', 'utf8'));
    if (size <= max) return;
    const where = partition === '' ? '' : ` in partition '${shownName(partition)}'`;
    throw new Error(`The state size of projection '${this.name}'${where} is ${size} bytes which exceeds the configured MaxProjectionStateSize of ${max} bytes.`);
  }

  /**
   * The reference's rule (projections.md §13): a checkpoint is suggested once handled events reach
   * checkpointHandledThreshold or unhandled log bytes pass checkpointUnhandledBytesThreshold, and
   * checkpointAfterMs has passed since the last one. Emitted events and results are written with
   * checkpoints here, so pending ones make a checkpoint due as soon as checkpointAfterMs allows; and
   * a write that would grow too large (maxWriteBatchLength events for one emitted stream, or the
   * fixed guards on all emits and on changed partitions) is written at once, whatever the time.
   */
  private checkpointDue(caughtUp: boolean): boolean {
    if (!this.checkpoints) return false;
    const config = this.persisted.config;
    const pendingWrites = this.pendingEmits.length + this.pendingResults.length;
    if (pendingWrites >= MAX_EMITS_PER_CHECKPOINT || this.partitionsTouched >= MAX_PARTITIONS_PER_CHECKPOINT) return true;
    if (this.pendingEmits.length >= config.maxWriteBatchLength && this.longestEmittedWrite() >= config.maxWriteBatchLength) return true;
    const since = Date.now() - this.lastCheckpointAt;
    if (since < config.checkpointAfterMs) return false;
    if (pendingWrites > 0) return true; // emitted events and results become visible with a checkpoint
    if (this.handledSinceCheckpoint >= config.checkpointHandledThreshold) return true;
    if (this.unhandledBytes > config.checkpointUnhandledBytesThreshold) return true;
    // Beyond the reference: states changed and the log went quiet, so save them now.
    return caughtUp && this.touchedSinceCheckpoint && since >= IDLE_CHECKPOINT_MS;
  }

  /** The most events pending for one emitted stream. */
  private longestEmittedWrite(): number {
    const perStream = new Map<string, number>();
    let longest = 0;
    for (const e of this.pendingEmits) {
      const n = (perStream.get(e.streamId) ?? 0) + 1;
      perStream.set(e.streamId, n);
      if (n > longest) longest = n;
    }
    return longest;
  }

  private async waitForCommit(): Promise<void> {
    if (this.store.headPosition > this.counters.position) return; // written meanwhile (our own checkpoint, too)
    this.wake = new AbortController();
    // Pending emitted events wake the loop when their checkpoint is due, even if nothing is written.
    const dueIn = this.persisted.config.checkpointAfterMs - (Date.now() - this.lastCheckpointAt);
    const timeout = this.pendingEmits.length > 0 ? Math.max(1, dueIn)
      : this.touchedSinceCheckpoint ? IDLE_CHECKPOINT_MS : 60_000;
    await this.store.bus.waitFor(() => true, timeout, this.wake.signal);
  }

  /**
   * Catching up in the convoy of projections that share the log's decoded blocks (shared-blocks.ts):
   * waits while slower ones have still to read the blocks that reading here would push out.
   */
  private async joinConvoy(position: number): Promise<void> {
    const until = performance.now() + CONVOY_WAIT_MS;
    if (this.streamSource()) return; // it reads no shared blocks
    while (!this.stopRequested && performance.now() < until && this.store.blocks.mustWait(this, position, this.store.headPosition, this.skipsSystem)) {
      await this.store.blocks.progress(50);
    }
  }

  private async paceLiveReads(): Promise<void> {
    const wait = this.lastLiveReadAt + LIVE_READ_INTERVAL_MS - performance.now();
    if (wait > 0 && !this.stopRequested) await new Promise((resolve) => setTimeout(resolve, wait));
    this.lastLiveReadAt = performance.now();
  }

  /** The event the query reads for this record, or undefined when it reads none. */
  private select(record: EventRecord): Selected | undefined {
    if (this.engine?.select) return this.engine.select(record);
    return selectEvent(this.definition!, this.filter!, this.store, record);
  }

  private apply(outcome: BatchOutcome): void {
    this.counters.eventsProcessedAfterRestart += outcome.processed;
    this.handledSinceCheckpoint += outcome.handled;
    this.partitionsTouched = outcome.touched ?? 0;
    this.applyChanges(outcome.changed);
    if (outcome.handled > 0) this.touchedSinceCheckpoint = true;
    for (const line of outcome.logs) this.log.debug({ projection: this.name }, line);
    for (const reason of outcome.skipped ?? []) this.skip(reason);
    // What a query (one-time, transient) writes waits for its end when it has no checkpoints.
    if (this.checkpoints || this.persisted.mode !== 'Continuous') {
      // One handler may emit any number of events: never spread them into a call's arguments.
      for (const e of outcome.emitted) this.pendingEmits.push(e);
      for (const r of outcome.results ?? []) this.pendingResults.push(r);
    }
  }

  private skip(reason: string): void {
    const skipped = ++this.counters.eventsSkipped;
    // Logged, but a flood of such events must not flood the log: the first ten, then every 1,000th.
    if (skipped <= 10 || skipped % 1000 === 0) {
      this.log.warn({ projection: this.name, skipped, reason }, 'projection skipped an event the store cannot index');
    }
  }

  /** Writes everything since the last checkpoint, and the checkpoint, in one transaction; resolves once it is written. */
  async checkpoint(): Promise<void> {
    await this.startCheckpoint();
    await this.writing;
  }

  /**
   * Collects the changed partitions and starts writing the checkpoint; resolves once the write is
   * under way, so the projection goes on with the next events meanwhile. A checkpoint starts only
   * after the previous one is written: it numbers its links and checks its streams against what
   * that one wrote.
   */
  private async startCheckpoint(): Promise<void> {
    await this.writing;
    if (!this.checkpoints || this.runStatus === 'Faulted') return;
    try {
      await this.collect();
    } catch (err) {
      // A state that cannot be stored (NaN, a cycle, too large): the fault is at the last event handled.
      this.fault(handlerFailure(this.name, this.lastHandledPosition, (err as Error).message));
      return;
    }
    const writes = new WriteSet(this.store, this.persisted.config.maxWriteBatchLength);
    const position = this.counters.position;
    const tagMeta = tagMetadata(this.tag, position);
    for (const e of this.engine?.checkpointEvents?.(tagMeta) ?? []) this.pendingEmits.push(e);
    this.addEmits(writes, tagMeta);
    this.addResults(writes, tagMeta);
    this.addCheckpoint(writes, tagMeta, false);
    const visibleEvents = this.pendingEmits.length + this.pendingResults.length;
    this.pendingEmits = [];
    this.pendingResults = [];
    const flight = this.changed;
    this.inFlight = flight;
    this.changed = new Map();
    this.newPartitions = [];
    this.handledSinceCheckpoint = 0;
    this.unhandledBytes = 0;
    this.touchedSinceCheckpoint = false;
    this.lastCheckpointAt = Date.now();
    this.counters.writesInProgress = 1;
    this.counters.writeRecordsInFlight = writes.count;
    this.counters.writePendingEventsBeforeCheckpoint = visibleEvents;
    // Checkpoint, states and emitted events stay one atomic batch; its fsync can wait for the
    // next synced write, since after a crash the projection redoes everything since the last
    // checkpoint that made it (exactly once either way).
    this.writing = this.store.transact(writes.toStreamWrites(), true).then(
      () => { this.counters.lastCheckpointPosition = position; },
      (err: Error) => this.fault(`The ${this.name} projection failed: ${err.message}`),
    ).finally(() => {
      if (this.inFlight === flight) this.inFlight = new Map();
      this.counters.writesInProgress = 0;
      this.counters.writeRecordsInFlight = 0;
      this.counters.writePendingEventsBeforeCheckpoint = 0;
    });
  }

  /** New partitions registered, changed partitions' checkpoints, and the root checkpoint last (a completed query's marked $cp). */
  private addCheckpoint(writes: WriteSet, tagMeta: Record<string, unknown>, completed: boolean): void {
    for (const p of this.newPartitions) writes.add(partitionsStream(this.name), event(EVENT.partition, p, false, tagMeta));
    for (const [p, v] of this.changed) {
      writes.addCheckpoint(partitionCheckpointStream(this.name, p), event(EVENT.partitionCheckpoint, encodeCheckpointBody(v), true, tagMeta));
    }
    const rootTag = completed ? { ...tagMeta, $cp: true } : tagMeta;
    writes.addCheckpoint(checkpointStream(this.name), event(EVENT.checkpoint, encodeCheckpointBody(this.root), true, rootTag));
  }

  private addEmits(writes: WriteSet, tagMeta: Record<string, unknown>): void {
    // The tag's keys win over the emitted metadata's: appended last, JSON readers take the last duplicate.
    const tagJson = JSON.stringify(tagMeta);
    const track = this.persisted.config.trackEmittedStreams;
    for (const e of this.pendingEmits) {
      const firstWrite = this.claim(writes, e.streamId);
      const own = JSON.stringify(e.metadata);
      const metadata = own === '{}' ? tagJson : `${own.slice(0, -1)},${tagJson.slice(1)}`;
      writes.add(e.streamId, {
        eventId: newUuid(), eventType: e.eventType, isJson: e.isJson, data: Buffer.from(e.data, 'utf8'),
        metadata: Buffer.from(metadata, 'utf8'), idempotent: false,
      });
      // A stream this projection never wrote before is tracked with the write that first fills it.
      if (track && firstWrite) writes.add(emittedStreamsStream(this.name), event(EVENT.streamTracked, e.streamId, false, tagMeta));
    }
  }

  /** One Result (or ResultRemoved) per change, in event order; a partition's also linked from the main result stream. */
  private addResults(writes: WriteSet, tagMeta: Record<string, unknown>): void {
    const main = this.resultStreamName;
    for (const [partition, result] of this.pendingResults) {
      const type = result === null ? EVENT.resultRemoved : EVENT.result;
      const data = result ?? '';
      if (partition === '') {
        this.claim(writes, main);
        writes.add(main, event(type, data, result !== null, tagMeta));
        continue;
      }
      const stream = partitionResultStream(this.name, partition, this.definition!.partitionResultStreamNamePattern);
      this.claim(writes, stream);
      this.claim(writes, main);
      const n = writes.add(stream, event(type, data, result !== null, tagMeta));
      writes.add(main, event(LINK_EVENT_TYPE, `${n}@${stream}`, false, tagMeta));
    }
  }

  /**
   * Before the first write of a run to a stream: it must not hold events written by anyone else,
   * and events of an older epoch (before a reset) are hidden behind a new $tb.
   */
  private claim(writes: WriteSet, streamId: string): boolean {
    if (this.ownedStreams.delete(streamId)) {
      this.ownedStreams.set(streamId, true); // most recently used last
      return false;
    }
    const info = this.store.streamInfo(streamId);
    if (info?.tombstoned) throw new Error(`Stream : ${streamId} is deleted. Cannot emit events to it`);
    let firstWrite = true;
    const last = this.store.readEvent(streamId, -1);
    if (last.status === 'ok' && last.event.event) {
      const tag = readTag(last.event.event.metadata);
      if (!tag) throw new Error(`The '${streamId}' stream managed by projection ${this.name} has been written to from the outside.`);
      const { projectionId: id, epoch } = tag;
      if (id !== this.id && this.isLiveProjection(id)) {
        throw new Error(`Multiple projections emitting to the same stream detected. Stream: '${streamId}'.`);
      }
      firstWrite = id !== this.id;
      // Written by an older epoch of this projection, or by a deleted one: hide those events.
      if (id !== this.id || epoch < this.persisted.epoch) {
        const meta = { ...this.store.metadataOf(streamId).raw, $tb: info!.lastEventNumber + 1 };
        writes.add(metastreamOf(streamId), event(METADATA_EVENT_TYPE, JSON.stringify(meta), true, {}));
      }
    }
    this.ownedStreams.set(streamId, true);
    if (this.ownedStreams.size > OWNED_STREAMS_CACHE) this.ownedStreams.delete(this.ownedStreams.keys().next().value!);
    return firstWrite;
  }

  /**
   * Query modes at the end of the log: one Result per partition, then $Eof; with checkpoints, the
   * last one (marked completed) with every partition not yet written. The projection is Completed.
   */
  private async complete(): Promise<void> {
    await this.writing;
    await this.collect();
    const writes = new WriteSet(this.store, this.persisted.config.maxWriteBatchLength);
    const tagMeta = tagMetadata(this.tag, this.counters.position);
    this.addEmits(writes, tagMeta);
    const main = this.resultStreamName;
    if (this.definition!.handlerOrder.length === 0) this.addResults(writes, tagMeta); // results while running; the end adds only $Eof
    else {
      // With when, phase 2: one Result per partition (its result, or none when it is null), in
      // order of first appearance, root first.
      this.claim(writes, main);
      const ordered = this.orderedPartitions();
      for (const [partition, v] of ordered) {
        writes.add(main, event(EVENT.result, v.result ?? '', v.result !== null, { ...tagMeta, ...(partition ? { partition } : {}) }));
      }
    }
    this.claim(writes, main);
    writes.add(main, event(EVENT.eof, '', false, tagMeta));
    if (this.checkpoints) this.addCheckpoint(writes, tagMeta, true);
    await this.store.transact(writes.toStreamWrites());
    this.changed = new Map();
    this.newPartitions = [];
    this.pendingEmits = [];
    this.pendingResults = [];
    this.counters.lastCheckpointPosition = this.counters.position;
    this.runStatus = 'Completed';
    this.release();
  }

  /**
   * Every partition with its state, root first, then in order of first appearance: the host's copy
   * without checkpoints, else the partitions stream (and those not yet registered) with their states.
   */
  private orderedPartitions(): [string, PartitionValue][] {
    const ordered: [string, PartitionValue][] = this.root ? [['', this.root]] : [];
    if (this.all) return [...ordered, ...this.all];
    const names = new Set<string>();
    for (const entry of this.store.streamRecords(partitionsStream(this.name))) {
      if (isOfEpoch(readTag(entry.metadata), this.id, this.persisted.epoch)) names.add(entry.data.toString('utf8'));
    }
    for (const p of this.newPartitions) names.add(p);
    for (const p of names) ordered.push([p, this.valueOf(p) ?? { state: null, result: null }]);
    return ordered;
  }

  /** Reads the last checkpoint: the position and the root partition (the other partitions are read when used). */
  private loadCheckpoint(): { root: PartitionValue | undefined; completed: boolean } | undefined {
    const last = this.store.readEvent(checkpointStream(this.name), -1);
    if (last.status !== 'ok' || !last.event.event) return undefined;
    const tag = readTag(last.event.event.metadata);
    if (!isOfEpoch(tag, this.id, this.persisted.epoch)) return undefined;
    this.counters.position = tag!.position;
    this.counters.lastCheckpointPosition = this.counters.position;
    return { root: decodeCheckpointBody(last.event.event.data), completed: tag!.completed };
  }

  /** A partition's state and result as its last checkpoint of this epoch holds them. */
  private readStored(partition: string): PartitionValue | undefined {
    const cp = this.store.readEvent(partitionCheckpointStream(this.name, partition), -1);
    if (cp.status !== 'ok' || !cp.event.event || !isOfEpoch(readTag(cp.event.event.metadata), this.id, this.persisted.epoch)) return undefined;
    return decodeCheckpointBody(cp.event.event.data);
  }
}

function handlerFailure(name: string, position: number | undefined, message: string): string {
  return `The ${name} projection failed to process an event.\r\nHandler: js\r\nEvent Position: C:${position}/P:${position}\r\n\r\nMessage:\r\n\r\n${message}`;
}
