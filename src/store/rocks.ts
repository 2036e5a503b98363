import { existsSync, mkdirSync, readdirSync, rmSync, statfsSync, statSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { RocksLevel } from '@nxtedition/rocksdb';
import { metaKey } from './keys.js';
import { isOutOfSpace, noSpaceReason, OutOfSpaceError } from './out-of-space.js';
import { unpackOps, type BatchOp } from './packed-ops.js';

// The RocksDB handle and the few synchronous calls the store makes. The store serialises all
// writes through one writer, and reads are short range scans, so synchronous native calls
// (no thread-pool hop per read) are the fast path here.

export interface Range { gte?: Buffer; gt?: Buffer; lt?: Buffer; lte?: Buffer; limit?: number; reverse?: boolean }
export type { BatchOp } from './packed-ops.js';

/** See Rocks.packedBatch. */
export interface PackedBatch {
  add(part: Buffer): void;
  write(sync: boolean): void;
  close(): void;
}

const NO_OPTIONS = {};

// Giving back the space of deleted keys (reclaimSpace). A delete is a tombstone in the memtable;
// the space comes back only when the tombstone is flushed to an L0 file and that file is
// compacted with the files holding the deleted data. RocksDB compacts L0 once it holds
// level0_file_num_compaction_trigger files: into the level below when L0 is at least 1/20 of it
// (deletions counted extra), else among themselves (size-based intra-L0 compaction). Measured
// (bench/space.ts, 1M events, half removed): the removal's tombstones filled one memtable, L0
// went from 2 to 3 files, and nothing came back until ~50 MB more had been appended or the
// database was reopened (the WAL is replayed into an L0 file; a close does not flush). The
// values below are RocksDB's defaults, which the open leaves as they are: the binding's
// compaction presets (the only way to change them) leave L0 and the base level uncompressed,
// measured at 1.6-2.4x the disk of today's options at this size, and 4x (the whole database
// uncompressed) while it is smaller than the preset's level base.
/**
 * RocksDB's write_buffer_size: a memtable this full is flushed. It is also the free space RocksDB
 * waits for before it writes again after running out (out-of-space.ts).
 */
const WRITE_BUFFER_BYTES = 64 * 1024 * 1024;
/** RocksDB's level0_file_num_compaction_trigger. */
const L0_COMPACTION_TRIGGER = 4;
/**
 * RocksDB marks a memtable full from about write_buffer_size on (its arena blocks are 1/8 of it;
 * it goes at most 0.6 of a block past it), and switches it at the next write.
 */
const SWITCH_AT_BYTES = WRITE_BUFFER_BYTES + WRITE_BUFFER_BYTES / 16;
/**
 * Filler values (flushMemtable), made when first used: zeros cost next to nothing in the
 * (compressed) WAL and L0 file, and 4 MB takes ~5 ms to write (8 MB: appends made while the
 * space was given back waited up to 30 ms, against 12 ms with 4 MB).
 */
const FILLER_BYTES = 4 * 1024 * 1024;
let FILLER: Buffer | undefined;
export const FILLER_KEY = metaKey('rocks-memtable-filler');

/**
 * A clean close flushes the memtable when the write-ahead log holds at least this many bytes
 * (flushBeforeClose): the next open would replay them. Replay costs
 * by the entry: ~25 ms a MB of WAL for 1 KB events, ~175 ms a MB for the small entries of links
 * and checkpoints (the scale bench's data: a 7.5 MB WAL left under the 8 MiB this was before took
 * 1.3 s of the next open). The flush costs a few hundred ms of the close however small the
 * memtable is (the filler that switches it).
 */
const CLOSE_FLUSH_FROM_BYTES = 1024 * 1024;
/** How long a clean close waits for that flush, at most. */
const CLOSE_FLUSH_MAX_MS = 10_000;

/** What a database may set apart from the defaults (the scavenge state database sets both). */
export interface RocksTuning {
  /** Block cache in bytes. */
  cacheSize?: number;
  /** Block size in bytes. */
  blockSize?: number;
}

/**
 * The database could not be opened, and why: the binding's own error says only "Database is not
 * open" and keeps RocksDB's reason as its cause. Out of space, it says how much the open needs:
 * it replays the write-ahead log into a table file, about the size of the log files.
 */
export class DatabaseOpenError extends Error {
  /** RocksDB's reason, and the binding's code for it (LEVEL_LOCKED: another process holds the database). */
  readonly reason: string;
  readonly code: string | undefined;

  constructor(readonly location: string, cause: unknown) {
    const inner = (cause as { cause?: Error & { code?: string } }).cause;
    const reason = inner?.message ?? (cause as Error).message;
    let message = `cannot open the database in ${location}: ${reason}`;
    if (/No space left on device/i.test(reason)) {
      const free = freeBytes(location);
      const wal = walBytes(location);
      message += `. Free space there: ${mib(free)}; opening writes the write-ahead log (${mib(wal)}) into a table file first:`
        + ` free at least ${mib(Math.max(wal - (free ?? 0), 0) + 16 * 1024 * 1024)} more, or move the data to a larger disk`;
    }
    super(message, { cause });
    this.reason = reason;
    this.code = inner?.code ?? (cause as { code?: string }).code;
  }
}

function mib(bytes: number | undefined): string {
  return bytes === undefined ? 'unknown' : `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

/** Bytes free to this process on the file system holding `dir` (undefined when it cannot be read). */
export function freeBytes(dir: string): number | undefined {
  try {
    const s = statfsSync(dir);
    return s.bavail * s.bsize;
  } catch {
    return undefined;
  }
}

/** Bytes of the write-ahead log files (`*.log`) in the database folder. */
function walBytes(dir: string): number {
  try {
    return readdirSync(dir).filter((f) => f.endsWith('.log')).reduce((sum, f) => sum + statSync(join(dir, f)).size, 0);
  } catch {
    return 0;
  }
}

/** What a refused write throws: OutOfSpaceError when the file system is full, else the binding's error. */
export function writeFailure(err: unknown): Error {
  return isOutOfSpace(err) ? new OutOfSpaceError(noSpaceReason((err as Error).message), WRITE_BUFFER_BYTES) : err as Error;
}

export class Rocks {
  private constructor(private readonly db: RocksLevel, readonly location: string, private readonly ephemeral: boolean) {}

  /** Opens (creating) the database in `dir`; `inMemory` puts it on tmpfs and removes it on close. */
  static async open(dir: string, inMemory: boolean, tuning: RocksTuning = {}): Promise<Rocks> {
    const location = inMemory ? ephemeralLocation() : resolve(dir);
    mkdirSync(location, { recursive: true });
    const db = new RocksLevel(location, { keyEncoding: 'buffer', valueEncoding: 'buffer' });
    // No bloom filters (`filterPolicy: ''` is RocksDB's "none"; left out, the binding builds one
    // into every table file and holds it in memory for every open file). Reads here are range
    // scans and point reads of keys that exist; the few misses (new streams' infos) cost no more
    // within the runs' spread, while RSS after a restart fell from 398-431 to 296-335 MB at the
    // scale bench's size (README: Benchmarks, session 24).
    try {
      await db.open({
        createIfMissing: true, infoLogLevel: 'error', filterPolicy: '', cacheSize: tuning.cacheSize ?? 256 * 1024 * 1024,
        ...(tuning.blockSize ? { blockSize: tuning.blockSize } : {}),
      });
    } catch (err) {
      throw new DatabaseOpenError(location, err);
    }
    return new Rocks(db, location, inMemory);
  }

  /**
   * The database opened elsewhere in this process (a worker thread's view of the store's
   * handle): reads only, and never closed from here.
   */
  static async attach(handle: bigint): Promise<Rocks> {
    const db = new RocksLevel(handle as unknown as string, { keyEncoding: 'buffer', valueEncoding: 'buffer' });
    await db.open({ createIfMissing: false });
    return new Rocks(db, '', false);
  }

  /** The open database's handle, for a thread to attach to (attach). */
  get handle(): bigint {
    return (this.db as unknown as { handle: bigint }).handle;
  }

  /** A RocksDB property (`rocksdb.total-sst-files-size`, `rocksdb.estimate-live-data-size`, ...). */
  property(name: string): string {
    return String(this.db.getProperty(name));
  }

  /**
   * Reads a range page by page off the event loop (RocksDB's reads run on libuv's thread pool),
   * so several readers can read at once; `visit` gets each page and may stop by returning false.
   */
  async scanPages(range: Range, pageSize: number, visit: (keys: Buffer[], values: Buffer[]) => Promise<boolean> | boolean,
    values = true): Promise<void> {
    const iterator = this.db.iterator({ ...range, values, keyEncoding: 'buffer', valueEncoding: 'buffer' });
    try {
      for (;;) {
        const entries = await iterator.nextv(pageSize);
        if (entries.length === 0) return;
        // (A page may be shorter than asked without being the last: only an empty one ends the range.)
        if (!(await visit(entries.map((e) => e[0]), entries.map((e) => e[1])))) return;
      }
    } finally {
      await iterator.close();
    }
  }

  scan(range: Range): { keys: Buffer[]; values: Buffer[] } {
    const { rows } = this.db.querySync({ ...range, limit: range.limit ?? -1, keyEncoding: 'buffer', valueEncoding: 'buffer' });
    const keys: Buffer[] = [];
    const values: Buffer[] = [];
    for (let i = 0; i < rows.length; i += 2) {
      keys.push(rows[i]!);
      values.push(rows[i + 1]!);
    }
    return { keys, values };
  }

  /** The keys of a range, without their values (at most `range.limit`, or all). */
  scanKeys(range: Range): Buffer[] {
    const { rows } = this.db.querySync({ ...range, limit: range.limit ?? -1, values: false, keyEncoding: 'buffer', valueEncoding: 'buffer' });
    const keys: Buffer[] = [];
    for (let i = 0; i < rows.length; i += 2) keys.push(rows[i]!);
    return keys;
  }

  /**
   * The values of a range, without their keys (at most `range.limit`, or all): the binding makes
   * one Buffer per key and per value, so a scan that needs only the values costs ~1.0 µs an entry
   * instead of ~1.8 (measured on a memtable of 100,000 index entries).
   */
  scanValues(range: Range): Buffer[] {
    const { rows } = this.db.querySync({ ...range, limit: range.limit ?? -1, keys: false, keyEncoding: 'buffer', valueEncoding: 'buffer' });
    const values: Buffer[] = [];
    for (let i = 1; i < rows.length; i += 2) values.push(rows[i]!);
    return values;
  }

  getMany(keys: Buffer[]): (Buffer | undefined)[] {
    return keys.length === 0 ? [] : this.db._getManySync(keys, { valueEncoding: 'buffer' });
  }

  get(key: Buffer): Buffer | undefined {
    return this.db._getManySync([key], { valueEncoding: 'buffer' })[0];
  }

  /**
   * Writes all operations as one atomic batch with sync (WAL fsync) and returns once durable.
   * Synchronous on purpose: measured on this class of machine (fdatasync ~0.3 ms), a worker
   * thread for the write lost 45% of append throughput to the hand-off (bench (b): 35k vs 58k
   * events/s) while the event loop gained little from not blocking.
   */
  writeDurable(ops: readonly BatchOp[]): void {
    this.writeBatch(ops, true);
  }

  /** Throws OutOfSpaceError when the file system is full (RocksDB then refuses every write until it recovers). */
  private writeBatch(ops: readonly BatchOp[], sync: boolean): void {
    const batch = this.db.batch();
    try {
      for (const op of ops) {
        if (op.length === 2) batch._put(op[0], op[1], NO_OPTIONS);
        else batch._del(op[0], NO_OPTIONS);
      }
      batch._writeSync({ sync });
    } catch (err) {
      throw writeFailure(err);
    } finally {
      void batch.close();
    }
  }

  /**
   * A write batch filled from packed parts (packed-ops.ts) as they come, then written as ONE
   * atomic batch: the write thread's (write-thread.ts). Closed once written or abandoned.
   */
  packedBatch(): PackedBatch {
    const batch = this.db.batch();
    return {
      add: (part) => unpackOps(part, (key, value) => batch._put(key, value, NO_OPTIONS), (key) => batch._del(key, NO_OPTIONS)),
      write: (sync) => batch._writeSync({ sync }),
      close: () => { void batch.close(); },
    };
  }

  /**
   * Writes all operations as one atomic batch without an fsync: the next synced write makes it
   * durable (the WAL is synced up to its end). On the event loop, not a worker thread: measured
   * with the system projections catching up while clients append, handing each batch to a write
   * thread and back took 10-20 ms on two busy cores (for ~3 ms of memtable inserts on its own), and
   * a client append waits for the write in flight (append p99 23-31 ms against 17-21 ms here).
   */
  writeUnsynced(ops: readonly BatchOp[]): void {
    this.writeBatch(ops, false);
  }

  /**
   * Flushes the memtable to an L0 file now, and resolves once it is flushed (or `stop` says so).
   * The bindings have no Flush: RocksDB switches a memtable (and flushes it) once it holds about
   * write_buffer_size, so this writes zero-filled values to one key, 4 MB at a time with other
   * writes (a client's append) between, until the memtable holds that much, then deletes the key
   * (the write that switches it, or the one after), then waits for the flush. The filler costs a
   * few KB on disk (zeros) until a compaction meets its deletion; each write holds the event loop
   * ~5 ms.
   */
  async flushMemtable(stop: () => boolean = () => false): Promise<void> {
    if (!(await this.flushesDone(stop))) return;
    FILLER ??= Buffer.alloc(FILLER_BYTES);
    // What to write is counted from the start, not watched: other writes may switch the memtable first.
    let missing = SWITCH_AT_BYTES - Number(this.property('rocksdb.cur-size-active-mem-table'));
    for (let tries = 0; tries < 3 && !stop(); tries++) {
      while (missing > 0 && !stop()) {
        const value = FILLER.subarray(0, Math.min(FILLER_BYTES, missing));
        this.writeUnsynced([[FILLER_KEY, value]]);
        missing -= value.length + FILLER_KEY.length;
        await new Promise((resolve) => setImmediate(resolve));
      }
      this.writeUnsynced([[FILLER_KEY]]);
      // Switched (a memtable waits to be flushed or was), or one more filler value and deletion.
      const active = Number(this.property('rocksdb.cur-size-active-mem-table'));
      if (this.property('rocksdb.num-immutable-mem-table') !== '0' || active < WRITE_BUFFER_BYTES) break;
      missing = FILLER_BYTES;
    }
    await this.flushesDone(stop);
  }

  /**
   * Makes RocksDB give back the space of deleted keys now, rather than after about four more
   * memtables of writes: waits for the compactions running (their L0 files still count), flushes
   * the memtable (its tombstones become an L0 file), then flushes (nearly empty) memtables until
   * L0 holds level0_file_num_compaction_trigger files, which starts the L0 compaction that drops
   * the deleted data (in the background: this does not wait for it). When the tombstones are
   * under 1/20 of the level below, RocksDB merges the L0 files instead, and their data comes back
   * with a later compaction. Returns the flushes made (at most four). Measured (bench/space.ts, 1M
   * events, half removed by a scavenge): total-sst-files-size 61 MB -> 31 MB within 10 s, where
   * without it the tombstones were flushed (77 MB) and nothing came back until ~50 MB more was
   * appended.
   */
  async reclaimSpace(stop: () => boolean = () => false): Promise<number> {
    let flushes = 0;
    if (!(await this.settled(stop, () => this.property('rocksdb.num-running-compactions') === '0'
      && this.property('rocksdb.compaction-pending') === '0'))) return flushes;
    do {
      await this.flushMemtable(stop);
      flushes++;
    } while (!stop() && flushes < L0_COMPACTION_TRIGGER && Number(this.property('rocksdb.num-files-at-level0')) < L0_COMPACTION_TRIGGER);
    return flushes;
  }

  /**
   * After a bulk load (a restore): flushes the memtables and waits until RocksDB has no compaction
   * running or pending, so that the node started on it replays no WAL and reads from compacted
   * files, as on the database the load came from. Measured on a restore of 100,000 events
   * (bench/backup.ts), before this: start to a read 0.57x and a read of $all 0.64x the original's.
   */
  async settleAfterLoad(maxMs = 120_000): Promise<void> {
    // Bounded: a restore that waited longer leaves the rest of the compaction to the node.
    const deadline = performance.now() + maxMs;
    const late = () => performance.now() > deadline;
    await this.reclaimSpace(late);
    await this.settled(late, () => this.property('rocksdb.num-running-compactions') === '0'
      && this.property('rocksdb.compaction-pending') === '0' && this.property('rocksdb.num-immutable-mem-table') === '0');
  }

  /**
   * Before a clean close: flushes the memtable when the write-ahead log holds at least
   * CLOSE_FLUSH_FROM_BYTES, so that the next open has no log to replay. RocksDB's close keeps the
   * memtable only in the log, and the next open replays it into a memtable and writes that to an
   * L0 file before it returns (see CLOSE_FLUSH_FROM_BYTES for the cost), on the path of every
   * restart. Flushing now is done while the node stops (on the scale bench's data: the stop 1.0 →
   * 1.8 s, the next open 1.34 → 0.16 s). Bounded by `maxMs`: a flush not done by then is left to the
   * next open, as before. Never throws (a full disk refuses the filler: the next open replays).
   * Returns whether the memtable was flushed.
   */
  async flushBeforeClose(maxMs = CLOSE_FLUSH_MAX_MS): Promise<boolean> {
    // (the WAL's size, not the memtable's: its arena reports a block of memory for a handful of entries)
    if (this.ephemeral || walBytes(this.location) < CLOSE_FLUSH_FROM_BYTES) return false;
    const deadline = performance.now() + maxMs;
    const late = () => performance.now() > deadline;
    try {
      await this.flushMemtable(late);
    } catch {
      return false;
    }
    return !late();
  }

  /** Waits until no memtable waits to be flushed; false if `stop` said so first. */
  private flushesDone(stop: () => boolean): Promise<boolean> {
    return this.settled(stop, () => this.property('rocksdb.num-immutable-mem-table') === '0'
      && this.property('rocksdb.mem-table-flush-pending') === '0');
  }

  /** Polls RocksDB's properties until `done`; false if `stop` said so first. */
  private async settled(stop: () => boolean, done: () => boolean): Promise<boolean> {
    for (;;) {
      if (stop()) return false;
      if (done()) return true;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  /**
   * A cursor over one consistent snapshot of the whole database (RocksDB pins the state at the
   * iterator's creation): it can seek anywhere, forward or back, and every read sees that state.
   * Pages are read off the event loop. The backup reads all its key spaces through one.
   */
  snapshotCursor(): SnapshotCursor {
    return new SnapshotCursor(this.db.iterator({ keyEncoding: 'buffer', valueEncoding: 'buffer', highWaterMarkBytes: SNAPSHOT_PAGE_BYTES }));
  }

  /** Deletes every key (one range deletion; the space comes back with compaction). */
  async clearAll(): Promise<void> {
    await this.db.clear({ gte: Buffer.of(0) });
  }

  async close(): Promise<void> {
    await this.db.close();
    if (this.ephemeral) rmSync(this.location, { recursive: true, force: true });
  }
}

function ephemeralLocation(): string {
  const base = existsSync('/dev/shm') ? '/dev/shm' : tmpdir();
  return join(base, `svc-mem-db-${process.pid}-${randomBytes(4).toString('hex')}`);
}

/**
 * A snapshot cursor's page is cut at about this many bytes: the event loop hashes and encodes a
 * page at a time (a few ms per MiB on a busy core), and an append waits for at most one.
 */
const SNAPSHOT_PAGE_BYTES = 256 * 1024;

/** See Rocks.snapshotCursor. */
export class SnapshotCursor {
  constructor(private readonly iterator: ReturnType<RocksLevel['iterator']>) {}

  /** The next reads start at the first key at or after `key`. */
  seek(key: Buffer): void {
    this.iterator.seek(key);
  }

  /** Up to `size` entries from where the cursor is (maybe fewer); none at the end of the database. */
  async next(size: number): Promise<[Buffer, Buffer][]> {
    return this.iterator.nextv(size);
  }

  close(): Promise<void> {
    return this.iterator.close();
  }
}
