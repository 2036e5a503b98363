import { DomainError } from '../errors.js';

// Out of space: the error a write meets when the data directory's file system is full, and the
// episode it starts. RocksDB refuses the write that meets ENOSPC and, from then on, every write
// (it stops writing: a "hard" background error) until its own recovery finds room: it checks
// every 5 s and resumes once the file system has at least its memtable size free (64 MiB:
// rocks.ts; on a 40 MiB tmpfs it never resumed, with 33 MiB free after the filler was removed,
// and a restart was the only way back). Nothing written before is lost and nothing of a refused write is applied: the
// writer's state moves on only after a write succeeds (commit-pipeline.ts).
//
// An episode runs from the first refused write to the next write that succeeds. Its start and
// end are told once each to whoever listens (the node logs them; the projection manager resumes
// the projections the full disk faulted), however many writes it refuses in between.

/** A write refused because the data directory's file system is full. */
export class OutOfSpaceError extends DomainError {
  readonly code = 'OUT_OF_SPACE';

  /**
   * `reason`: RocksDB's words (the file it was writing), without its "IO error: No space left on
   * device" prefix; `resumeFreeBytes`: the free space RocksDB waits for before it writes again.
   */
  constructor(readonly reason: string, readonly resumeFreeBytes: number) {
    super(`No space left on device: ${reason}. The write was refused; writes resume by themselves once the data directory's `
      + `file system has ${resumeFreeBytes / 1024 / 1024} MiB free (retry with the same event ids then).`);
  }
}

/** Whether a write failed because its file system is full (RocksDB's NoSpace status, or an ENOSPC errno). */
export function isOutOfSpace(err: unknown): boolean {
  const { message, code } = err as { message?: unknown; code?: unknown };
  return code === 'ENOSPC' || (typeof message === 'string' && /No space left on device|ENOSPC/i.test(message));
}

/** RocksDB's message without the status prefix and the errno text it repeats at the end. */
export function noSpaceReason(message: string): string {
  const reason = message.replace(/^IO error: /, '').replace(/^No space left on device:? ?/i, '').replace(/: No space left on device$/i, '');
  return reason || 'the data directory\'s file system is full';
}

/** The start or the end of an out-of-space episode. */
export type SpaceEvent =
  | { readonly kind: 'full'; readonly since: Date; readonly error: OutOfSpaceError }
  | { readonly kind: 'back'; readonly since: Date; readonly until: Date; readonly refusedWrites: number };

export type SpaceListener = (event: SpaceEvent) => void;

/** Whether writes are refused for space now, since when, and who hears when that starts and ends. */
export class SpaceWatch {
  private episode: { since: Date; refusedWrites: number } | undefined;
  private readonly listeners = new Map<SpaceListener, string>();
  /** Episodes since the start. */
  episodes = 0;
  /** Where a listener's exception is reported (the node logs it); until set, it is dropped. */
  onListenerFailure: (subscriber: string, error: unknown) => void = () => undefined;

  /** When the writes began to be refused, or undefined while they succeed. */
  get failingSince(): Date | undefined {
    return this.episode?.since;
  }

  /** Writes refused in the episode under way (0 when none is). */
  get refusedWrites(): number {
    return this.episode?.refusedWrites ?? 0;
  }

  /** `subscriber` names the listener in the report of an exception it throws. */
  subscribe(listener: SpaceListener, subscriber: string): () => void {
    this.listeners.set(listener, subscriber);
    return () => this.listeners.delete(listener);
  }

  /** A write of `writes` queued writes was refused for space. */
  refused(error: OutOfSpaceError, writes: number): void {
    if (this.episode) {
      this.episode.refusedWrites += writes;
      return;
    }
    this.episode = { since: new Date(), refusedWrites: writes };
    this.episodes++;
    this.tell({ kind: 'full', since: this.episode.since, error });
  }

  /** A write succeeded: an episode under way ends. */
  written(): void {
    const episode = this.episode;
    if (!episode) return;
    this.episode = undefined;
    this.tell({ kind: 'back', since: episode.since, until: new Date(), refusedWrites: episode.refusedWrites });
  }

  private tell(event: SpaceEvent): void {
    for (const [listener, subscriber] of this.listeners) {
      try {
        listener(event);
      } catch (err) {
        // A failing listener must not break the writer that tells it, nor the other listeners.
        this.onListenerFailure(subscriber, err);
      }
    }
  }
}
