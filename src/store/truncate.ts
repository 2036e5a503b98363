import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import type { BatchOp, Rocks } from './rocks.js';
import {
  chunkKey, chunkTimesKey, eventIdKey, hintKey, indexKey, logKey, metaKey, readU64, SPACE, spaceEnd, streamKey, systemLogKey, u64Value,
} from './keys.js';
import { LogSpaces } from './log-spaces.js';
import { decodeRecord } from './record.js';
import { isMetastream } from './metadata.js';
import {
  decodeStreamInfo, encodeWriterCheckpoint, loadWriterCheckpoint, streamInfoOp, WRITER_CHECKPOINT_KEY, type StreamInfo,
} from './stream-state.js';
import { decodeChunk } from './chunks.js';
import { HISTORY_ID_KEY } from './backup-format.js';

// The truncate checkpoint (the established servers' truncate.chk): a position the log must end
// at. A restore sets it to the backup's position; Store.open then removes every log record at or
// above it (both key spaces) with its index, event-id and hint entries, puts the affected streams
// back as they were before it, lowers the writer checkpoint, and clears it. A node truncates and
// goes on (the established servers exit and need a second start; nothing here needs that).
//
// Records go newest first, a page per synced batch, each batch with the stream infos it changes
// and the writer checkpoint: a crash mid-way leaves the checkpoint set and a prefix [target, p) of
// the records to remove, and the next start goes on from there. A stream's last event number
// becomes one below the lowest of its removed events (its events below the target may have been
// scavenged, so the index alone cannot say); a stream whose event 0 (or whose tombstone, having
// no events) is removed did not exist before the target and is removed.

export const TRUNCATE_KEY = metaKey('truncate');
/** The scavenge state database under the data directory (node.ts): after a truncation it describes records that are gone. */
export const SCAVENGE_STATE_DIR = 'scavenging';

const PAGE = 4096;

export interface Truncation {
  /** Where the log now ends. */
  position: number;
  /** Where it ended before. */
  from: number;
  records: number;
  streamsChanged: number;
  streamsRemoved: number;
}

/** Sets the truncate checkpoint (restore); the next Store.open truncates to it. */
export function truncateOp(position: number): readonly [Buffer, Buffer] {
  return [TRUNCATE_KEY, u64Value(position)];
}

/** Truncates the log to the truncate checkpoint if one is set (see above); what was done, or undefined if none was set. */
export function truncateToCheckpoint(rocks: Rocks, chunkSize: number): Truncation | undefined {
  const stored = rocks.get(TRUNCATE_KEY);
  if (!stored) return undefined;
  const target = readU64(stored, 0);
  const from = loadWriterCheckpoint(rocks).nextPosition;
  const removed = removeRecords(rocks, target);
  // Done whether or not records went now: a crash may have come between the last page and this.
  const checkpoint = loadWriterCheckpoint(rocks);
  const ops: BatchOp[] = [
    ...chunkEntriesFrom(rocks, target, chunkSize),
    [HISTORY_ID_KEY, Buffer.from(randomUUID(), 'utf8')],
    [WRITER_CHECKPOINT_KEY, encodeWriterCheckpoint({ ...checkpoint, nextPosition: Math.min(checkpoint.nextPosition, target) })],
    [TRUNCATE_KEY],
  ];
  // The scavenge state knows streams and a scavenge point past the target: a scavenge starts afresh.
  rmSync(join(rocks.location, SCAVENGE_STATE_DIR), { recursive: true, force: true });
  rocks.writeDurable(ops);
  return { position: Math.min(from, target), from, ...removed };
}

/** Removes the records at or above `target`, newest first, a page per synced batch (see above). */
function removeRecords(rocks: Rocks, target: number): Omit<Truncation, 'position' | 'from'> {
  // splitFrom 0: records of system streams are looked for in SYSLOG everywhere, whatever the split.
  const spaces = new LogSpaces(rocks, 0);
  const infos = new Map<string, StreamInfo | null>();
  const changed = new Set<string>();
  let streamsRemoved = 0;
  let records = 0;
  for (let before = Number.MAX_SAFE_INTEGER; ;) {
    const page = spaces.backward(before, PAGE);
    const ops: BatchOp[] = [];
    const touched = new Set<string>();
    let count = 0;
    for (; count < page.positions.length && page.positions[count] >= target; count++) {
      const position = page.positions[count];
      const r = decodeRecord(position, page.values[count]);
      ops.push([logKey(position)], [systemLogKey(position)]);
      if (r.tombstone || isMetastream(r.streamId)) ops.push([hintKey(position)]);
      const info = infos.has(r.streamId) ? infos.get(r.streamId) ?? undefined : storedInfo(rocks, r.streamId);
      if (!info) continue; // (a stream removed above had no records left below: see the header)
      if (!r.tombstone) ops.push(...indexEntriesOf(rocks, info, r.eventNumber, r.eventId));
      infos.set(r.streamId, r.tombstone ? { ...info, tombstoned: false }
        : { ...info, lastEventNumber: Math.min(info.lastEventNumber, r.eventNumber - 1) });
      touched.add(r.streamId);
    }
    if (count === 0) break;
    for (const name of touched) {
      const info = infos.get(name)!;
      changed.add(name);
      if (info.lastEventNumber < 0 && !info.tombstoned) {
        ops.push([streamKey(name)]);
        infos.set(name, null);
        streamsRemoved++;
      } else ops.push(streamInfoOp(name, info));
    }
    records += count;
    const checkpoint = loadWriterCheckpoint(rocks);
    ops.push([WRITER_CHECKPOINT_KEY, encodeWriterCheckpoint({
      ...checkpoint, nextPosition: Math.min(checkpoint.nextPosition, target), recordCount: Math.max(0, checkpoint.recordCount - count),
    })]);
    rocks.writeDurable(ops);
    before = page.positions[count - 1];
  }
  return { records, streamsChanged: changed.size, streamsRemoved };
}

/** The index entry of an event, and its event-id entry if it points at this event. */
function indexEntriesOf(rocks: Rocks, info: StreamInfo, eventNumber: number, eventId: Buffer): BatchOp[] {
  const ops: BatchOp[] = [[indexKey(info.streamNumber, eventNumber)]];
  const idKey = eventIdKey(info.streamNumber, eventId);
  const id = rocks.get(idKey);
  if (id && readU64(id, 0) === eventNumber) ops.push([idKey]);
  return ops;
}

/**
 * Deletions of what describes chunks wholly at or after the target (times, chunk-table entries)
 * and of hints there. The chunk holding the target keeps a time range and remaining bytes at most
 * too wide (harmless: a wider range or a heavier chunk only makes a scavenge look closer).
 */
function chunkEntriesFrom(rocks: Rocks, target: number, chunkSize: number): BatchOp[] {
  const firstGone = Math.ceil(target / chunkSize);
  const ops: BatchOp[] = [];
  for (const key of rocks.scan({ gte: chunkTimesKey(firstGone), lt: spaceEnd(SPACE.TIMES) }).keys) ops.push([key]);
  const table = rocks.scan({ gte: chunkKey(0), lt: spaceEnd(SPACE.CHUNK) });
  table.keys.forEach((key, i) => { if (decodeChunk(key, table.values[i]).start >= firstGone) ops.push([key]); });
  for (const key of rocks.scan({ gte: hintKey(target), lt: spaceEnd(SPACE.HINT) }).keys) ops.push([key]);
  return ops;
}

function storedInfo(rocks: Rocks, streamId: string): StreamInfo | undefined {
  const value = rocks.get(streamKey(streamId));
  return value ? decodeStreamInfo(value) : undefined;
}
