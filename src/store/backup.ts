import { createHash } from 'node:crypto';
import { open, readdir, rename, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { FILLER_KEY, type Rocks, type SnapshotCursor } from './rocks.js';
import { logKey, readU64, SPACE, systemLogKey } from './keys.js';
import { chunkName, decodeChunk, type PhysicalChunk } from './chunks.js';
import { WRITER_CHECKPOINT_KEY } from './stream-state.js';
import {
  BACKUP_FILE_NAME, BACKUP_FORMAT, encodeEntries, fileSize, HISTORY_ID_KEY, INDEX_NAME, MANIFEST_NAME, PENDING_SUFFIX, readManifest, sha256Of,
  type BackupFile, type ChunkFile, type Manifest,
} from './backup-format.js';
import { DomainError } from '../errors.js';

// A backup of a running store: a logical, point-in-time copy of every key, read through ONE
// RocksDB iterator (one snapshot), so it holds exactly what was committed when the backup began
// and never a torn mix; writes go on meanwhile. The directory layout and the commit protocol
// are in backup-format.ts. Reads run on libuv's thread pool a page (≤ 1 MiB) at a time; the
// event loop only hashes and hands each page to the file. Every call on the directory is async
// too: a slow or stuck file system holds a pool thread, never the node.
//
// Differential: a complete chunk (entirely below the snapshot's position: nothing is appended
// to it any more) whose file of the same name (same version) is in the directory from a backup
// of the same history is not copied again if it still holds as many records. Below the head
// records are only ever removed, so the same count means the same records; the count catches a
// chunk a stopped scavenge left half executed at its old version. The open chunk and the index
// are always written; files the new manifest does not name are removed after it is written.

/** Entries read per page, at most (pages are also cut at 1 MiB: see Rocks.snapshotCursor). */
const PAGE = 1024;
/** A file being written is synced every this many bytes (see PendingFile.write). */
const SYNC_EVERY_BYTES = 4 * 1024 * 1024;

export interface BackupOptions {
  /** An existing absolute directory (src/backup/target.ts checks and creates the one a request names). */
  dir: string;
  differential: boolean;
  chunkSize: number;
  nodeVersion: string;
  /** Asked between pages: true stops the backup (BackupStoppedError), leaving the directory's previous backup whole. */
  shouldStop?: () => boolean;
}

export interface BackupResult {
  /** The position the backup restores to. */
  position: number;
  /** Its chunk files, in order. */
  chunks: string[];
  /** Chunk files written (the others were already in the directory). */
  copied: number;
  /** Chunk files removed (of chunks merged, scavenged to a new version, or gone). */
  removed: number;
  /** Bytes written (chunk files and index). */
  bytes: number;
  seconds: number;
}

export class BackupStoppedError extends DomainError {
  readonly code = 'BACKUP_STOPPED';

  constructor() {
    super('The backup was stopped: the node is shutting down');
  }
}

export async function writeBackup(rocks: Rocks, options: BackupOptions): Promise<BackupResult> {
  const started = performance.now();
  const { dir, chunkSize } = options;
  const previous = await readManifest(dir);
  if (previous) await settle(dir, previous);
  await removeStrays(dir, new Set(previous ? fileNames(previous) : []));
  const stop = () => {
    if (options.shouldStop?.()) throw new BackupStoppedError();
  };

  const cursor = rocks.snapshotCursor();
  try {
    const index = await copyIndex(cursor, dir, stop);
    const reusable = options.differential && previous && previous.chunkSize === chunkSize && previous.historyId === index.historyId
      ? new Map(previous.chunks.map((c) => [c.name, c])) : new Map<string, ChunkFile>();
    const chunks: ChunkFile[] = [];
    let copied = 0;
    let bytes = index.file.bytes;
    const last = index.position === 0 ? -1 : Math.floor((index.position - 1) / chunkSize);
    for (let c = 0; c <= last; c++) {
      const name = chunkName({ start: c, end: c, version: versionOf(index.physical, c) });
      const complete = (c + 1) * chunkSize <= index.position;
      const before = reusable.get(name);
      if (complete && before && (await fileSize(join(dir, name))) === before.bytes
        && (await countChunk(cursor, c, chunkSize, stop)) === before.records) {
        chunks.push(before);
        continue;
      }
      const file = await copyChunk(cursor, dir, c, name, chunkSize, stop);
      chunks.push(file);
      copied++;
      bytes += file.bytes;
    }
    stop();
    const manifest: Manifest = {
      format: BACKUP_FORMAT, position: index.position, chunkSize, historyId: index.historyId, created: new Date().toISOString(),
      nodeVersion: options.nodeVersion, index: index.file, chunks,
    };
    await commit(dir, manifest, [index.file.name, ...chunks.filter((c) => c !== reusable.get(c.name)).map((c) => c.name)]);
    const kept = new Set(fileNames(manifest));
    const removed = await removeStrays(dir, kept);
    return { position: index.position, chunks: chunks.map((c) => c.name), copied, removed, bytes, seconds: (performance.now() - started) / 1000 };
  } catch (err) {
    // The previous backup stays as it was: its manifest and files are untouched; drop the new files
    // (best effort: a directory that refused a write may refuse this too, and the first error is the one to report).
    await removeStrays(dir, new Set(previous ? fileNames(previous) : [])).catch(() => undefined);
    throw err;
  } finally {
    await cursor.close();
  }
}

function fileNames(m: Manifest): string[] {
  return [m.index.name, ...m.chunks.map((c) => c.name)];
}

/** A page at a time, the entries with keys in [from, to) (the cursor reads one snapshot). */
async function readRange(cursor: SnapshotCursor, from: Buffer, to: Buffer, stop: () => void,
  visit: (keys: Buffer[], values: Buffer[]) => Promise<void> | void): Promise<void> {
  cursor.seek(from);
  for (;;) {
    stop();
    const page = await cursor.next(PAGE);
    if (page.length === 0) return;
    let end = 0;
    while (end < page.length && Buffer.compare(page[end][0], to) < 0) end++;
    if (end > 0) await visit(page.slice(0, end).map((e) => e[0]), page.slice(0, end).map((e) => e[1]));
    if (end < page.length) return;
  }
}

/** A file written as `<name>.pending` (renamed at commit), its size, entries and sha256 counted as it goes. */
class PendingFile {
  private readonly hash = createHash('sha256');
  records = 0;
  bytes = 0;
  private synced = 0;

  private constructor(readonly name: string, private readonly handle: Awaited<ReturnType<typeof open>>) {}

  static async create(dir: string, name: string): Promise<PendingFile> {
    return new PendingFile(name, await open(join(dir, name + PENDING_SUFFIX), 'w'));
  }

  async write(keys: Buffer[], values: Buffer[]): Promise<void> {
    const bytes = encodeEntries(keys, values);
    this.hash.update(bytes);
    await this.handle.write(bytes);
    this.records += keys.length;
    this.bytes += bytes.length;
    // Written back as it goes rather than in one flush at the end, which stalled the node's own
    // log syncs on the same disk behind it.
    if (this.bytes - this.synced >= SYNC_EVERY_BYTES) {
      await this.handle.datasync();
      this.synced = this.bytes;
    }
  }

  /** Durable and closed. */
  async finish(): Promise<BackupFile> {
    await this.handle.sync();
    await this.handle.close();
    return { name: this.name, records: this.records, bytes: this.bytes, sha256: this.hash.digest('hex') };
  }

  async abandon(): Promise<void> {
    await this.handle.close();
  }
}

interface IndexCopy {
  file: BackupFile;
  /** The writer checkpoint's nextPosition in the snapshot. */
  position: number;
  historyId: string;
  /** The chunk table in the snapshot. */
  physical: PhysicalChunk[];
}

/** Every key outside the log's two spaces into `index`; notes the writer checkpoint, history id and chunk table on the way. */
async function copyIndex(cursor: SnapshotCursor, dir: string, stop: () => void): Promise<IndexCopy> {
  const file = await PendingFile.create(dir, INDEX_NAME);
  let position: number | undefined;
  let historyId = '';
  const physical: PhysicalChunk[] = [];
  try {
    const ranges: [number, number][] = [[0x00, SPACE.LOG], [SPACE.LOG + 1, SPACE.SYSLOG], [SPACE.SYSLOG + 1, 0x100]];
    for (const [from, to] of ranges) {
      const end = to === 0x100 ? Buffer.alloc(64, 0xff) : Buffer.of(to);
      await readRange(cursor, Buffer.of(from), end, stop, async (keys, values) => {
        const kept = keys.map((_, i) => i).filter((i) => !keys[i].equals(FILLER_KEY)); // rocks.ts's transient filler
        for (const i of kept) {
          if (keys[i][0] === SPACE.CHUNK) physical.push(decodeChunk(keys[i], values[i]));
          else if (keys[i].equals(WRITER_CHECKPOINT_KEY)) position = readU64(values[i], 0);
          else if (keys[i].equals(HISTORY_ID_KEY)) historyId = values[i].toString('utf8');
        }
        await file.write(kept.map((i) => keys[i]), kept.map((i) => values[i]));
      });
    }
  } catch (err) {
    await file.abandon();
    throw err;
  }
  return { file: await file.finish(), position: position ?? 0, historyId, physical };
}

function versionOf(physical: readonly PhysicalChunk[], chunk: number): number {
  return physical.find((p) => p.start <= chunk && chunk <= p.end)?.version ?? 0;
}

function logRanges(chunk: number, chunkSize: number): [Buffer, Buffer][] {
  const from = chunk * chunkSize;
  const to = from + chunkSize;
  return [[logKey(from), logKey(to)], [systemLogKey(from), systemLogKey(to)]];
}

async function copyChunk(cursor: SnapshotCursor, dir: string, chunk: number, name: string, chunkSize: number,
  stop: () => void): Promise<ChunkFile> {
  const file = await PendingFile.create(dir, name);
  try {
    for (const [from, to] of logRanges(chunk, chunkSize)) await readRange(cursor, from, to, stop, (keys, values) => file.write(keys, values));
  } catch (err) {
    await file.abandon();
    throw err;
  }
  const written = await file.finish();
  const version = Number(name.slice(name.indexOf('.') + 1));
  return { ...written, chunk, version };
}

async function countChunk(cursor: SnapshotCursor, chunk: number, chunkSize: number, stop: () => void): Promise<number> {
  let records = 0;
  for (const [from, to] of logRanges(chunk, chunkSize)) await readRange(cursor, from, to, stop, (keys) => { records += keys.length; });
  return records;
}

/** The commit: the manifest (temp file, fsync, rename), then the pending files renamed into place. */
async function commit(dir: string, manifest: Manifest, written: readonly string[]): Promise<void> {
  const temp = join(dir, `${MANIFEST_NAME}.tmp`);
  await writeFile(temp, JSON.stringify(manifest, null, 2));
  await syncFile(temp);
  await rename(temp, join(dir, MANIFEST_NAME));
  await syncFile(dir);
  for (const name of written) await rename(join(dir, name + PENDING_SUFFIX), join(dir, name));
  await syncFile(dir);
}

async function syncFile(path: string): Promise<void> {
  const handle = await open(path, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Finishes a commit a crash interrupted: a pending file whose checksum is the manifest's was
 * written by the backup that manifest describes, and takes its name.
 */
async function settle(dir: string, manifest: Manifest): Promise<void> {
  for (const file of [manifest.index, ...manifest.chunks]) {
    const pending = join(dir, file.name + PENDING_SUFFIX);
    if ((await fileSize(pending)) === file.bytes && (await sha256Of(pending)) === file.sha256) await rename(pending, join(dir, file.name));
  }
}

/** Removes the backup files (by their names: nothing else in the directory) not in `kept`; returns how many chunk files went. */
async function removeStrays(dir: string, kept: ReadonlySet<string>): Promise<number> {
  let removed = 0;
  for (const name of await readdir(dir)) {
    if (!BACKUP_FILE_NAME.test(name) || kept.has(name)) continue;
    await unlink(join(dir, name)).catch((err: NodeJS.ErrnoException) => { if (err.code !== 'ENOENT') throw err; });
    if (name.startsWith('chunk-') && !name.endsWith(PENDING_SUFFIX)) removed++;
  }
  return removed;
}
