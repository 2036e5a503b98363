import type { EventRecord, RecordSieve } from '../store/index.js';
import { BatchEncoder, FULL_DELIVERY, type Delivery } from './wire.js';
import type { EventUse } from './event-use.js';
import {
  Sandbox, DefinitionError, type BatchOutcome, type ChangedPartition, type EmittedEvent, type PartitionLookup, type StoredPartition,
} from './sandbox.js';
import { definitionProblem, needsRawBody } from './definition.js';
import type { SourceDefinition } from './language/source-definition.js';
import type { Selected } from './source.js';
import type { ProjectionMode } from './model.js';

// What runs a projection's handlers over the events its source selected: the sandboxed
// JavaScript engine for user queries, or a native engine for the trusted system projections.

export interface Engine {
  readonly definition: SourceDefinition;
  readonly disposed: boolean;
  /** Engines that read the log their own way (the system projections) choose their records here. */
  select?(record: EventRecord): Selected | undefined;
  /**
   * With select: a test of each record's stored bytes. The records it refuses are neither decoded
   * nor selected, and count as processed: they are records the engine would have been handed and
   * done nothing with.
   */
  readonly sieve?: RecordSieve;
  /** Records read per batch, when the engine wants other than the default. */
  readonly readBatchSize?: number;
  /** Its checkpoints go before the other projections' in the writer's queue (the system projections' indexes). */
  readonly checkpointsAhead?: boolean;
  /** Events written with each checkpoint, in the same transaction. */
  checkpointEvents?(tag: Record<string, unknown>): EmittedEvent[];
  /**
   * Turns selected events into what process() takes. Separate so the runner can prepare the
   * next batch while the engine works on the current one.
   */
  encode(batch: Selected[]): unknown;
  /**
   * Handles one encoded batch; state changes stay inside until collect(), or, with `collect`,
   * come back in the outcome (one call instead of two when a checkpoint will follow the batch).
   * `lookup` reads the stored states of partitions the engine does not hold.
   */
  process(encoded: unknown, collect?: boolean, lookup?: PartitionLookup): Promise<BatchOutcome>;
  /** The partitions changed since the last collection, serialised. */
  collect(): Promise<ChangedPartition[]>;
  /** Partitions the engine holds in memory now. */
  readonly resident?: number;
  /** The live state and result of one partition; null when the engine does not hold it (read its checkpoint). */
  partition(partition: string): Promise<StoredPartition>;
  dispose(): void;
}

export interface EngineLimits {
  memoryLimitMb: number;
  timeoutMs: number;
  /** Events one event may emit at most (MaxProjectionEmitsPerEvent); 0: no limit. */
  maxEmitsPerEvent: number;
}

/** User JavaScript in an isolated-vm sandbox; events cross as one JSON text per batch. */
export class JsEngine implements Engine {
  private readonly encoder: BatchEncoder;

  private constructor(private readonly sandbox: Sandbox, delivery: Delivery,
    /** Handlers get plain event objects: unfrozen, with only the fields the query reads (see event-use.ts). */
    readonly plainEvents: boolean) {
    this.encoder = new BatchEncoder(delivery);
  }

  /**
   * `run.partitionCache`: partitions the sandbox keeps (the others are read from their checkpoints
   * when an event needs them); 0 keeps them all (a run without checkpoints has nothing to read back).
   * `run.trace`: each outcome says what ran for each event (the debugger's runs).
   */
  static async create(query: string, limits: EngineLimits,
    run: { emitEnabled: boolean; mode: ProjectionMode; partitionCache: number; trace?: boolean },
    stored: Record<string, StoredPartition>): Promise<JsEngine> {
    const sandbox = await Sandbox.create(query, limits);
    try {
      const problem = definitionProblem(sandbox.definition);
      if (problem) throw new DefinitionError(problem, sandbox.definition);
      const resultsPerEvent = writesRunningResults(sandbox.definition, run.mode);
      const { plainEvents } = await sandbox.start({
        emitEnabled: run.emitEnabled, resultsPerEvent, partitionCache: run.partitionCache, maxEmitsPerEvent: limits.maxEmitsPerEvent,
        trace: run.trace === true,
      }, stored);
      const delivery = deliveryFor(sandbox.eventUse, plainEvents, needsRawBody(sandbox.definition, query), run.emitEnabled);
      return new JsEngine(sandbox, delivery, plainEvents);
    } catch (err) {
      sandbox.dispose();
      throw err;
    }
  }

  get definition(): SourceDefinition {
    return this.sandbox.definition;
  }

  get disposed(): boolean {
    return this.sandbox.disposed;
  }

  get resident(): number {
    return this.sandbox.resident;
  }

  encode(batch: Selected[]): string {
    return this.encoder.encode(batch);
  }

  process(encoded: unknown, collect = false, lookup?: PartitionLookup): Promise<BatchOutcome> {
    return this.sandbox.process(encoded as string, collect, lookup);
  }

  collect(): Promise<ChangedPartition[]> {
    return this.sandbox.collect();
  }

  partition(partition: string): Promise<StoredPartition> {
    return this.sandbox.partition(partition);
  }

  dispose(): void {
    this.sandbox.dispose();
  }
}

/**
 * What crosses per event. With plain event objects (the query only reads fields by name) the
 * fields it never reads stay out; emitting needs the id ($causedBy) and metadata ($correlationId).
 */
/**
 * §15: a continuous projection writes a result for each change; a query (one-time, transient)
 * writes running results only when it has no handlers, and otherwise one per partition at the end.
 */
function writesRunningResults(definition: SourceDefinition, mode: ProjectionMode): boolean {
  return definition.producesResults && (mode === 'Continuous' || definition.handlerOrder.length === 0);
}

function deliveryFor(use: EventUse, plainEvents: boolean, rawBody: boolean, emitEnabled: boolean): Delivery {
  // Event objects escape: they are complete, as the reference describes them, bodyRaw the exact text included.
  if (!plainEvents) return { ...FULL_DELIVERY, rawBody: true };
  const reads = new Set(use.reads);
  return {
    body: rawBody || reads.has('body') || reads.has('data'),
    rawBody,
    eventId: emitEnabled || reads.has('eventId'),
    metadata: emitEnabled || reads.has('metadata') || reads.has('metadataRaw'),
    linkMetadata: reads.has('linkMetadata') || reads.has('linkMetadataRaw'),
  };
}
