import { formatUuid, LINK_EVENT_TYPE, type EventRecord, type Store } from '../store/index.js';
import { JsEngine } from './engine.js';
import { DefinitionError, type EmittedEvent } from './sandbox.js';
import { eventFilterOf, type EventFilter } from './definition.js';
import type { SourceDefinition } from './language/source-definition.js';
import type { ProjectionMode, RuntimeLimits } from './model.js';
import { ProjectionError } from './manager.js';
import { handlerFailure } from './projection.js';
import { stateSizeProblem } from './partition-cache.js';
import { selectEvent, type Selected } from './source.js';
import { StreamSourceReader } from './stream-source.js';
import { validateQuery } from './validate.js';

// The projection debugger (POST /projections/debug, docs/projection-debugger.md): a query run
// over a few chosen events in a sandbox made exactly as a running projection's (JsEngine: the same
// language modules, memory and CPU limits, emit setting and event delivery), one event per sandbox
// call, reporting for each event what ran (language/execution.js traces it), the partition's
// state before and after (the shared state too, and the result), and what it emitted and logged.
// It writes nothing: its events come from store reads, and what the handlers emit is only
// reported. A run is bounded in events, wall time, report bytes and concurrent runs, and its
// isolate is disposed whatever happens.

/** Events one run handles at most (the first N of a source, or a stream range). */
export const MAX_DEBUG_EVENTS = 1000;
export const DEFAULT_DEBUG_EVENTS = 20;
/** Wall time of one run, reading included; the steps so far are answered, marked truncated. */
const RUN_BUDGET_MS = 10_000;
/** Bytes of states, events and emits one report holds at most (a 1 MB state over 1,000 steps would be 2 GB). */
const MAX_REPORT_BYTES = 16 * 1024 * 1024;
/** Runs at a time: each holds an isolate of up to the node's projection memory limit. */
const MAX_CONCURRENT_RUNS = 2;
/** Log records read per page while looking for a source's events. */
const READ_PAGE = 1000;

/** Which events a run handles: the first N its query's source reads, or a range of one stream. */
export type DebugEvents = { first: number } | { stream: string; from: number; count: number };

/** What a run is: the query and the settings of the projection it would be. */
export interface DebugSettings {
  query: string;
  /** The projection's name (in fault reasons); a new query's is `debug`. */
  name: string;
  emitEnabled: boolean;
  mode: ProjectionMode;
  /** The projection's own CPU limit per call, when it has one. */
  executionTimeoutMs: number | null;
}

/** An event as a step shows it; data and metadata are the stored texts (JSON or not, as the flags say). */
export interface DebugEvent {
  streamId: string;
  eventNumber: number;
  eventType: string;
  eventId: string;
  isJson: boolean;
  data: string;
  dataIsJson: boolean;
  metadata: string | null;
  linkMetadata: string | null;
  /** Log position of the record read: the link's, for an event read through one. */
  position: number;
  /** The link it was read through. */
  link: { streamId: string; eventNumber: number } | null;
}

/** One event's step. State texts are JSON (the no-handler rule's state may be any text). */
export interface DebugStep {
  event: DebugEvent;
  /** Its partition; null when it was skipped. */
  partition: string | null;
  /** The handler it reached: an event type, `$any`, `$deleted`; null for none. */
  handler: string | null;
  /** Every query function called for it, in order. */
  calls: string[];
  stateBefore?: string | null;
  stateAfter?: string | null;
  sharedStateBefore?: string | null;
  sharedStateAfter?: string | null;
  result?: string | null;
  emits: EmittedEvent[];
  logs: string[];
  /** Why the query did not handle it. */
  skipped?: string;
  /** What the query threw (or the limit it met): the run stops here, as the projection would fault. */
  error?: string;
}

export interface DebugReport {
  name: string;
  mode: ProjectionMode;
  emitEnabled: boolean;
  biState: boolean;
  producesResults: boolean;
  steps: DebugStep[];
  /** Why the run stopped before its events ran out (its time or report budget). */
  truncated?: string;
  /** The fault a running projection would have at the failing step. */
  fault?: string;
}

/** An event picked for a run, or one it reads but does not handle (a stream range), with the reason. */
type Picked = { selected: Selected } | { record: EventRecord; skipped: string };

export class ProjectionDebugger {
  private running = 0;

  constructor(private readonly store: Store, private readonly limits: RuntimeLimits) {}

  /** Checks and compiles the query (a syntax or definition error is a 400 with its reason); dispose() the run. */
  async prepare(settings: DebugSettings): Promise<DebugRun> {
    validateQuery(settings.query);
    if (this.running >= MAX_CONCURRENT_RUNS) {
      throw new ProjectionError('PROJECTION_BUSY', `The node runs ${MAX_CONCURRENT_RUNS} debug runs already; try again shortly.`);
    }
    this.running++;
    try {
      const engine = await JsEngine.create(settings.query, {
        memoryLimitMb: this.limits.memoryLimitMb,
        timeoutMs: settings.executionTimeoutMs ?? this.limits.executionTimeoutMs,
        maxEmitsPerEvent: this.limits.maxEmitsPerEvent,
      }, { emitEnabled: settings.emitEnabled, mode: settings.mode, partitionCache: 0, trace: true }, {});
      return new DebugRun(this.store, engine, settings, this.limits.maxStateBytes, () => { this.running--; });
    } catch (err) {
      this.running--;
      if (err instanceof DefinitionError) throw new ProjectionError('PROJECTION_REFUSED', err.message);
      throw err;
    }
  }
}

/** One run: its compiled query, the events it reads, its steps. */
export class DebugRun {
  private readonly filter: EventFilter;
  private readonly deadline = performance.now() + RUN_BUDGET_MS;
  private released = false;

  constructor(private readonly store: Store, private readonly engine: JsEngine, private readonly settings: DebugSettings,
    private readonly maxStateBytes: number, private readonly release: () => void) {
    this.filter = eventFilterOf(engine.definition);
  }

  get definition(): SourceDefinition {
    return this.engine.definition;
  }

  /** Disposes the isolate (once). */
  dispose(): void {
    if (this.released) return;
    this.released = true;
    this.engine.dispose();
    this.release();
  }

  /** The first `count` events the query's source reads, from the start of the log (404 when none of its streams exists). */
  async sourceEvents(count: number): Promise<Picked[]> {
    const def = this.definition;
    const sources = [...def.streams, ...def.categories.map((c) => `$ce-${c}`)];
    if (!def.allStreams && sources.every((s) => !this.store.streamInfo(s))) {
      throw new ProjectionError('PROJECTION_NOT_FOUND', `None of the streams ${sources.join(', ')} exists.`);
    }
    const reader = def.allStreams ? undefined : new StreamSourceReader(this.store, sources);
    const picked: Picked[] = [];
    let position = 0;
    while (picked.length < count && !this.overTime()) {
      const page = reader ? reader.read(position, READ_PAGE) : this.store.readAllForward(position, READ_PAGE, undefined, true);
      for (const record of page.records) {
        const selected = selectEvent(def, this.filter, this.store, record);
        if (selected) picked.push({ selected });
        if (picked.length >= count) break;
      }
      if (page.isEnd || page.records.length === 0) break;
      position = page.nextPosition;
      await new Promise<void>((resolve) => setImmediate(resolve)); // a long scan of the log lets requests in
    }
    return picked;
  }

  /**
   * A stream's records (read by the caller, links unresolved) as the query would read them were
   * the stream its source: links resolved, the event types it handles, content validation.
   */
  streamEvents(stream: string, records: EventRecord[]): Picked[] {
    const def = this.definition;
    const category = def.categories.find((c) => stream === `$ce-${c}`);
    const asSource: SourceDefinition = category !== undefined
      ? { ...def, allStreams: false, streams: [], categories: [category] }
      : { ...def, allStreams: false, streams: [stream], categories: [] };
    return records.map((record) => {
      const selected = selectEvent(asSource, this.filter, this.store, record);
      return selected ? { selected } : { record, skipped: this.skipReason(record) };
    });
  }

  private skipReason(record: EventRecord): string {
    let event = record;
    if (record.eventType === LINK_EVENT_TYPE) {
      const resolved = this.store.resolveLink(record).event;
      if (!resolved) return 'It is a link to an event that no longer exists.';
      event = resolved;
    }
    if (!this.filter.all && !this.filter.types.has(event.eventType)) return `The query has no handler for events of type '${event.eventType}'.`;
    if (event.isJson && !event.dataIsJson) return 'It is flagged JSON but its data is not JSON: the reader drops it (content validation).';
    return 'The query does not read it.';
  }

  /** Runs the picked events one by one; stops at the first error, or when the run's time or report budget is spent. */
  async run(picked: Picked[]): Promise<DebugReport> {
    const def = this.definition;
    const report: DebugReport = {
      name: this.settings.name, mode: this.settings.mode, emitEnabled: this.settings.emitEnabled,
      biState: def.biState, producesResults: def.producesResults, steps: [],
    };
    /** Each partition's state after its last step (at most one per step). */
    const states = new Map<string, string | null>();
    let shared: string | null = null;
    let bytes = 0;
    for (const item of picked) {
      if (this.overTime()) {
        report.truncated = `The run took its ${RUN_BUDGET_MS / 1000} s: ${report.steps.length} of ${picked.length} events were run.`;
        break;
      }
      if ('skipped' in item) {
        report.steps.push({ event: debugEvent(item.record, undefined), partition: null, handler: null, calls: [], emits: [], logs: [], skipped: item.skipped });
        continue;
      }
      const { selected } = item;
      const outcome = await this.engine.process(this.engine.encode([selected]));
      const trace = outcome.trace?.[0] ?? { partition: null, handler: null, calls: [] };
      const step: DebugStep = {
        event: debugEvent(selected.event, selected.link), partition: trace.partition, handler: trace.handler, calls: trace.calls,
        emits: outcome.emitted, logs: outcome.logs,
      };
      let error = outcome.fault?.message;
      if (outcome.emitted.length > 0 && !this.settings.emitEnabled) error ??= "'emit' is not allowed by the projection/configuration/mode";
      const p = trace.partition;
      if (p === null && error === undefined) step.skipped = def.byCustomPartitions ? 'partitionBy gave it no partition: it is skipped.' : 'No handler ran for it.';
      if (p !== null) {
        step.stateBefore = states.get(p) ?? null;
        if (def.biState) step.sharedStateBefore = shared;
        if (error === undefined) {
          try {
            const [state, result] = (await this.engine.partition(p)) ?? [null, null];
            step.stateAfter = state;
            if (def.producesResults) step.result = result;
            states.set(p, state);
            if (def.biState) step.sharedStateAfter = shared = ((await this.engine.partition('')) ?? [null])[0];
            error = stateSizeProblem(this.settings.name, p, state, def.producesResults ? result : state, this.maxStateBytes);
          } catch (err) {
            error = (err as Error).message; // a state that cannot be serialised (NaN, a cycle): the projection faults on it too
          }
        }
      }
      if (error !== undefined) step.error = error;
      report.steps.push(step);
      if (error !== undefined) {
        report.fault = handlerFailure(this.settings.name, selected.link?.position ?? selected.event.position, error);
        break;
      }
      bytes += stepBytes(step);
      if (bytes > MAX_REPORT_BYTES) {
        report.truncated = `The report reached ${MAX_REPORT_BYTES / 1024 / 1024} MiB: ${report.steps.length} of ${picked.length} events were run.`;
        break;
      }
    }
    return report;
  }

  private overTime(): boolean {
    return performance.now() > this.deadline;
  }
}

function debugEvent(event: EventRecord, link: EventRecord | undefined): DebugEvent {
  return {
    streamId: event.streamId, eventNumber: event.eventNumber, eventType: event.eventType, eventId: formatUuid(event.eventId),
    isJson: event.isJson, data: event.data.toString('utf8'), dataIsJson: event.dataIsJson,
    metadata: event.metadata.length > 0 ? event.metadata.toString('utf8') : null,
    linkMetadata: link && link.metadata.length > 0 ? link.metadata.toString('utf8') : null,
    position: (link ?? event).position,
    link: link ? { streamId: link.streamId, eventNumber: link.eventNumber } : null,
  };
}

/** About what a step weighs in the answer. */
function stepBytes(step: DebugStep): number {
  let n = step.event.data.length + (step.event.metadata?.length ?? 0) + 200;
  for (const text of [step.stateBefore, step.stateAfter, step.sharedStateBefore, step.sharedStateAfter, step.result]) n += text?.length ?? 0;
  for (const e of step.emits) n += e.data.length + 100;
  for (const line of step.logs) n += line.length;
  return n;
}
