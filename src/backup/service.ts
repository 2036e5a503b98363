import { resolve } from 'node:path';
import type { Logger } from 'pino';
import { BackupStoppedError, type BackupResult, type Store } from '../store/index.js';
import { DomainError } from '../errors.js';
import { prepareTarget, removeCreated, targetError } from './target.js';

// The node's backups (POST /admin/backup): one at a time, never while a scavenge runs (the
// seed's rule: stop the scavenge, back up, resume it), and a scavenge is refused while one runs
// (the scavenger asks `running`). The store writes the backup (src/store/backup.ts); target.ts
// checks and creates the directory; this owns who may start one and when.

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
    // Taken before the first await: two requests at once cannot both pass the check above.
    const work = this.backUp(request, to);
    this.current = { to, done: work.catch(() => undefined) };
    try {
      return await work;
    } finally {
      this.current = undefined;
    }
  }

  private async backUp(request: BackupRequest, to: string): Promise<BackupResult> {
    const target = await prepareTarget(request.to, this.store.location);
    const log = this.log.child({ backupTo: to, differential: request.differential });
    log.info('backup started');
    try {
      const result = await this.store.backup({ dir: target.dir, differential: request.differential, nodeVersion: this.nodeVersion,
        shouldStop: () => this.stopping });
      log.info({ position: result.position, chunks: result.chunks.length, copied: result.copied, removed: result.removed,
        bytes: result.bytes, seconds: result.seconds }, `backup completed: ${result.copied} of ${result.chunks.length} chunk files copied, ${result.bytes} bytes in ${result.seconds.toFixed(1)} s`);
      return result;
    } catch (err) {
      log.error({ err: (err as Error).message }, 'backup failed; the directory keeps its previous backup');
      await removeCreated(target.created);
      throw targetError(err, to) ?? err;
    }
  }

  /** Stops a running backup (its directory keeps the previous backup) and waits for it. */
  async close(): Promise<void> {
    this.stopping = true;
    await this.current?.done;
  }
}
