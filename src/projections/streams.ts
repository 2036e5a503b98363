// Names of the streams and event types the projection subsystem writes (as the established
// servers name them, so existing tools find them).

export const REGISTRY_STREAM = '$projections-$all';
export const EVENT = {
  initialized: '$ProjectionsInitialized',
  created: '$ProjectionCreated',
  deleted: '$ProjectionDeleted',
  updated: '$ProjectionUpdated',
  checkpoint: '$ProjectionCheckpoint',
  partitionCheckpoint: '$Checkpoint',
  partition: '$partition',
  result: 'Result',
  resultRemoved: 'ResultRemoved',
  eof: '$Eof',
  streamTracked: '$StreamTracked',
} as const;

export const projectionStream = (name: string) => `$projections-${name}`;
export const checkpointStream = (name: string) => `$projections-${name}-checkpoint`;
export const partitionCheckpointStream = (name: string, partition: string) => `$projections-${name}-${partition}-checkpoint`;
export const partitionsStream = (name: string) => `$projections-${name}-partitions`;
export const emittedStreamsStream = (name: string) => `$projections-${name}-emittedstreams`;
export const defaultResultStream = (name: string) => `$projections-${name}-result`;

export function partitionResultStream(name: string, partition: string, pattern: string | null): string {
  return pattern ? pattern.replace('{0}', partition) : `$projections-${name}-${partition}-result`;
}
