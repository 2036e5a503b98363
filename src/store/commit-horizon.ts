import { strict as assert } from 'node:assert';
import type { EventRecord } from './record.js';
import { isMetastream, originalStreamOf } from './metadata.js';
import type { StreamInfo } from './stream-state.js';
import type { StreamInfos } from './stream-infos.js';

// How far readers see the log. A single node shows each batch once it is durable. A cluster node
// shows a batch once a quorum of the cluster holds it: the writer plans on a durable batch at
// once (StreamInfos.get), but readers see the log up to `visible` and each stream as committed
// (StreamInfos.visible) until the batch is released. The leader releases a batch when its quorum
// acknowledges it; a follower when the leader's commit position passes it; a restarted node holds
// what lies past the last commit position it stored (an old leader's tail no quorum may hold)
// until the cluster commits it or the node truncates it. Nothing read is taken back by a failover.

/** A batch durable here that readers do not see yet: where it ends, its records, the streams whose metadata it wrote. */
export interface HeldBatch {
  end: number;
  records: EventRecord[];
  metadataWritten: ReadonlySet<string>;
}

export class CommitHorizon {
  /** The end of the log readers see. */
  readonly visible: { nextPosition: number };
  /** Batches durable here that readers do not see yet, oldest first. */
  private readonly held: HeldBatch[] = [];

  constructor(private readonly streams: StreamInfos, end: number,
    /** Metadata read while a batch was held was the committed one: it is read again once released. */
    private readonly onMetadataChanged: (streamIds: Iterable<string>) => void) {
    this.visible = { nextPosition: end };
  }

  /** A durable batch readers see at once. */
  show(end: number, infos: Iterable<[string, StreamInfo]>): void {
    // (Only where nothing is held: a single node, or a follower without bounded reads.)
    assert(this.held.length === 0, 'a batch is shown at once only when no batch before it is held');
    assert(end >= this.visible.nextPosition, 'what readers see never goes back');
    for (const [name, info] of infos) this.streams.set(name, info);
    this.visible.nextPosition = end;
  }

  /** A durable batch readers see once `releaseThrough` passes its end. */
  hold(batch: HeldBatch, infos: Iterable<[string, StreamInfo]>): void {
    assert(batch.end > (this.held.at(-1)?.end ?? this.visible.nextPosition), 'batches are held in log order');
    this.streams.setHeld(batch.end, infos);
    this.held.push(batch);
  }

  /** The held batches ending at or before `position` become visible, in order; returns them (their records are to be published). */
  releaseThrough(position: number): HeldBatch[] {
    const released: HeldBatch[] = [];
    while (this.held.length > 0 && this.held[0].end <= position) {
      const batch = this.held.shift()!;
      this.streams.release(batch.end);
      this.visible.nextPosition = Math.max(this.visible.nextPosition, batch.end);
      if (batch.metadataWritten.size > 0) this.onMetadataChanged(batch.metadataWritten);
      released.push(batch);
    }
    return released;
  }

  /**
   * At a start: `records` (in log order, from `commit` to the log's `end`) are held. Each stream
   * they wrote is shown as it was before them: its events from the first of them on are hidden,
   * a tombstone among them is not yet, and one they created does not exist yet.
   */
  holdTail(commit: number, end: number, records: EventRecord[]): void {
    const firstEvent = new Map<string, number>();
    const metadataWritten = new Set<string>();
    for (const r of records) {
      if (r.tombstone) metadataWritten.add(r.streamId);
      else {
        firstEvent.set(r.streamId, Math.min(firstEvent.get(r.streamId) ?? r.eventNumber, r.eventNumber));
        if (isMetastream(r.streamId)) metadataWritten.add(originalStreamOf(r.streamId));
      }
    }
    const committed: [string, StreamInfo][] = [];
    for (const name of new Set(records.map((r) => r.streamId))) {
      const latest = this.streams.get(name);
      if (!latest) continue;
      const first = firstEvent.get(name);
      committed.push([name, { streamNumber: latest.streamNumber, lastEventNumber: first === undefined ? latest.lastEventNumber : first - 1, tombstoned: false }]);
    }
    this.streams.holdAtOpen(end, committed);
    this.held.push({ end, records, metadataWritten });
    this.visible.nextPosition = commit;
  }
}
