// The figures a projection reports (projections.md §16), read as one snapshot: a copy taken at
// one moment, so a reader never sees a figure change under it and nothing outside the projection
// can change one. The projection counts what a run does in its RunCounters; the rest is derived
// when the snapshot is taken.

export type ProjectionStatus = 'Stopped' | 'Preparing' | 'Running' | 'Stopping' | 'Faulted' | 'Completed' | 'Aborted';

export interface ProjectionStatistics {
  readonly status: ProjectionStatus;
  readonly stateReason: string;
  /** Position of the next record to read. */
  readonly position: number;
  /** Position of the last checkpoint written or loaded; -1: none. */
  readonly lastCheckpointPosition: number;
  /** Progress through the log in percent. */
  readonly progress: number;
  readonly eventsProcessedAfterRestart: number;
  /** Events a system projection skipped because the store refuses the stream it derives from them. */
  readonly eventsSkipped: number;
  /** Events read and not yet handled. */
  readonly bufferedEvents: number;
  readonly coreProcessingTimeMs: number;
  /** Reads done ahead of the handlers: the next batch, read while the sandbox works on this one (0 or 1). */
  readonly readsInProgress: number;
  /** Checkpoint writes in flight: a checkpoint starts only once the previous one is written (0 or 1). */
  readonly writesInProgress: number;
  /** Records of the checkpoint write in flight (`checkpointStatus`). */
  readonly writeRecordsInFlight: number;
  /** Emitted and result events in the checkpoint write in flight. */
  readonly writePendingEventsBeforeCheckpoint: number;
  /** Emitted and result events waiting for the next checkpoint. */
  readonly writePendingEventsAfterCheckpoint: number;
  /** Partitions held in memory: resident in the sandbox while it runs, else those a run without checkpoints kept. */
  readonly partitionsCached: number;
}

type Derived = 'status' | 'stateReason' | 'progress' | 'partitionsCached'
  | 'writesInProgress' | 'writeRecordsInFlight' | 'writePendingEventsBeforeCheckpoint' | 'writePendingEventsAfterCheckpoint';

/** What a projection counts itself (the projection alone writes them); the rest is read from its parts. */
export type RunCounters = { -readonly [K in Exclude<keyof ProjectionStatistics, Derived>]: ProjectionStatistics[K] };

export function newRunCounters(): RunCounters {
  return {
    position: 0, lastCheckpointPosition: -1, eventsProcessedAfterRestart: 0, eventsSkipped: 0, bufferedEvents: 0,
    coreProcessingTimeMs: 0, readsInProgress: 0,
  };
}

/** Percent of the log read, to two decimals; a completed query and an empty log are done. */
export function progressOf(status: ProjectionStatus, position: number, head: number): number {
  return status === 'Completed' || head === 0 ? 100 : Math.min(100, Math.round((position / head) * 10000) / 100);
}
