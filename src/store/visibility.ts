import { nowMicros } from './clock.js';
import { isSoftDeleted, type StreamMetadata } from './metadata.js';
import type { StreamInfo } from './stream-state.js';

// The one rule of what a stream read shows, from the stream's metadata: events from the truncate
// point (`$tb`, which a soft delete sets to the maximum) and within the newest `$maxCount`, created
// no longer than `$maxAge` ago; nothing of a hard-deleted stream. Reads apply it; a persistent
// subscription's cursor and its parked messages skip what it hides; what it hides at a scavenge
// point is what that scavenge may remove (scavenge/calculate.ts).

export interface Visibility {
  /** The first event number a read shows ($tb, $maxCount). */
  firstEventNumber: number;
  /** Events created before this (µs since the epoch) are hidden ($maxAge); -Infinity when none is set. */
  oldestCreated: number;
  /** Hard-deleted or soft-deleted: no event shows. */
  deleted: boolean;
}

/** What the rule reads of a stream's metadata. */
export type VisibilityRules = Pick<StreamMetadata, 'truncateBefore' | 'maxCount' | 'maxAge'>;

/** The first event number a read shows of a stream whose last event is `lastEventNumber` ($tb, $maxCount). */
export function firstVisibleEventNumber(lastEventNumber: number, rules: Pick<VisibilityRules, 'truncateBefore' | 'maxCount'>): number {
  let first = rules.truncateBefore ?? 0;
  if (rules.maxCount !== undefined) first = Math.max(first, lastEventNumber - rules.maxCount + 1);
  return first;
}

/** The rule for a stream as it is (`info`) and as its metadata says, at `now` (µs since the epoch). */
export function visibilityOf(info: Pick<StreamInfo, 'lastEventNumber' | 'tombstoned'>, metadata: VisibilityRules,
  now = nowMicros()): Visibility {
  return {
    firstEventNumber: firstVisibleEventNumber(info.lastEventNumber, metadata),
    oldestCreated: metadata.maxAge === undefined ? -Infinity : now - metadata.maxAge * 1_000_000,
    deleted: info.tombstoned || isSoftDeleted(metadata),
  };
}

export function isVisibleIn(v: Visibility, eventNumber: number, created: number): boolean {
  return !v.deleted && eventNumber >= v.firstEventNumber && created >= v.oldestCreated;
}
