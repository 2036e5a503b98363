import { Rocks } from './rocks.js';
import { SharedBlocks } from './shared-blocks.js';
import {
  chunkKey, hintKey, indexKey, metaKey, readU64, u64Value,
} from './keys.js';
import { LogSpaces } from './log-spaces.js';
import type { PackedPlaces } from './packed-places.js';
import { LogReadThread } from './log-read-thread.js';
import { EventIdFilter } from './id-filter.js';
import { CHUNK_SPACE, decodeChunk, type PhysicalChunk } from './chunks.js';
import { decodeRecord } from './record.js';
import { CommitBus } from './bus.js';
import { LogTailCache } from './log-cache.js';
import { Reader } from './reader.js';
import { Writer } from './writer.js';
import type { AppendResult, DeleteResult, StreamWrite } from './commit-decision.js';
import type { ProposedEvent } from './proposed-event.js';
import type { ReplicationGate } from './commit-pipeline.js';
import type { SpaceWatch } from './out-of-space.js';
import type { Removal, ShippedBatch } from './batch.js';
import { storedChunkTimes } from './chunk-times.js';
import { COMMIT_KEY, loadWriterCheckpoint, type StreamInfo, type WriterCheckpoint } from './stream-state.js';
import { StreamInfos } from './stream-infos.js';
import { CommitHorizon } from './commit-horizon.js';
import type { ExpectedVersion } from './expected-version.js';
import type { EventRecord, RecordSieve } from './record.js';
import { truncateOp, truncateToCheckpoint, type Truncation } from './truncate.js';
import { writeBackup, type BackupOptions, type BackupResult } from './backup.js';

// The store's public face: what the rest of the node may use of it (the exports below) and the
// Store, whose methods are every verb the API, projections, subscriptions, scavenge and the
// cluster call. Over 400 lines on purpose: it is that surface, read in one file; most methods are
// documented delegations of a few lines to the module that owns the work (writer.ts, reader.ts,
// commit-horizon.ts, backup.ts, truncate.ts), and the few with logic of their own are short
// (the start's log-tail warm-up and held tail, the index walks a scavenge asks for).

export { ExpectedVersion } from './expected-version.js';
export {
  WrongExpectedVersionError, StreamDeletedError, StoreClosedError, NotLeaderError, ReplicationLostError, ReplicationMismatchError, WriteTimeoutError,
  InvalidFilterError,
} from './errors.js';
export { makeFilter, matchesFilter, type EventFilter } from './filter.js';
export { OutOfSpaceError, type SpaceEvent, type SpaceWatch } from './out-of-space.js';
export { InvalidWriteError, MAX_JSON_DEPTH, jsonDepthExceeds, shownName, streamNameProblem } from './write-rules.js';
export type { EventRecord } from './record.js';
export { proposedEvent, jsonEvent, metadataEvent, type ProposedEvent, type EventFields } from './proposed-event.js';
export type { AppendResult, DeleteResult, StreamWrite } from './commit-decision.js';
export type { ReplicationGate } from './commit-pipeline.js';
export type { Removal, ShippedBatch } from './batch.js';
export { chunkName, encodeChunk, dropChunkEntry, type PhysicalChunk } from './chunks.js';
export { SCAVENGE_POINTS_STREAM, SCAVENGE_POINT_EVENT_TYPE, EPOCHS_STREAM } from './system-streams.js';
export type { ResolvedEvent, StreamPage, SingleEvent, AllPage } from './reader.js';
export { originalOf, parseLinkTarget } from './reader.js';
export {
  LINK_EVENT_TYPE, STORED, storedFormOf, eventNumberAt, inDollarStream, inSystemStream, metadataLengthAt, type RecordSieve, type StoredRecord,
} from './record.js';
export type { Commit } from './bus.js';
export type { StreamInfo } from './stream-state.js';
export {
  SOFT_DELETED_TB, METADATA_EVENT_TYPE, EMPTY_METADATA, isMetastream, metastreamOf, originalStreamOf, isSystemStream, isSoftDeleted,
  parseAcl, parseMetadata, type AclOperation, type Acl, type StreamMetadata,
} from './metadata.js';
export { isSystemRecordStream } from './log-spaces.js';
export { PackedPlaces } from './packed-places.js';
export { parseUuid, parseUuidBytes, formatUuid, newUuid } from './uuid.js';
export { BackupStoppedError, type BackupResult } from './backup.js';
export { SCAVENGE_STATE_DIR, type Truncation } from './truncate.js';
export { firstVisibleEventNumber, visibilityOf, type Visibility } from './visibility.js';
export { nowMicros } from './clock.js';
// The offline restore (cli/restore.ts), and the RocksDB wrapper, which the scavenge state
// database (scavenge/state.ts, a RocksDB of its own under <db>/scavenging) opens too.
export { restoreBackup, DatabaseInUseError } from './restore.js';
export { BackupInvalidError } from './backup-format.js';
export { freeBytes, Rocks, type BatchOp } from './rocks.js';

const DEFAULT_LOG_CACHE_BYTES = 64 * 1024 * 1024;
/** RocksDB's block cache (uncompressed blocks of the log, index and stream keys read recently). */
const DEFAULT_DB_CACHE_BYTES = 64 * 1024 * 1024;
const DEFAULT_SHARED_READ_BYTES = 32 * 1024 * 1024;
const DEFAULT_EVENT_ID_FILTER_BYTES = 8 * 1024 * 1024;
/**
 * The newest log bytes read into the log tail at start, at most (warmTail). 2 MB: projections
 * write a last checkpoint when the node stops, and checkpoint every 4,000 events otherwise, so
 * they resume within the newest megabyte or two. Measured at a million events (the scale bench's
 * data): 8 MB took ~450 ms of the start; to reads and all 20 Running, three alternating pairs gave
 * 2.52-3.27 s with 2 MB against 2.93-3.67 s with 8 MB (0.12-0.41 s faster each), three starts of
 * each in a row 2.54-2.76 against 3.57-3.93 s.
 */
const WARM_TAIL_BYTES = 2 * 1024 * 1024;

export interface StoreOptions {
  dir: string;
  inMemory: boolean;
  chunkSize: number;
  /** Bytes of the most recent records kept in memory for reads (0: none). */
  logCacheBytes?: number;
  /** Largest data + metadata of one event (the `maxAppendSize` option); every writer is held to it. */
  maxEventBytes?: number;
  /** Stream informations kept in memory (the rest are read from RocksDB when needed). */
  streamInfoCacheSize?: number;
  /**
   * A cluster node: reads show what a quorum holds only (commit-horizon.ts), from the start:
   * records past the last known commit position are held until the cluster commits them.
   */
  boundedReads?: boolean;
  /** Bytes of RocksDB's block cache. */
  dbCacheBytes?: number;
  /** Bytes of decoded log blocks shared by the projections reading the log (0: none). */
  sharedReadBytes?: number;
  /** Bytes of the Bloom filter of stored event ids (id-filter.ts; 0: none). */
  eventIdFilterBytes?: number;
  /**
   * The filter reads the stored ids only when told (loadIdFilter), not as the store opens: a node
   * starts it once it serves, so the read does not compete with its start for the two cores.
   */
  deferIdFilterLoad?: boolean;
}

const DEFAULT_MAX_EVENT_BYTES = 4 * 1024 * 1024;

/** What Store.open found in RocksDB, and the options with their defaults. */
interface StoreParts {
  rocks: Rocks;
  streams: StreamInfos;
  checkpoint: WriterCheckpoint;
  chunkSize: number;
  logCacheBytes: number;
  maxEventBytes: number;
  hintsFrom: number;
  sharedReadBytes: number;
  splitFrom: number;
  idFilterBytes: number;
  boundedReads: boolean;
}

const HINTS_FROM_KEY = metaKey('hints-from');
/** Where the log was split into user and system records (log-spaces.ts): everything below is in LOG. */
const SPLIT_FROM_KEY = metaKey('syslog-from');

/**
 * The event store: one RocksDB holding the log, the stream index and the stream infos; one
 * writer; reads; and the commit bus every follower listens to.
 */
export class Store {
  readonly bus = new CommitBus();
  private readonly reader: Reader;
  private readonly writer: Writer;

  private readonly tail: LogTailCache;
  /** Decoded blocks of the log shared by the projections reading it (shared-blocks.ts). */
  readonly blocks: SharedBlocks;

  private readonly spaces: LogSpaces;
  /** The stored event ids, approximately (id-filter.ts). */
  readonly idFilter: EventIdFilter;
  /** What the open truncated (the truncate checkpoint was set: truncate.ts), if anything. */
  truncation: Truncation | undefined;
  /** What reads see of the log (commit-horizon.ts). */
  private readonly horizon: CommitHorizon;

  private readonly rocks: Rocks;
  /** Reads of much of the log, off the event loop (log-read-thread.ts). */
  private readonly readThread: LogReadThread;
  private readonly streams: StreamInfos;
  private readonly checkpoint: WriterCheckpoint;
  readonly chunkSize: number;
  /** Scavenge hints (keys.ts) exist from this position on. */
  readonly hintsFrom: number;

  private constructor(parts: StoreParts) {
    const { rocks, streams, checkpoint, chunkSize } = parts;
    this.rocks = rocks;
    this.streams = streams;
    this.checkpoint = checkpoint;
    this.chunkSize = chunkSize;
    this.hintsFrom = parts.hintsFrom;
    const tail = new LogTailCache(parts.logCacheBytes);
    this.tail = tail;
    const spaces = new LogSpaces(rocks, parts.splitFrom);
    this.spaces = spaces;
    this.blocks = new SharedBlocks(spaces, parts.sharedReadBytes);
    this.horizon = new CommitHorizon(streams, checkpoint.nextPosition, (ids) => this.reader.forgetMetadata(ids));
    this.readThread = new LogReadThread(() => rocks.handle, parts.splitFrom);
    this.blocks.readAheadOn(this.readThread);
    this.reader = new Reader(rocks, spaces, streams, this.horizon.visible, tail, this.blocks, this.readThread);
    this.idFilter = new EventIdFilter(parts.idFilterBytes);
    this.writer = new Writer({
      rocks, spaces, idFilter: this.idFilter, tail, blocks: this.blocks, streams, checkpoint, horizon: this.horizon,
      boundedReads: parts.boundedReads, chunkSize, bus: this.bus, limits: { maxEventBytes: parts.maxEventBytes },
      metadataOf: (id) => this.reader.writtenMetadataOf(id), idFlagsFrom: parts.hintsFrom,
      onMetadataChanged: (ids) => this.reader.forgetMetadata(ids),
    });
  }

  static async open(options: StoreOptions): Promise<Store> {
    const rocks = await Rocks.open(options.dir, options.inMemory, { cacheSize: options.dbCacheBytes ?? DEFAULT_DB_CACHE_BYTES });
    const truncation = truncateToCheckpoint(rocks, options.chunkSize);
    const checkpoint = loadWriterCheckpoint(rocks);
    const streams = new StreamInfos(rocks, options.streamInfoCacheSize);
    // Scavenge hints (keys.ts) exist from this position on: a database written before they did
    // gets them for what is written from now on, and a scavenge reads older chunks whole.
    let hints = rocks.get(HINTS_FROM_KEY);
    if (!hints) {
      hints = u64Value(checkpoint.nextPosition);
      rocks.writeDurable([[HINTS_FROM_KEY, hints]]);
    }
    let split = rocks.get(SPLIT_FROM_KEY);
    if (!split) {
      split = u64Value(checkpoint.nextPosition);
      rocks.writeDurable([[SPLIT_FROM_KEY, split]]);
    }
    const store = new Store({
      rocks, streams, checkpoint, chunkSize: options.chunkSize, logCacheBytes: options.logCacheBytes ?? DEFAULT_LOG_CACHE_BYTES,
      maxEventBytes: options.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES, hintsFrom: readU64(hints, 0),
      sharedReadBytes: options.sharedReadBytes ?? DEFAULT_SHARED_READ_BYTES, splitFrom: readU64(split, 0),
      idFilterBytes: options.eventIdFilterBytes ?? DEFAULT_EVENT_ID_FILTER_BYTES, boundedReads: options.boundedReads ?? false,
    });
    store.truncation = truncation;
    if (options.boundedReads) store.holdUncommittedTail();
    if (!options.deferIdFilterLoad) store.loadIdFilter();
    store.warmTail(Math.min(options.logCacheBytes ?? DEFAULT_LOG_CACHE_BYTES, WARM_TAIL_BYTES * 2));
    return store;
  }

  /** Starts reading the stored event ids into the filter (once; see StoreOptions.deferIdFilterLoad). */
  loadIdFilter(): void {
    this.idFilter.load(this.rocks);
  }

  /**
   * A cluster node's start: the records past the last commit position it stored (COMMIT_KEY) may
   * be an old leader's tail that no quorum holds; they are held (CommitHorizon.holdTail). Without
   * a stored position (a first cluster start, or a single node's data) all of the log counts as
   * committed.
   */
  private holdUncommittedTail(): void {
    const end = this.checkpoint.nextPosition;
    const stored = this.rocks.get(COMMIT_KEY);
    const commit = stored ? Math.min(readU64(stored, 0), end) : end;
    if (commit >= end) return;
    const records: EventRecord[] = [];
    for (let from = commit; ;) {
      const { positions, values } = this.spaces.forward(from, 4096, end);
      if (positions.length === 0) break;
      for (let i = 0; i < positions.length; i++) records.push(decodeRecord(positions[i], values[i]));
      from = positions[positions.length - 1] + 1;
    }
    this.horizon.holdTail(commit, end, records);
  }

  /** A cluster follower: its leader's quorum holds the log up to `position` (FollowerReplication). */
  commitThrough(position: number): void {
    this.writer.commitThrough(Math.min(position, this.checkpoint.nextPosition));
  }

  /**
   * Fills the in-memory log tail with the newest records (up to half its size, leaving room for
   * new writes): after a restart every projection and subscription resumes near the end of the
   * log, and reading it from memory instead of RocksDB keeps their catch-up off the event loop's
   * critical path (measured: RocksDB scans were ~40% of the loop while three system projections
   * caught up after a restart). At most WARM_TAIL_BYTES: a start waits for it (32 MB took 1.3 s
   * of a 2.5 s start at a million events, 8 MB ~450 ms), and projections further back read
   * shared blocks.
   */
  private warmTail(capacityBytes: number): void {
    // Positions are byte offsets in the log: the newest `budget` bytes start about here.
    let from = Math.max(0, this.checkpoint.nextPosition - Math.floor(capacityBytes / 2));
    for (;;) {
      // Page by page, oldest first, so only one page of row buffers is alive at a time.
      const { positions, values } = this.spaces.forward(from, 4096);
      if (positions.length === 0) return;
      this.tail.add(positions, values);
      from = positions[positions.length - 1] + 1;
    }
  }

  get location(): string {
    return this.rocks.location;
  }

  /** Number of records in the log. */
  get recordCount(): number {
    return this.checkpoint.recordCount;
  }

  get streamCount(): number {
    return this.checkpoint.nextStreamNumber - 1; // every stream ever created has its number, and keeps it
  }

  /**
   * The position after the last record as reads see it: where `$all` ends. On a single node, also
   * where the next write goes; on a cluster leader, the end of what a quorum holds (see logEnd).
   */
  get headPosition(): number {
    return this.horizon.visible.nextPosition;
  }

  /** The end of the log as written here, committed or not (the cluster compares and ships logs by it). */
  get logEnd(): number {
    return this.checkpoint.nextPosition;
  }

  /** The stream informations held in memory (bounded by `streamInfoCacheSize`). */
  get streamInfoCache(): { readonly cached: number } {
    return this.streams;
  }

  get writerStats() {
    return this.writer.stats;
  }

  /** Whether writes are refused because the disk is full, since when, and who hears when that starts and ends. */
  get space(): SpaceWatch {
    return this.writer.space;
  }

  get writerQueueLength(): number {
    return this.writer.queueLength;
  }

  get readCounters() {
    return this.reader.counters;
  }

  append(streamId: string, expected: ExpectedVersion, events: ProposedEvent[]): Promise<AppendResult> {
    return this.writer.append(streamId, expected, events);
  }

  /** An append to a reserved stream (system-streams.ts: the cluster's `$epochs`), which the write door refuses to everyone else. */
  appendReserved(streamId: string, expected: ExpectedVersion, events: ProposedEvent[]): Promise<AppendResult> {
    return this.writer.appendReserved(streamId, expected, events);
  }

  /**
   * Appends to several streams in one atomic batch (all or nothing), durable when it resolves;
   * with `deferSync`, durable with the next synced write instead (for writers that redo their
   * work after a crash: projection checkpoints); with `ahead` too, before the other deferred-sync
   * transactions queued (the system projections' checkpoints: the indexes every reader reads).
   */
  transact(writes: StreamWrite[], deferSync = false, ahead = false): Promise<AppendResult[]> {
    return this.writer.transact(writes, deferSync, ahead);
  }

  /** Soft delete (the stream can be written again) or hard delete (a permanent tombstone). */
  deleteStream(streamId: string, expected: ExpectedVersion, hard: boolean): Promise<DeleteResult> {
    return this.writer.delete(streamId, expected, hard);
  }

  streamInfo(streamId: string): StreamInfo | undefined {
    return this.reader.streamInfo(streamId);
  }

  /** Brings the information of these streams into memory at once, where it is not (StreamInfos.prefetch). */
  prefetchStreamInfos(streamIds: Iterable<string>): void {
    this.streams.prefetch(streamIds);
  }

  metadataOf(streamId: string) {
    return this.reader.metadataOf(streamId);
  }

  readStreamForward(streamId: string, from: number, count: number, resolveLinks = false) {
    return this.reader.readStreamForward(streamId, from, count, resolveLinks);
  }

  /**
   * Every record a read of the stream shows, oldest first, read a page at a time (nothing for a
   * stream that does not exist or is deleted). The one way to walk a whole stream.
   */
  *streamRecords(streamId: string, pageSize = 1000): Generator<EventRecord> {
    for (let from = 0; ; from += pageSize) {
      const page = this.reader.readStreamForward(streamId, from, pageSize, false);
      if (page.status !== 'ok') return;
      for (const e of page.events) if (e.event) yield e.event;
      if (page.isEndOfStream) return;
    }
  }

  readStreamBackward(streamId: string, from: number, count: number, resolveLinks = false) {
    return this.reader.readStreamBackward(streamId, from, count, resolveLinks);
  }

  readEvent(streamId: string, eventNumber: number, resolveLinks = false) {
    return this.reader.readEvent(streamId, eventNumber, resolveLinks);
  }

  /**
   * `sharedBy`: a reader of much of the log in order (a projection), served from the blocks all
   * such readers share; `skipSystem`: it leaves system streams out (see Reader.readAllForward);
   * `sieve`: records it refuses are left out undecoded; `keep`: the page ends after this many it passed.
   */
  readAllForward(position: number, count: number, sharedBy?: object, skipSystem = false, sieve?: RecordSieve, keep?: number) {
    return this.reader.readAllForward(position, count, sharedBy, skipSystem, sieve, keep);
  }

  /** readAllForward of the whole log with what is not in the log tail read off the event loop (catch-up subscriptions). */
  readAllForwardOffThread(position: number, count: number) {
    return this.reader.readAllForwardOffThread(position, count);
  }

  readAllBackward(position: number, count: number) {
    return this.reader.readAllBackward(position, count);
  }

  /** The records at places `from` to `to` of `places` as they are now (undefined: removed by a scavenge since). */
  recordsAtPacked(places: PackedPlaces, from: number, to: number) {
    return this.reader.recordsAtPacked(places, from, to);
  }

  /** Whether a stream read would show this record (its stream's $tb, $maxCount, $maxAge, deletion). */
  isVisible(record: import('./record.js').EventRecord): boolean {
    return this.reader.isVisible(record);
  }

  /** Runs `resolve` with the records `links` point to read beforehand, at once (Reader.resolvingLinks). */
  resolvingLinks<T>(links: readonly import('./record.js').EventRecord[], resolve: () => T): T {
    return this.reader.resolvingLinks(links, resolve);
  }

  resolveLink(record: import('./record.js').EventRecord) {
    return this.reader.resolveLink(record);
  }

  // What a scavenge (src/scavenge) reads of the store, and how it removes records.

  /**
   * Log records in [from, to), a page at a time, off the event loop (Reader.scanLog); `visit`
   * returns false to stop; `decoded` hears the loop's time each page took to decode.
   */
  scanLog(from: number, to: number, pageSize: number, visit: (records: EventRecord[]) => Promise<boolean> | boolean,
    decoded?: (ms: number) => void): Promise<void> {
    return this.reader.scanLog(from, to, pageSize, visit, decoded);
  }

  /**
   * The metastream records and tombstones in [from, to) (positions from `hintsFrom` on), read
   * through their hints instead of the whole range.
   */
  hintedRecords(from: number, to: number): EventRecord[] {
    const { keys } = this.rocks.scan({ gte: hintKey(from), lt: hintKey(to) });
    const positions = keys.map((k) => readU64(k, 1));
    const values = this.spaces.getMany(positions);
    const out: EventRecord[] = [];
    positions.forEach((p, i) => {
      if (values[i]) out.push(decodeRecord(p, values[i]!));
    });
    return out;
  }

  /** Oldest and newest record time (µs) in a logical chunk, if anything was written there since hints exist. */
  chunkTimeRange(chunk: number): [number, number] | undefined {
    return storedChunkTimes(this.rocks, chunk);
  }

  /**
   * The stream's records with event numbers in [from, to], oldest first, as stored: those a
   * scavenge removed are missing, and no metadata applies (a reader applies it: isVisible).
   */
  storedRecords(streamId: string, from: number, to: number): EventRecord[] {
    return this.reader.storedRecords(streamId, from, to);
  }

  /** A stream's last `count` records as written here, committed or not, newest first. */
  writtenRecords(streamId: string, count: number): EventRecord[] {
    return this.reader.writtenRecords(streamId, count);
  }

  /** A stream's index entries with event numbers in [from, to], oldest first, at most `limit`. */
  indexEntries(streamId: string, from: number, to: number, limit: number): { eventNumber: number; position: number }[] {
    const info = this.streams.get(streamId);
    if (!info || to < from) return [];
    const { keys, values } = this.rocks.scan({ gte: indexKey(info.streamNumber, from), lte: indexKey(info.streamNumber, to), limit });
    return keys.map((k, i) => ({ eventNumber: readU64(k, 9), position: readU64(values[i], 0) }));
  }

  /** The positions of the stream's index entries with event numbers in [from, to], oldest first, at most `limit`. */
  indexPositionsBetween(streamId: string, from: number, to: number, limit: number): number[] {
    const info = this.streams.get(streamId);
    if (!info || to < from) return [];
    return this.rocks.scanValues({ gte: indexKey(info.streamNumber, from), lte: indexKey(info.streamNumber, to), limit }).map((v) => readU64(v, 0));
  }

  /** The positions of these events of the stream (undefined: not in the index). */
  indexPositions(streamId: string, eventNumbers: number[]): (number | undefined)[] {
    const info = this.streams.get(streamId);
    if (!info) return eventNumbers.map(() => undefined);
    return this.rocks.getMany(eventNumbers.map((n) => indexKey(info.streamNumber, n))).map((v) => (v ? readU64(v, 0) : undefined));
  }

  /** The number of the stream's last event whose record lies before `position` (-1: none). */
  lastEventBefore(streamId: string, position: number): number {
    const info = this.streams.get(streamId);
    if (!info || info.lastEventNumber < 0) return -1;
    // Usually the last event itself (a point read: no iterator); else pages that grow.
    const [lastPosition] = this.indexPositions(streamId, [info.lastEventNumber]);
    if (lastPosition !== undefined && lastPosition < position) return info.lastEventNumber;
    for (let top = info.lastEventNumber, limit = 2; top >= 0; limit = Math.min(limit * 4, 4096)) {
      const { keys, values } = this.rocks.scan({
        gte: indexKey(info.streamNumber, 0), lte: indexKey(info.streamNumber, top), reverse: true, limit,
      });
      for (let i = 0; i < keys.length; i++) if (readU64(values[i], 0) < position) return readU64(keys[i], 9);
      if (keys.length < limit) return -1;
      top = readU64(keys[keys.length - 1], 9) - 1;
    }
    return -1;
  }

  /** The physical chunks covering logical chunks [from, to], in order. */
  physicalChunks(from: number, to: number): PhysicalChunk[] {
    const { keys, values } = this.rocks.scan({ ...CHUNK_SPACE, lte: chunkKey(to) });
    const entries = keys.map((k, i) => decodeChunk(k, values[i]));
    const out: PhysicalChunk[] = [];
    let e = 0;
    for (let c = from; c <= to;) {
      while (e < entries.length && entries[e].end < c) e++;
      const entry = entries[e];
      if (entry && entry.start <= c) {
        out.push(entry);
        c = entry.end + 1;
      } else {
        out.push({ start: c, end: c, version: 0 });
        c++;
      }
    }
    return out;
  }

  /**
   * Removes what a scavenge found removable (records with their index and event-id entries), in
   * order with all writes; answers the event loop's time (ms) the removal's batch took.
   */
  remove(removal: Removal): Promise<number> {
    return this.writer.remove(removal);
  }

  /** A point-in-time backup of everything into a directory, while writes go on (backup.ts). */
  backup(options: Omit<BackupOptions, 'chunkSize'>): Promise<BackupResult> {
    return writeBackup(this.rocks, { ...options, chunkSize: this.chunkSize });
  }

  // What a cluster node (src/cluster) needs of its store: the writer's gate, the log's raw
  // records to ship, a follower's apply path, and the truncate checkpoint for a diverged tail.

  /** Holds the writer for the cluster (see ReplicationGate); undefined: a single node. */
  setReplicationGate(gate: ReplicationGate | undefined): void {
    this.writer.setGate(gate);
  }

  /** A follower's copy of a batch its leader shipped, at the leader's positions; resolves once durable. */
  applyReplicated(batch: ShippedBatch, current: () => boolean): Promise<void> {
    return this.writer.applyReplicated(batch, current);
  }

  /** At most `limit` records at or after `from`, as stored (position and encoded bytes), in log order. */
  logRows(from: number, limit: number): ShippedBatch {
    const { positions, values } = this.spaces.forward(from, limit, this.checkpoint.nextPosition);
    return { positions, records: values };
  }

  /**
   * Sets the truncate checkpoint (truncate.ts) durably: the next open removes every record at or
   * after `position`. A cluster node whose tail no quorum acknowledged sets it and restarts.
   */
  setTruncateCheckpoint(position: number): void {
    this.rocks.writeDurable([truncateOp(position)]);
  }

  /** RocksDB's own figures of the space the store takes. */
  diskUsage(): { sstFilesBytes: number; liveDataBytes: number } {
    return {
      sstFilesBytes: Number(this.rocks.property('rocksdb.total-sst-files-size')),
      liveDataBytes: Number(this.rocks.property('rocksdb.estimate-live-data-size')),
    };
  }

  /**
   * Finishes the writes in flight, then closes RocksDB, also when the writer's last sync fails. On
   * a full disk RocksDB cannot write its last buffers and says so: what was acknowledged was
   * synced when it was, and the next start replays the write-ahead log, as after a kill.
   */
  async close(): Promise<void> {
    await this.readThread.close();
    try {
      await this.writer.close();
      // Everything is written: the next start replays no write-ahead log (unless the disk is full).
      if (this.space.failingSince === undefined) await this.rocks.flushBeforeClose();
    } finally {
      await this.idFilter.stop();
      await this.rocks.close().catch((err: Error) => {
        if (this.space.failingSince === undefined) throw err;
        throw new Error(`closed on a full disk: RocksDB could not write its last buffers (${err.message}); nothing acknowledged is lost, `
          + 'the next start replays the write-ahead log', { cause: err });
      });
    }
  }
}
