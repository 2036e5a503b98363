import { existsSync, statSync } from 'node:fs';
import { isAbsolute, relative, resolve } from 'node:path';
import type { Logger } from 'pino';
import { BackupStoppedError, type BackupResult, type Store } from '../store/index.js';
import { DomainError } from '../errors.js';

// The node's backups (POST /admin/backup): one at a time, never while a scavenge runs (the
// seed's rule: stop the scavenge, back up, resume it), and a scavenge is refused while one runs
// (the scavenger asks `running`). The store writes the backup (src/store/backup.ts); this owns
// who may start one and when.

export interface BackupRequest {
  /** An absolute directory on the node's machine. */
  to: string;
  differential: boolean;
}

/** A scavenge runs: the backup is refused, naming it and how to stop it. */
export class ScavengeRunningError extends DomainError {
  readonly code = 'SCAVENGE_RUNNING';

  constructor(readonly scavengeId: string) {
    super(`A scavenge is running (${scavengeId}): stop it with DELETE /admin/scavenge/${scavengeId}, back up, `
      + 'then start it again with POST /admin/scavenge (it resumes where it stopped).');
  }
}

export class BackupAlreadyRunningError extends DomainError {
  readonly code = 'BACKUP_ALREADY_RUNNING';

  constructor(to: string) {
    super(`A backup is already running (to ${to}); one backup runs at a time.`);
  }
}

/** The directory cannot take a backup (a file, inside the database, not creatable). */
export class BackupTargetError extends DomainError {
  readonly code = 'BACKUP_TARGET';
}

export class BackupService {
  private current: { to: string; done: Promise<unknown> } | undefined;
  private stopping = false;

  constructor(private readonly store: Store, private readonly runningScavenge: () => string | undefined,
    private readonly nodeVersion: string, private readonly log: Logger) {}

  /** Whether a backup runs now (a scavenge may not start). */
  get running(): boolean {
    return this.current !== undefined;
  }

  /** Backs up into `request.to`; resolves once the backup is complete and durable. */
  async run(request: BackupRequest): Promise<BackupResult> {
    const scavengeId = this.runningScavenge();
    if (scavengeId !== undefined) throw new ScavengeRunningError(scavengeId);
    if (this.current) throw new BackupAlreadyRunningError(this.current.to);
    if (this.stopping) throw new BackupStoppedError();
    const to = resolve(request.to);
    this.checkTarget(to);
    const log = this.log.child({ backupTo: to, differential: request.differential });
    log.info('backup started');
    const work = this.store.backup({ dir: to, differential: request.differential, nodeVersion: this.nodeVersion, shouldStop: () => this.stopping });
    this.current = { to, done: work.catch(() => undefined) };
    try {
      const result = await work;
      log.info({ position: result.position, chunks: result.chunks.length, copied: result.copied, removed: result.removed,
        bytes: result.bytes, seconds: result.seconds }, `backup completed: ${result.copied} of ${result.chunks.length} chunk files copied, ${result.bytes} bytes in ${result.seconds.toFixed(1)} s`);
      return result;
    } catch (err) {
      log.error({ err: (err as Error).message }, 'backup failed; the directory keeps its previous backup');
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EACCES' || code === 'EROFS' || code === 'ENOTDIR' || code === 'ENOSPC' || code === 'EEXIST') {
        throw new BackupTargetError(`Cannot write the backup to ${to}: ${(err as Error).message}`);
      }
      throw err;
    } finally {
      this.current = undefined;
    }
  }

  private checkTarget(to: string): void {
    if (existsSync(to) && !statSync(to).isDirectory()) throw new BackupTargetError(`${to} exists and is not a directory.`);
    const inside = relative(this.store.location, to);
    if (inside === '' || (!inside.startsWith('..') && !isAbsolute(inside))) {
      throw new BackupTargetError(`${to} is inside the database directory ${this.store.location}: back up somewhere else.`);
    }
  }

  /** Stops a running backup (its directory keeps the previous backup) and waits for it. */
  async close(): Promise<void> {
    this.stopping = true;
    await this.current?.done;
  }
}
