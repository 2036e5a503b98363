import {
  EPOCHS_STREAM, LINK_EVENT_TYPE, firstVisibleEventNumber, isMetastream, originalStreamOf, type EventRecord, type ResolvedEvent, type Store,
} from '../store/index.js';
import { matchesFilter, type EventFilter } from '../store/index.js';

// Where a group's events come from: one stream, or `$all` (every record of the log, optionally
// filtered by stream name or event type). A group reads its source a page at a time and keeps a
// cursor in the source's own positions: the event number in a stream, the log position in `$all`
// (commit == prepare on this node). Checkpoints and statistics write those positions as the
// established servers do: `42` for a stream, `C:42/P:42` for `$all`.

export const ALL_SOURCE = '$all';

/** What a read found: events to hand out, and runs of records the `$all` filter left out (they move checkpoints too). */
export type SourceEntry =
  | { readonly event: ResolvedEvent; readonly position: number }
  | { readonly skipped: number; readonly position: number };

export interface SourceRead {
  readonly entries: SourceEntry[];
  /** Where the next read starts. */
  readonly next: number;
  /** The read reached the end of the source. */
  readonly atEnd: boolean;
  /** The last position the source holds for the group (stream: its last event number), if the read learnt it. */
  readonly lastKnown?: number;
}

export interface GroupSource {
  /** The stream name, or `$all`. */
  readonly name: string;
  readonly filter?: EventFilter;
  /** The position after which a group starting live (`startFrom` -1) begins: the source's last position now. */
  lastPosition(): number;
  /** Up to `count` events from `from` (inclusive); a `$all` read also stops after scanning SCAN_LIMIT records. */
  read(from: number, count: number, resolveLinks: boolean): SourceRead;
  /** Whether a record of the log is one of the source's. */
  takes(record: EventRecord): boolean;
  /** A record's position in the source. */
  positionOf(record: EventRecord): number;
  positionText(position: number): string;
  parsePosition(text: string): number | undefined;
}

/** Records of `$all` scanned by one read: a filter that matches little must not hold the event loop. */
export const SCAN_LIMIT = 4096;
/** Records read from the log per store call of a `$all` read. */
const ALL_PAGE = 512;

export function streamSource(store: Store, stream: string): GroupSource {
  return {
    name: stream,
    lastPosition: () => store.streamInfo(stream)?.lastEventNumber ?? -1,
    read(from, count, resolveLinks) {
      const page = store.readStreamForward(stream, from, count, resolveLinks);
      if (page.status !== 'ok') return { entries: [], next: from, atEnd: true };
      const entries: SourceEntry[] = [];
      let next = Math.min(from + count, page.lastEventNumber + 1);
      for (const e of page.events) {
        const original = (e.link ?? e.event)!;
        if (original.eventNumber < from) continue;
        entries.push({ event: e, position: original.eventNumber });
        next = Math.max(next, original.eventNumber + 1);
      }
      // Past what reads hide ($tb, $maxCount; visibility.ts), and no further than the stream's end.
      next = Math.max(next, Math.min(firstVisibleEventNumber(page.lastEventNumber, page.metadata), page.lastEventNumber + 1));
      return { entries, next, atEnd: next > page.lastEventNumber, lastKnown: page.lastEventNumber };
    },
    takes: (r) => r.streamId === stream,
    positionOf: (r) => r.eventNumber,
    positionText: (position) => String(position),
    parsePosition(text) {
      const n = Number(text);
      return text.trim() !== '' && Number.isSafeInteger(n) && n >= -1 ? n : undefined;
    },
  };
}

export function allSource(store: Store, filter: EventFilter | undefined, pageSize = ALL_PAGE): GroupSource {
  const takes = (r: EventRecord): boolean => !excludedFromAll(r.streamId) && (!filter || matchesFilter(filter, r));
  return {
    name: ALL_SOURCE,
    filter,
    lastPosition: () => lastRecordPosition(store),
    read(from, count, resolveLinks) {
      const entries: SourceEntry[] = [];
      let next = from;
      let scanned = 0;
      let taken = 0;
      let skipped = 0;
      let lastSkipped = -1;
      let lastKnown: number | undefined;
      let atEnd = false;
      scan: while (taken < count && scanned < SCAN_LIMIT) {
        const page = store.readAllForward(next, Math.min(pageSize, SCAN_LIMIT - scanned));
        for (const r of page.records) {
          scanned++;
          if (!takes(r)) {
            skipped++;
            lastSkipped = r.position;
            continue;
          }
          if (skipped > 0) entries.push({ skipped, position: lastSkipped });
          skipped = 0;
          entries.push({ event: resolveLinks && r.eventType === LINK_EVENT_TYPE ? store.resolveLink(r) : { event: r }, position: r.position });
          lastKnown = r.position;
          if (++taken === count) {
            next = r.position + r.size;
            break scan;
          }
        }
        next = page.nextPosition;
        if (page.isEnd || page.records.length === 0) {
          atEnd = true;
          break;
        }
      }
      if (skipped > 0) entries.push({ skipped, position: lastSkipped });
      return { entries, next, atEnd, ...(lastKnown !== undefined ? { lastKnown } : {}) };
    },
    takes,
    positionOf: (r) => r.position,
    positionText: (position) => `C:${position}/P:${position}`,
    parsePosition(text) {
      const m = /^C:(-?\d+)\/P:(-?\d+)$/.exec(text.trim());
      if (!m) return undefined;
      const commit = Number(m[1]);
      return Number.isSafeInteger(commit) && commit === Number(m[2]) && commit >= -1 ? commit : undefined;
    },
  };
}

/**
 * Streams no `$all` group sees, as the established servers leave them out: the epochs, and the
 * `$all` groups' own checkpoints and parked messages (with their metadata), which would
 * otherwise come back to the groups that wrote them.
 */
export function excludedFromAll(streamId: string): boolean {
  if (streamId === EPOCHS_STREAM) return true;
  const stream = isMetastream(streamId) ? originalStreamOf(streamId) : streamId;
  return stream.startsWith('$persistentsubscription-$all::') && (stream.endsWith('-checkpoint') || stream.endsWith('-parked'));
}

/** The position of the last record in the log (-1 when it is empty). */
function lastRecordPosition(store: Store): number {
  const page = store.readAllBackward(store.headPosition, 1);
  return page.records[0]?.position ?? -1;
}
