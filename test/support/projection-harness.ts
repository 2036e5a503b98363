// A small in-memory host for the projection sandbox, for language-level unit tests.
//
// It plays the part the projection runtime plays around the sandbox: runs the definition
// phase, applies the start-time validation (definitionProblem), turns simple event
// descriptions into SandboxEvents, filters them the way the reader does (event-type filter
// from eventFilterOf, "content type validation" of JSON events, $deleted notifications),
// feeds them in batches, and folds the reported changes into final states and results.

import { DefinitionError, Sandbox, type BatchOutcome, type ChangedPartition, type EmittedEvent } from '../../src/projections/sandbox.js';
import { encodeSandboxEvents, type SandboxEvent } from './sandbox-events.js';
import { definitionProblem, eventFilterOf, needsRawBody } from '../../src/projections/definition.js';
import type { SourceDefinition } from '../../src/projections/language/source-definition.js';

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
  /** Metadata of the link the event was read through: an object, raw text, or absent. */
  linkMetadata?: unknown;
  /** Event number in its stream (default: 0, 1, 2... per stream). */
  sequenceNumber?: number;
  eventId?: string;
  /** The foreachStream partition (default: `$o` of the link metadata, x for `$$x`, else the stream). */
  partitionStream?: string;
  category?: string | null;
}

/** A stream deletion (hard delete tombstone or soft delete). */
export interface DeleteSpec {
  deleted: string;
}

export type InputSpec = EventSpec | DeleteSpec;

export interface RunOptions {
  emitEnabled?: boolean;
  /** Events per sandbox.process call (default: all in one batch). */
  batchSize?: number;
  /** Stored partition states passed to start(): {partition: [stateJson|null, resultJson|null]}. */
  storedStates?: Record<string, [string | null, string | null]>;
  memoryLimitMb?: number;
  timeoutMs?: number;
  /** Drop JSON events whose body is empty or not JSON, as the reader does (default true). */
  contentValidation?: boolean;
  /**
   * How JSON data crosses into the sandbox: 'raw' sends `bodyRaw` text; 'spliced' sends one
   * JSON text per batch with the event's data spliced in as `body` (what the runtime does).
   */
  delivery?: 'raw' | 'spliced';
  /**
   * When changed partitions are serialised: after every batch ('batch', process(.., true)), or
   * once after the last batch ('end', process(.., false) then collect(), like a checkpoint).
   */
  collect?: 'batch' | 'end';
}

export interface RunFault {
  message: string;
  /** Index in `delivered` of the event that failed. */
  index: number;
  /** The sandbox's isolate had been disposed when the fault was reported. */
  sandboxDisposed: boolean;
}

export interface RunResult {
  /** How far it got. */
  stage: 'definition' | 'validation' | 'processed' | 'faulted';
  /** Message of the DefinitionError when the query could not be defined. */
  definitionError?: string;
  /** §8 start-time reason, when the definition was rejected. */
  problem?: string;
  definition?: SourceDefinition;
  /** Events actually handed to the sandbox, in order. */
  delivered: SandboxEvent[];
  /** Final state JSON per partition (stored states included). */
  states: Record<string, string | null>;
  /** Final result JSON per partition (stored results included). */
  results: Record<string, string | null>;
  /** `changed` of every batch, in order. */
  changes: ChangedPartition[][];
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

let idCounter = 0;
function nextEventId(): string {
  idCounter++;
  return `00000000-0000-4000-8000-${idCounter.toString(16).padStart(12, '0')}`;
}

function rawOf(v: unknown): string | null {
  if (v === undefined || v === null) return null;
  return typeof v === 'string' ? v : JSON.stringify(v);
}

function isDelete(s: InputSpec): s is DeleteSpec {
  return typeof (s as DeleteSpec).deleted === 'string';
}

function isValidJson(text: string | null): boolean {
  if (text === null || text.trim() === '') return false;
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** Turns descriptions into SandboxEvents (numbering events per stream), before any filtering. */
export function toSandboxEvents(specs: InputSpec[], def: SourceDefinition): SandboxEvent[] {
  const seq = new Map<string, number>();
  const nextSeq = (stream: string, explicit?: number) => {
    const n = explicit ?? seq.get(stream) ?? 0;
    seq.set(stream, n + 1);
    return n;
  };
  const out: SandboxEvent[] = [];
  for (const spec of specs) {
    if (isDelete(spec)) {
      if (def.handlesDeletedNotifications) {
        out.push({
          eventType: '$streamDeleted', streamId: spec.deleted, sequenceNumber: Number.MAX_SAFE_INTEGER,
          eventId: nextEventId(), isJson: false, bodyRaw: null, metadataRaw: null, linkMetadataRaw: null,
          partitionStream: spec.deleted, deletedPartition: spec.deleted,
        });
      } else {
        // Without $deleted the tombstone is delivered as an ordinary event.
        out.push({
          eventType: '$streamDeleted', streamId: spec.deleted, sequenceNumber: nextSeq(spec.deleted),
          eventId: nextEventId(), isJson: false, bodyRaw: '', metadataRaw: null, linkMetadataRaw: null,
          partitionStream: spec.deleted,
        });
      }
      continue;
    }
    const stream = spec.stream ?? 'stream-1';
    const isJson = spec.isJson ?? spec.raw === undefined;
    const bodyRaw = spec.raw !== undefined ? spec.raw : JSON.stringify(spec.data ?? {});
    const link = spec.linkMetadata;
    const linkOrigin = link && typeof link === 'object' && typeof (link as Record<string, unknown>).$o === 'string'
      ? (link as Record<string, string>).$o : undefined;
    const partitionStream = spec.partitionStream ?? linkOrigin ?? (stream.startsWith('$$') ? stream.slice(2) : stream);
    const event: SandboxEvent = {
      eventType: spec.type ?? 'E', streamId: stream, sequenceNumber: nextSeq(stream, spec.sequenceNumber),
      eventId: spec.eventId ?? nextEventId(), isJson, bodyRaw,
      metadataRaw: rawOf(spec.metadata), linkMetadataRaw: rawOf(spec.linkMetadata), partitionStream,
    };
    if (spec.category !== undefined) event.category = spec.category;
    out.push(event);
  }
  return out;
}

/** What the reader hands to the sandbox: the event-type filter and content validation. */
export function deliverable(events: SandboxEvent[], def: SourceDefinition, contentValidation = true): SandboxEvent[] {
  const filter = eventFilterOf(def);
  return events.filter((e) => {
    if (e.deletedPartition !== undefined) return def.handlesDeletedNotifications;
    if (!filter.all && !filter.types.has(e.eventType)) return false;
    if (contentValidation && e.isJson && !isValidJson(e.bodyRaw ?? null)) return false;
    return true;
  });
}

/** The batch as one JSON text, JSON data spliced in as `body` unless the query needs raw text (the runtime's encoding). */
export function splicedBatch(events: SandboxEvent[], rawBody = false): string {
  return encodeSandboxEvents(events, !rawBody);
}

/** Only the definition phase and the §8 check. */
export async function define(source: string, opts: Pick<RunOptions, 'memoryLimitMb' | 'timeoutMs'> = {}):
  Promise<{ definition?: SourceDefinition; definitionError?: string; problem?: string }> {
  let sandbox: Sandbox;
  try {
    sandbox = await Sandbox.create(source, { memoryLimitMb: opts.memoryLimitMb ?? 32, timeoutMs: opts.timeoutMs ?? 1000 });
  } catch (err) {
    if (err instanceof DefinitionError) return { definitionError: err.message };
    throw err;
  }
  try {
    return { definition: sandbox.definition, problem: definitionProblem(sandbox.definition) };
  } finally {
    sandbox.dispose();
  }
}

/** Defines, validates, starts and feeds the events; always disposes the sandbox. */
export async function runProjection(source: string, specs: InputSpec[] = [], opts: RunOptions = {}): Promise<RunResult> {
  const result: RunResult = {
    stage: 'definition', delivered: [], states: {}, results: {}, changes: [], outcomes: [], emitted: [], logs: [],
    handled: 0, processed: 0, fault: null,
  };
  let sandbox: Sandbox;
  try {
    sandbox = await Sandbox.create(source, { memoryLimitMb: opts.memoryLimitMb ?? 32, timeoutMs: opts.timeoutMs ?? 1000 });
  } catch (err) {
    if (!(err instanceof DefinitionError)) throw err;
    result.definitionError = err.message;
    result.error = err.message;
    return result;
  }
  try {
    const def = sandbox.definition;
    result.definition = def;
    const problem = definitionProblem(def);
    if (problem !== undefined) {
      result.stage = 'validation';
      result.problem = problem;
      result.error = problem;
      return result;
    }
    const stored = opts.storedStates ?? {};
    for (const [p, [state, res]] of Object.entries(stored)) {
      result.states[p] = state;
      result.results[p] = res;
    }
    result.plainEvents = (await sandbox.start({ emitEnabled: opts.emitEnabled ?? false }, stored)).plainEvents;
    const delivered = deliverable(toSandboxEvents(specs, def), def, opts.contentValidation ?? true);
    result.delivered = delivered;
    const size = Math.max(1, opts.batchSize ?? (delivered.length || 1));
    result.stage = 'processed';
    for (let offset = 0; offset < delivered.length; offset += size) {
      const batch = delivered.slice(offset, offset + size);
      const deferred = opts.collect === 'end';
      const outcome = await sandbox.process(opts.delivery === 'spliced' ? splicedBatch(batch, needsRawBody(sandbox.definition, source)) : encodeSandboxEvents(batch), !deferred);
      if (deferred && !outcome.fault && offset + size >= delivered.length) {
        try {
          outcome.changed = await sandbox.collect();
        } catch (err) {
          outcome.fault = { message: (err as Error).message, index: batch.length - 1 };
        }
      }
      result.outcomes.push(outcome);
      result.changes.push(outcome.changed);
      result.emitted.push(...outcome.emitted);
      result.logs.push(...outcome.logs);
      result.handled += outcome.handled;
      result.processed += outcome.processed;
      for (const [p, state, res] of outcome.changed) {
        result.states[p] = state;
        result.results[p] = res;
      }
      if (outcome.fault) {
        result.stage = 'faulted';
        result.fault = { message: outcome.fault.message, index: offset + outcome.fault.index, sandboxDisposed: sandbox.disposed };
        result.error = outcome.fault.message;
        break;
      }
    }
    return result;
  } finally {
    sandbox.dispose();
  }
}
