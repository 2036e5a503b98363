import { strict as assert } from 'node:assert';
import type { BatchOp } from './rocks.js';
import type { Batch, BatchSource, Pending, Removal } from './batch.js';
import type { EventRecord } from './record.js';
import { eventIdKey, hintKey, indexKey } from './keys.js';
import type { LogSpaces } from './log-spaces.js';
import type { StreamInfos } from './stream-infos.js';
import { encodeWriterCheckpoint, WRITER_CHECKPOINT_KEY, type WriterCheckpoint } from './stream-state.js';
import { isMetastream } from './metadata.js';
import type { SpaceReclaimer } from './space-reclaim.js';

// The batch source of a scavenge's removals: the records it found removable, with their index,
// event-id and hint entries, and its chunk-table changes, one removal per batch, in order with
// every other write. The log's end does not move; the record count goes down with it.

export interface RemovalsDeps {
  spaces: LogSpaces;
  streams: StreamInfos;
  checkpoint: WriterCheckpoint;
  /** Records from this position on carry ID_INDEXED exactly (written since the store kept hints). */
  idFlagsFrom: number;
  /** The in-memory caches of the log: they drop what the removal removed. */
  tail: { forgetThrough(position: number): void };
  blocks: { forgetThrough(position: number): void };
  reclaimer: SpaceReclaimer;
}

export class Removals implements BatchSource {
  constructor(private readonly deps: RemovalsDeps) {}

  take(queue: Pending[]): Batch {
    const started = performance.now();
    const p = queue.shift();
    assert(p?.kind === 'remove', 'the removal source takes one removal from the head of the queue');
    const { records, chunkOps, sync } = p.removal;
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
    const checkpoint: WriterCheckpoint = { ...this.deps.checkpoint, recordCount: this.deps.checkpoint.recordCount - records.length };
    ops.push([WRITER_CHECKPOINT_KEY, encodeWriterCheckpoint(checkpoint)]);
    // The loop's time the removal took: this batch built, written, and its caches trimmed.
    let loopMs = 0;
    return {
      origin: 'scavenge', taken: [p], ops, sync, checkpoint, appended: undefined,
      written: () => {
        if (highest >= 0) {
          this.deps.tail.forgetThrough(highest);
          this.deps.blocks.forgetThrough(highest);
        }
        this.deps.reclaimer.removed(records);
        loopMs = performance.now() - started;
      },
      settle: () => p.resolve(loopMs),
    };
  }
}
