import { ExpectedVersion, metadataEvent, metastreamOf, type ProposedEvent, type Store } from '../store/index.js';

/**
 * Appends to a stream of which only the latest events are ever read (a group's checkpoints, the
 * definitions document): its first write also sets `$maxCount`, in the same transaction.
 */
export async function appendKeepingLatest(store: Store, streamId: string, event: ProposedEvent, keep: number): Promise<void> {
  if (store.streamInfo(metastreamOf(streamId))) {
    await store.append(streamId, ExpectedVersion.any, [event]);
    return;
  }
  await store.transact([
    { streamId: metastreamOf(streamId), expected: ExpectedVersion.any, events: [metadataEvent({ $maxCount: keep }, { idempotent: false })] },
    { streamId, expected: ExpectedVersion.any, events: [event] },
  ]);
}
