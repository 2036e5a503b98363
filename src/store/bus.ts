import type { EventRecord } from './record.js';

/** One durable write batch, published after it is on disk. Records are in log order. */
export interface Commit {
  readonly records: readonly EventRecord[];
  /** The log position after the last record: where the next record will go. */
  readonly nextPosition: number;
}

export type CommitListener = (commit: Commit) => void;

/**
 * The in-process commit bus. The writer publishes every durable batch; projections,
 * subscriptions and long-poll readers follow it instead of polling the store.
 */
export class CommitBus {
  private readonly listeners = new Set<CommitListener>();

  subscribe(listener: CommitListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  publish(commit: Commit): void {
    for (const listener of this.listeners) {
      try {
        listener(commit);
      } catch {
        // A failing follower must not break the writer or the other followers.
      }
    }
  }

  /**
   * Resolves true on the first commit with a record that `matches`, or false after `timeoutMs`
   * or when `signal` aborts.
   */
  waitFor(matches: (record: EventRecord) => boolean, timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
    return new Promise((resolve) => {
      if (signal?.aborted) return resolve(false);
      const done = (result: boolean) => {
        clearTimeout(timer);
        unsubscribe();
        signal?.removeEventListener('abort', onAbort);
        resolve(result);
      };
      const onAbort = () => done(false);
      const timer = setTimeout(() => done(false), timeoutMs);
      const unsubscribe = this.subscribe((commit) => {
        if (commit.records.some(matches)) done(true);
      });
      signal?.addEventListener('abort', onAbort);
    });
  }
}
