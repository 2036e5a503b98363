import { strict as assert } from 'node:assert';
import { BatchBuilder, MAX_BYTES_PER_BATCH, type BuilderDeps } from './batch-builder.js';
import type { Batch, BatchSource, ClientPending, FailedBatch, Pending } from './commit-pipeline.js';
import { isClientWrite, isDeferred } from './commit-pipeline.js';
import {
  decideAppend, decideDelete, doorRefusal, streamsOf, type AppendResult, type Refusal, type StreamWrite,
} from './commit-decision.js';
import { isMetastream, originalStreamOf, SOFT_DELETED_TB_TEXT } from './metadata.js';
import { metadataEvent } from './proposed-event.js';
import type { WriteLimits } from './write-rules.js';
import type { WriterCheckpoint } from './stream-state.js';
import { nowMicros } from './clock.js';

// The batch source of clients' appends, transactions and deletes (every writer of the node's own
// included: projections, subscriptions, users, scavenge history). It takes the operations at the
// head of the queue into one batch, asks commit-decision.ts what each one does, and applies the
// decision to the batch: a refused operation changes nothing and fails alone, the others are
// answered once the pipeline has made the batch durable and visible.

/** Operations per batch, at most: the batch's bytes (MAX_BYTES_PER_BATCH) usually stop it first. */
const MAX_OPS_PER_BATCH = 4096;
/**
 * Deferred-sync writes are flushed in slices of about this many records (a transaction is never
 * split): each slice holds the event loop for a few milliseconds, and a client append waits for
 * at most one.
 */
const MAX_RECORDS_PER_DEFERRED_BATCH = 1000;

/** A soft delete's metadata: `$tb` at Int64.MaxValue (as text: JSON.stringify would round it). */
const SOFT_DELETE_METADATA = `{"$tb":${SOFT_DELETED_TB_TEXT}}`;

export interface ClientWritesDeps extends BuilderDeps {
  checkpoint: WriterCheckpoint;
  /** The write door's limits (write-rules.ts). */
  limits: WriteLimits;
}

export class ClientWrites implements BatchSource {
  constructor(private readonly deps: ClientWritesDeps) {}

  take(queue: Pending[]): Batch | FailedBatch {
    const builder = new BatchBuilder(this.deps, { ...this.deps.checkpoint });
    const taken: ClientPending[] = [];
    const outcomes: (() => void)[] = [];
    const now = nowMicros();
    // Deferred-sync transactions are batched together without an fsync; everything else (which
    // goes first) is written with its fsync.
    const deferred = isDeferred(queue[0]);
    const maxRecords = deferred ? MAX_RECORDS_PER_DEFERRED_BATCH : Infinity;
    while (queue.length > 0 && taken.length < MAX_OPS_PER_BATCH && builder.bytes < MAX_BYTES_PER_BATCH
      && builder.records.length < maxRecords) {
      const next = queue[0];
      if (!isClientWrite(next) || isDeferred(next) !== deferred) break;
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

  private append(b: BatchBuilder, w: StreamWrite, now: number): AppendResult | Refusal {
    const decision = decideAppend(b, w.streamId, w.expected, w.events);
    if (decision.kind === 'refuse') return decision;
    if (decision.kind === 'replay') return decision.result;
    const { firstEventNumber } = decision;
    const lastEventNumber = firstEventNumber + w.events.length - 1;
    const position = b.appendEvents(w.streamId, w.events, now, true);
    assert(b.info(w.streamId)?.lastEventNumber === lastEventNumber, 'the events take the numbers decided');
    if (decision.recreate) b.writeMetadata(w.streamId, metadataEvent(decision.recreate), now);
    return { firstEventNumber, lastEventNumber, position, idempotent: false };
  }
}

function isRefusal(result: AppendResult | Refusal): result is Refusal {
  return 'kind' in result;
}
