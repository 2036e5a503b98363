// The host of the projection language tests: each run writes the events it is given to a real
// store (in memory) and runs the query over them the way users run it, as a Projection
// (src/projections/projection.ts) with the production engine (JsEngine: sandbox, source
// selection, batch encoding), in OneTime mode so that it completes at the end of the log (or in
// the mode asked for: a Continuous run is stopped, with its checkpoint, once it has read the log).
//
// What the tests read is recorded where the engine meets the Projection: the events handed to
// it, each batch's outcome (emitted events, log lines, a fault), the partitions collected after
// it (the Projection collects at its checkpoints and at the end), and whether handlers got plain
// event objects. The final states and results are checked against what the projection answers.

import type {
  BatchOutcome, ChangedPartition, EmittedEvent, PartitionLookup, StoredPartition,
} from '../../src/projections/sandbox.js';
import { DefinitionError } from '../../src/projections/sandbox.js';
import { JsEngine, type Engine } from '../../src/projections/engine.js';
import { Projection } from '../../src/projections/projection.js';
import { DEFAULT_CONFIG, type PersistedProjection, type ProjectionMode } from '../../src/projections/model.js';
import type { Selected } from '../../src/projections/source.js';
import type { SourceDefinition } from '../../src/projections/language/source-definition.js';
import { createLogger } from '../../src/logger.js';
import {
  ExpectedVersion, formatUuid, LINK_EVENT_TYPE, newUuid, parseUuid, Store, type ProposedEvent,
} from '../../src/store/index.js';

/** One event written to a stream. */
export interface EventSpec {
  /** Event type (default `E`). */
  type?: string;
  /** Stream the event is in (default `stream-1`). */
  stream?: string;
  /** Body as a JS value, JSON-serialised (default `{}`). Ignored when `raw` is given. */
  data?: unknown;
  /** Body as raw text (null = no data). */
  raw?: string | null;
  /** Content-type flag; defaults to true unless `raw` is given. */
  isJson?: boolean;
  /** Event metadata: an object (JSON-serialised), raw text, or absent. */
  metadata?: unknown;
  /**
   * The stream of a link to the event, written right after it (`$ce-<category>` as $by_category
   * writes them, or any stream): category and stream sources read the event through it.
   */
  via?: string;
  /** Metadata of that link: an object, raw text, or absent. */
  linkMetadata?: unknown;
  /** Event number in its stream: filler events written before the run's first event make it so. */
  sequenceNumber?: number;
  eventId?: string;
}

/** A stream deletion (a hard delete: its tombstone). */
export interface DeleteSpec {
  deleted: string;
}

export type InputSpec = EventSpec | DeleteSpec;

/**
 * Partitions a run keeps in its sandbox: PROJECTION_PARTITION_CACHE=1 runs every language test with
 * each partition read back from its checkpoint whenever another was used since.
 */
const DEFAULT_PARTITION_CACHE = Number(process.env.PROJECTION_PARTITION_CACHE ?? 10_000);

export interface RunOptions {
  /** Partitions kept in the sandbox (--projection-partition-cache). */
  partitionCache?: number;
  emitEnabled?: boolean;
  /** Log records per read (the engine's readBatchSize; default: the Projection's). */
  batchSize?: number;
  /** Partition states (JSON, or null) an earlier run of the projection left in its checkpoint; their results are their states. */
  storedStates?: Record<string, string | null>;
  memoryLimitMb?: number;
  timeoutMs?: number;
  /** Events one event may emit at most (--max-projection-emits-per-event; default: no limit). */
  maxEmitsPerEvent?: number;
  /**
   * With checkpoints (the default) the projection checkpoints, and so collects the changed
   * partitions, after each batch whose events were all handled (its checkpointHandledThreshold
   * is the batch size, 1 unless given, and checkpointAfterMs 0). Without, it collects them once,
   * at the end.
   */
  checkpoints?: boolean;
  /** The projection's mode (default OneTime). A Continuous run stops, writing its checkpoint, at the end of the log. */
  mode?: ProjectionMode;
  /** Streams to read from the store after the run (results, emitted streams): see RunResult.streams. */
  streams?: string[];
}

/** An event as the store holds it after the run. */
export interface StoredEvent {
  eventType: string;
  isJson: boolean;
  /** The data as text ('' when none). */
  data: string;
  /** The metadata as text ('' when none). */
  metadata: string;
}

/** An event the engine was handed. */
export interface DeliveredEvent {
  eventType: string;
  streamId: string;
  eventNumber: number;
  eventId: string;
  /** Set for a "partition deleted" notification. */
  deletedPartition?: string;
}

export interface RunFault {
  message: string;
  /** Index in `delivered` of the event that failed. */
  index: number;
  /** The engine's isolate had been disposed when the fault was reported. */
  sandboxDisposed: boolean;
}

export interface RunResult {
  /** How far it got. */
  stage: 'definition' | 'validation' | 'processed' | 'faulted';
  /** The reason the query could not be defined. */
  definitionError?: string;
  /** §8 start-time reason, when the definition was rejected. */
  problem?: string;
  definition?: SourceDefinition;
  /** Events handed to the engine, in order. */
  delivered: DeliveredEvent[];
  /** Final state JSON per partition (stored states included). */
  states: Record<string, string | null>;
  /** Final result JSON per partition (stored results included). */
  results: Record<string, string | null>;
  /** The partitions collected after each batch ([] when none were). */
  changes: ChangedPartition[][];
  /** Each batch's outcome, its `changed` being the partitions collected after it. */
  outcomes: BatchOutcome[];
  emitted: EmittedEvent[];
  logs: string[];
  handled: number;
  processed: number;
  fault: RunFault | null;
  /** Handlers got plain (unfrozen, only the fields read) event objects (see src/projections/event-use.ts). */
  plainEvents?: boolean;
  /** definitionError ?? problem ?? fault message. */
  error?: string;
  /** Each stream of RunOptions.streams, oldest first, links not resolved ([] when it does not exist). */
  streams: Record<string, StoredEvent[]>;
}

/** Parsed final state of a partition (undefined when the partition has no entry). */
export function stateOf(run: RunResult, partition = ''): unknown {
  const text = run.states[partition];
  return text === undefined ? undefined : text === null ? null : JSON.parse(text);
}

/** Parsed final result of a partition (undefined when the partition has no entry). */
export function resultOf(run: RunResult, partition = ''): unknown {
  const text = run.results[partition];
  return text === undefined ? undefined : text === null ? null : JSON.parse(text);
}

export const PROJECTION_NAME = 'under-test';
const ID = 0;
const log = createLogger('silent');

/** Only the definition phase and the §8 check (a run over no events). */
export async function define(source: string, opts: Pick<RunOptions, 'memoryLimitMb' | 'timeoutMs'> = {}):
  Promise<{ definition?: SourceDefinition; definitionError?: string; problem?: string }> {
  const { definition, definitionError, problem } = await runProjection(source, [], opts);
  return { definition, definitionError, problem };
}

/** Writes the events, runs the query over them to the end of the log, and reports what happened. */
export async function runProjection(source: string, specs: InputSpec[] = [], opts: RunOptions = {}): Promise<RunResult> {
  const store = await Store.open({ dir: '', inMemory: true, chunkSize: 256 * 1024 * 1024, logCacheBytes: 1 << 20 });
  try {
    const fillers = await writeFillers(store, specs);
    if (opts.storedStates || fillers > 0) await leaveCheckpoint(store, opts.storedStates ?? {});
    await writeEvents(store, specs);
    const result = await run(store, source, opts);
    for (const stream of opts.streams ?? []) {
      result.streams[stream] = [...store.streamRecords(stream)].map((e) => ({
        eventType: e.eventType, isJson: e.isJson, data: e.data.toString('utf8'), metadata: e.metadata.toString('utf8'),
      }));
    }
    return result;
  } finally {
    await store.close();
  }
}

async function run(store: Store, source: string, opts: RunOptions): Promise<RunResult> {
  const result: RunResult = {
    stage: 'definition', delivered: [], states: {}, results: {}, changes: [], outcomes: [], emitted: [], logs: [],
    handled: 0, processed: 0, fault: null, streams: {},
  };
  const mode = opts.mode ?? 'OneTime';
  const end = store.headPosition;
  let engine: RecordingEngine | undefined;
  let startError: unknown;
  const projection = newProjection(store, {
    ...persisted(source, mode, { emitEnabled: opts.emitEnabled ?? false, checkpointAfterMs: 0, checkpointHandledThreshold: opts.batchSize ?? 1 }),
    checkpointsEnabled: opts.checkpoints ?? true,
  }, opts, async (p, limits, stored, partitionCache) => {
    for (const [partition, value] of Object.entries(stored)) {
      result.states[partition] = value?.[0] ?? null;
      result.results[partition] = value?.[1] ?? null;
    }
    try {
      engine = new RecordingEngine(await JsEngine.create(p.query, limits, { emitEnabled: p.config.emitEnabled, mode: p.mode, partitionCache }, stored), opts.batchSize);
      return engine;
    } catch (err) {
      startError = err;
      throw err;
    }
  });
  await projection.start();
  if (mode === 'Continuous') {
    await until(() => projection.position >= end || projection.status !== 'Running');
    await projection.stop(true);
  } else {
    await until(() => projection.status === 'Completed' || projection.status === 'Faulted');
    await projection.stop(false);
  }

  if (!engine) {
    if (!(startError instanceof DefinitionError)) throw startError ?? new Error(`harness: the projection did not start: ${projection.snapshot().stateReason}`);
    if (startError.definition) {
      result.stage = 'validation';
      result.definition = startError.definition;
      result.problem = startError.message;
    } else result.definitionError = startError.message;
    result.error = startError.message;
    return result;
  }
  result.definition = projection.definition;
  result.plainEvents = engine.plainEvents;
  result.delivered = engine.delivered;
  result.stage = 'processed';
  for (const batch of engine.batches) {
    const { outcome, changed } = batch;
    result.outcomes.push({ ...outcome, changed });
    result.changes.push(changed);
    result.emitted.push(...outcome.emitted);
    result.logs.push(...outcome.logs);
    result.handled += outcome.handled;
    result.processed += outcome.processed;
    for (const [p, state, res] of changed) {
      result.states[p] = state;
      result.results[p] = res;
    }
    if (outcome.fault && !result.fault) {
      result.fault = { message: outcome.fault.message, index: batch.first + outcome.fault.index, sandboxDisposed: batch.disposedAtFault };
    }
  }
  if (!result.fault && engine.collectError) {
    result.fault = { message: (engine.collectError as Error).message, index: result.delivered.length - 1, sandboxDisposed: engine.disposed };
  }
  if (!result.fault && projection.status === 'Faulted') {
    result.fault = { message: projection.snapshot().stateReason, index: -1, sandboxDisposed: engine.disposed };
  }
  if (result.fault) {
    result.stage = 'faulted';
    result.error = result.fault.message;
  } else if (projection.status !== (mode === 'Continuous' ? 'Stopped' : 'Completed')) {
    throw new Error(`harness: the projection ended ${projection.status}`);
  }
  await expectAnswers(projection, result);
  return result;
}

/** What was recorded at the engine is what the projection answers for each partition. */
async function expectAnswers(projection: Projection, result: RunResult): Promise<void> {
  for (const [partition, state] of Object.entries(result.states)) {
    const answer = await projection.read(partition);
    const expected = { state: state ?? '', result: result.results[partition] ?? '' };
    if (answer.state !== expected.state || answer.result !== expected.result) {
      throw new Error(`harness: partition '${partition}' answers ${JSON.stringify(answer)}, recorded ${JSON.stringify(expected)}`);
    }
  }
}

/** The production engine, with a record of what crossed between it and the Projection. */
class RecordingEngine implements Engine {
  readonly delivered: DeliveredEvent[] = [];
  /** Each batch: its outcome, the index of its first event, the partitions collected after it. */
  readonly batches: { outcome: BatchOutcome; first: number; changed: ChangedPartition[]; disposedAtFault: boolean }[] = [];
  collectError: unknown;
  /** Events of the batches encoded and not yet processed (the Projection encodes one ahead). */
  private readonly encoded: DeliveredEvent[][] = [];

  constructor(private readonly inner: JsEngine, readonly readBatchSize: number | undefined) {}

  get definition(): SourceDefinition {
    return this.inner.definition;
  }

  get disposed(): boolean {
    return this.inner.disposed;
  }

  get plainEvents(): boolean {
    return this.inner.plainEvents;
  }

  encode(batch: Selected[]): unknown {
    this.encoded.push(batch.map(({ event, deletedPartition }) => ({
      eventType: event.eventType, streamId: event.streamId, eventNumber: event.eventNumber, eventId: formatUuid(event.eventId),
      ...(deletedPartition !== undefined ? { deletedPartition } : {}),
    })));
    return this.inner.encode(batch);
  }

  async process(encoded: unknown, _collect?: boolean, lookup?: PartitionLookup): Promise<BatchOutcome> {
    const first = this.delivered.length;
    this.delivered.push(...this.encoded.shift()!);
    const outcome = await this.inner.process(encoded, false, lookup);
    this.batches.push({ outcome, first, changed: [], disposedAtFault: outcome.fault !== null && this.inner.disposed });
    return outcome;
  }

  async collect(): Promise<ChangedPartition[]> {
    try {
      const changed = await this.inner.collect();
      // What the language reports of a partition; whether it was new is the host's bookkeeping.
      this.batches[this.batches.length - 1]?.changed.push(...changed.map(([p, state, result, resultChanged]): ChangedPartition => [p, state, result, resultChanged]));
      return changed;
    } catch (err) {
      this.collectError ??= err;
      throw err;
    }
  }

  partition(partition: string): Promise<StoredPartition> {
    return this.inner.partition(partition);
  }

  dispose(): void {
    this.inner.dispose();
  }
}

function persisted(query: string, mode: ProjectionMode, config: Partial<PersistedProjection['config']>): PersistedProjection {
  return {
    name: PROJECTION_NAME, handlerType: 'JS', mode, query, enabled: true, checkpointsEnabled: true, epoch: 0, version: 0, runAs: null,
    config: { ...DEFAULT_CONFIG, ...config },
  };
}

function newProjection(store: Store, p: PersistedProjection, opts: RunOptions,
  createEngine: ConstructorParameters<typeof Projection>[6]): Projection {
  return new Projection(p, ID, store, log, {
    memoryLimitMb: opts.memoryLimitMb ?? 32, executionTimeoutMs: opts.timeoutMs ?? 1000, maxStateBytes: 0,
    partitionCache: opts.partitionCache ?? DEFAULT_PARTITION_CACHE, maxEmitsPerEvent: opts.maxEmitsPerEvent ?? 0,
  }, (id) => id === ID, createEngine);
}

async function until(done: () => boolean): Promise<void> {
  while (!done()) await new Promise((resolve) => setTimeout(resolve, 1));
}

const SEED_STREAM = '$harness-seed';
const SEED_QUERY = `fromStream('${SEED_STREAM}').partitionBy(function (e) { return e.data.partition; })
  .when({ $any: function (s, e) { return e.data.state; } })`;

/**
 * An earlier run of the projection, with its checkpoint: it leaves the given partition states,
 * and the log position after everything written so far (the fillers), where the run resumes.
 */
async function leaveCheckpoint(store: Store, states: Record<string, string | null>): Promise<void> {
  for (const [partition, state] of Object.entries(states)) {
    await store.append(SEED_STREAM, ExpectedVersion.any, [proposed({ type: 'Seed', data: { partition, state: state === null ? null : JSON.parse(state) } })]);
  }
  const end = store.headPosition;
  const seed = newProjection(store, persisted(SEED_QUERY, 'Continuous', {}), {}, (p, limits, stored, partitionCache) =>
    JsEngine.create(p.query, limits, { emitEnabled: p.config.emitEnabled, mode: p.mode, partitionCache }, stored));
  await seed.start();
  await until(() => seed.position >= end || seed.status === 'Faulted');
  await seed.stop(true);
  if (seed.status === 'Faulted') throw new Error(`harness: the earlier run faulted: ${seed.snapshot().stateReason}`);
}

/** Writes the filler events that give events their requested numbers; returns how many. */
async function writeFillers(store: Store, specs: InputSpec[]): Promise<number> {
  const counts = new Map<string, number>();
  let fillers = 0;
  for (const spec of specs) {
    const stream = isDelete(spec) ? spec.deleted : spec.stream ?? 'stream-1';
    const count = counts.get(stream) ?? 0;
    const wanted = isDelete(spec) ? count : spec.sequenceNumber ?? count;
    if (wanted < count) throw new Error(`harness: event ${wanted} of ${stream} is written after ${count} others`);
    for (let n = count; n < wanted; n++, fillers++) {
      await store.append(stream, ExpectedVersion.any, [proposed({ type: 'Filler', raw: null })]);
    }
    counts.set(stream, wanted + 1);
  }
  return fillers;
}

/** Writes the events of a run into a store (the debugger's tests write the same events for their own runs). */
export async function writeEvents(store: Store, specs: InputSpec[]): Promise<void> {
  for (const spec of specs) {
    if (isDelete(spec)) {
      await store.deleteStream(spec.deleted, ExpectedVersion.any, true);
      continue;
    }
    const stream = spec.stream ?? 'stream-1';
    const { firstEventNumber } = await store.append(stream, ExpectedVersion.any, [proposed(spec)]);
    if (spec.via !== undefined) {
      await store.append(spec.via, ExpectedVersion.any, [{
        eventId: newUuid(), eventType: LINK_EVENT_TYPE, isJson: false, data: Buffer.from(`${firstEventNumber}@${stream}`),
        metadata: Buffer.from(rawOf(spec.linkMetadata) ?? ''),
      }]);
    } else if (spec.linkMetadata !== undefined) {
      throw new Error('harness: link metadata needs a link: give the stream it is in (via)');
    }
  }
}

function proposed(spec: EventSpec): ProposedEvent {
  const isJson = spec.isJson ?? spec.raw === undefined;
  const data = spec.raw !== undefined ? spec.raw : JSON.stringify(spec.data ?? {});
  const eventId = spec.eventId === undefined ? newUuid() : parseUuid(spec.eventId);
  if (!eventId) throw new Error(`harness: ${spec.eventId} is not a UUID`);
  return {
    eventId, eventType: spec.type ?? 'E', isJson, dataIsJson: isJson && isJsonText(data), data: Buffer.from(data ?? ''),
    metadata: Buffer.from(rawOf(spec.metadata) ?? ''),
  };
}

function rawOf(v: unknown): string | null {
  if (v === undefined || v === null) return null;
  return typeof v === 'string' ? v : JSON.stringify(v);
}

function isDelete(s: InputSpec): s is DeleteSpec {
  return typeof (s as DeleteSpec).deleted === 'string';
}

function isJsonText(text: string | null): boolean {
  if (text === null || text.trim() === '') return false;
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}
