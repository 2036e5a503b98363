import { strict as assert } from 'node:assert';
import { BatchBuilder, MAX_BYTES_PER_BATCH, type BuilderDeps } from './batch-builder.js';
import type { Batch, BatchSource, ClientPending, FailedBatch, Pending } from './batch.js';
import { isClientWrite, isDeferred } from './batch.js';
import {
  decideAppend, decideDelete, doorRefusal, streamsOf, streamsReadFor, writeRefusal, type AppendDecision, type AppendResult, type Refusal, type StreamWrite,
} from './commit-decision.js';
import { isMetastream, originalStreamOf, SOFT_DELETED_TB_TEXT } from './metadata.js';
import { metadataEvent } from './proposed-event.js';
import type { WriteLimits } from './write-rules.js';
import type { WriterCheckpoint } from './stream-state.js';
import { nowMicros } from './clock.js';
import { LoopSlices } from '../loop-slices.js';

// The batch source of clients' appends, transactions and deletes (every writer of the node's own
// included: projections, subscriptions, users, scavenge history). It takes the operations at the
// head of the queue into one batch, asks commit-decision.ts what each one does, and applies the
// decision to the batch: a refused operation changes nothing and fails alone, the others are
// answered once the pipeline has made the batch durable and visible. A large operation (a
// projection checkpoint with many emitted events) is taken alone and built in slices of the
// event loop's time (takeLarge), the same decisions applied the same way.

/** Operations per batch, at most: the batch's bytes (MAX_BYTES_PER_BATCH) usually stop it first. */
const MAX_OPS_PER_BATCH = 4096;
/**
 * Deferred-sync writes are flushed in slices of about this many records (a transaction is never
 * split): each slice holds the event loop for a few milliseconds, and a client append waits for
 * at most one.
 */
const MAX_RECORDS_PER_DEFERRED_BATCH = 1000;
/**
 * An operation of at least this many events is large: taken alone into a batch that is built in
 * slices (takeLarge) and written on the write thread, while the pipeline holds the writes behind
 * it. Below it, its batch is built and written on the event loop in one piece: 20-90 ms for
 * 1,999 events on two busy cores (measured with the store alone; 3,999 events: 130-240 ms).
 */
export const LARGE_OPERATION_EVENTS = 2000;
/** Events a large operation's batch takes between two looks at the clock (LoopSlices). */
const EVENTS_PER_STEP = 64;

/** A soft delete's metadata: `$tb` at Int64.MaxValue (as text: JSON.stringify would round it). */
const SOFT_DELETE_METADATA = `{"$tb":${SOFT_DELETED_TB_TEXT}}`;

export interface ClientWritesDeps extends BuilderDeps {
  checkpoint: WriterCheckpoint;
  /** The write door's limits (write-rules.ts). */
  limits: WriteLimits;
}

export class ClientWrites implements BatchSource {
  constructor(private readonly deps: ClientWritesDeps) {}

  take(queue: Pending[]): Batch | FailedBatch | Promise<Batch | FailedBatch> {
    if (eventCount(queue[0] as ClientPending) >= LARGE_OPERATION_EVENTS) return this.takeLarge(queue);
    const builder = new BatchBuilder(this.deps, { ...this.deps.checkpoint });
    const taken: ClientPending[] = [];
    const outcomes: (() => void)[] = [];
    const now = nowMicros();
    // Deferred-sync transactions are batched together without an fsync; everything else (which
    // goes first) is written with its fsync.
    const deferred = isDeferred(queue[0]);
    const maxRecords = deferred ? MAX_RECORDS_PER_DEFERRED_BATCH : Infinity;
    this.deps.streams.prefetch(streamsAhead(queue, deferred, maxRecords));
    while (queue.length > 0 && taken.length < MAX_OPS_PER_BATCH && builder.bytes < MAX_BYTES_PER_BATCH
      && builder.records.length < maxRecords) {
      const next = queue[0];
      if (!isClientWrite(next) || isDeferred(next) !== deferred || eventCount(next) >= LARGE_OPERATION_EVENTS) break;
      // Its stream's metadata changes in this batch, and decisions read the metadata written: next batch.
      if (streamsOf(next).some((id) => builder.metadataWritten.has(isMetastream(id) ? originalStreamOf(id) : id))) break;
      queue.shift();
      taken.push(next);
      try {
        outcomes.push(this.plan(builder, next, now));
      } catch (err) {
        // A broken invariant of the store, not input: this batch is not written, the writer goes on.
        return { taken, failure: err as Error };
      }
    }
    const { ops, checkpoint, appended, written } = builder.finish();
    return {
      origin: 'client', taken, ops, sync: !deferred, checkpoint, appended, written,
      settle: () => { for (const outcome of outcomes) outcome(); },
    };
  }

  /**
   * The large operation at the head of the queue, alone in a batch built in slices: between them
   * the event loop serves reads and requests, and the pipeline holds every other write (the
   * decisions taken here read the stream infos as committed when it started).
   */
  private async takeLarge(queue: Pending[]): Promise<Batch | FailedBatch> {
    const p = queue.shift() as ClientPending;
    const builder = new BatchBuilder(this.deps, { ...this.deps.checkpoint });
    const slices = new LoopSlices();
    let outcome: () => void;
    try {
      const refused = await this.doorRefusalInSlices(p, slices);
      outcome = refused ? () => p.reject(refused.error) : await this.planInSlices(builder, p, nowMicros(), slices);
    } catch (err) {
      return { taken: [p], failure: err as Error };
    }
    const { ops, checkpoint, appended } = builder.finish();
    return { origin: 'client', taken: [p], ops, sync: !isDeferred(p), checkpoint, appended, settle: outcome };
  }

  /** Adds one operation to the batch as decided; returns what answers its caller. */
  private plan(b: BatchBuilder, p: ClientPending, now: number): () => void {
    // The door first: a refused operation changes nothing in the batch and fails alone.
    const refused = doorRefusal(p, this.deps.limits);
    if (refused) return () => p.reject(refused.error);
    switch (p.kind) {
      case 'append': {
        const result = this.append(b, p, now);
        return isRefusal(result) ? () => p.reject(result.error) : () => p.resolve(result);
      }
      case 'transaction': {
        // All or nothing: a refused write takes the transaction's earlier writes out of the batch.
        const mark = b.mark();
        const results: AppendResult[] = [];
        for (const w of p.writes) {
          const result = this.append(b, w, now);
          if (isRefusal(result)) {
            b.rollback(mark);
            return () => p.reject(result.error);
          }
          results.push(result);
        }
        return () => p.resolve(results);
      }
      case 'delete': {
        const decision = decideDelete(b, p.streamId, p.expected, p.hard);
        if (decision.kind === 'refuse') return () => p.reject(decision.error);
        const position = decision.kind === 'tombstone'
          ? b.addTombstone(p.streamId, now)
          : b.writeMetadata(p.streamId, metadataEvent(SOFT_DELETE_METADATA), now);
        return () => p.resolve({ position });
      }
    }
  }

  /** The door's refusal of a large append or transaction (doorRefusal), a step of events at a time. */
  private async doorRefusalInSlices(p: ClientPending, slices: LoopSlices): Promise<Refusal | undefined> {
    assert(p.kind !== 'delete', 'a delete is never large');
    const writes: readonly StreamWrite[] = p.kind === 'append' ? [p] : p.writes;
    const reserved = p.kind === 'append' && p.reserved === true;
    for (const w of writes) {
      for (let from = 0; from === 0 || from < w.events.length; from += EVENTS_PER_STEP) {
        if (slices.due()) await slices.next();
        const refused = writeRefusal(w.streamId, w.events, reserved, this.deps.limits, from, Math.min(from + EVENTS_PER_STEP, w.events.length));
        if (refused) return refused;
      }
    }
    return undefined;
  }

  /** plan() for a large append or transaction (after the door), giving the event loop up between slices. */
  private async planInSlices(b: BatchBuilder, p: ClientPending, now: number, slices: LoopSlices): Promise<() => void> {
    assert(p.kind !== 'delete', 'a delete is never large');
    const writes: readonly StreamWrite[] = p.kind === 'append' ? [p] : p.writes;
    const mark = b.mark();
    const results: AppendResult[] = [];
    for (const w of writes) {
      const result = await this.appendInSlices(b, w, now, slices);
      if (isRefusal(result)) {
        b.rollback(mark);
        return () => p.reject(result.error);
      }
      results.push(result);
    }
    return p.kind === 'append' ? () => p.resolve(results[0]) : () => p.resolve(results);
  }

  private append(b: BatchBuilder, w: StreamWrite, now: number): AppendResult | Refusal {
    const decision = decideAppend(b, w.streamId, w.expected, w.events);
    if (decision.kind === 'refuse') return decision;
    if (decision.kind === 'replay') return decision.result;
    const position = b.appendEvents(w.streamId, w.events, now, true);
    return this.appended(b, w, decision, position, now);
  }

  /** append(), the events added a step at a time: the same records, keys and stream info as in one call. */
  private async appendInSlices(b: BatchBuilder, w: StreamWrite, now: number, slices: LoopSlices): Promise<AppendResult | Refusal> {
    const decision = decideAppend(b, w.streamId, w.expected, w.events);
    if (decision.kind === 'refuse') return decision;
    if (decision.kind === 'replay') return decision.result;
    let position = -1;
    for (let from = 0; from < w.events.length; from += EVENTS_PER_STEP) {
      if (slices.due()) await slices.next();
      // Only the first event's id is indexed (see BatchBuilder.appendEvents).
      const first = b.appendEvents(w.streamId, w.events.slice(from, from + EVENTS_PER_STEP), now, from === 0);
      if (from === 0) position = first;
    }
    return this.appended(b, w, decision, position, now);
  }

  /** The events of an append are in the batch: its stream's metadata too if it is recreated, and its result. */
  private appended(b: BatchBuilder, w: StreamWrite, decision: Extract<AppendDecision, { kind: 'write' }>, position: number,
    now: number): AppendResult {
    const { firstEventNumber } = decision;
    const lastEventNumber = firstEventNumber + w.events.length - 1;
    assert(b.info(w.streamId)?.lastEventNumber === lastEventNumber, 'the events take the numbers decided');
    if (decision.recreate) b.writeMetadata(w.streamId, metadataEvent(decision.recreate), now);
    return { firstEventNumber, lastEventNumber, position, idempotent: false };
  }
}

function isRefusal(result: AppendResult | Refusal): result is Refusal {
  return 'kind' in result;
}

/** Events an operation writes (a delete: none of its own). */
function eventCount(p: ClientPending): number {
  switch (p.kind) {
    case 'append': return p.events.length;
    case 'transaction': {
      let n = 0;
      for (const w of p.writes) n += w.events.length;
      return n;
    }
    case 'delete': return 0;
  }
}

/**
 * The streams of the client writes at the head of the queue that this batch may take (take's own
 * limits: the same durability, no large operation, up to `maxRecords` events): the informations
 * their decisions read (their metastreams' too) are read at once. Looking further cost twenty
 * projections catching up 10.8 s of the event loop's 190 in the prefetch alone: ~15 checkpoints
 * of ~1,000 streams each waited, and each batch of deferred-sync writes took about one of them.
 */
function* streamsAhead(queue: readonly Pending[], deferred: boolean, maxRecords: number): Generator<string> {
  let events = 0;
  for (let i = 0; i < queue.length && i < MAX_OPS_PER_BATCH && events < maxRecords; i++) {
    const p = queue[i];
    if (!isClientWrite(p) || isDeferred(p) !== deferred) return;
    const n = eventCount(p);
    if (n >= LARGE_OPERATION_EVENTS) return;
    events += n;
    for (const s of streamsOf(p)) yield* streamsReadFor(s);
  }
}
