import { mkdir, realpath, rmdir, stat } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { DomainError } from '../errors.js';
import { BackupInvalidError } from '../store/index.js';
import { mountOf, PSEUDO_FILE_SYSTEMS, readMounts, type Mount } from './mounts.js';

// Where a backup may go. The directory named by POST /admin/backup (any ops user can name one) is
// checked and created here before the store writes a byte to it, and every way it can be wrong is
// a BackupTargetError with the reason, never a 500 and never a hung node:
//   1. its text, with no file system call: absolute, no NUL, no "." or ".." component, each name
//      at most NAME_MAX bytes and the whole within PATH_MAX, not under /proc, /sys or /dev;
//   2. the nearest ancestor that exists, symbolic links resolved (async realpath and stat, which
//      return on any file system): a real directory, on a mount whose file system keeps files
//      (mounts.ts), not inside the database directory;
//   3. the missing levels created one mkdir at a time, async, and removed again if a later step
//      fails. Never a recursive mkdir: Node 20's loops forever on the event loop under /proc.
// Any errno on the way, and any the store meets writing the backup, becomes a BackupTargetError
// naming the code and the path (targetError). Its kind decides the status (src/api/errors.ts).

/** Bytes per name in a path (Linux's NAME_MAX; ext4, xfs, btrfs and tmpfs all take 255). */
export const NAME_MAX = 255;
/** Bytes in a path, its terminating NUL included (Linux's PATH_MAX). */
export const PATH_MAX = 4096;
/** Kept under PATH_MAX for "/" and the longest name a backup writes in the directory (`chunk-X.Y.pending`, numbers of any width). */
const FILE_NAME_ROOM = 64;
/** Kernel views mounted at these on every Linux (proc, sysfs, devtmpfs): refused by name, before any call, even where /proc cannot be read. */
const PSEUDO_ROOTS: ReadonlySet<string> = new Set(['proc', 'sys', 'dev']);

/** Why a directory cannot take the backup: `path` 400, `permission` 403, `space` 507. */
export type BackupTargetProblem = 'path' | 'permission' | 'space';

/** The directory cannot take a backup: a bad path, a file system that refuses it, or no room; the message says which and where. */
export class BackupTargetError extends DomainError {
  readonly code = 'BACKUP_TARGET';

  constructor(readonly problem: BackupTargetProblem, message: string) {
    super(message);
  }
}

const PERMISSION_ERRNOS: ReadonlySet<string> = new Set(['EACCES', 'EPERM', 'EROFS']);
const SPACE_ERRNOS: ReadonlySet<string> = new Set(['ENOSPC', 'EDQUOT', 'EFBIG']);

/**
 * The target error for what a file system call on the backup directory threw (Node's message holds
 * the code, the call and the path), or for a damaged manifest in it; undefined for anything else
 * (a fault of ours, the store's own errors). Any errno: a path's problems outnumber any list.
 */
export function targetError(err: unknown, to: string): BackupTargetError | undefined {
  if (err instanceof BackupTargetError) return err;
  if (err instanceof BackupInvalidError) return new BackupTargetError('path', `Cannot write the backup to ${to}: ${err.message}; remove it or back up elsewhere.`);
  const { code, syscall } = (err ?? {}) as NodeJS.ErrnoException;
  if (typeof code !== 'string' || typeof syscall !== 'string') return undefined;
  const problem = PERMISSION_ERRNOS.has(code) ? 'permission' : SPACE_ERRNOS.has(code) ? 'space' : 'path';
  return new BackupTargetError(problem, `Cannot write the backup to ${to}: ${(err as Error).message}`);
}

/** What is wrong with the text of `to`, if anything; no file system call. */
export function targetPathProblem(to: string): string | undefined {
  if (to.includes('\0')) return 'to holds a NUL byte, which no path can hold.';
  if (!to.startsWith('/')) return 'to must be an absolute path (starting with /) of a directory on the node\'s machine.';
  const names = to.split('/').filter((name) => name !== '');
  // resolve() would drop "..", but the kernel takes it after following a symbolic link, elsewhere.
  if (names.some((name) => name === '.' || name === '..')) return `${to} has a "." or ".." in it: name the directory itself.`;
  const long = names.find((name) => Buffer.byteLength(name) > NAME_MAX);
  if (long !== undefined) {
    return `${to} has a name of ${Buffer.byteLength(long)} bytes ("${long.slice(0, 24)}..."): a file system takes at most ${NAME_MAX} (NAME_MAX).`;
  }
  const bytes = Buffer.byteLength(resolve(to));
  const most = PATH_MAX - 1 - FILE_NAME_ROOM;
  if (bytes > most) return `${to.slice(0, 64)}... is ${bytes} bytes long: a backup directory takes at most ${most} (PATH_MAX ${PATH_MAX} less room for its files).`;
  if (names.length > 0 && PSEUDO_ROOTS.has(names[0])) return `${to} is under /${names[0]}, a view of the kernel and not storage: a backup cannot go there.`;
  return undefined;
}

export interface BackupTarget {
  /** The directory, symbolic links resolved: where the backup is written. */
  readonly dir: string;
  /** The directories this created, outermost first (removeCreated takes them back). */
  readonly created: readonly string[];
}

/** Checks `to` (steps 1-2 above) and creates what is missing of it (3); throws BackupTargetError, having changed nothing. */
export async function prepareTarget(to: string, databaseDir: string): Promise<BackupTarget> {
  const problem = targetPathProblem(to);
  if (problem) throw new BackupTargetError('path', problem);
  const wanted = resolve(to);
  const { real, missing } = await nearestExisting(wanted);
  const dir = join(real, ...missing);
  refuseMount(dir === wanted ? wanted : `${wanted} (that is ${dir})`, real, await readMounts());
  await refuseInside(wanted, dir, databaseDir);
  const isDirectory = await stat(real).then((info) => info.isDirectory(), (err: unknown) => { throw targetError(err, wanted) ?? err; });
  if (!isDirectory) {
    throw new BackupTargetError('path', missing.length === 0
      ? `${wanted} exists and is not a directory.`
      : `${wanted} cannot be created: ${real} is not a directory.`);
  }
  return { dir, created: await createLevels(real, missing, wanted) };
}

/** The real path of the deepest ancestor of `wanted` (itself included) that exists, and the names below it. */
async function nearestExisting(wanted: string): Promise<{ real: string; missing: string[] }> {
  const missing: string[] = [];
  for (let path = wanted; ; path = dirname(path)) {
    try {
      return { real: await realpath(path), missing };
    } catch (err) {
      // A dangling symbolic link is "missing" too; its mkdir answers EEXIST, named below.
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || path === '/') throw targetError(err, wanted) ?? err;
      missing.unshift(basename(path));
    }
  }
}

/** `real`: the existing part of the target, links resolved (what lies below it cannot be another mount). */
function refuseMount(target: string, real: string, mounts: readonly Mount[] | undefined): void {
  const top = real.split('/')[1];
  if (PSEUDO_ROOTS.has(top)) throw new BackupTargetError('path', `${target} is under /${top}, a view of the kernel and not storage: a backup cannot go there.`);
  const mount = mounts && mountOf(real, mounts);
  if (mount && PSEUDO_FILE_SYSTEMS.has(mount.fsType)) {
    throw new BackupTargetError('path', `${target} is on ${mount.point}, a ${mount.fsType} file system (a view of the kernel, not storage): a backup cannot go there.`);
  }
}

async function refuseInside(wanted: string, dir: string, databaseDir: string): Promise<void> {
  const database = await realpath(databaseDir).catch(() => resolve(databaseDir));
  for (const [path, db] of [[wanted, resolve(databaseDir)], [dir, database]]) {
    const inside = relative(db, path);
    if (inside === '' || (inside !== '..' && !inside.startsWith('../') && !isAbsolute(inside))) {
      throw new BackupTargetError('path', `${wanted} is inside the database directory ${databaseDir}: back up somewhere else.`);
    }
  }
}

async function createLevels(real: string, missing: readonly string[], wanted: string): Promise<string[]> {
  const created: string[] = [];
  let path = real;
  try {
    for (const name of missing) {
      path = join(path, name);
      await mkdir(path);
      created.push(path);
    }
  } catch (err) {
    await removeCreated(created);
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') {
      throw new BackupTargetError('path', `${wanted} cannot be created: ${path} exists and is not a directory (a dangling symbolic link?).`);
    }
    throw targetError(err, wanted) ?? err;
  }
  return created;
}

/** Removes the directories prepareTarget created (innermost first), if still empty; best effort, as the failure being reported matters more. */
export async function removeCreated(created: readonly string[]): Promise<void> {
  for (const path of [...created].reverse()) await rmdir(path).catch(() => undefined);
}
