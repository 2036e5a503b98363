import type { EventRecord } from './record.js';

/** One durable write batch, published after it is on disk. Records are in log order. */
export interface Commit {
  readonly records: readonly EventRecord[];
  /** The log position after the last record: where the next record will go. */
  readonly nextPosition: number;
}

export type CommitListener = (commit: Commit) => void;

/** Told when a listener throws: who it was (the name it subscribed with) and what it threw. */
export type ListenerFailure = (subscriber: string, error: unknown) => void;

/**
 * The in-process commit bus. The writer publishes every durable batch; projections,
 * subscriptions and long-poll readers follow it instead of polling the store.
 */
export class CommitBus {
  private readonly listeners = new Map<CommitListener, string>();
  /** Where a listener's exception is reported (the node logs it); until set, it is dropped. */
  onListenerFailure: ListenerFailure = () => undefined;

  /** `subscriber` names the follower in the report of an exception it throws (the node logs it with the name). */
  subscribe(listener: CommitListener, subscriber: string): () => void {
    this.listeners.set(listener, subscriber);
    return () => this.listeners.delete(listener);
  }

  publish(commit: Commit): void {
    for (const [listener, subscriber] of this.listeners) {
      try {
        listener(commit);
      } catch (err) {
        // A failing follower must not break the writer or the other followers; it is reported.
        this.onListenerFailure(subscriber, err);
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
      }, 'a reader waiting for a commit');
      signal?.addEventListener('abort', onAbort);
    });
  }
}
