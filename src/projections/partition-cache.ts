import { shownName, type Store } from '../store/index.js';
import type { ChangedPartition, StoredPartition } from './sandbox.js';
import type { Engine } from './engine.js';
import { decodeCheckpointBody, isOfEpoch, readTag, type CheckpointTag, type PartitionValue } from './checkpoint-codec.js';
import { checkpointStream, partitionCheckpointStream, partitionsStream } from './streams.js';

// The host's copy of a projection's partition states and results. While a sandbox runs it holds
// the live states; the host keeps only what it collected and has not yet written (changed, then
// in flight with the checkpoint being written) and the root, and reads any other partition back
// from its checkpoint stream when the sandbox or a reader asks. A run without checkpoints has
// nothing to read back from, so it keeps every partition here.

/** The partition records of a checkpoint: what changed since the last one, and the root. */
export interface CheckpointContent {
  /** Partitions first stored by this checkpoint, in order of first appearance. */
  newPartitions: readonly string[];
  /** Partitions changed since the last checkpoint. */
  changed: ReadonlyMap<string, PartitionValue>;
  root: PartitionValue | undefined;
}

export interface CacheRun {
  name: string;
  projectionId: number;
  epoch: number;
  /** Partitions can be read back from their checkpoints; without, every partition stays here. */
  checkpoints: boolean;
  /** Largest state + result of one partition in bytes (MaxProjectionStateSize); 0: no limit. */
  maxStateBytes: number;
}

export class PartitionCache {
  /** The root partition ('', the state of an unpartitioned query and the shared state of a bi-state one). */
  private rootValue: PartitionValue | undefined;
  /** Every partition, kept only by a run without checkpoints. */
  private readonly all: Map<string, PartitionValue> | undefined;
  /** Partitions collected since the last checkpoint began: the next checkpoint writes them. */
  private changed = new Map<string, PartitionValue>();
  /** Partitions of the checkpoint being written: read from here until it is. */
  private inFlight = new Map<string, PartitionValue>();
  /** Partitions first collected since the last checkpoint began, in order of first appearance. */
  private newPartitions: string[] = [];

  constructor(private readonly store: Store, private readonly run: CacheRun) {
    this.all = run.checkpoints ? undefined : new Map();
  }

  get root(): PartitionValue | undefined {
    return this.rootValue;
  }

  /** Partitions held here (without a running sandbox, those are what a run without checkpoints kept). */
  get size(): number {
    return (this.all?.size ?? 0) + (this.rootValue ? 1 : 0);
  }

  /** Reads the last root checkpoint of this epoch: the root comes back; the tag says where the run was. */
  restoreRoot(): CheckpointTag | undefined {
    const last = this.store.readEvent(checkpointStream(this.run.name), -1);
    if (last.status !== 'ok' || !last.event.event) return undefined;
    const tag = readTag(last.event.event.metadata);
    if (!tag || !isOfEpoch(tag, this.run.projectionId, this.run.epoch)) return undefined;
    this.rootValue = decodeCheckpointBody(last.event.event.data);
    return tag;
  }

  /** Raw state and result JSON of a partition ('' when none): live from `engine` while it runs, else as last collected. */
  async read(partition: string, engine: Engine | undefined): Promise<{ state: string; result: string }> {
    if (engine && !engine.disposed) {
      try {
        const live = await engine.partition(partition);
        if (live !== null) return { state: live[0] ?? '', result: live[1] ?? '' };
      } catch {
        // the sandbox went away meanwhile: answer from the last collected copy
      }
    }
    const v = this.valueOf(partition);
    return { state: v?.state ?? '', result: v?.result ?? '' };
  }

  /** The last collected state and result of a partition: the copy here, else its checkpoint. */
  valueOf(partition: string): PartitionValue | undefined {
    if (partition === '') return this.rootValue;
    if (this.all) return this.all.get(partition);
    return this.changed.get(partition) ?? this.inFlight.get(partition) ?? this.readStored(partition);
  }

  /** The sandbox's lookup: the stored states of partitions it does not hold. */
  readonly lookup = (partitions: string[]): Record<string, StoredPartition> => {
    const out: Record<string, StoredPartition> = {};
    this.store.prefetchStreamInfos(partitions.map((p) => partitionCheckpointStream(this.run.name, p)));
    for (const p of partitions) {
      const v = this.valueOf(p);
      out[p] = v ? [v.state, v.result] : null;
    }
    return out;
  };

  /** Takes what the sandbox collected. Throws when a partition outgrows MaxProjectionStateSize (nothing after it is taken). */
  apply(changed: readonly ChangedPartition[]): void {
    for (const [partition, state, result, , isNew] of changed) {
      this.checkStateSize(partition, state, result);
      const value = { state, result };
      if (partition === '') {
        this.rootValue = value;
        continue;
      }
      if (isNew) this.newPartitions.push(partition);
      if (this.all) this.all.set(partition, value);
      else this.changed.set(partition, value);
    }
  }

  /** What the next checkpoint writes (unchanged until beginWrite). */
  get pending(): CheckpointContent {
    return { newPartitions: this.newPartitions, changed: this.changed, root: this.rootValue };
  }

  /** The checkpoint's write began: its partitions are read from it until written(); the next collects anew. */
  beginWrite(): ReadonlyMap<string, PartitionValue> {
    const flight = this.changed;
    this.inFlight = flight;
    this.changed = new Map();
    this.newPartitions = [];
    return flight;
  }

  /** The write of `flight` ended (written or failed): its partitions are read from their checkpoints again. */
  written(flight: ReadonlyMap<string, PartitionValue>): void {
    if (this.inFlight === flight) this.inFlight = new Map();
  }

  /**
   * Every partition with its state, root first, then in order of first appearance: the copy here
   * without checkpoints, else the partitions stream (and those not yet registered) with their states.
   */
  ordered(): [string, PartitionValue][] {
    const ordered: [string, PartitionValue][] = this.rootValue ? [['', this.rootValue]] : [];
    if (this.all) return [...ordered, ...this.all];
    const names = new Set<string>();
    for (const entry of this.store.streamRecords(partitionsStream(this.run.name))) {
      if (isOfEpoch(readTag(entry.metadata), this.run.projectionId, this.run.epoch)) names.add(entry.data.toString('utf8'));
    }
    for (const p of this.newPartitions) names.add(p);
    for (const p of names) ordered.push([p, this.valueOf(p) ?? { state: null, result: null }]);
    return ordered;
  }

  /** A partition's state and result as its last checkpoint of this epoch holds them. */
  private readStored(partition: string): PartitionValue | undefined {
    const cp = this.store.readEvent(partitionCheckpointStream(this.run.name, partition), -1);
    if (cp.status !== 'ok' || !cp.event.event) return undefined;
    if (!isOfEpoch(readTag(cp.event.event.metadata), this.run.projectionId, this.run.epoch)) return undefined;
    return decodeCheckpointBody(cp.event.event.data);
  }

  /** MaxProjectionStateSize: a partition whose state and result outgrow it faults the projection. */
  private checkStateSize(partition: string, state: string | null, result: string | null): void {
    const problem = stateSizeProblem(this.run.name, partition, state, result, this.run.maxStateBytes);
    if (problem) throw new Error(problem);
  }
}

/** Why a partition's state and result cannot be stored (MaxProjectionStateSize, `max` bytes; 0: no limit), or undefined. */
export function stateSizeProblem(name: string, partition: string, state: string | null, result: string | null, max: number): string | undefined {
  if (max <= 0) return undefined;
  const size = Buffer.byteLength(state ?? '', 'utf8') + (result === state ? 0 : Buffer.byteLength(result ?? '', 'utf8'));
  if (size <= max) return undefined;
  const where = partition === '' ? '' : ` in partition '${shownName(partition)}'`;
  return `The state size of projection '${name}'${where} is ${size} bytes which exceeds the configured MaxProjectionStateSize of ${max} bytes.`;
}
