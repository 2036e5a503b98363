import { createHash } from 'node:crypto';
import { createReadStream, type Stats } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { metaKey } from './keys.js';

// What a backup directory holds, read and written by backup.ts and restore.ts:
//
//   chunk-XXXXXX.YYYYYY  the log records (LOG and SYSLOG key spaces) whose position lies in logical
//                        chunk X (positions [X·chunkSize, (X+1)·chunkSize)); Y is the version of
//                        the physical chunk holding it (CHUNK key space; 0 if never scavenged)
//   index                every other key: stream index, stream infos, event ids, hints, chunk
//                        table, chunk times, meta (the writer checkpoint among them)
//   backup.json          the manifest: the position the backup restores to, and every file with
//                        its record count, size and sha256. Written last: it is the commit point.
//
// Each data file is a sequence of entries `u32 key length | key | u32 value length | value`
// (big-endian lengths), the keys as RocksDB holds them. A file that replaces one of the same
// name is first written as `<name>.pending` and renamed after the manifest is written; a reader
// takes `<name>.pending` when `<name>` does not match the manifest (a backup interrupted between
// its manifest and its renames), so a directory is always one whole backup.

export const BACKUP_FORMAT = 1;
export const MANIFEST_NAME = 'backup.json';
export const INDEX_NAME = 'index';
export const PENDING_SUFFIX = '.pending';
/** Names a backup writes, and so may remove (nothing else in the directory is touched). */
export const BACKUP_FILE_NAME = /^(chunk-\d{6,}\.\d{6,}|index)(\.pending)?$|^backup\.json\.tmp$/;

/**
 * Names this database's history: a restore and a truncation start a new one. A differential
 * backup reuses the chunk files of a backup of the same history only (a chunk of another may
 * hold other records under the same name).
 */
export const HISTORY_ID_KEY = metaKey('history-id');

export interface BackupFile {
  readonly name: string;
  /** Entries (key/value pairs) in the file. */
  readonly records: number;
  readonly bytes: number;
  readonly sha256: string;
}

export interface ChunkFile extends BackupFile {
  readonly chunk: number;
  readonly version: number;
}

export interface Manifest {
  readonly format: typeof BACKUP_FORMAT;
  /** The writer checkpoint's nextPosition in the snapshot: a restored node's log ends here. */
  readonly position: number;
  readonly chunkSize: number;
  readonly historyId: string;
  readonly created: string;
  readonly nodeVersion: string;
  readonly index: BackupFile;
  readonly chunks: readonly ChunkFile[];
}

export class BackupInvalidError extends Error {}

const U32 = 4;

/** Entries as the files hold them. */
export function encodeEntries(keys: readonly Buffer[], values: readonly Buffer[]): Buffer {
  let size = 0;
  for (let i = 0; i < keys.length; i++) size += 2 * U32 + keys[i].length + values[i].length;
  const out = Buffer.allocUnsafe(size);
  let at = 0;
  for (let i = 0; i < keys.length; i++) {
    out.writeUInt32BE(keys[i].length, at);
    keys[i].copy(out, at + U32);
    at += U32 + keys[i].length;
    out.writeUInt32BE(values[i].length, at);
    values[i].copy(out, at + U32);
    at += U32 + values[i].length;
  }
  return out;
}

/** The entries of a file, a batch at a time, streamed (a chunk file may be far larger than memory should hold). */
export async function* readEntries(path: string): AsyncGenerator<{ keys: Buffer[]; values: Buffer[] }> {
  let pending: Buffer = Buffer.alloc(0);
  for await (const piece of createReadStream(path, { highWaterMark: 1024 * 1024 }) as AsyncIterable<Buffer>) {
    pending = pending.length === 0 ? piece : Buffer.concat([pending, piece]);
    const keys: Buffer[] = [];
    const values: Buffer[] = [];
    let at = 0;
    for (;;) {
      if (pending.length - at < U32) break;
      const keyLength = pending.readUInt32BE(at);
      if (pending.length - at < 2 * U32 + keyLength) break;
      const valueLength = pending.readUInt32BE(at + U32 + keyLength);
      const end = at + 2 * U32 + keyLength + valueLength;
      if (pending.length < end) break;
      keys.push(pending.subarray(at + U32, at + U32 + keyLength));
      values.push(pending.subarray(at + 2 * U32 + keyLength, end));
      at = end;
    }
    pending = pending.subarray(at);
    if (keys.length > 0) yield { keys, values };
  }
  if (pending.length > 0) throw new BackupInvalidError(`${path} ends inside an entry`);
}

export async function sha256Of(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const piece of createReadStream(path) as AsyncIterable<Buffer>) hash.update(piece);
  return hash.digest('hex');
}

/**
 * The size of the regular file at `path`; undefined if there is none (missing, or a directory, a
 * FIFO, a device: reading one of those could wait or never end).
 */
export async function fileSize(path: string): Promise<number | undefined> {
  const info = await statIfAny(path);
  return info?.isFile() ? info.size : undefined;
}

async function statIfAny(path: string): Promise<Stats | undefined> {
  try {
    return await stat(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** The manifest in `dir`, checked for shape (not the files: see verifyBackup); undefined when there is none. */
export async function readManifest(dir: string): Promise<Manifest | undefined> {
  const path = join(dir, MANIFEST_NAME);
  const info = await statIfAny(path);
  if (!info) return undefined;
  if (!info.isFile()) throw new BackupInvalidError(`${path} is not a regular file`);
  const text = await readFile(path, 'utf8');
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new BackupInvalidError(`${path} is not JSON: ${(err as Error).message}`);
  }
  const problem = manifestProblem(doc);
  if (problem) throw new BackupInvalidError(`${path} is not a backup manifest: ${problem}`);
  return doc as Manifest;
}

function fileProblem(f: unknown, what: string): string | undefined {
  const file = f as Partial<BackupFile> | null;
  if (typeof file !== 'object' || file === null) return `${what} is not an object`;
  if (typeof file.name !== 'string' || !BACKUP_FILE_NAME.test(file.name) || file.name.endsWith(PENDING_SUFFIX)) return `${what} has no valid name`;
  if (!Number.isSafeInteger(file.records) || !Number.isSafeInteger(file.bytes)) return `${what} (${file.name}) has no record count or size`;
  if (typeof file.sha256 !== 'string' || !/^[0-9a-f]{64}$/.test(file.sha256)) return `${what} (${file.name}) has no sha256`;
  return undefined;
}

function manifestProblem(doc: unknown): string | undefined {
  const m = doc as Partial<Manifest> | null;
  if (typeof m !== 'object' || m === null) return 'not an object';
  if (m.format !== BACKUP_FORMAT) return `format ${String(m.format)} (this node reads format ${BACKUP_FORMAT})`;
  if (!Number.isSafeInteger(m.position) || m.position! < 0) return 'no position';
  if (!Number.isSafeInteger(m.chunkSize) || m.chunkSize! <= 0) return 'no chunk size';
  if (typeof m.historyId !== 'string') return 'no history id';
  const indexProblem = fileProblem(m.index, 'the index');
  if (indexProblem) return indexProblem;
  if (!Array.isArray(m.chunks)) return 'no chunk list';
  const last = m.position === 0 ? -1 : Math.floor((m.position! - 1) / m.chunkSize!);
  if (m.chunks.length !== last + 1) return `${m.chunks.length} chunk files where positions up to ${m.position} take ${last + 1}`;
  for (let i = 0; i < m.chunks.length; i++) {
    const problem = fileProblem(m.chunks[i], `chunk ${i}`);
    if (problem) return problem;
    if (m.chunks[i].chunk !== i || !Number.isSafeInteger(m.chunks[i].version)) return `chunk entry ${i} names chunk ${m.chunks[i].chunk}`;
  }
  return undefined;
}

/** The manifest and the path of each of its files, every file's size and sha256 checked. */
export async function verifyBackup(dir: string): Promise<{ manifest: Manifest; paths: Map<string, string> }> {
  const manifest = await readManifest(dir);
  if (!manifest) throw new BackupInvalidError(`${dir} holds no backup (no ${MANIFEST_NAME})`);
  const paths = new Map<string, string>();
  for (const file of [manifest.index, ...manifest.chunks]) {
    let found: string | undefined;
    for (const name of [file.name, file.name + PENDING_SUFFIX]) {
      const path = join(dir, name);
      if ((await fileSize(path)) === file.bytes && (await sha256Of(path)) === file.sha256) {
        found = path;
        break;
      }
    }
    if (!found) throw new BackupInvalidError(`${join(dir, file.name)} is missing or does not match its checksum in ${MANIFEST_NAME}`);
    paths.set(file.name, found);
  }
  return { manifest, paths };
}
