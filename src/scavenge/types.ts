import { DomainError } from '../errors.js';

// What the rest of the node sees of scavenging: the request, the progress, the results.

/** A request to scavenge (POST /admin/scavenge), already validated. */
export interface ScavengeRequest {
  /** 1..4: chunks executed at once. */
  threads: number;
  /** -1: every chunk; 0: every chunk with something to remove; > 0: chunks heavier than this. */
  threshold: number;
  /** 1..100; 100 is full speed, 50 takes about twice as long (100 when threads > 1). */
  throttlePercent: number;
  /** Run only to an existing scavenge point no scavenge has reached; never write a new one. */
  syncOnly: boolean;
  /**
   * Chunk execution starts at this chunk (0: the first): the chunks before it keep what they
   * could lose, and their weights, for a later run. Accumulation and calculation cover the whole log.
   */
  startFromChunk: number;
}

export type ScavengePhase =
  | 'Beginning' | 'Accumulation' | 'Calculation' | 'ChunkExecution' | 'ChunkMerging' | 'IndexExecution' | 'Cleaning' | 'Done';

export interface ScavengeProgress {
  phase: ScavengePhase;
  /** The scavenge point this run works up to (its event number in $scavengePoints), -1 until known. */
  scavengePoint: number;
  /** Chunks of the current phase done, of how many (accumulation and execution). */
  chunksDone: number;
  chunksTotal: number;
  /** Streams whose discard points were calculated. */
  streamsCalculated?: number;
  /** Log records read (accumulation and execution). */
  eventsExamined: number;
  eventsRemoved: number;
  /** Logical bytes of the removed records. */
  spaceSaved: number;
  /** Ms the run has rested so far because the node's other work kept the event loop busy (throttle.ts). */
  restedForClientsMs: number;
}

/** Results written to the history streams. */
export type ScavengeResult = 'Success' | 'Stopped' | 'Errored' | 'Interrupted';

/** What GET /admin/scavenge/last reports. */
export type LastScavengeResult = 'Unknown' | 'InProgress' | ScavengeResult;

export class ScavengeAlreadyRunningError extends DomainError {
  readonly code = 'SCAVENGE_ALREADY_RUNNING';

  constructor(readonly scavengeId: string) {
    super('Scavenge is already running');
  }
}

/** A stop of a scavenge that does not run (no such id, or it has finished). */
export class ScavengeNotFoundError extends DomainError {
  readonly code = 'SCAVENGE_NOT_FOUND';

  constructor(readonly scavengeId: string) {
    super('Scavenge Id does not exist');
  }
}

/** A scavenge asked for while a backup runs (src/backup): refused, as a backup is refused while a scavenge runs. */
export class BackupRunningError extends DomainError {
  readonly code = 'BACKUP_RUNNING';

  constructor() {
    super('A backup is running');
  }
}
