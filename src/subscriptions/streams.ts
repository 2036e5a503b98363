import { ExpectedVersion, METADATA_EVENT_TYPE, metastreamOf, newUuid, type ProposedEvent, type Store } from '../store/index.js';

/**
 * Appends to a stream of which only the latest events are ever read (a group's checkpoints, the
 * definitions document): its first write also sets `$maxCount`, in the same transaction.
 */
export async function appendKeepingLatest(store: Store, streamId: string, event: ProposedEvent, keep: number): Promise<void> {
  if (store.streamInfo(metastreamOf(streamId))) {
    await store.append(streamId, ExpectedVersion.any, [event]);
    return;
  }
  const meta: ProposedEvent = {
    eventId: newUuid(), eventType: METADATA_EVENT_TYPE, isJson: true, idempotent: false,
    data: Buffer.from(JSON.stringify({ $maxCount: keep })), metadata: Buffer.alloc(0),
  };
  await store.transact([
    { streamId: metastreamOf(streamId), expected: ExpectedVersion.any, events: [meta] },
    { streamId, expected: ExpectedVersion.any, events: [event] },
  ]);
}
