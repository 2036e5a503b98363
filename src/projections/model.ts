// The persisted shape of a projection (its `$ProjectionUpdated` event), its configuration, and the
// limits the node sets for every projection it runs.

export type ProjectionMode = 'Transient' | 'OneTime' | 'Continuous';

export interface ProjectionConfig {
  emitEnabled: boolean;
  trackEmittedStreams: boolean;
  checkpointAfterMs: number;
  checkpointHandledThreshold: number;
  checkpointUnhandledBytesThreshold: number;
  pendingEventsThreshold: number;
  maxWriteBatchLength: number;
  maxAllowedWritesInFlight: number;
  /** Per-batch CPU limit in ms; null = the server default. */
  projectionExecutionTimeout: number | null;
}

export const DEFAULT_CONFIG: ProjectionConfig = {
  emitEnabled: false,
  trackEmittedStreams: false,
  checkpointAfterMs: 0,
  checkpointHandledThreshold: 4000,
  checkpointUnhandledBytesThreshold: 10_000_000,
  pendingEventsThreshold: 5000,
  maxWriteBatchLength: 500,
  maxAllowedWritesInFlight: 0,
  projectionExecutionTimeout: null,
};

export interface RunAs { name: string; roles: string[] }

export interface PersistedProjection {
  name: string;
  /** 'JS' for user queries; 'native:...' for the system projections (whose query is their configuration). */
  handlerType: string;
  mode: ProjectionMode;
  query: string;
  enabled: boolean;
  checkpointsEnabled: boolean;
  /** Checkpoints and emitted events of older epochs are ignored (set by reset). */
  epoch: number;
  version: number;
  runAs: RunAs | null;
  config: ProjectionConfig;
  /**
   * Why the projection faulted, kept until an operator enables, resets or updates it: after a
   * restart it stays faulted where it stopped instead of replaying into the same wall.
   */
  faultedReason?: string;
}

/** What the node's options allow every projection it runs. */
export interface RuntimeLimits {
  memoryLimitMb: number;
  executionTimeoutMs: number;
  /** Largest state + result of one partition in bytes (MaxProjectionStateSize); 0: no limit of its own. */
  maxStateBytes: number;
  /** Partitions a sandbox keeps resident when they can be read back from their checkpoints. */
  partitionCache: number;
  /** Events one event may emit at most (MaxProjectionEmitsPerEvent); 0: no limit. */
  maxEmitsPerEvent: number;
}
