import {
  ExpectedVersion, metadataEvent, metastreamOf, proposedEvent, type ProposedEvent, type Store, type StreamWrite,
} from '../store/index.js';

// What one projection checkpoint writes, gathered before the one atomic store transaction: the
// events per stream in the order the projection produced them (each numbered as it will be
// written, for the links to it), and the checkpoint tag that marks every one of them.

/** Groups a checkpoint's events by stream, in order, and numbers them as they will be written. */
export class WriteSet {
  /** Events per stream (for numbering), and every event in the order it was added. */
  private readonly perStream = new Map<string, number>();
  private readonly ordered: { streamId: string; event: ProposedEvent }[] = [];

  /** `maxWriteBatchLength`: no write to one stream holds more events than this (0: no limit). */
  constructor(private readonly store: Store, private readonly maxWriteLength = 0) {}

  get count(): number {
    return this.ordered.length;
  }

  /** Adds an event; returns the event number it will get (for links to it). */
  add(streamId: string, e: ProposedEvent): number {
    const n = (this.perStream.get(streamId) ?? 0) + 1;
    this.perStream.set(streamId, n);
    this.ordered.push({ streamId, event: e });
    const info = this.store.streamInfo(streamId);
    return (info ? info.lastEventNumber + 1 : 0) + n - 1;
  }

  /** A checkpoint: only the latest two are kept, so a new checkpoint stream gets $maxCount 2 with its first event. */
  addCheckpoint(streamId: string, e: ProposedEvent): void {
    if (!this.store.streamInfo(streamId) && !this.perStream.has(streamId)) {
      this.add(metastreamOf(streamId), metadataEvent({ $maxCount: 2 }, { idempotent: false }));
    }
    this.add(streamId, e);
  }

  /**
   * The writes in the order the events were added (consecutive events of one stream form one
   * write, of at most maxWriteBatchLength events), so the log keeps the order in which the
   * projection emitted across streams.
   */
  toStreamWrites(): StreamWrite[] {
    const writes: StreamWrite[] = [];
    for (const { streamId, event: e } of this.ordered) {
      const last = writes[writes.length - 1];
      if (last && last.streamId === streamId && (this.maxWriteLength <= 0 || last.events.length < this.maxWriteLength)) last.events.push(e);
      else writes.push({ streamId, expected: ExpectedVersion.any, events: [e] });
    }
    return writes;
  }
}

/** An event of a projection's: its checkpoint transaction is atomic, so it never retries by id. */
export function event(eventType: string, data: string, isJson: boolean, metadata: Record<string, unknown>): ProposedEvent {
  return proposedEvent({ eventType, data, isJson, metadata: JSON.stringify(metadata), idempotent: false });
}
