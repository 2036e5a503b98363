import { strict as assert } from 'node:assert';
import type { BatchOp, Rocks } from './rocks.js';
import type { CommitBus } from './bus.js';
import type { EventRecord } from './record.js';
import type { CommitHorizon } from './commit-horizon.js';
import type { LogTailCache } from './log-cache.js';
import type { WriterStats } from './writer-stats.js';
import { NotLeaderError, StoreClosedError } from './errors.js';
import { OutOfSpaceError, type SpaceWatch } from './out-of-space.js';
import { encodeWriterCheckpoint, WRITER_CHECKPOINT_KEY, type WriterCheckpoint } from './stream-state.js';
import type { Appended } from './batch-builder.js';
import type { Batch, BatchSource, FailedBatch, Pending, ShippedBatch } from './batch.js';
import { isClientWrite, isDeferred, isDeferredAhead } from './batch.js';
import type { WriteThread } from './write-thread.js';
import { LoopSlices } from '../loop-slices.js';

// Commit once: every write goes through one pipeline, queue → batch → durable → visible →
// publish. Writes wait in one queue; each turn a batch source (client-writes.ts, replicated-
// writes.ts, removals.ts) takes from its head what goes in one batch; the batch is written as ONE
// RocksDB write batch, synced; then the writer's state moves on (checkpoint, log tail), readers
// see it (commit-horizon.ts), its callers hear, and it is published on the commit bus. Writes
// arriving meanwhile wait for the next turn: that is the group commit. On a cluster leader (a
// ReplicationGate) readers see a batch and its callers hear only once a quorum holds it; on a
// follower with bounded reads once its leader's commit position passes it (commitThrough).
// A batch that cannot be written (a full disk) fails its callers and changes nothing in memory:
// the writer's state moves on only in `written`, after RocksDB took the batch, so the next batch
// is planned from the same log end. While the disk is full (an out-of-space episode,
// out-of-space.ts) an idle writer tries a write of its checkpoint every PROBE_MS, so the episode
// ends, and whoever waits for it hears, as soon as RocksDB writes again, with or without clients.
//
// A large operation (client-writes.ts: thousands of events, as a projection checkpoint with a
// burst of emitted events) is one batch too, but not one turn of the event loop: it is built in
// slices, written on the write thread (write-thread.ts) as ONE atomic RocksDB write, and its
// records are added to the log tail in slices, while reads, /ping and every other request are
// served in between. Meanwhile the pipeline takes no other batch (commitLarge): every decision
// and position of the large batch assumes the log as it was when the batch began, and the log
// stays written in order, one batch after the other. A crash at any point leaves all of the
// large batch or none of it.

/** How often an idle writer tries whether RocksDB writes again after running out of space (RocksDB itself checks every 5 s). */
const PROBE_MS = 1000;

/**
 * The cluster's hold on the writer (src/cluster). Unset on a single node: every write is settled
 * once durable, as ever. Set on a cluster node: only a leader takes writes, each durable batch is
 * handed over for shipping to the followers, and its callers are answered (and the commit
 * published) only once a quorum of nodes holds the log up to the batch's end.
 */
export interface ReplicationGate {
  /** Why this node takes no writes now (a follower, a leader still starting), or undefined when it does. */
  refusal(): string | undefined;
  /** A batch is durable here: ship it. Called in log order, before its callers hear anything. */
  shipped(batch: ShippedBatch, nextPosition: number): void;
  /** Calls `settle` once a quorum holds the log up to `position` (in order of the calls), or `fail` if the term ends first. */
  whenReplicated(position: number, settle: () => void, fail: (err: Error) => void): void;
}

export interface PipelineDeps {
  rocks: Rocks;
  checkpoint: WriterCheckpoint;
  horizon: CommitHorizon;
  /** The in-memory tail of the log, extended with every durable commit. */
  tail: LogTailCache;
  bus: CommitBus;
  stats: WriterStats;
  /** Whether writes are refused for space (an episode), told of each refused and each successful write. */
  space: SpaceWatch;
  /** Where large batches are written, off the event loop. */
  writeThread: WriteThread;
  /** A cluster node: a follower's copies too are held until the leader's commit position passes them. */
  boundedReads: boolean;
  /** Called after a batch that wrote to the metastreams of these streams. */
  onMetadataChanged: (streamIds: Iterable<string>) => void;
  sources: { client: BatchSource; replicated: BatchSource; removal: BatchSource };
}

/** Records of a large batch added to the log tail between two looks at the clock (LoopSlices). */
const TAIL_RECORDS_PER_STEP = 1024;

export class CommitPipeline {
  /** The cluster's hold on this writer (ReplicationGate), if any. */
  gate: ReplicationGate | undefined;
  private readonly queue: Pending[] = [];
  private scheduled = false;
  private closed = false;
  private drained: (() => void) | undefined;
  /** A deferred-sync write is in the log but not yet fsynced (the next synced write covers it). */
  private unsynced = false;
  /** The end of the last batch published. */
  private publishedThrough = -1;
  /** Tries a write while an out-of-space episode lasts (see PROBE_MS). */
  private probe: NodeJS.Timeout | undefined;
  /** A large batch is being built or written (commitLarge): no other batch is taken meanwhile. */
  private largeUnderWay = false;

  constructor(private readonly deps: PipelineDeps) {}

  get queueLength(): number {
    return this.queue.length;
  }

  enqueue(p: Pending): void {
    if (this.closed) {
      p.reject(new StoreClosedError());
      return;
    }
    // A scavenge's removal is each node's own (its copy of the log), a follower's copy too.
    const refusal = isClientWrite(p) ? this.gate?.refusal() : undefined;
    if (refusal !== undefined) {
      p.reject(new NotLeaderError(refusal));
      return;
    }
    this.queue.push(p);
    this.deps.stats.queued(this.queue.length);
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => this.flush());
    }
  }

  /**
   * A quorum holds the log up to `position` (the leader's commit position, on a follower): the
   * held batches ending there or before become visible, and their records are published.
   */
  commitThrough(position: number): void {
    for (const batch of this.deps.horizon.releaseThrough(position)) this.publish(batch.records, batch.end);
  }

  /** Stops taking writes and resolves once every write already queued is durable (or failed). */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.probe);
    if (this.queue.length > 0 || this.scheduled) await new Promise<void>((resolve) => { this.drained = resolve; });
    if (this.unsynced) {
      // One synced write makes every deferred-sync write before it durable.
      this.deps.rocks.writeDurable([[WRITER_CHECKPOINT_KEY, encodeWriterCheckpoint(this.deps.checkpoint)]]);
      this.unsynced = false;
    }
  }

  private flush(): void {
    assert(!this.largeUnderWay, 'no batch is taken while a large one is built or written');
    const { stats, sources } = this.deps;
    stats.flushStarted();
    this.prioritise();
    const head = this.queue[0];
    const source = isClientWrite(head) ? sources.client : head.kind === 'replicated' ? sources.replicated : sources.removal;
    const batch = source.take(this.queue);
    if (batch instanceof Promise) {
      void this.commitLarge(batch);
      return;
    }
    if ('failure' in batch) {
      this.abandon(batch.taken, batch.failure);
      return;
    }
    const gate = this.gate;
    let writeMs = 0;
    if (batch.ops.length > 0) {
      const sync = synced(batch, gate);
      const started = performance.now();
      try {
        if (sync) this.deps.rocks.writeDurable(batch.ops);
        else this.deps.rocks.writeUnsynced(batch.ops);
        this.unsynced = !sync; // a synced write makes everything before it durable
      } catch (err) {
        this.refused(batch, err as Error);
        return;
      }
      writeMs = performance.now() - started;
      this.written(batch);
    }
    stats.flushed(batch.taken.length, writeMs, this.queue.length);
    this.release(batch, gate);
    if (batch.ops.length > 0) this.deps.space.written();
    this.afterFlush();
  }

  /** RocksDB refused the batch: its callers fail, and a full disk starts (or goes on with) an out-of-space episode. */
  private refused(batch: Batch, err: Error): void {
    if (err instanceof OutOfSpaceError) this.outOfSpace(err, batch.taken.length);
    this.abandon(batch.taken, err);
  }

  /** A batch was refused for space: the episode starts (or goes on), and an idle writer probes until it ends. */
  private outOfSpace(err: OutOfSpaceError, writes: number): void {
    this.deps.space.refused(err, writes);
    this.probe ??= setInterval(() => this.probeSpace(), PROBE_MS).unref();
  }

  /**
   * Between batches (none is being planned or written: a flush runs in one turn), writes the
   * writer checkpoint as it is (a write that changes nothing) to learn whether RocksDB writes again.
   */
  private probeSpace(): void {
    if (this.closed || this.deps.space.failingSince === undefined) {
      clearInterval(this.probe);
      this.probe = undefined;
      return;
    }
    if (this.scheduled) return; // writes are queued: their outcome tells
    try {
      this.deps.rocks.writeDurable([[WRITER_CHECKPOINT_KEY, encodeWriterCheckpoint(this.deps.checkpoint)]]);
    } catch {
      return; // still full (or RocksDB has not recovered yet): the next tick tries again
    }
    this.unsynced = false; // a synced write makes everything before it durable
    clearInterval(this.probe);
    this.probe = undefined;
    this.deps.space.written();
  }

  /**
   * A large batch, built in slices (the promise), written on the write thread, its records added
   * to the log tail in slices. The pipeline stays scheduled throughout, so no other batch is
   * taken until this one is released: writes arriving meanwhile wait in the queue.
   */
  private async commitLarge(building: Promise<Batch | FailedBatch>): Promise<void> {
    this.largeUnderWay = true;
    const batch = await building;
    if ('failure' in batch) {
      this.largeUnderWay = false;
      this.abandon(batch.taken, batch.failure);
      return;
    }
    const gate = this.gate;
    let writeMs = 0;
    if (batch.ops.length > 0) {
      const sync = synced(batch, gate);
      const started = performance.now();
      try {
        await this.deps.writeThread.write(batch.ops, sync, new LoopSlices());
        this.unsynced = !sync;
      } catch (err) {
        this.largeUnderWay = false;
        this.refused(batch, err as Error);
        return;
      }
      writeMs = performance.now() - started;
      // Readers see none of it until it is released: they read up to the commit horizon.
      const appended = batch.appended;
      this.checkWritten(batch);
      const slices = new LoopSlices();
      if (appended) {
        for (let from = 0; from < appended.records.length; from += TAIL_RECORDS_PER_STEP) {
          if (slices.due()) await slices.next();
          const to = from + TAIL_RECORDS_PER_STEP;
          this.deps.tail.add(appended.records.slice(from, to).map((r) => r.position), appended.recordBytes.slice(from, to));
        }
      }
      this.movedOn(batch);
    }
    this.largeUnderWay = false;
    this.deps.stats.flushed(batch.taken.length, writeMs, this.queue.length);
    this.release(batch, gate);
    if (batch.ops.length > 0) this.deps.space.written();
    this.afterFlush();
  }

  /** The batch is written (durable, unless deferred-sync): the writer's state moves on. */
  private written(batch: Batch): void {
    this.checkWritten(batch);
    const appended = batch.appended;
    if (appended) this.deps.tail.add(appended.records.map((r) => r.position), appended.recordBytes);
    this.movedOn(batch);
  }

  private checkWritten(batch: Batch): void {
    const { checkpoint } = this.deps;
    assert(batch.checkpoint.nextPosition >= checkpoint.nextPosition, 'the log never goes back');
    const appended = batch.appended;
    if (appended) {
      const { records } = appended;
      assert(records[0].position >= checkpoint.nextPosition && batch.checkpoint.nextPosition > records[records.length - 1].position,
        'a batch appends after the end of the log, and ends after its last record');
      this.deps.stats.recordsWritten += records.length;
      for (const bytes of appended.recordBytes) this.deps.stats.recordBytesWritten += bytes.length;
    }
  }

  private movedOn(batch: Batch): void {
    Object.assign(this.deps.checkpoint, batch.checkpoint);
    batch.written?.();
  }

  /** Readers see the batch, its callers hear, and it is published: at once, or once the cluster holds it. */
  private release(batch: Batch, gate: ReplicationGate | undefined): void {
    const { horizon } = this.deps;
    const { appended } = batch;
    const end = batch.checkpoint.nextPosition;
    if (batch.origin === 'client' && gate) {
      // A cluster leader plans on the batch now; readers see it and its callers hear once a quorum
      // holds it. (An idempotent answer waits like a write: the original may not be held yet.)
      if (appended) {
        this.hold(end, appended);
        gate.shipped({ positions: appended.records.map((r) => r.position), records: appended.recordBytes }, end);
      }
      gate.whenReplicated(end, () => {
        // Visible first (a caller reads its write), then the callers, then the commit bus.
        const released = horizon.releaseThrough(end);
        batch.settle();
        for (const held of released) this.publish(held.records, held.end);
      }, (err) => { for (const t of batch.taken) t.reject(err); });
      return;
    }
    if (batch.origin === 'leader' && this.deps.boundedReads) {
      // A follower's copy: durable here (the leader hears so), seen once the leader's commit position passes it.
      if (appended) this.hold(end, appended);
      batch.settle();
      return;
    }
    if (appended) {
      horizon.show(end, appended.infos);
      this.metadataChanged(appended);
    }
    batch.settle();
    if (appended) this.publish(appended.records, end);
  }

  private hold(end: number, appended: Appended): void {
    this.deps.horizon.hold({ end, records: appended.records, metadataWritten: appended.metadataWritten }, appended.infos);
    this.metadataChanged(appended);
  }

  private metadataChanged(appended: Appended): void {
    if (appended.metadataWritten.size > 0) this.deps.onMetadataChanged(appended.metadataWritten);
  }

  private publish(records: readonly EventRecord[], end: number): void {
    assert(end > this.publishedThrough, 'batches are published in log order, each once');
    assert(end <= this.deps.checkpoint.nextPosition && end <= this.deps.horizon.visible.nextPosition,
      'a batch is published only once written and visible');
    this.publishedThrough = end;
    this.deps.bus.publish({ records, nextPosition: end });
  }

  /** Fails every entry of a batch that cannot be written, and goes on with the queue. */
  private abandon(taken: readonly { reject(err: Error): void }[], err: Error): void {
    this.deps.stats.flushed(0, 0, this.queue.length);
    for (const t of taken) t.reject(err);
    this.afterFlush();
  }

  private afterFlush(): void {
    if (this.queue.length > 0) {
      setImmediate(() => this.flush());
    } else {
      this.scheduled = false;
      this.drained?.();
    }
  }

  /**
   * Everything else goes before queued deferred-sync transactions (projection checkpoints, which
   * can be thousands of events): they are independent writers, and a client's append should not
   * wait behind a catch-up's links. Among those, the ones marked `ahead` go first: the system
   * projections' checkpoints, the indexes every reader of `$streams` and the `$ce-`/`$et-` streams
   * sees. Each projection has one checkpoint write queued at most, so these are five at most and
   * the others never starve; in plain order, while twenty projections caught up, `$streams` waited
   * behind ~15 of their ~1,000-record checkpoints for each of its own 250 links, moved ~1,050
   * records a second and fell to half the log. Each group keeps its order.
   */
  private prioritise(): void {
    const rank = (p: Pending) => (!isDeferred(p) ? 0 : isDeferredAhead(p) ? 1 : 2);
    let ordered = true;
    for (let i = 1; i < this.queue.length && ordered; i++) ordered = rank(this.queue[i - 1]) <= rank(this.queue[i]);
    if (ordered) return;
    const groups: Pending[][] = [[], [], []];
    for (const p of this.queue) groups[rank(p)].push(p);
    this.queue.length = 0;
    for (const group of groups) for (const p of group) this.queue.push(p);
  }
}

/** A cluster leader syncs every batch of its own: a quorum counts only durable copies. */
function synced(batch: Batch, gate: ReplicationGate | undefined): boolean {
  return batch.sync || (batch.origin === 'client' && gate !== undefined);
}
