import { strict as assert } from 'node:assert';
import type { Rocks } from './rocks.js';
import type { CommitBus } from './bus.js';
import type { ExpectedVersion } from './expected-version.js';
import type { LogSpaces } from './log-spaces.js';
import type { EventIdFilter } from './id-filter.js';
import type { WriterCheckpoint } from './stream-state.js';
import type { StreamInfos } from './stream-infos.js';
import type { CommitHorizon } from './commit-horizon.js';
import type { StreamMetadata } from './metadata.js';
import type { WriteLimits } from './write-rules.js';
import type { LogTailCache } from './log-cache.js';
import type { ProposedEvent } from './proposed-event.js';
import type { AppendResult, DeleteResult, StreamWrite } from './commit-decision.js';
import { CommitPipeline, type ReplicationGate } from './commit-pipeline.js';
import { ClientWrites } from './client-writes.js';
import { ReplicatedWrites } from './replicated-writes.js';
import { Removals } from './removals.js';
import type { Removal, ShippedBatch } from './batch.js';
import { ChunkTimes } from './chunk-times.js';
import { SpaceReclaimer } from './space-reclaim.js';
import { WriterStats } from './writer-stats.js';
import { SpaceWatch } from './out-of-space.js';
import { WriteThread } from './write-thread.js';

// The single writer: the writes the store takes, each a queue entry carrying only what it needs,
// and the one commit pipeline (commit-pipeline.ts) they all go through. Three batch sources feed
// it: clients' operations (client-writes.ts, which asks commit-decision.ts what each one does), a
// follower's copies of its leader's batches (replicated-writes.ts) and a scavenge's removals
// (removals.ts).

export interface WriterDeps {
  rocks: Rocks;
  /** Where each record goes: the log's key spaces. */
  spaces: LogSpaces;
  /** The stored event-id keys, approximately: a "no" spares the idempotency check its read. */
  idFilter: EventIdFilter;
  /** The in-memory tail of the log, extended with every durable commit. */
  tail: LogTailCache;
  /** Decoded blocks of the log shared by projections: a removal drops those it removed from. */
  blocks: { forgetThrough(position: number): void };
  streams: StreamInfos;
  checkpoint: WriterCheckpoint;
  /** What readers see of the log (commit-horizon.ts). */
  horizon: CommitHorizon;
  /**
   * A cluster node: replicated batches too are held until the leader's commit position passes
   * them (commitThrough), and every batch stores the commit position reached (COMMIT_KEY).
   */
  boundedReads: boolean;
  chunkSize: number;
  /** The write door's limits (write-rules.ts). */
  limits: WriteLimits;
  bus: CommitBus;
  /** Current metadata of a stream as written (reads its metastream). */
  metadataOf: (streamId: string) => StreamMetadata;
  /** Records from this position on carry ID_INDEXED exactly (written since the store kept hints). */
  idFlagsFrom: number;
  /** Called after a batch that wrote to the metastreams of these streams. */
  onMetadataChanged: (streamIds: Iterable<string>) => void;
}

export class Writer {
  readonly stats = new WriterStats();
  /** Whether writes are refused for space now (out-of-space.ts). */
  readonly space = new SpaceWatch();
  private readonly pipeline: CommitPipeline;
  private readonly reclaimer: SpaceReclaimer;
  private readonly writeThread: WriteThread;

  constructor(deps: WriterDeps) {
    const { rocks, checkpoint, horizon } = deps;
    const builder = {
      rocks, spaces: deps.spaces, idFilter: deps.idFilter, streams: deps.streams, chunkSize: deps.chunkSize, checkpoint,
      chunkTimes: new ChunkTimes(rocks), metadataOf: deps.metadataOf,
      commitPosition: deps.boundedReads ? () => horizon.visible.nextPosition : undefined,
    };
    this.reclaimer = new SpaceReclaimer(rocks);
    this.writeThread = new WriteThread(rocks);
    this.pipeline = new CommitPipeline({
      rocks, checkpoint, horizon, tail: deps.tail, bus: deps.bus, stats: this.stats, space: this.space, writeThread: this.writeThread, boundedReads: deps.boundedReads,
      onMetadataChanged: deps.onMetadataChanged,
      sources: {
        client: new ClientWrites({ ...builder, limits: deps.limits }),
        replicated: new ReplicatedWrites(builder),
        removal: new Removals({
          spaces: deps.spaces, streams: deps.streams, checkpoint, idFlagsFrom: deps.idFlagsFrom, tail: deps.tail, blocks: deps.blocks,
          reclaimer: this.reclaimer,
        }),
      },
    });
  }

  setGate(gate: ReplicationGate | undefined): void {
    this.pipeline.gate = gate;
  }

  get queueLength(): number {
    return this.pipeline.queueLength;
  }

  append(streamId: string, expected: ExpectedVersion, events: ProposedEvent[]): Promise<AppendResult> {
    return new Promise((resolve, reject) => this.pipeline.enqueue({ kind: 'append', streamId, expected, events, resolve, reject }));
  }

  /** An append to a reserved stream (system-streams.ts), by the node itself. */
  appendReserved(streamId: string, expected: ExpectedVersion, events: ProposedEvent[]): Promise<AppendResult> {
    return new Promise((resolve, reject) => this.pipeline.enqueue({ kind: 'append', streamId, expected, events, reserved: true, resolve, reject }));
  }

  /**
   * Appends to several streams atomically: every write is applied, or none is. With `deferSync`
   * (projection checkpoints: a crash only makes the projection redo them) the write is made
   * without an fsync of its own; it is durable with the next synced write, since syncing the log
   * makes everything before it durable, and the writer syncs on close. With `ahead` too, it goes
   * before the other deferred-sync transactions queued (see CommitPipeline.prioritise).
   */
  transact(writes: StreamWrite[], deferSync = false, ahead = false): Promise<AppendResult[]> {
    assert(writes.length > 0 && writes.every((w) => w.events.length > 0), 'a transaction writes at least one event to each stream');
    return new Promise((resolve, reject) => this.pipeline.enqueue({ kind: 'transaction', writes, deferSync, ahead: deferSync && ahead, resolve, reject }));
  }

  delete(streamId: string, expected: ExpectedVersion, hard: boolean): Promise<DeleteResult> {
    return new Promise((resolve, reject) => this.pipeline.enqueue({ kind: 'delete', streamId, expected, hard, resolve, reject }));
  }

  /**
   * A follower's copy of a batch its leader shipped (ReplicationGate); resolves once durable here.
   * Batches are queued as they arrive; one whose connection failed meanwhile (`current` false:
   * an earlier batch did not apply) is refused, so the log never gets a hole.
   */
  applyReplicated(batch: ShippedBatch, current: () => boolean): Promise<void> {
    return new Promise((resolve, reject) => this.pipeline.enqueue({ kind: 'replicated', batch, current, resolve, reject }));
  }

  /** Removes records a scavenge found removable (see Removal); resolves once written. */
  remove(removal: Removal): Promise<number> {
    return new Promise((resolve, reject) => this.pipeline.enqueue({ kind: 'remove', removal, resolve, reject }));
  }

  /** A quorum holds the log up to `position` (the leader's commit position, on a follower): see CommitPipeline.commitThrough. */
  commitThrough(position: number): void {
    this.pipeline.commitThrough(position);
  }

  /** Stops taking writes and resolves once every write already queued is durable (or failed). */
  async close(): Promise<void> {
    const drained = this.pipeline.close();
    await this.reclaimer.close();
    await drained;
    await this.writeThread.close();
  }
}
