import type { BatchOp } from './rocks.js';
import type { EventRecord } from './record.js';
import type { WriterCheckpoint } from './stream-state.js';
import type { AppendResult, ClientOperation, DeleteResult } from './commit-decision.js';
import type { Appended } from './batch-builder.js';

// What the commit pipeline (commit-pipeline.ts) and its batch sources (client-writes.ts,
// replicated-writes.ts, removals.ts) say to each other: the writes waiting in the queue, and the
// batch a source builds from its head. Kept apart from both so neither imports the other.

/** A durable batch as the leader ships it: each record's position and encoded bytes, in log order. */
export interface ShippedBatch {
  positions: readonly number[];
  records: readonly Buffer[];
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

/** How a queued write is answered. */
interface Answer<T> {
  resolve: (result: T) => void;
  reject: (err: Error) => void;
}

/** A client's operation waiting in the queue. */
export type ClientPending =
  | (Extract<ClientOperation, { kind: 'append' }> & Answer<AppendResult>)
  | (Extract<ClientOperation, { kind: 'transaction' }> & Answer<AppendResult[]>)
  | (Extract<ClientOperation, { kind: 'delete' }> & Answer<DeleteResult>);
/** A follower's copy of a batch its leader shipped; refused if `current` is false by its turn (an earlier batch failed). */
export type ReplicatedPending = { kind: 'replicated'; batch: ShippedBatch; current: () => boolean } & Answer<void>;
/** Answered with the event loop's time (ms) its batch took to build and write. */
export type RemovalPending = { kind: 'remove'; removal: Removal } & Answer<number>;
export type Pending = ClientPending | ReplicatedPending | RemovalPending;

export function isClientWrite(p: Pending): p is ClientPending {
  return p.kind === 'append' || p.kind === 'transaction' || p.kind === 'delete';
}

/** A projection's checkpoint (see Writer.transact): written without an fsync of its own. */
export function isDeferred(p: Pending): boolean {
  return p.kind === 'transaction' && p.deferSync;
}

/** A deferred-sync write that goes before the other deferred ones queued (a system projection's checkpoint: see Writer.transact). */
export function isDeferredAhead(p: Pending): boolean {
  return p.kind === 'transaction' && p.deferSync && p.ahead === true;
}

/** One batch a source built from the head of the queue. */
export interface Batch {
  /**
   * Whose writes: a client's (on a cluster leader, synced and answered once a quorum holds them),
   * the leader's copied by a follower, or a scavenge's removal (nothing appended).
   */
  readonly origin: 'client' | 'leader' | 'scavenge';
  /** The queue entries it holds: they fail together if the batch cannot be written or replicated. */
  readonly taken: readonly { reject(err: Error): void }[];
  /** One atomic RocksDB write; empty when there is nothing to write (every operation refused, or a retry). */
  readonly ops: readonly BatchOp[];
  /** With an fsync (false: a deferred-sync write, durable with the next synced one). */
  readonly sync: boolean;
  /** The writer checkpoint the batch stores. */
  readonly checkpoint: WriterCheckpoint;
  readonly appended: Appended | undefined;
  /** Once written: what else moves on with it (caches of removed records). */
  written?(): void;
  /** Answers its callers, once readers see it. */
  settle(): void;
}

/** A batch that cannot be written (a broken invariant, records that do not fit the log): its entries fail, the writer goes on. */
export interface FailedBatch {
  readonly taken: readonly { reject(err: Error): void }[];
  readonly failure: Error;
}

export interface BatchSource {
  /**
   * Takes from the head of the queue (whose first entry is its own) what goes in one batch, and
   * builds it; a promise for a large batch built in slices (written with commitLarge).
   */
  take(queue: Pending[]): Batch | FailedBatch | Promise<Batch | FailedBatch>;
}
