import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { RocksLevel } from '@nxtedition/rocksdb';

// The RocksDB handle and the few synchronous calls the store makes. The store serialises all
// writes through one writer, and reads are short range scans, so synchronous native calls
// (no thread-pool hop per read) are the fast path here.

export interface Range { gte?: Buffer; gt?: Buffer; lt?: Buffer; lte?: Buffer; limit?: number; reverse?: boolean }
export type BatchOp = readonly [key: Buffer, value: Buffer] | readonly [key: Buffer];

const NO_OPTIONS = {};

/** EXPERIMENT (bench/space.ts): options merged into the store's open. */
export const rocksExperiment: { open: Record<string, unknown> } = { open: {} };

/** What a database may set apart from the defaults (the scavenge state database sets both). */
export interface RocksTuning {
  /** Block cache in bytes. */
  cacheSize?: number;
  /** Block size in bytes. */
  blockSize?: number;
}

export class Rocks {
  private constructor(private readonly db: RocksLevel, readonly location: string, private readonly ephemeral: boolean) {}

  /** Opens (creating) the database in `dir`; `inMemory` puts it on tmpfs and removes it on close. */
  static async open(dir: string, inMemory: boolean, tuning: RocksTuning = {}): Promise<Rocks> {
    const location = inMemory ? ephemeralLocation() : resolve(dir);
    mkdirSync(location, { recursive: true });
    const db = new RocksLevel(location, { keyEncoding: 'buffer', valueEncoding: 'buffer' });
    // No bloom filters: measured, building them cost more append throughput (bench (b): 53k vs
    // 39-44k events/s, p99 0.7 s vs 1.3-1.5 s) than they saved on point lookups.
    await db.open({
      createIfMissing: true, infoLogLevel: 'error', cacheSize: tuning.cacheSize ?? 256 * 1024 * 1024,
      ...(tuning.blockSize ? { blockSize: tuning.blockSize } : {}),
      ...(tuning.blockSize ? {} : rocksExperiment.open),
    });
    return new Rocks(db, location, inMemory);
  }

  /** A RocksDB property (`rocksdb.total-sst-files-size`, `rocksdb.estimate-live-data-size`, ...). */
  property(name: string): string {
    return String(this.db.getProperty(name));
  }

  /**
   * Reads a range page by page off the event loop (RocksDB's reads run on libuv's thread pool),
   * so several readers can read at once; `visit` gets each page and may stop by returning false.
   */
  async scanPages(range: Range, pageSize: number, visit: (keys: Buffer[], values: Buffer[]) => Promise<boolean> | boolean): Promise<void> {
    const iterator = this.db.iterator({ ...range, keyEncoding: 'buffer', valueEncoding: 'buffer' });
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

  private writeBatch(ops: readonly BatchOp[], sync: boolean): void {
    const batch = this.db.batch();
    for (const op of ops) {
      if (op.length === 2) batch._put(op[0], op[1], NO_OPTIONS);
      else batch._del(op[0], NO_OPTIONS);
    }
    batch._writeSync({ sync });
    void batch.close();
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
   * Deletes every key in [gte, lt) with one range tombstone (RocksDB's DeleteRange), written
   * without an fsync and apart from any batch. The tombstone is written before this returns; the
   * promise reports the outcome (the binding reports errors on the next tick).
   */
  deleteRange(gte: Buffer, lt: Buffer): Promise<void> {
    return new Promise((resolve, reject) => {
      (this.db as unknown as ClearCapable)._clear({ gte, lt }, (err) => (err ? reject(err) : resolve()));
    });
  }

  async close(): Promise<void> {
    await this.db.close();
    if (this.ephemeral) rmSync(this.location, { recursive: true, force: true });
  }
}

/** The binding's range delete: `_clear` without a limit is one DeleteRange, made synchronously. */
interface ClearCapable {
  _clear(range: { gte: Buffer; lt: Buffer }, callback: (err: Error | null) => void): void;
}

function ephemeralLocation(): string {
  const base = existsSync('/dev/shm') ? '/dev/shm' : tmpdir();
  return join(base, `svc-mem-db-${process.pid}-${randomBytes(4).toString('hex')}`);
}
