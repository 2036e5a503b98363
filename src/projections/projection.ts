import type { Logger } from 'pino';
import { OutOfSpaceError, type Store } from '../store/index.js';
import type { BatchOutcome, StoredPartition } from './sandbox.js';
import type { Engine, EngineLimits } from './engine.js';
import type { SourceDefinition } from './language/source-definition.js';
import type { PersistedProjection, RuntimeLimits } from './model.js';
import { BatchReader, type BatchLimits, type PreparedBatch } from './batch-reader.js';
import { tagVersion } from './checkpoint-codec.js';
import { EmitWriter } from './emit-writer.js';
import { PartitionCache } from './partition-cache.js';
import { defaultResultStream } from './streams.js';
import { newRunCounters, progressOf, type ProjectionStatistics, type ProjectionStatus } from './statistics.js';

// One projection at run time: the run loop and its policy. It reads the log from its checkpoint
// (batch-reader.ts), hands the events its query selects to its engine in batches, and decides when
// to checkpoint; a checkpoint writes changed partition states, results and emitted events together
// in ONE store transaction (emit-writer.ts), so a crash resumes from the last checkpoint with
// nothing emitted twice and nothing lost. The host's copy of the partitions is partition-cache.ts;
// what a checkpoint holds and how it is read back, checkpoint-codec.ts. Its figures are read
// through snapshot(). A fault is the query's (its code threw, looped, ran out of memory: it stays
// faulted) or the full disk's (the store refused a checkpoint for space: nothing of it was
// written, and the manager runs the projection again from its last checkpoint once writes
// succeed, as a restart would: resumeAfterFullDisk). (Somewhat over 400 lines: the loop and the
// checkpoint policy weigh the same since-the-last-checkpoint state, and split apart they would
// hand it back and forth.)

/** A projection that handled events and then went quiet checkpoints its states after this long. */
const IDLE_CHECKPOINT_MS = 1000;
/**
 * Emitted events (to all streams together) that make a checkpoint due whatever the settings say:
 * each is a record of the checkpoint's one atomic write, and 1,000 of them held the event loop
 * long enough to show in client append latency (measured with the system projections under load).
 */
const MAX_EMITS_PER_CHECKPOINT = 250;
/**
 * After a checkpoint write that took long (queued behind other projections' checkpoints, or the
 * event loop busy with their turns), the next checkpoint may hold more emitted events: one
 * MAX_EMITS_PER_CHECKPOINT more for each EMIT_GROWTH_WRITE_MS the write took, up to EMIT_GROWTH
 * times as many. A bigger write then costs little beside the wait, while at 250 a checkpoint
 * `$streams` moved ~1,250 records a second as twenty projections caught up and fell to half the
 * log; writes under a light load take a few milliseconds and the limit stays.
 */
const EMIT_GROWTH_WRITE_MS = 12.5;
const EMIT_GROWTH = 4;
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
  /** The fault came from the store refusing a write for space, not from the query (see resumeAfterFullDisk). */
  private fullDiskFault = false;
  private readonly counters = newRunCounters();
  definition: SourceDefinition | undefined;

  private engine: Engine | undefined;
  private reader: BatchReader | undefined;
  private writer: EmitWriter | undefined;
  private partitions: PartitionCache;
  private loop: Promise<void> | undefined;
  /** The checkpoint being written. */
  private writing: Promise<void> | undefined;
  private stopRequested = false;
  private wake: AbortController | undefined;
  /** What the checkpoint policy weighs, since the last checkpoint. */
  private since = sinceCheckpoint();
  /** Partitions changed in the engine since the last collection (as it last reported). */
  private partitionsTouched = 0;
  private lastHandledPosition = 0;
  /** Emitted events that make a checkpoint due (see EMIT_GROWTH_WRITE_MS). */
  private emitsPerCheckpoint = MAX_EMITS_PER_CHECKPOINT;

  constructor(public persisted: PersistedProjection, readonly id: number, private readonly store: Store,
    private readonly log: Logger, private readonly limits: RuntimeLimits,
    /** Whether a projection id belongs to a projection that still exists. */
    private readonly isLiveProjection: (id: number) => boolean,
    /** Makes the engine that runs this projection's handlers (sandboxed JS, or native). */
    private readonly createEngine: (p: PersistedProjection, limits: EngineLimits, stored: Record<string, StoredPartition>, partitionCache: number) => Promise<Engine>,
    /**
     * Told once when the projection faults: the manager keeps a fault of the query across
     * restarts, and resumes one of the full disk (`byFullDisk`) once writes succeed again.
     */
    private readonly onFault: (reason: string, byFullDisk: boolean) => void = () => undefined) {
    this.partitions = this.newPartitionCache();
  }

  get name(): string {
    return this.persisted.name;
  }

  get status(): ProjectionStatus {
    return this.runStatus;
  }

  /** Faulted because the store refused its write for space (not by its query): it resumes once writes succeed again. */
  get faultedByFullDisk(): boolean {
    return this.runStatus === 'Faulted' && this.fullDiskFault;
  }

  get checkpoints(): boolean {
    return this.persisted.checkpointsEnabled && this.persisted.mode !== 'Transient';
  }

  get resultStreamName(): string {
    return this.definition?.resultStreamName?.trim() || defaultResultStream(this.name);
  }

  /** Position of the next record to read, for loops that wait on it every turn (a snapshot per turn cost the bench ~0.7 ms of live lag). */
  get position(): number {
    return this.counters.position;
  }

  /** The projection's figures now: a copy, unaffected by what happens next. */
  snapshot(): ProjectionStatistics {
    const flight = this.writer?.inFlight;
    return {
      ...this.counters,
      status: this.runStatus,
      stateReason: this.stateReason,
      progress: progressOf(this.runStatus, this.counters.position, this.store.headPosition),
      writesInProgress: flight ? 1 : 0,
      writeRecordsInFlight: flight?.records ?? 0,
      writePendingEventsBeforeCheckpoint: flight?.visibleEvents ?? 0,
      writePendingEventsAfterCheckpoint: this.writer?.pendingEvents ?? 0,
      partitionsCached: this.engine && !this.engine.disposed ? this.engine.resident ?? 0 : this.partitions.size,
    };
  }

  /** Raw state and result JSON of a partition ('' when none): live from the sandbox while it runs. */
  read(partition: string): Promise<{ state: string; result: string }> {
    return this.partitions.read(partition, this.engine);
  }

  /** Loads the checkpoint, prepares the sandbox and starts following the log. */
  async start(): Promise<void> {
    if (await this.prepare()) this.begin();
  }

  /**
   * Loads the checkpoint and prepares the sandbox: true when the projection is ready to follow
   * the log (begin), false when it faulted or stays as it completed. A start of many (the node's,
   * ProjectionManager.start) prepares them all first and then begins them.
   */
  async prepare(): Promise<boolean> {
    if (this.loop || this.runStatus === 'Preparing') return false;
    this.runStatus = 'Preparing';
    this.stateReason = '';
    this.fullDiskFault = false;
    this.stopRequested = false;
    this.counters.eventsProcessedAfterRestart = 0;
    // A run starts from its last checkpoint, or from the beginning: nothing of an aborted run survives.
    // (checkpointAfterMs counts from the start, where the last checkpoint was loaded.)
    this.clear();
    let completed = false;
    try {
      const tag = this.checkpoints ? this.partitions.restoreRoot() : undefined;
      if (tag) this.counters.position = this.counters.lastCheckpointPosition = tag.position;
      completed = tag?.completed === true && this.persisted.mode === 'OneTime';
      const root = this.partitions.root;
      const engine = await this.createEngine(this.persisted, {
        memoryLimitMb: this.limits.memoryLimitMb,
        timeoutMs: this.persisted.config.projectionExecutionTimeout ?? this.limits.executionTimeoutMs,
        maxEmitsPerEvent: this.limits.maxEmitsPerEvent,
      }, root ? { '': [root.state, root.result] } : {}, this.checkpoints ? this.limits.partitionCache : 0);
      this.engine = engine;
      this.definition = engine.definition;
      this.reader = new BatchReader(this.store, engine);
      this.writer = this.newEmitWriter();
    } catch (err) {
      this.fault((err as Error).message, err);
      return false;
    }
    if (completed) {
      // A query that completed wrote its results and its last checkpoint: it stays as it ended.
      this.runStatus = 'Completed';
      this.release();
      return false;
    }
    if (this.stopRequested) {
      this.release(); // stopped while it was being prepared: its sandbox goes
      return false;
    }
    return true;
  }

  /** Starts following the log, once prepared (unless it was stopped or faulted meanwhile). */
  begin(): void {
    if (this.loop || this.runStatus !== 'Preparing' || this.stopRequested || !this.engine) return;
    this.runStatus = 'Running';
    this.loop = this.run().catch((err) => this.fault(`The ${this.name} projection failed: ${(err as Error).message}`, err))
      .finally(() => { this.loop = undefined; });
  }

  /** Stops following the log; with `checkpoint`, saves progress first (disable), without it aborts. */
  async stop(checkpoint: boolean, finalStatus: ProjectionStatus = checkpoint ? 'Stopped' : 'Aborted'): Promise<void> {
    this.stopRequested = true;
    this.wake?.abort();
    if (this.runStatus === 'Running') this.runStatus = 'Stopping';
    await this.loop;
    await this.writing;
    if (checkpoint && this.engine && this.runStatus !== 'Faulted') await this.checkpoint().catch((err) => this.fault((err as Error).message, err));
    this.release();
    if (this.runStatus !== 'Faulted' && this.runStatus !== 'Completed') this.runStatus = finalStatus;
  }

  /** Forgets in-memory progress: the next start reads from its last checkpoint, or from the beginning (of a new epoch, after a reset). */
  clear(): void {
    this.partitions = this.newPartitionCache();
    this.counters.position = 0;
    this.counters.lastCheckpointPosition = -1;
    this.writer = undefined;
    this.since = sinceCheckpoint();
    this.partitionsTouched = 0;
    this.emitsPerCheckpoint = MAX_EMITS_PER_CHECKPOINT;
  }

  private newPartitionCache(): PartitionCache {
    return new PartitionCache(this.store, {
      name: this.name, projectionId: this.id, epoch: this.persisted.epoch, checkpoints: this.checkpoints, maxStateBytes: this.limits.maxStateBytes,
    });
  }

  /** The writer of a run: what it writes with is fixed while it runs (definitions and settings change only while stopped). */
  private newEmitWriter(): EmitWriter {
    const { epoch, version, config } = this.persisted;
    return new EmitWriter(this.store, {
      name: this.name, projectionId: this.id, epoch, tagVersion: tagVersion(this.id, epoch, version),
      trackEmittedStreams: config.trackEmittedStreams, maxWriteLength: config.maxWriteBatchLength,
      resultStreamName: this.resultStreamName, partitionResultPattern: this.definition!.partitionResultStreamNamePattern,
      isLiveProjection: this.isLiveProjection,
    });
  }

  private release(): void {
    this.reader?.leave();
    this.engine?.dispose();
    this.engine = undefined;
  }

  /** A projection restored as faulted: it does not run until an operator enables or resets it. */
  restoreFault(reason: string): void {
    this.runStatus = 'Faulted';
    this.stateReason = reason;
    this.fullDiskFault = false;
  }

  /**
   * After a fault of the full disk, once the store writes again: runs again from its last
   * checkpoint, exactly as a restart of the node would (the refused checkpoint wrote nothing, so
   * what it held is emitted once, by the new run). Nothing happens if the projection was enabled,
   * reset or stopped meanwhile.
   */
  async resumeAfterFullDisk(): Promise<void> {
    if (!this.faultedByFullDisk) return;
    await this.stop(false, 'Faulted'); // the faulted run's loop and write end first
    if (this.faultedByFullDisk) await this.start();
  }

  /** `cause`: what was thrown, if anything; a write the store refused for space makes it a fault of the full disk. */
  private fault(reason: string, cause?: unknown): void {
    if (this.runStatus === 'Faulted') return; // the first reason is the cause; later ones are its echoes
    const byFullDisk = cause instanceof OutOfSpaceError;
    if (byFullDisk) {
      reason = `The ${this.name} projection could not write: No space left on device (${cause.reason}); `
        + 'it resumes from its last checkpoint once writes succeed again';
    }
    this.onFault(reason, byFullDisk);
    this.runStatus = 'Faulted';
    this.fullDiskFault = byFullDisk;
    this.stateReason = reason;
    this.stopRequested = true;
    this.log.warn({ projection: this.name, reason }, byFullDisk ? 'projection faulted by the full disk' : 'projection faulted');
    this.release();
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
  private batchLimits(): BatchLimits {
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
    const reader = this.reader!;
    const counters = this.counters;
    const endAtStart = this.store.headPosition;
    let next: PreparedBatch | undefined;
    /** How long the last turn waited for the event loop (the reader reads more after a long wait: see BatchReader.read). */
    let waited = 0;
    while (!this.stopRequested) {
      if (!next) await reader.joinConvoy(counters.position, () => this.stopRequested);
      const batch: PreparedBatch = next ?? reader.read(counters.position, this.batchLimits(), waited);
      next = undefined;
      counters.readsInProgress = 0;
      counters.bufferedEvents = batch.count;
      this.since.unhandledBytes += batch.unhandledBytes;
      if (batch.count > 0) {
        const started = performance.now();
        // A checkpoint will follow this batch: collect the changed partitions with it (one sandbox call, not two).
        const collectNow = this.checkpoints && this.since.handled + batch.count >= this.persisted.config.checkpointHandledThreshold;
        const processing = engine.process(batch.encoded, collectNow, this.partitions.lookup);
        // While the sandbox works on this batch, read the next one.
        if (!batch.caughtUp && reader.mayReadAhead(batch.nextPosition)) {
          next = reader.read(batch.nextPosition, this.batchLimits(), waited);
          counters.readsInProgress = 1;
          counters.bufferedEvents += next.count;
        }
        const outcome = await processing;
        counters.coreProcessingTimeMs += performance.now() - started;
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
        if (outcome.handled > 0) this.since.unhandledBytes = 0;
      }
      counters.bufferedEvents = next?.count ?? 0;
      counters.eventsProcessedAfterRestart += batch.sieved; // (records the engine's sieve passed over undecoded)
      counters.position = batch.nextPosition;
      if (this.persisted.mode !== 'Continuous' && counters.position >= endAtStart) {
        await this.complete();
        return;
      }
      if (this.checkpointDue(batch.caughtUp)) await this.startCheckpoint();
      waited = 0;
      if (batch.caughtUp) {
        reader.leave();
        await this.waitForCommit();
        if (!this.stopRequested) await reader.paceLiveReads();
      } else {
        const yielded = performance.now();
        await new Promise<void>((resolve) => setImmediate(resolve)); // let HTTP requests in between batches
        waited = performance.now() - yielded;
      }
    }
  }

  /** Brings the host's copy of the changed partitions up to date from the sandbox. */
  private async collect(): Promise<void> {
    if (!this.engine || this.engine.disposed || this.partitionsTouched === 0) return; // nothing changed since the last collection
    const changed = await this.engine.collect();
    this.partitionsTouched = 0;
    this.partitions.apply(changed);
  }

  private apply(outcome: BatchOutcome): void {
    this.counters.eventsProcessedAfterRestart += outcome.processed;
    this.since.handled += outcome.handled;
    this.partitionsTouched = outcome.touched ?? 0;
    this.partitions.apply(outcome.changed);
    if (outcome.handled > 0) this.since.touched = true;
    for (const line of outcome.logs) this.log.debug({ projection: this.name }, line);
    for (const reason of outcome.skipped ?? []) this.skip(reason);
    // What a query (one-time, transient) writes waits for its end when it has no checkpoints.
    if (this.checkpoints || this.persisted.mode !== 'Continuous') this.writer!.add(outcome.emitted, outcome.results ?? []);
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
    const position = this.counters.position;
    const engine = this.engine;
    const write = await this.writer!.checkpoint(position, this.partitions.pending, (tag) => engine?.checkpointEvents?.(tag) ?? []);
    const flight = this.partitions.beginWrite();
    this.since = sinceCheckpoint();
    // Checkpoint, states and emitted events stay one atomic batch; its fsync can wait for the
    // next synced write, since after a crash the projection redoes everything since the last
    // checkpoint that made it (exactly once either way).
    const started = performance.now();
    this.writing = this.writer!.write(write, true, engine?.checkpointsAhead === true).then(
      () => {
        this.counters.lastCheckpointPosition = position;
        const steps = Math.floor((performance.now() - started) / EMIT_GROWTH_WRITE_MS);
        this.emitsPerCheckpoint = MAX_EMITS_PER_CHECKPOINT * Math.min(EMIT_GROWTH, Math.max(1, steps));
      },
      (err: Error) => this.fault(`The ${this.name} projection failed: ${err.message}`, err),
    ).finally(() => this.partitions.written(flight));
  }

  /**
   * Query modes at the end of the log: one Result per partition, then $Eof; with checkpoints, the
   * last one (marked completed) with every partition not yet written. The projection is Completed.
   */
  private async complete(): Promise<void> {
    await this.writing;
    await this.collect();
    const position = this.counters.position;
    // With when, phase 2: root first, then in order of first appearance; without, results were written while running.
    const phase2 = this.definition!.handlerOrder.length === 0 ? undefined : this.partitions.ordered();
    await this.writer!.write(await this.writer!.complete(position, phase2, this.checkpoints ? this.partitions.pending : undefined));
    this.partitions.written(this.partitions.beginWrite());
    this.counters.lastCheckpointPosition = position;
    this.runStatus = 'Completed';
    this.release();
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
    const writer = this.writer!;
    const pendingWrites = writer.pendingEvents;
    if (pendingWrites >= this.emitsPerCheckpoint || this.partitionsTouched >= MAX_PARTITIONS_PER_CHECKPOINT) return true;
    if (writer.pendingEmits >= config.maxWriteBatchLength && writer.longestEmittedWrite() >= config.maxWriteBatchLength) return true;
    const elapsed = Date.now() - this.since.at;
    if (elapsed < config.checkpointAfterMs) return false;
    if (pendingWrites > 0) return true; // emitted events and results become visible with a checkpoint
    if (this.since.handled >= config.checkpointHandledThreshold) return true;
    if (this.since.unhandledBytes > config.checkpointUnhandledBytesThreshold) return true;
    // Beyond the reference: states changed and the log went quiet, so save them now.
    return caughtUp && this.since.touched && elapsed >= IDLE_CHECKPOINT_MS;
  }

  private async waitForCommit(): Promise<void> {
    if (this.store.headPosition > this.counters.position) return; // written meanwhile (our own checkpoint, too)
    this.wake = new AbortController();
    // Pending emitted events wake the loop when their checkpoint is due, even if nothing is written.
    const dueIn = this.persisted.config.checkpointAfterMs - (Date.now() - this.since.at);
    const timeout = this.writer!.pendingEmits > 0 ? Math.max(1, dueIn) : this.since.touched ? IDLE_CHECKPOINT_MS : 60_000;
    await this.store.bus.waitFor(() => true, timeout, this.wake.signal);
  }
}

/** The checkpoint policy's measures, from now. */
function sinceCheckpoint(): { handled: number; unhandledBytes: number; touched: boolean; at: number } {
  // handled: events handled; unhandledBytes: log bytes of records the query did not select (since
  // the last handled batch, too); touched: some event changed a state still only in the sandbox.
  return { handled: 0, unhandledBytes: 0, touched: false, at: Date.now() };
}

/** The reason a projection faults with when its query failed at the event at `position`. */
export function handlerFailure(name: string, position: number | undefined, message: string): string {
  return `The ${name} projection failed to process an event.\r\nHandler: js\r\nEvent Position: C:${position}/P:${position}\r\n\r\nMessage:\r\n\r\n${message}`;
}
