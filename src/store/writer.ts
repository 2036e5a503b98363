import { strict as assert } from 'node:assert';
import type { Rocks, BatchOp } from './rocks.js';
import type { CommitBus } from './bus.js';
import type { ExpectedVersion } from './expected-version.js';
import { NotLeaderError, ReplicationMismatchError, StoreClosedError, StreamDeletedError, WrongExpectedVersionError } from './errors.js';
import { decodeRecord, encodeRecord, type EventRecord, type RecordPayload } from './record.js';
import { chunkTimesKey, eventIdKey, hintKey, indexKey, readU64, u64Value } from './keys.js';
import type { LogSpaces } from './log-spaces.js';
import type { EventIdFilter } from './id-filter.js';
import { SCAVENGE_POINT_EVENT_TYPE, SCAVENGE_POINTS_STREAM } from './system-streams.js';
import {
  COMMIT_KEY, encodeWriterCheckpoint, streamInfoOp, TOMBSTONE_EVENT_NUMBER, WRITER_CHECKPOINT_KEY,
  type StreamInfo, type WriterCheckpoint,
} from './stream-state.js';
import type { StreamInfos } from './stream-infos.js';
import type { CommitHorizon } from './commit-horizon.js';
import {
  isMetastream, isSoftDeleted, METADATA_EVENT_TYPE, metastreamOf, originalStreamOf, SOFT_DELETED_TB_TEXT, type StreamMetadata,
} from './metadata.js';
import { newUuid } from './uuid.js';
import { WriterStats } from './writer-stats.js';
import { checkEvents, checkNotReserved, checkStreamName, InvalidWriteError, type WriteLimits } from './write-rules.js';
import { nowMicros } from './clock.js';
import type { LogTailCache } from './log-cache.js';

// The single writer. Appends and deletes wait in one queue; each flush drains it into ONE
// RocksDB write batch (log records, index entries, stream infos and the writer checkpoint
// together) written with sync, and only then acknowledges them and publishes the commit.
// Appends arriving while a flush runs wait for the next one: that is the group commit.
// Expected-version and idempotency checks run here, against the in-memory stream infos, so
// concurrent writers to one stream are serialised without locks.

/** An event to append: id, type, and the data and metadata bytes as received. */
export type ProposedEvent = RecordPayload;

export interface AppendResult {
  firstEventNumber: number;
  lastEventNumber: number;
  /** Log position of the first event (of the original write when the append was a retry). */
  position: number;
  /** True when every event was already in the stream: nothing was written. */
  idempotent: boolean;
}

export interface DeleteResult { position: number }

type Pending =
  | { kind: 'append'; streamId: string; expected: ExpectedVersion; events: ProposedEvent[]; reserved?: true;
      resolve: (r: AppendResult) => void; reject: (e: Error) => void }
  | { kind: 'delete'; streamId: string; expected: ExpectedVersion; hard: boolean;
      resolve: (r: DeleteResult) => void; reject: (e: Error) => void }
  | { kind: 'transaction'; streamId: string; writes: StreamWrite[]; deferSync: boolean;
      resolve: (r: AppendResult[]) => void; reject: (e: Error) => void }
  | { kind: 'remove'; streamId: string; removal: Removal; resolve: () => void; reject: (e: Error) => void }
  | { kind: 'replicated'; streamId: string; batch: ShippedBatch; current: () => boolean; resolve: () => void; reject: (e: Error) => void };

/** A durable batch as the leader ships it: each record's position and encoded bytes, in log order. */
export interface ShippedBatch {
  positions: readonly number[];
  records: readonly Buffer[];
}

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

/**
 * What a scavenge removes in one batch: records (with their index and event-id entries) and
 * chunk-table changes. Written alone, in order with every other write.
 */
export interface Removal {
  records: readonly EventRecord[];
  chunkOps: readonly BatchOp[];
  /** Sync the batch (and with it everything before it): a scavenge checkpoint follows it. */
  sync: boolean;
}

/** One stream's part of a multi-stream transaction. */
export interface StreamWrite {
  streamId: string;
  expected: ExpectedVersion;
  events: ProposedEvent[];
}

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
  /** Current metadata of a stream (reads its metastream). */
  metadataOf: (streamId: string) => StreamMetadata;
  /** Records from this position on carry ID_INDEXED exactly (written since the store kept hints). */
  idFlagsFrom: number;
  /** Called after a batch that wrote to the metastreams of these streams. */
  onMetadataChanged: (streamIds: Iterable<string>) => void;
}

const MAX_OPS_PER_FLUSH = 4096;
/**
 * When the space of removed records is given back (Rocks.reclaimSpace): this long after the last
 * removal (a scavenge sends them back to back; this is after its end, or a long throttle rest),
 * once at least this many record bytes were removed since the last time (smaller removals come
 * back with the next compactions anyway). Benches and tests may change them.
 */
export const SPACE_RECLAIM = { afterMs: 3000, minRemovedBytes: 16 * 1024 * 1024 };
const EMPTY = Buffer.alloc(0);
const MAX_BYTES_PER_FLUSH = 16 * 1024 * 1024;
/**
 * Deferred-sync writes are flushed in slices of about this many records (a transaction is never
 * split): each slice holds the event loop for a few milliseconds, and a client append waits for
 * at most one.
 */
const MAX_RECORDS_PER_DEFERRED_FLUSH = 1000;

/** The batch being built by one flush: stream infos and event ids changed so far overlay the committed ones. */
class BatchBuilder {
  // The batch's keys, one list per key space, written space after space: RocksDB inserts a
  // batch's keys in order and each insert starts from where the last one ended, so keys of one
  // space together cost ~25% less than the same keys interleaved per event (measured with
  // bench/keys.ts: 6.9 → 5.2 ms per 1,000-event batch).
  readonly logOps: BatchOp[] = [];
  readonly indexOps: BatchOp[] = [];
  readonly idOps: BatchOp[] = [];
  /** Everything else: hints, chunk times, stream infos, the writer checkpoint. */
  readonly ops: BatchOp[] = [];
  readonly records: EventRecord[] = [];
  /** The encoded bytes of each record, for the log tail cache. */
  readonly recordBytes: Buffer[] = [];
  readonly infos = new Map<string, StreamInfo>();
  readonly newEventIds = new Map<string, number>();
  /** Streams whose metastream this batch writes: their metadata is not known until it commits. */
  readonly metadataWritten = new Set<string>();
  /** Oldest and newest record time of each chunk this batch writes to. */
  readonly chunkTimes = new Map<number, [number, number]>();
  bytes = 0;

  constructor(private readonly deps: WriterDeps, public position: number, public nextStreamNumber: number,
    public recordCount: number) {}

  info(streamId: string): StreamInfo | undefined {
    return this.infos.get(streamId) ?? this.deps.streams.get(streamId);
  }

  ensureInfo(streamId: string): StreamInfo {
    const existing = this.info(streamId);
    if (existing) return existing;
    const created: StreamInfo = { streamNumber: this.nextStreamNumber++, lastEventNumber: -1, tombstoned: false };
    this.infos.set(streamId, created);
    return created;
  }

  /** Event number of `eventId` in the stream, if an append or transaction began with it there. */
  eventNumberOf(info: StreamInfo, eventId: Buffer): number | undefined {
    const key = eventIdKey(info.streamNumber, eventId);
    const pending = this.newEventIds.get(key.toString('latin1'));
    if (pending !== undefined) return pending;
    if (!this.deps.idFilter.mightContain(key)) return undefined;
    const stored = this.deps.rocks.get(key);
    return stored ? readU64(stored, 0) : undefined;
  }

  /** The id of event `eventNumber` of the stream, whether written before or in this batch (undefined: not there). */
  eventIdAt(streamId: string, info: StreamInfo, eventNumber: number): Buffer | undefined {
    for (let i = this.records.length - 1; i >= 0; i--) {
      const r = this.records[i];
      if (r.eventNumber === eventNumber && !r.tombstone && this.info(r.streamId)?.streamNumber === info.streamNumber) return r.eventId;
    }
    const position = this.deps.rocks.get(indexKey(info.streamNumber, eventNumber));
    const bytes = position && this.deps.spaces.get(readU64(position, 0), streamId);
    return bytes ? decodeRecord(readU64(position, 0), bytes).eventId : undefined;
  }

  positionOf(info: StreamInfo, eventNumber: number): number {
    const stored = this.deps.rocks.get(indexKey(info.streamNumber, eventNumber));
    if (stored) return readU64(stored, 0);
    const pending = this.records.find((r) => r.eventNumber === eventNumber && this.info(r.streamId) === info);
    return pending ? pending.position : -1;
  }

  /**
   * Appends one record to the batch: log entry, and (unless a tombstone) its index entry, and for
   * the first event of an append or transaction write its event id (a retry sends the same
   * events again, and is recognised by its first id; the following ids are compared with the
   * events after it).
   */
  addRecord(streamId: string, info: StreamInfo, eventNumber: number, e: ProposedEvent, created: number,
    tombstone = false, firstOfWrite = false): EventRecord {
    const idIndexed = !tombstone && firstOfWrite && e.idempotent !== false;
    const bytes = encodeRecord(streamId, eventNumber, e, created, tombstone, idIndexed);
    let position = this.position;
    const room = this.deps.chunkSize - (position % this.deps.chunkSize);
    // A record never straddles a chunk boundary unless it is larger than a chunk.
    if (bytes.length > room && bytes.length <= this.deps.chunkSize) position += room;
    assert(position >= this.position, 'log positions strictly increase');
    if (!tombstone) assert(eventNumber === info.lastEventNumber + 1, 'event numbers are contiguous within a stream');
    const stored: EventRecord = {
      position, size: bytes.length, streamId, eventNumber, eventId: e.eventId, eventType: e.eventType,
      isJson: e.isJson, dataIsJson: (e.dataIsJson ?? e.isJson) && e.data.length > 0, data: e.data, metadata: e.metadata, created, tombstone,
      idIndexed,
    };
    this.place(stored, bytes, info);
    return stored;
  }

  /**
   * A record the leader wrote, at the leader's position (a follower's copy of the log), with the
   * entries addRecord makes for it; the stream infos follow it. Event numbers may skip (the
   * leader's scavenge removed records before shipping them), never go back.
   */
  addReplicated(position: number, bytes: Buffer): EventRecord {
    if (!(position >= this.position)) throw new ReplicationMismatchError(`a record at ${position} is below the log's end ${this.position}`);
    let record: EventRecord;
    try {
      record = decodeRecord(position, bytes);
    } catch (err) {
      throw new ReplicationMismatchError(`the record at ${position} does not decode: ${(err as Error).message}`);
    }
    const info = this.ensureInfo(record.streamId);
    if (info.tombstoned || (!record.tombstone && record.eventNumber <= info.lastEventNumber)) {
      throw new ReplicationMismatchError(`event ${record.eventNumber} of ${record.streamId} at ${position} does not follow its stream's end ${info.lastEventNumber}`);
    }
    this.place(record, bytes, info);
    if (record.tombstone) {
      this.setInfo(record.streamId, { ...info, tombstoned: true });
      this.metadataWritten.add(record.streamId);
    } else {
      this.setInfo(record.streamId, { ...info, lastEventNumber: record.eventNumber });
      if (isMetastream(record.streamId)) this.metadataWritten.add(originalStreamOf(record.streamId));
    }
    return record;
  }

  /** The log entry of a record at its position, and its index, event-id, hint and chunk-time entries. */
  private place(record: EventRecord, bytes: Buffer, info: StreamInfo): void {
    const { position, streamId, tombstone } = record;
    this.position = position + bytes.length;
    this.logOps.push([this.deps.spaces.key(position, streamId), bytes]);
    // What a scavenge's accumulation needs without reading the whole log: where the metastream
    // records and tombstones are, and each chunk's time range.
    if (tombstone || isMetastream(streamId)) this.ops.push([hintKey(position), EMPTY]);
    const chunk = Math.floor(position / this.deps.chunkSize);
    const times = this.chunkTimes.get(chunk);
    const created = record.created;
    if (!times) this.chunkTimes.set(chunk, [created, created]);
    else {
      if (created < times[0]) times[0] = created;
      if (created > times[1]) times[1] = created;
    }
    if (!tombstone) {
      this.indexOps.push([indexKey(info.streamNumber, record.eventNumber), u64Value(position)]);
      if (record.idIndexed) {
        const idKey = eventIdKey(info.streamNumber, record.eventId);
        this.idOps.push([idKey, u64Value(record.eventNumber)]);
        this.deps.idFilter.add(idKey); // before it is durable: a batch that fails leaves a false positive at worst
        this.newEventIds.set(idKey.toString('latin1'), record.eventNumber);
      }
    }
    if (record.eventType === SCAVENGE_POINT_EVENT_TYPE && streamId === SCAVENGE_POINTS_STREAM) {
      // The scavenge point completes its chunk: everything after it starts the next one, so a
      // scavenge up to the point covers whole chunks and accumulates each chunk once.
      this.position = Math.ceil(this.position / this.deps.chunkSize) * this.deps.chunkSize;
    }
    this.bytes += bytes.length;
    this.recordCount++;
    this.recordBytes.push(bytes);
    this.records.push(record);
  }

  setInfo(streamId: string, info: StreamInfo): void {
    this.infos.set(streamId, info);
  }

  /** A point to roll back to if a later part of a transaction fails. */
  mark() {
    return {
      ops: this.ops.length, logOps: this.logOps.length, indexOps: this.indexOps.length, idOps: this.idOps.length,
      records: this.records.length, position: this.position, nextStreamNumber: this.nextStreamNumber,
      recordCount: this.recordCount, bytes: this.bytes, infos: new Map(this.infos), newEventIds: new Map(this.newEventIds),
      metadataWritten: new Set(this.metadataWritten),
    };
  }

  rollback(m: ReturnType<BatchBuilder['mark']>): void {
    this.ops.length = m.ops;
    this.logOps.length = m.logOps;
    this.indexOps.length = m.indexOps;
    this.idOps.length = m.idOps;
    this.records.length = m.records;
    this.recordBytes.length = m.records;
    this.position = m.position;
    this.nextStreamNumber = m.nextStreamNumber;
    this.recordCount = m.recordCount;
    this.bytes = m.bytes;
    this.infos.clear();
    for (const [k, v] of m.infos) this.infos.set(k, v);
    this.newEventIds.clear();
    for (const [k, v] of m.newEventIds) this.newEventIds.set(k, v);
    this.metadataWritten.clear();
    for (const k of m.metadataWritten) this.metadataWritten.add(k);
  }
}

/** Errors that refuse one operation (the caller's input or expectations), as opposed to a broken store. */
function isRefusal(err: unknown): boolean {
  return err instanceof InvalidWriteError || err instanceof WrongExpectedVersionError || err instanceof StreamDeletedError;
}

function isDeferred(op: Pending): boolean {
  return op.kind === 'transaction' && op.deferSync;
}

export class Writer {
  /** A deferred-sync write is in the log but not yet fsynced (the next synced write covers it). */
  private unsynced = false;
  private readonly queue: Pending[] = [];
  private scheduled = false;
  private closed = false;
  private drained: (() => void) | undefined;
  /** Record bytes removed since the space was last given back, the timer that will, and the reclaim running. */
  private removedBytes = 0;
  private reclaimTimer: NodeJS.Timeout | undefined;
  private reclaiming: Promise<void> | undefined;
  readonly stats = new WriterStats();

  /** The cluster's hold on this writer (ReplicationGate), if any. */
  private gate: ReplicationGate | undefined;

  constructor(private readonly deps: WriterDeps) {}

  setGate(gate: ReplicationGate | undefined): void {
    this.gate = gate;
  }

  /**
   * A follower's copy of a batch its leader shipped (ReplicationGate); resolves once durable here.
   * Batches are queued as they arrive; one whose connection failed meanwhile (`current` false:
   * an earlier batch did not apply) is refused, so the log never gets a hole.
   */
  applyReplicated(batch: ShippedBatch, current: () => boolean): Promise<void> {
    return new Promise((resolve, reject) => {
      this.enqueue({ kind: 'replicated', streamId: '', batch, current, resolve, reject });
    });
  }

  /**
   * A quorum holds the log up to `position` (the leader's commit position, on a follower): the
   * held batches ending there or before become visible, and their records are published.
   */
  commitThrough(position: number): void {
    for (const batch of this.deps.horizon.releaseThrough(position)) this.deps.bus.publish({ records: batch.records, nextPosition: batch.end });
  }

  get queueLength(): number {
    return this.queue.length;
  }

  append(streamId: string, expected: ExpectedVersion, events: ProposedEvent[]): Promise<AppendResult> {
    assert(events.length > 0, 'an append carries at least one event');
    return new Promise((resolve, reject) => {
      this.enqueue({ kind: 'append', streamId, expected, events, resolve, reject });
    });
  }

  /** An append to a reserved stream (system-streams.ts), by the node itself. */
  appendReserved(streamId: string, expected: ExpectedVersion, events: ProposedEvent[]): Promise<AppendResult> {
    return new Promise((resolve, reject) => {
      this.enqueue({ kind: 'append', streamId, expected, events, reserved: true, resolve, reject });
    });
  }

  /**
   * Appends to several streams atomically: every write is applied, or none is. With `deferSync`
   * (projection checkpoints: a crash only makes the projection redo them) the write is made
   * without an fsync of its own; it is durable with the next synced write, since syncing the log
   * makes everything before it durable, and the writer syncs on close.
   */
  transact(writes: StreamWrite[], deferSync = false): Promise<AppendResult[]> {
    assert(writes.length > 0 && writes.every((w) => w.events.length > 0), 'a transaction writes at least one event to each stream');
    return new Promise((resolve, reject) => {
      this.enqueue({ kind: 'transaction', streamId: writes[0].streamId, writes, deferSync, resolve, reject });
    });
  }

  delete(streamId: string, expected: ExpectedVersion, hard: boolean): Promise<DeleteResult> {
    return new Promise((resolve, reject) => {
      this.enqueue({ kind: 'delete', streamId, expected, hard, resolve, reject });
    });
  }

  /** Removes records a scavenge found removable (see Removal); resolves once written. */
  remove(removal: Removal): Promise<void> {
    return new Promise((resolve, reject) => {
      this.enqueue({ kind: 'remove', streamId: '', removal, resolve, reject });
    });
  }

  /** Stops taking writes and resolves once every write already queued is durable (or failed). */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.reclaimTimer);
    await this.reclaiming;
    if (this.queue.length > 0 || this.scheduled) await new Promise<void>((resolve) => { this.drained = resolve; });
    if (this.unsynced) {
      // One synced write makes every deferred-sync write before it durable.
      this.deps.rocks.writeDurable([[WRITER_CHECKPOINT_KEY, encodeWriterCheckpoint(this.deps.checkpoint)]]);
      this.unsynced = false;
    }
  }

  private enqueue(op: Pending): void {
    if (this.closed) {
      op.reject(new StoreClosedError());
      return;
    }
    // A scavenge's removal is each node's own (its copy of the log), a follower's too.
    const refusal = op.kind === 'replicated' || op.kind === 'remove' ? undefined : this.gate?.refusal();
    if (refusal !== undefined) {
      op.reject(new NotLeaderError(refusal));
      return;
    }
    this.queue.push(op);
    this.stats.queued(this.queue.length);
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => this.flush());
    }
  }

  /**
   * Everything else goes before queued deferred-sync transactions (projection checkpoints, which
   * can be thousands of events): they are independent writers, and a client's append should not
   * wait behind a catch-up's links. Each group keeps its order.
   */
  private prioritiseClientWrites(): void {
    const firstDeferred = this.queue.findIndex(isDeferred);
    if (firstDeferred < 0) return;
    let otherAfter = false;
    for (let i = firstDeferred + 1; i < this.queue.length && !otherAfter; i++) otherAfter = !isDeferred(this.queue[i]);
    if (!otherAfter) return;
    const others = this.queue.filter((op) => !isDeferred(op));
    const deferred = this.queue.filter(isDeferred);
    this.queue.length = 0;
    for (const op of others) this.queue.push(op);
    for (const op of deferred) this.queue.push(op);
  }

  private flush(): void {
    this.stats.flushStarted();
    this.prioritiseClientWrites();
    const first = this.queue[0];
    if (first.kind === 'remove') {
      this.queue.shift();
      this.flushRemoval(first);
      return;
    }
    if (first.kind === 'replicated') {
      this.flushReplicated();
      return;
    }
    const { checkpoint } = this.deps;
    const builder = new BatchBuilder(this.deps, checkpoint.nextPosition, checkpoint.nextStreamNumber, checkpoint.recordCount);
    const outcomes: (() => void)[] = [];
    const taken: Pending[] = [];
    const now = nowMicros();
    // Deferred-sync transactions are flushed together without an fsync; everything else (which
    // goes first) is written with its fsync.
    const deferred = isDeferred(this.queue[0]);
    const maxRecords = deferred ? MAX_RECORDS_PER_DEFERRED_FLUSH : Infinity;
    while (this.queue.length > 0 && taken.length < MAX_OPS_PER_FLUSH && builder.bytes < MAX_BYTES_PER_FLUSH
      && builder.records.length < maxRecords) {
      const next: Pending = this.queue[0];
      if (next.kind === 'remove' || next.kind === 'replicated' || isDeferred(next) !== deferred) break;
      const op = next;
      const streams = op.kind === 'transaction' ? op.writes.map((w) => w.streamId) : [op.streamId];
      const targets = streams.map((id) => (isMetastream(id) ? originalStreamOf(id) : id));
      if (targets.some((t) => builder.metadataWritten.has(t))) break; // its metadata changes in this batch: next flush
      this.queue.shift();
      taken.push(op);
      try {
        // The door first: a refused operation changes nothing in the batch and fails alone.
        this.checkOperation(op);
        outcomes.push(this.plan(builder, op, now));
      } catch (err) {
        if (!isRefusal(err)) {
          // A broken invariant of the store, not input: this batch is not written, the writer goes on.
          this.abandon(taken, err as Error);
          return;
        }
        outcomes.push(() => op.reject(err as Error));
      }
    }

    const gate = this.gate;
    if (builder.records.length === 0) {
      this.stats.flushed(taken.length, 0, this.queue.length);
      // (In a cluster an idempotent answer waits like a write: the original may not be replicated yet.)
      const settle = () => { for (const outcome of outcomes) outcome(); };
      if (gate) gate.whenReplicated(checkpoint.nextPosition, settle, (err) => { for (const op of taken) op.reject(err); });
      else settle();
      this.afterFlush();
      return;
    }
    const next = this.prepareCommit(builder);
    const started = performance.now();
    // A cluster leader syncs every batch: a quorum counts only durable copies.
    const unsynced = deferred && !gate;
    try {
      const ops = [...builder.logOps, ...builder.indexOps, ...builder.idOps, ...builder.ops];
      if (unsynced) this.deps.rocks.writeUnsynced(ops);
      else this.deps.rocks.writeDurable(ops);
      this.unsynced = unsynced;
    } catch (err) {
      this.abandon(taken, err as Error);
      return;
    }
    // Durable (or, deferred, written): now make it visible, acknowledge, and tell the followers
    // (a leader: the writer plans on it now, readers see it once a quorum holds it).
    this.applyCommit(builder, next, gate !== undefined);
    this.stats.recordsWritten += builder.records.length;
    this.stats.flushed(taken.length, performance.now() - started, this.queue.length);
    const settle = () => {
      // Visible first (a caller reads its write), then the callers, then the commit bus.
      const released = gate ? this.deps.horizon.releaseThrough(next.nextPosition) : [{ end: next.nextPosition, records: builder.records }];
      for (const outcome of outcomes) outcome();
      for (const batch of released) this.deps.bus.publish({ records: batch.records, nextPosition: batch.end });
    };
    if (gate) {
      gate.shipped({ positions: builder.records.map((r) => r.position), records: builder.recordBytes }, next.nextPosition);
      gate.whenReplicated(next.nextPosition, settle, (err) => { for (const op of taken) op.reject(err); });
    } else settle();
    this.afterFlush();
  }

  /**
   * A follower's copy of one batch of its leader's: the records at the leader's positions, with
   * the same index, event-id, hint, chunk-time and stream-info entries, in one synced batch.
   */
  private flushReplicated(): void {
    const { checkpoint } = this.deps;
    const builder = new BatchBuilder(this.deps, checkpoint.nextPosition, checkpoint.nextStreamNumber, checkpoint.recordCount);
    // The leader's batches that arrived while the last one was written go together: one fsync.
    const taken: Extract<Pending, { kind: 'replicated' }>[] = [];
    while (this.queue.length > 0 && this.queue[0].kind === 'replicated' && builder.bytes < MAX_BYTES_PER_FLUSH) {
      const op = this.queue.shift() as Extract<Pending, { kind: 'replicated' }>;
      if (!op.current()) {
        op.reject(new ReplicationMismatchError('an earlier batch of this connection failed'));
        continue;
      }
      taken.push(op);
      const { positions, records } = op.batch;
      try {
        for (let i = 0; i < positions.length; i++) builder.addReplicated(positions[i], records[i]);
      } catch (err) {
        this.abandon(taken, err as Error);
        return;
      }
    }
    if (builder.records.length === 0) {
      for (const op of taken) op.resolve();
      this.afterFlush();
      return;
    }
    const next = this.prepareCommit(builder);
    const started = performance.now();
    try {
      this.deps.rocks.writeDurable([...builder.logOps, ...builder.indexOps, ...builder.idOps, ...builder.ops]);
      this.unsynced = false;
    } catch (err) {
      this.abandon(taken, err as Error);
      return;
    }
    // Durable here (the leader hears so), seen once the leader's commit position passes it.
    const held = this.deps.boundedReads;
    this.applyCommit(builder, next, held);
    this.stats.recordsWritten += builder.records.length;
    this.stats.flushed(taken.length, performance.now() - started, this.queue.length);
    for (const op of taken) op.resolve();
    if (!held) this.deps.bus.publish({ records: builder.records, nextPosition: next.nextPosition });
    this.afterFlush();
  }

  /** One scavenge removal batch: records, their index and event-id entries, chunk changes and the record count. */
  private flushRemoval(op: Extract<Pending, { kind: 'remove' }>): void {
    const { records, chunkOps, sync } = op.removal;
    const ops: BatchOp[] = [];
    let highest = -1;
    for (const r of records) {
      ops.push([this.deps.spaces.key(r.position, r.streamId)]);
      highest = Math.max(highest, r.position);
      if (r.tombstone) continue;
      if (isMetastream(r.streamId)) ops.push([hintKey(r.position)]);
      const info = this.deps.streams.get(r.streamId);
      if (!info) continue;
      ops.push([indexKey(info.streamNumber, r.eventNumber)]);
      // Records from before the flag existed may have their id indexed whether flagged or not.
      if (r.idIndexed || r.position < this.deps.idFlagsFrom) ops.push([eventIdKey(info.streamNumber, r.eventId)]);
    }
    for (const chunkOp of chunkOps) ops.push(chunkOp);
    const next: WriterCheckpoint = { ...this.deps.checkpoint, recordCount: this.deps.checkpoint.recordCount - records.length };
    ops.push([WRITER_CHECKPOINT_KEY, encodeWriterCheckpoint(next)]);
    try {
      if (sync) this.deps.rocks.writeDurable(ops);
      else this.deps.rocks.writeUnsynced(ops);
      this.unsynced = !sync; // a synced write makes everything before it durable
    } catch (err) {
      this.abandon([op], err as Error);
      return;
    }
    Object.assign(this.deps.checkpoint, next);
    if (highest >= 0) {
      this.deps.tail.forgetThrough(highest);
      this.deps.blocks.forgetThrough(highest);
    }
    this.stats.flushed(1, 0, this.queue.length);
    op.resolve();
    this.afterFlush();
    if (records.length > 0) this.removed(records);
  }

  /**
   * Counts what a removal freed and (re)arms the timer that gives the space back. RocksDB keeps
   * the removal's tombstones in its memtable and compacts them with the removed data only once
   * L0 holds four files: measured, half of a 1M-event log removed left total-sst-files-size at
   * 61 MB (77 MB once the tombstones were flushed) until ~50 MB more was appended or the store was
   * reopened; with this, 31 MB within 10 s of the scavenge's end (bench/space.ts).
   */
  private removed(records: readonly EventRecord[]): void {
    for (const r of records) this.removedBytes += r.size;
    if (this.removedBytes < SPACE_RECLAIM.minRemovedBytes || this.closed) return;
    clearTimeout(this.reclaimTimer);
    this.reclaimTimer = setTimeout(() => this.reclaimSpace(), SPACE_RECLAIM.afterMs);
    this.reclaimTimer.unref();
  }

  private reclaimSpace(): void {
    this.reclaimTimer = undefined;
    if (this.closed) return;
    if (this.reclaiming) {
      // Still giving back the space of earlier removals: once that is done.
      this.reclaimTimer = setTimeout(() => this.reclaimSpace(), SPACE_RECLAIM.afterMs);
      this.reclaimTimer.unref();
      return;
    }
    this.removedBytes = 0;
    // Best effort: a failure here loses nothing (the space comes back with later compactions).
    this.reclaiming = this.deps.rocks.reclaimSpace(() => this.closed).then(() => undefined, () => undefined)
      .finally(() => { this.reclaiming = undefined; });
  }

  /** The write door (write-rules.ts), for every stream the operation writes. */
  private checkOperation(op: Exclude<Pending, { kind: 'remove' | 'replicated' }>): void {
    const { limits } = this.deps;
    if (op.kind === 'append') {
      checkStreamName(op.streamId);
      if (!op.reserved) checkNotReserved(op.streamId);
      checkEvents(op.streamId, op.events, limits);
    } else if (op.kind === 'transaction') {
      for (const w of op.writes) {
        checkStreamName(w.streamId);
        checkNotReserved(w.streamId);
        checkEvents(w.streamId, w.events, limits);
      }
    } else {
      checkStreamName(op.streamId);
      checkNotReserved(op.streamId);
    }
  }

  /** Adds one operation to the batch; returns what settles its caller once the batch is durable. */
  private plan(builder: BatchBuilder, op: Exclude<Pending, { kind: 'remove' | 'replicated' }>, now: number): () => void {
    if (op.kind === 'append') {
      const result = this.planAppend(builder, op.streamId, op.expected, op.events, now);
      return () => op.resolve(result);
    }
    if (op.kind === 'transaction') {
      const mark = builder.mark();
      try {
        const results = op.writes.map((w) => this.planAppend(builder, w.streamId, w.expected, w.events, now));
        return () => op.resolve(results);
      } catch (err) {
        builder.rollback(mark);
        throw err;
      }
    }
    const result = this.planDelete(builder, op.streamId, op.expected, op.hard, now);
    return () => op.resolve(result);
  }

  /** Fails every operation of a batch that cannot be written, and goes on with the queue. */
  private abandon(taken: Pending[], err: Error): void {
    this.stats.flushed(0, 0, this.queue.length);
    for (const op of taken) op.reject(err);
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

  /** Adds the stream infos and the writer checkpoint to the batch: they commit with the records. */
  /** The time range of the chunk being written (kept across batches), widened by each batch. */
  private chunkTimes: { chunk: number; range: [number, number] } | undefined;

  private prepareCommit(builder: BatchBuilder): WriterCheckpoint {
    // (A rolled-back transaction may have widened a range: a range wider than its records is harmless.)
    for (const [chunk, [min, max]] of builder.chunkTimes) {
      let known = this.chunkTimes?.chunk === chunk ? this.chunkTimes.range : undefined;
      if (!known) {
        const stored = this.deps.rocks.get(chunkTimesKey(chunk));
        known = stored ? [stored.readDoubleBE(0), stored.readDoubleBE(8)] : [min, max];
      }
      const range: [number, number] = [Math.min(known[0], min), Math.max(known[1], max)];
      this.chunkTimes = { chunk, range };
      const value = Buffer.allocUnsafe(16);
      value.writeDoubleBE(range[0], 0);
      value.writeDoubleBE(range[1], 8);
      builder.ops.push([chunkTimesKey(chunk), value]);
    }
    const next: WriterCheckpoint = {
      nextPosition: builder.position, nextStreamNumber: builder.nextStreamNumber, recordCount: builder.recordCount,
    };
    for (const [name, info] of builder.infos) builder.ops.push(streamInfoOp(name, info));
    builder.ops.push([WRITER_CHECKPOINT_KEY, encodeWriterCheckpoint(next)]);
    // What a restart may show at once: the commit position reached so far (a batch behind at most).
    if (this.deps.boundedReads) builder.ops.push([COMMIT_KEY, u64Value(this.deps.horizon.visible.nextPosition)]);
    return next;
  }

  /** A durable batch: the writer's state moves on; readers see it now, or once released (`held`). */
  private applyCommit(builder: BatchBuilder, next: WriterCheckpoint, held: boolean): void {
    this.deps.tail.add(builder.records.map((r) => r.position), builder.recordBytes);
    const { horizon } = this.deps;
    if (held) horizon.hold({ end: next.nextPosition, records: builder.records, metadataWritten: builder.metadataWritten }, builder.infos);
    else horizon.show(next.nextPosition, builder.infos);
    Object.assign(this.deps.checkpoint, next);
    if (builder.metadataWritten.size > 0) this.deps.onMetadataChanged(builder.metadataWritten);
  }

  private planAppend(b: BatchBuilder, streamId: string, expected: ExpectedVersion, events: ProposedEvent[],
    now: number): AppendResult {
    const existing = b.info(streamId);
    if (existing?.tombstoned) throw new StreamDeletedError(streamId);
    // A hard-deleted stream's metadata stream is gone with it.
    if (isMetastream(streamId) && b.info(originalStreamOf(streamId))?.tombstoned) throw new StreamDeletedError(streamId);
    const metadata = this.deps.metadataOf(streamId);
    const softDeleted = isSoftDeleted(metadata);
    const current = existing?.lastEventNumber ?? -1;

    const retry = this.checkExpected(b, streamId, existing, current, softDeleted, expected, events);
    if (retry) return retry;

    const info = b.ensureInfo(streamId);
    let last = info.lastEventNumber;
    let firstPosition = -1;
    const growing = { streamNumber: info.streamNumber, lastEventNumber: last, tombstoned: false };
    for (const e of events) {
      const record = b.addRecord(streamId, growing, last + 1, e, now, false, last + 1 === current + 1);
      if (firstPosition < 0) firstPosition = record.position;
      growing.lastEventNumber = ++last;
    }
    b.setInfo(streamId, { streamNumber: info.streamNumber, lastEventNumber: last, tombstoned: false });
    if (isMetastream(streamId)) b.metadataWritten.add(originalStreamOf(streamId));
    if (softDeleted) {
      // Recreating a soft-deleted stream: the old events stay hidden behind a new $tb.
      const { $tb: _, ...rest } = metadata.raw;
      this.writeMetadata(b, streamId, { ...rest, $tb: current + 1 }, now);
    }
    return { firstEventNumber: current + 1, lastEventNumber: last, position: firstPosition, idempotent: false };
  }

  /** Throws on a mismatch; returns the earlier result when the events are a retry of a completed write. */
  private checkExpected(b: BatchBuilder, streamId: string, info: StreamInfo | undefined, current: number,
    softDeleted: boolean, expected: ExpectedVersion, events: ProposedEvent[]): AppendResult | undefined {
    const wrong = () => new WrongExpectedVersionError(streamId, current);
    switch (expected.kind) {
      case 'any':
        return info ? this.retryAt(b, streamId, info, events, undefined, current) : undefined;
      case 'noStream':
        if (current === -1 || softDeleted) return undefined;
        return this.retryAt(b, streamId, info!, events, 0, current) ?? (() => { throw wrong(); })();
      case 'streamExists':
        if (softDeleted) throw new StreamDeletedError(streamId);
        if (current === -1 && !b.info(metastreamOf(streamId))) throw wrong();
        return info ? this.retryAt(b, streamId, info, events, undefined, current) : undefined;
      case 'exact':
        if (expected.version === current) return undefined;
        if (info && expected.version < current) {
          const retry = this.retryAt(b, streamId, info, events, expected.version + 1, current);
          if (retry) return retry;
        }
        throw wrong();
    }
  }

  /**
   * Idempotency: the batch is a retry when its first event id is already in the stream (at
   * `at`, if given) and the following ids match the following events. A partial match is a
   * conflict, not a retry.
   */
  private retryAt(b: BatchBuilder, streamId: string, info: StreamInfo, events: ProposedEvent[],
    at: number | undefined, current: number): AppendResult | undefined {
    if (events[0].idempotent === false) return undefined; // such writers never retry by id
    const first = b.eventNumberOf(info, events[0].eventId);
    if (first === undefined || (at !== undefined && first !== at)) return undefined;
    if (b.positionOf(info, first) < 0) return undefined; // a scavenge removed that write: its id is free again
    for (let i = 1; i < events.length; i++) {
      if (!b.eventIdAt(streamId, info, first + i)?.equals(events[i].eventId)) throw new WrongExpectedVersionError(streamId, current);
    }
    return {
      firstEventNumber: first, lastEventNumber: first + events.length - 1,
      position: b.positionOf(info, first), idempotent: true,
    };
  }

  private planDelete(b: BatchBuilder, streamId: string, expected: ExpectedVersion, hard: boolean, now: number): DeleteResult {
    const existing = b.info(streamId);
    if (existing?.tombstoned) throw new StreamDeletedError(streamId);
    const current = existing?.lastEventNumber ?? -1;
    const metadata = this.deps.metadataOf(streamId);
    const softDeleted = isSoftDeleted(metadata);
    const hasMetastream = b.info(metastreamOf(streamId)) !== undefined;
    switch (expected.kind) {
      case 'noStream': if (current !== -1 && !softDeleted) throw new WrongExpectedVersionError(streamId, current); break;
      case 'streamExists': if (current === -1 && !hasMetastream) throw new WrongExpectedVersionError(streamId, current); break;
      case 'exact': if (expected.version !== current) throw new WrongExpectedVersionError(streamId, current); break;
      case 'any': break;
    }
    if (!hard) {
      if (current === -1 && !hasMetastream) throw new WrongExpectedVersionError(streamId, current);
      return { position: this.writeMetadataText(b, streamId, `{"$tb":${SOFT_DELETED_TB_TEXT}}`, now) };
    }
    const info = b.ensureInfo(streamId);
    const record = b.addRecord(streamId, info, TOMBSTONE_EVENT_NUMBER, {
      eventId: newUuid(), eventType: '$streamDeleted', isJson: false, data: Buffer.alloc(0), metadata: Buffer.alloc(0),
    }, now, true);
    b.setInfo(streamId, { ...info, tombstoned: true });
    b.metadataWritten.add(streamId);
    return { position: record.position };
  }

  private writeMetadata(b: BatchBuilder, streamId: string, doc: Record<string, unknown>, now: number): number {
    return this.writeMetadataText(b, streamId, JSON.stringify(doc), now);
  }

  private writeMetadataText(b: BatchBuilder, streamId: string, json: string, now: number): number {
    const meta = metastreamOf(streamId);
    const info = b.ensureInfo(meta);
    const record = b.addRecord(meta, info, info.lastEventNumber + 1, {
      eventId: newUuid(), eventType: METADATA_EVENT_TYPE, isJson: true, data: Buffer.from(json, 'utf8'), metadata: Buffer.alloc(0),
    }, now);
    b.setInfo(meta, { ...info, lastEventNumber: info.lastEventNumber + 1 });
    b.metadataWritten.add(streamId);
    return record.position;
  }
}
