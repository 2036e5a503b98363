import { nowMicros } from './clock.js';
import { isSoftDeleted, type StreamMetadata } from './metadata.js';
import type { StreamInfo } from './stream-state.js';

// The one rule of what a stream read shows, from the stream's metadata: events from the truncate
// point (`$tb`, which a soft delete sets to the maximum) and within the newest `$maxCount`, created
// no longer than `$maxAge` ago; nothing of a hard-deleted stream. Reads apply it; what it hides is
// what a scavenge may remove.

export interface Visibility {
  /** The first event number a read shows ($tb, $maxCount). */
  firstEventNumber: number;
  /** Events created before this (µs since the epoch) are hidden ($maxAge); -Infinity when none is set. */
  oldestCreated: number;
  /** Hard-deleted or soft-deleted: no event shows. */
  deleted: boolean;
}

export function visibilityOf(info: StreamInfo, metadata: StreamMetadata, now = nowMicros()): Visibility {
  let first = metadata.truncateBefore ?? 0;
  if (metadata.maxCount !== undefined) first = Math.max(first, info.lastEventNumber - metadata.maxCount + 1);
  return {
    firstEventNumber: first,
    oldestCreated: metadata.maxAge === undefined ? -Infinity : now - metadata.maxAge * 1_000_000,
    deleted: info.tombstoned || isSoftDeleted(metadata),
  };
}

export function isVisibleIn(v: Visibility, eventNumber: number, created: number): boolean {
  return !v.deleted && eventNumber >= v.firstEventNumber && created >= v.oldestCreated;
}
