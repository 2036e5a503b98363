import { BatchBuilder, MAX_BYTES_PER_BATCH, type BuilderDeps } from './batch-builder.js';
import type { Batch, BatchSource, FailedBatch, Pending, ReplicatedPending } from './batch.js';
import { ReplicationMismatchError } from './errors.js';
import type { WriterCheckpoint } from './stream-state.js';

// The batch source of a follower's copy of its leader's log: the records at the leader's
// positions, with the same index, event-id, hint, chunk-time and stream-info entries as the
// leader's (BatchBuilder.addReplicated), in one synced batch. Nothing is decided here: the leader
// decided; records that do not follow this log fail their batch (ReplicationMismatchError).

export class ReplicatedWrites implements BatchSource {
  constructor(private readonly deps: BuilderDeps & { checkpoint: WriterCheckpoint }) {}

  take(queue: Pending[]): Batch | FailedBatch {
    const builder = new BatchBuilder(this.deps, { ...this.deps.checkpoint });
    // The leader's batches that arrived while the last one was written go together: one fsync.
    const taken: ReplicatedPending[] = [];
    while (queue.length > 0 && queue[0].kind === 'replicated' && builder.bytes < MAX_BYTES_PER_BATCH) {
      const p = queue.shift() as ReplicatedPending;
      if (!p.current()) {
        p.reject(new ReplicationMismatchError('an earlier batch of this connection failed'));
        continue;
      }
      taken.push(p);
      const { positions, records } = p.batch;
      try {
        for (let i = 0; i < positions.length; i++) builder.addReplicated(positions[i], records[i]);
      } catch (err) {
        return { taken, failure: err as Error };
      }
    }
    const { ops, checkpoint, appended, written } = builder.finish();
    return {
      origin: 'leader', taken, ops, sync: true, checkpoint, appended, written,
      settle: () => { for (const p of taken) p.resolve(); },
    };
  }
}
