import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { DatabaseOpenError, Rocks, type BatchOp } from './rocks.js';
import { HISTORY_ID_KEY, readEntries, verifyBackup, type Manifest } from './backup-format.js';
import { SCAVENGE_STATE_DIR, truncateOp } from './truncate.js';
import { loadWriterCheckpoint } from './stream-state.js';

// Restore on a stopped node: the backup directory is checked whole first (manifest, every
// file's size and sha256), then the database at the data path is opened (RocksDB's LOCK: a
// running node holds it, and the open fails), emptied, loaded with every key of the backup, and
// given the truncate checkpoint at the backup's position and a new history id (truncate.ts,
// backup-format.ts). Any number of nodes can be restored from one backup.

/** Bytes of entries per write batch while loading. */
const LOAD_BATCH_BYTES = 4 * 1024 * 1024;

export class DatabaseInUseError extends Error {}

export interface RestoreSummary {
  position: number;
  chunkSize: number;
  files: number;
  records: number;
  bytes: number;
  seconds: number;
}

export async function restoreBackup(from: string, dbPath: string): Promise<RestoreSummary> {
  const started = performance.now();
  const { manifest, paths } = await verifyBackup(resolve(from));
  let rocks: Rocks;
  try {
    rocks = await Rocks.open(dbPath, false, { cacheSize: 8 * 1024 * 1024 });
  } catch (err) {
    if (err instanceof DatabaseOpenError && err.code === 'LEVEL_LOCKED') {
      throw new DatabaseInUseError(`The database at ${resolve(dbPath)} is in use (a node runs on it?): stop the node first. (${err.reason})`);
    }
    throw err;
  }
  try {
    await rocks.clearAll();
    rmSync(join(rocks.location, SCAVENGE_STATE_DIR), { recursive: true, force: true });
    const loaded = await load(rocks, manifest, paths);
    const restoredTo = loadWriterCheckpoint(rocks).nextPosition;
    if (restoredTo !== manifest.position) {
      throw new Error(`The restored writer checkpoint is at ${restoredTo}, the manifest says ${manifest.position}: the backup is not consistent`);
    }
    rocks.writeDurable([truncateOp(manifest.position), [HISTORY_ID_KEY, Buffer.from(randomUUID(), 'utf8')]]);
    await rocks.settleAfterLoad();
    return { position: manifest.position, chunkSize: manifest.chunkSize, files: paths.size, ...loaded, seconds: (performance.now() - started) / 1000 };
  } finally {
    await rocks.close();
  }
}

async function load(rocks: Rocks, manifest: Manifest, paths: ReadonlyMap<string, string>): Promise<{ records: number; bytes: number }> {
  let records = 0;
  let bytes = 0;
  let batch: BatchOp[] = [];
  let batchBytes = 0;
  for (const file of [manifest.index, ...manifest.chunks]) {
    for await (const { keys, values } of readEntries(paths.get(file.name)!)) {
      for (let i = 0; i < keys.length; i++) {
        batch.push([keys[i], values[i]]);
        batchBytes += keys[i].length + values[i].length;
      }
      records += keys.length;
      if (batchBytes >= LOAD_BATCH_BYTES) {
        rocks.writeUnsynced(batch);
        bytes += batchBytes;
        batch = [];
        batchBytes = 0;
      }
    }
  }
  rocks.writeDurable(batch);
  return { records, bytes: bytes + batchBytes };
}
