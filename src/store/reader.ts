import type { PackedPlaces } from './packed-places.js';
import type { Rocks } from './rocks.js';
import type { LogTailCache } from './log-cache.js';
import type { SharedBlocks } from './shared-blocks.js';
import { decodeRecord, LINK_EVENT_TYPE, storedFormOf, type EventRecord, type RecordSieve } from './record.js';
import { recordsOf, type LogReadThread } from './log-read-thread.js';
import { indexKey, readU64 } from './keys.js';
import { isSystemRecordStream, type LogRows, type LogSpaces } from './log-spaces.js';
import type { StreamInfo } from './stream-state.js';
import type { StreamInfos } from './stream-infos.js';
import { isVisibleIn, visibilityOf, type Visibility } from './visibility.js';
import {
  EMPTY_METADATA, isMetastream, isSoftDeleted, metastreamOf, originalStreamOf, parseMetadata, type StreamMetadata,
} from './metadata.js';

// Reads: stream pages through the stream index, $all pages straight off the log, metadata
// (cached until its metastream is written) applied to every stream read. A read sees the log up
// to `visible` and streams as committed (commit-horizon.ts): on a cluster node, nothing a
// quorum does not hold yet.

/** A read event. `link` is the `$>` record when a link was resolved; `event` is missing when its target is gone. */
export interface ResolvedEvent {
  readonly event?: EventRecord;
  readonly link?: EventRecord;
}

export function originalOf(e: ResolvedEvent): EventRecord {
  return (e.link ?? e.event)!;
}

export type StreamPage =
  | { status: 'ok'; events: ResolvedEvent[]; lastEventNumber: number; isEndOfStream: boolean; metadata: StreamMetadata }
  | { status: 'noStream' }
  | { status: 'deleted' };

export type SingleEvent =
  | { status: 'ok'; event: ResolvedEvent; lastEventNumber: number; metadata: StreamMetadata }
  | { status: 'notFound' | 'noStream' | 'deleted' };

export interface AllPage {
  records: EventRecord[];
  /** Log bytes of the records left out before each record, and after the last (a read skipping system streams, or with a sieve). */
  gaps?: number[];
  /** With a sieve: how many records it left out before each record, and after the last. */
  sieved?: number[];
  /** Forward: where the next forward page starts. Backward: the position the next older page ends before. */
  nextPosition: number;
  isEnd: boolean;
}

/** Metastreams keep only their latest event visible. */
const METASTREAM_METADATA: StreamMetadata = Object.freeze({ maxCount: 1, raw: { $maxCount: 1 } });
const METADATA_CACHE_LIMIT = 100_000;
const METADATA_CACHE_BYTES = 64 * 1024 * 1024;

export interface ReadCounters {
  cachedRecord: number;
  notCachedRecord: number;
  /** Records read from RocksDB on the log-read thread (of notCachedRecord). */
  offLoopRecord: number;
  cachedStreamInfo: number;
  notCachedStreamInfo: number;
}

export class Reader {
  private readonly metadataCache = new Map<string, StreamMetadata>();
  private metadataCacheBytes = 0;
  /**
   * While resolvingLinks runs: the link targets' records read at once, by `${streamNumber}:${eventNumber}`
   * (`cached`: found in the log tail), counted as read when used.
   */
  private readAhead: Map<string, { record: EventRecord; cached: boolean }> | undefined;
  readonly counters: ReadCounters = { cachedRecord: 0, notCachedRecord: 0, offLoopRecord: 0, cachedStreamInfo: 0, notCachedStreamInfo: 0 };

  constructor(private readonly rocks: Rocks, private readonly spaces: LogSpaces, private readonly streams: StreamInfos,
    /** The end of the log a read sees (CommitHorizon.visible). */
    private readonly visible: { nextPosition: number }, private readonly tail: LogTailCache,
    /** Decoded blocks of the log shared by the readers that read it in order (projections). */
    private readonly blocks?: SharedBlocks,
    /** Where reads of much of the log go off the event loop (readAllForwardOffThread). */
    private readonly thread?: LogReadThread) {}

  streamInfo(streamId: string): StreamInfo | undefined {
    return this.streams.visible(streamId);
  }

  forgetMetadata(streamIds: Iterable<string>): void {
    for (const id of streamIds) this.metadataCache.delete(id);
  }

  metadataOf(streamId: string): StreamMetadata {
    if (isMetastream(streamId)) return METASTREAM_METADATA;
    const cached = this.metadataCache.get(streamId);
    if (cached) {
      this.counters.cachedStreamInfo++;
      return cached;
    }
    this.counters.notCachedStreamInfo++;
    const meta = this.streams.visible(metastreamOf(streamId));
    let metadata = EMPTY_METADATA;
    let bytes = 0;
    if (meta && meta.lastEventNumber >= 0) {
      const record = this.recordAt(metastreamOf(streamId), meta, meta.lastEventNumber);
      if (record) metadata = parseMetadata(record.data);
      bytes = record?.data.length ?? 0;
    }
    // Bounded in entries and in bytes of the documents held: what is dropped is read again on demand.
    if (this.metadataCache.size >= METADATA_CACHE_LIMIT || this.metadataCacheBytes + bytes > METADATA_CACHE_BYTES) {
      this.metadataCache.clear();
      this.metadataCacheBytes = 0;
    }
    this.metadataCache.set(streamId, metadata);
    this.metadataCacheBytes += bytes;
    return metadata;
  }

  /** The metadata as written, committed or not (the writer's view: it plans on batches in flight). */
  writtenMetadataOf(streamId: string): StreamMetadata {
    const metastream = metastreamOf(streamId);
    if (isMetastream(streamId) || !this.streams.isHeld(metastream)) return this.metadataOf(streamId);
    const meta = this.streams.get(metastream);
    const record = meta && meta.lastEventNumber >= 0 ? this.recordAt(metastream, meta, meta.lastEventNumber) : undefined;
    return record ? parseMetadata(record.data) : EMPTY_METADATA;
  }

  readStreamForward(streamId: string, from: number, count: number, resolveLinks: boolean): StreamPage {
    const found = this.openStream(streamId);
    if (found.status !== 'ok') return found;
    const { info, metadata } = found;
    const visibility = visibilityOf(info, metadata);
    const last = info.lastEventNumber;
    const start = Math.max(from, visibility.firstEventNumber);
    const end = Math.min(from + count - 1, last);
    const records = start <= end ? this.recordsBetween(streamId, info, start, end, false) : [];
    return {
      status: 'ok', lastEventNumber: last, metadata, isEndOfStream: from + count > last,
      events: this.present(records, visibility, resolveLinks),
    };
  }

  /** `from` -1 reads from the last event. */
  readStreamBackward(streamId: string, from: number, count: number, resolveLinks: boolean): StreamPage {
    const found = this.openStream(streamId);
    if (found.status !== 'ok') return found;
    const { info, metadata } = found;
    const visibility = visibilityOf(info, metadata);
    const last = info.lastEventNumber;
    const top = from < 0 ? last : from;
    const start = Math.max(top - count + 1, visibility.firstEventNumber);
    const end = Math.min(top, last);
    const records = start <= end ? this.recordsBetween(streamId, info, start, end, true) : [];
    return {
      status: 'ok', lastEventNumber: last, metadata, isEndOfStream: top - count < visibility.firstEventNumber,
      events: this.present(records, visibility, resolveLinks),
    };
  }

  /** One event by number; -1 reads the last one. */
  readEvent(streamId: string, eventNumber: number, resolveLinks: boolean): SingleEvent {
    const found = this.openStream(streamId);
    if (found.status !== 'ok') return found;
    const { info, metadata } = found;
    const visibility = visibilityOf(info, metadata);
    const n = eventNumber < 0 ? info.lastEventNumber : eventNumber;
    if (n > info.lastEventNumber || n < visibility.firstEventNumber) return { status: 'notFound' };
    const record = this.recordAt(streamId, info, n);
    const [event] = record ? this.present([record], visibility, resolveLinks) : [];
    if (!event) return { status: 'notFound' };
    return { status: 'ok', event, lastEventNumber: info.lastEventNumber, metadata };
  }

  /**
   * Records from `position` on. `sharedBy`: a reader of much of the log in order (a projection):
   * completed blocks of the log come from the blocks shared by every such reader. `skipSystem`:
   * records of system streams are left out (most are never read: log-spaces.ts), their bytes told
   * in `gaps`, and the page may end at the head of the log past the last record returned.
   * `sieve`: records it refuses are left out undecoded (told in `sieved`); `keep`: with a sieve,
   * the page ends after this many records it passed.
   */
  readAllForward(position: number, count: number, sharedBy?: object, skipSystem = false, sieve?: RecordSieve, keep = Infinity): AllPage {
    if (!sieve) keep = Infinity;
    // A reader near the head finds its records in the log tail: a block not in memory is not read
    // from RocksDB for it. (The system projections, keeping up with twenty catching up, read each
    // block of the twenty's checkpoints on the event loop as it filled: 8.3 s of 165 in RocksDB scans.)
    const tailStart = this.tail.start;
    const inTail = tailStart !== undefined && position >= tailStart;
    if (sharedBy && this.blocks && !(inTail && !this.blocks.holds(position, skipSystem))) {
      const readBefore = this.blocks.counters.reads;
      const shared = this.blocks.read(position, count, this.visible.nextPosition, sharedBy, skipSystem, sieve, keep);
      // Rows read from RocksDB into blocks, and records handed out of blocks already in memory.
      const fresh = this.blocks.counters.reads - readBefore;
      this.counters.notCachedRecord += fresh;
      this.counters.cachedRecord += Math.max(0, shared.scanned - fresh);
      if (shared.nextPosition > position) {
        const { records, gaps, sieved } = shared;
        if (shared.scanned >= count || records.length >= keep) return { records, nextPosition: shared.nextPosition, isEnd: false, gaps, sieved };
        const rest = this.readAllForward(shared.nextPosition, count - shared.scanned, undefined, skipSystem, sieve, keep - records.length);
        records.push(...rest.records);
        // What was left out at the end of the shared read and at the start of the rest is one gap.
        joinLeftOut(gaps, rest.gaps);
        joinLeftOut(sieved, rest.sieved);
        return { records, nextPosition: rest.nextPosition, isEnd: rest.isEnd, gaps, sieved };
      }
    }
    let records: EventRecord[];
    const end = this.visible.nextPosition;
    const cached = this.tail.forward(position, count);
    if (cached) {
      records = cached;
      // (the tail holds a leader's batches in flight too)
      if (records.length > 0 && records[records.length - 1].position >= end) records = records.filter((r) => r.position < end);
      this.counters.cachedRecord += records.length;
    } else {
      records = position < end ? this.decode(this.spaces.forward(position, count, end, skipSystem)) : [];
      this.counters.notCachedRecord += records.length;
    }
    const last = records[records.length - 1];
    let nextPosition = last ? last.position + last.size : Math.max(position, 0);
    // Fewer records than asked: the end of the log (which a scavenge point may leave at a chunk
    // boundary, past the last record); for a reader of LOG alone, the end of the user records.
    const isEnd = records.length < count || nextPosition >= end;
    if (!skipSystem && !sieve) return { records, nextPosition, isEnd };
    if (skipSystem && isEnd) nextPosition = Math.max(nextPosition, end);
    const kept = leftOut(records, position, nextPosition, skipSystem, sieve, keep);
    // Ended at its `keep`-th record: the page ends right after it.
    return kept.endedAt === undefined ? { ...kept, nextPosition, isEnd } : { ...kept, nextPosition: kept.endedAt, isEnd: false };
  }

  /**
   * readAllForward's records (the whole log, no shared blocks) with the rows read on the
   * log-read thread when they are older than the log tail: for a reader of much of the log, whose
   * event loop decodes one buffer a page and meanwhile goes on with the page before.
   */
  async readAllForwardOffThread(position: number, count: number): Promise<AllPage> {
    // (the end a read sees: committed records, which no truncation removes while this one is away)
    const end = this.visible.nextPosition;
    const tailStart = this.tail.start;
    if (position >= end || (tailStart !== undefined && position >= tailStart)) return this.readAllForward(position, count);
    const packed = await this.thread?.forward({ from: Math.max(0, position), limit: count, to: end });
    if (!packed) return this.readAllForward(position, count);
    const records = recordsOf(packed);
    this.counters.notCachedRecord += records.length;
    this.counters.offLoopRecord += records.length;
    const last = records[records.length - 1];
    const nextPosition = last ? last.position + last.size : Math.max(position, 0);
    return { records, nextPosition, isEnd: records.length < count || nextPosition >= end };
  }

  /**
   * Log records in [from, to), a page at a time, read off the event loop (a scavenge's reads);
   * `visit` returns false to stop. On the log-read thread in log order; where the thread cannot
   * take it, on the thread pool from there on: the user streams' records first, then the system
   * streams' (log-spaces.ts), each part in log order. (Through the thread pool the event loop made
   * two Buffers per row: a scavenge's execution spent most of its time there.) `decoded` hears
   * the event loop's time each page took to decode (a scavenge keeps account of its share).
   */
  async scanLog(from: number, to: number, pageSize: number, visit: (records: EventRecord[]) => Promise<boolean> | boolean,
    decoded?: (ms: number) => void): Promise<void> {
    let at = Math.max(0, from);
    while (at < to) {
      const packed = await this.thread?.forward({ from: at, limit: pageSize, to });
      if (!packed) break;
      const started = performance.now();
      const records = recordsOf(packed);
      decoded?.(performance.now() - started);
      if (records.length === 0 || !(await visit(records)) || records.length < pageSize) return;
      const last = records[records.length - 1];
      at = last.position + last.size;
    }
    if (at < to) {
      await this.spaces.pages(at, to, pageSize, (positions, values) => {
        const started = performance.now();
        const records = positions.map((p, i) => decodeRecord(p, values[i]));
        decoded?.(performance.now() - started);
        return visit(records);
      });
    }
  }

  /** The stream's records with event numbers in [from, to] as stored, whatever a read would show of them. */
  storedRecords(streamId: string, from: number, to: number): EventRecord[] {
    const info = this.streams.visible(streamId);
    return info && from <= to ? this.recordsBetween(streamId, info, from, Math.min(to, info.lastEventNumber), false) : [];
  }

  /** The stream's last `count` records as written here, committed or not, newest first (the cluster's epochs). */
  writtenRecords(streamId: string, count: number): EventRecord[] {
    const info = this.streams.get(streamId);
    if (!info || info.lastEventNumber < 0 || count <= 0) return [];
    return this.recordsBetween(streamId, info, Math.max(0, info.lastEventNumber - count + 1), info.lastEventNumber, true);
  }

  /**
   * The records at places `from` to `to` (exclusive) of `places` as they are now (undefined where a
   * scavenge has removed one since it was read): a big page is held as places and read back a part at a time.
   */
  recordsAtPacked(places: PackedPlaces, from: number, to: number): (EventRecord | undefined)[] {
    const records: (EventRecord | undefined)[] = [];
    const missing: number[] = [];
    for (let i = from; i < to; i++) {
      const r = this.tail.get(places.position(i));
      if (r === undefined) missing.push(records.length);
      records.push(r);
    }
    if (missing.length > 0) {
      const fetched = this.rocks.getMany(missing.map((j) => this.spaces.keyOf(places.position(from + j), places.isSystem(from + j))));
      missing.forEach((j, k) => {
        const bytes = fetched[k];
        if (bytes) records[j] = decodeRecord(places.position(from + j), bytes);
      });
    }
    this.counters.cachedRecord += records.length - missing.length;
    this.counters.notCachedRecord += missing.length;
    return records;
  }

  /** Records before `position`, newest first. */
  readAllBackward(position: number, count: number): AllPage {
    const records = this.decode(this.spaces.backward(Math.min(position, this.visible.nextPosition), count));
    this.counters.notCachedRecord += records.length;
    const oldest = records[records.length - 1];
    return { records, nextPosition: oldest ? oldest.position : 0, isEnd: records.length < count };
  }

  private decode({ positions, values }: LogRows): EventRecord[] {
    return positions.map((p, i) => decodeRecord(p, values[i]));
  }

  get headPosition(): number {
    return this.visible.nextPosition;
  }

  private openStream(streamId: string):
    { status: 'ok'; info: StreamInfo; metadata: StreamMetadata } | { status: 'noStream' } | { status: 'deleted' } {
    if (isMetastream(streamId) && this.streams.visible(originalStreamOf(streamId))?.tombstoned) return { status: 'deleted' };
    const info = this.streams.visible(streamId);
    if (!info) return { status: 'noStream' };
    if (info.tombstoned) return { status: 'deleted' };
    if (info.lastEventNumber < 0) return { status: 'noStream' };
    const metadata = this.metadataOf(streamId);
    if (isSoftDeleted(metadata)) return { status: 'noStream' };
    return { status: 'ok', info, metadata };
  }

  /** Whether a stream read would show this record ($tb, $maxCount, $maxAge, deletion). */
  isVisible(record: EventRecord): boolean {
    const info = this.streams.visible(record.streamId);
    if (!info) return false;
    return isVisibleIn(visibilityOf(info, this.metadataOf(record.streamId)), record.eventNumber, record.created);
  }

  private recordAt(streamId: string, info: StreamInfo, eventNumber: number): EventRecord | undefined {
    const cachedEvent = this.tail.streamEvents(streamId, eventNumber, eventNumber);
    if (cachedEvent) {
      this.counters.cachedRecord++;
      return cachedEvent[0];
    }
    const ahead = this.readAhead?.get(`${info.streamNumber}:${eventNumber}`);
    if (ahead) {
      if (ahead.cached) this.counters.cachedRecord++;
      else this.counters.notCachedRecord++;
      return ahead.record;
    }
    const pos = this.rocks.get(indexKey(info.streamNumber, eventNumber));
    if (!pos) return undefined;
    const position = readU64(pos, 0);
    const cached = this.tail.get(position);
    if (cached) {
      this.counters.cachedRecord++;
      return cached;
    }
    const bytes = this.spaces.get(position, streamId);
    if (!bytes) return undefined; // removed by a scavenge since the index was read
    this.counters.notCachedRecord++;
    return decodeRecord(position, bytes);
  }

  private recordsBetween(streamId: string, info: StreamInfo, start: number, end: number, reverse: boolean): EventRecord[] {
    // Nothing to read (a reader of a stream caught up with it asks for what comes after its last
    // event): no scan. An index scan of an empty range still cost ~0.5 ms under a busy writer,
    // and a caught-up category projection asks after every commit.
    if (start > end) return [];
    const cached = this.tail.streamEvents(streamId, start, end);
    if (cached) {
      this.counters.cachedRecord += cached.length;
      return reverse ? cached.reverse() : cached;
    }
    const { values } = this.rocks.scan({
      gte: indexKey(info.streamNumber, start), lte: indexKey(info.streamNumber, end), reverse,
    });
    const positions = values.map((v) => readU64(v, 0));
    const records: (EventRecord | undefined)[] = positions.map((p) => this.tail.get(p));
    const missing = positions.filter((_, i) => records[i] === undefined);
    if (missing.length > 0) {
      const fetched = this.spaces.getMany(missing, streamId);
      for (let i = 0, j = 0; i < records.length; i++) {
        if (records[i] !== undefined) continue;
        const bytes = fetched[j++];
        // Missing: a scavenge removed it between the index scan and this read (their entries go together).
        if (bytes) records[i] = decodeRecord(positions[i], bytes);
      }
    }
    this.counters.cachedRecord += positions.length - missing.length;
    this.counters.notCachedRecord += missing.length;
    return records.filter((r): r is EventRecord => r !== undefined);
  }

  /** Applies $maxAge and, when asked, resolves `$>` links to their targets. */
  private present(records: EventRecord[], visibility: Visibility, resolveLinks: boolean): ResolvedEvent[] {
    const out: ResolvedEvent[] = [];
    for (const record of records) {
      if (record.created < visibility.oldestCreated) continue;
      if (resolveLinks && record.eventType === LINK_EVENT_TYPE) out.push(this.resolveLink(record));
      else out.push({ event: record });
    }
    return out;
  }

  /**
   * Runs `resolve` (which resolves links among `links`, one by one, through resolveLink) with the
   * records they point to read beforehand in two RocksDB calls, their index entries and then the
   * records, instead of two point reads a link (~6-7 µs each against ~2-3.5 µs a key read at once).
   * A category query catching up resolves every link of its page: five of the scale bench's twenty
   * spent 8 s of the event loop's 165 in those point reads. Nothing is written meanwhile (the
   * call is synchronous), and nothing read ahead is kept after it.
   */
  resolvingLinks<T>(links: readonly EventRecord[], resolve: () => T): T {
    const wanted: { key: string; index: Buffer; streamId: string }[] = [];
    for (const link of links) {
      if (link.eventType !== LINK_EVENT_TYPE) continue;
      const target = parseLinkTarget(link.data);
      const info = target && this.streams.visible(target.streamId);
      if (!target || !info || target.eventNumber > info.lastEventNumber) continue;
      if (this.tail.streamEvents(target.streamId, target.eventNumber, target.eventNumber)) continue; // in memory
      wanted.push({ key: `${info.streamNumber}:${target.eventNumber}`, index: indexKey(info.streamNumber, target.eventNumber), streamId: target.streamId });
    }
    if (wanted.length < 3) return resolve();
    const ahead = new Map<string, { record: EventRecord; cached: boolean }>();
    const positions = this.rocks.getMany(wanted.map((w) => w.index));
    const found: { key: string; position: number; streamId: string }[] = [];
    for (let i = 0; i < wanted.length; i++) {
      const pos = positions[i];
      if (!pos) continue;
      const position = readU64(pos, 0);
      const cached = this.tail.get(position);
      if (cached) ahead.set(wanted[i].key, { record: cached, cached: true });
      else found.push({ key: wanted[i].key, position, streamId: wanted[i].streamId });
    }
    const stored = this.rocks.getMany(found.map((f) => this.spaces.key(f.position, f.streamId)));
    for (let i = 0; i < found.length; i++) {
      const bytes = stored[i];
      if (!bytes) continue; // removed by a scavenge since the index was read: resolveLink finds it gone too
      ahead.set(found[i].key, { record: decodeRecord(found[i].position, bytes), cached: false });
    }
    this.readAhead = ahead;
    try {
      return resolve();
    } finally {
      this.readAhead = undefined;
    }
  }

  resolveLink(link: EventRecord): ResolvedEvent {
    const target = parseLinkTarget(link.data);
    if (!target) return { link };
    const found = this.readEvent(target.streamId, target.eventNumber, false);
    return found.status === 'ok' ? { event: found.event.event, link } : { link };
  }
}

/** A link event's data is `<eventNumber>@<streamId>`. */
export function parseLinkTarget(data: Buffer): { eventNumber: number; streamId: string } | undefined {
  const text = data.toString('utf8');
  const at = text.indexOf('@');
  if (at <= 0) return undefined;
  const eventNumber = Number(text.slice(0, at));
  if (!Number.isSafeInteger(eventNumber) || eventNumber < 0) return undefined;
  return { eventNumber, streamId: text.slice(at + 1) };
}

/**
 * The records of a forward page in [from, to) a reader keeps: without those of system streams
 * (`skipSystem`: below the split they are in LOG with the others) and those its sieve refuses
 * (decoded already here: the log tail's, or read without blocks), with the log bytes left out
 * before each kept record and after the last up to `to`, and with a sieve how many it refused.
 */
function leftOut(records: EventRecord[], from: number, to: number, skipSystem: boolean, sieve: RecordSieve | undefined, keep = Infinity):
  { records: EventRecord[]; gaps: number[]; sieved: number[] | undefined; endedAt?: number } {
  const kept: EventRecord[] = [];
  const gaps: number[] = [];
  const sieved: number[] | undefined = sieve ? [] : undefined;
  let end = Math.max(from, 0);
  let refused = 0;
  for (const r of records) {
    if (kept.length >= keep) {
      gaps.push(0);
      sieved?.push(0);
      return { records: kept, gaps, sieved, endedAt: end };
    }
    if (skipSystem && isSystemRecordStream(r.streamId)) continue;
    if (sieve) {
      const stored = storedFormOf(r);
      if (!sieve(stored.bytes, stored.start)) {
        refused++;
        continue;
      }
      sieved!.push(refused);
      refused = 0;
    }
    gaps.push(Math.max(0, r.position - end));
    kept.push(r);
    end = r.position + r.size;
  }
  gaps.push(Math.max(0, to - end));
  sieved?.push(refused);
  return { records: kept, gaps, sieved };
}

/** Joins what a read left out after its last record with what the next read left out before its first. */
function joinLeftOut(into: number[] | undefined, next: number[] | undefined): void {
  if (!into || !next) return;
  into[into.length - 1] += next[0];
  for (let i = 1; i < next.length; i++) into.push(next[i]);
}
