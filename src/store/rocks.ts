import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { RocksLevel } from '@nxtedition/rocksdb';
import { SyncWriteThread } from './sync-thread.js';

// The RocksDB handle and the few synchronous calls the store makes. The store serialises all
// writes through one writer, and reads are short range scans, so synchronous native calls
// (no thread-pool hop per read) are the fast path here.

export interface Range { gte?: Buffer; gt?: Buffer; lt?: Buffer; lte?: Buffer; limit?: number; reverse?: boolean }
export type BatchOp = readonly [key: Buffer, value: Buffer] | readonly [key: Buffer];

export class Rocks {
  private readonly syncThread: SyncWriteThread;

  private constructor(private readonly db: RocksLevel, readonly location: string, private readonly ephemeral: boolean) {
    this.syncThread = new SyncWriteThread(db.handle);
  }

  /** Opens (creating) the database in `dir`; `inMemory` puts it on tmpfs and removes it on close. */
  static async open(dir: string, inMemory: boolean): Promise<Rocks> {
    const location = inMemory ? ephemeralLocation() : resolve(dir);
    mkdirSync(location, { recursive: true });
    const db = new RocksLevel(location, { keyEncoding: 'buffer', valueEncoding: 'buffer' });
    await db.open({ createIfMissing: true, infoLogLevel: 'error', cacheSize: 256 * 1024 * 1024 });
    return new Rocks(db, location, inMemory);
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

  /** Writes all operations atomically on the sync thread; resolves once they are durable. */
  writeDurable(ops: readonly BatchOp[]): Promise<void> {
    return this.syncThread.write(ops);
  }

  property(name: string): string | undefined {
    try {
      return this.db.getProperty(name);
    } catch {
      return undefined;
    }
  }

  async close(): Promise<void> {
    await this.syncThread.stop();
    await this.db.close();
    if (this.ephemeral) rmSync(this.location, { recursive: true, force: true });
  }
}

function ephemeralLocation(): string {
  const base = existsSync('/dev/shm') ? '/dev/shm' : tmpdir();
  return join(base, `svc-mem-db-${process.pid}-${randomBytes(4).toString('hex')}`);
}
