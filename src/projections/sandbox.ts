import { readFileSync } from 'node:fs';
import ivm from 'isolated-vm';
import type { SourceDefinition } from './language/source-definition.js';
import { analyseEventUse, type EventUse } from './event-use.js';
import { LoopSlices } from '../loop-slices.js';

// One isolate per running projection: a memory limit for the whole isolate and a CPU time
// limit per call. The projection language (language/prelude.js and the modules it imports) is
// evaluated in it first, then the query. The host crosses the boundary once per batch (one JSON
// text in, one out); handlers never call back into the host.

export interface EmittedEvent {
  streamId: string;
  eventType: string;
  data: string;
  isJson: boolean;
  metadata: Record<string, unknown>;
}

/** [partition, state JSON or null, result JSON or null, result changed, first stored now (a new partition)] */
export type ChangedPartition = [string, string | null, string | null, boolean, boolean?];

/** A partition's stored [state JSON, result JSON], or null when nothing is stored for it. */
export type StoredPartition = [string | null, string | null] | null;

/** Reads the stored states of partitions that are not resident in the sandbox. */
export type PartitionLookup = (partitions: string[]) => Record<string, StoredPartition>;

/** What ran for one event (a run started with `trace`, the debugger's): see language/execution.js. */
export interface EventTrace {
  /** Its partition; null when it reached no handler or partitionBy gave it none (it was skipped). */
  partition: string | null;
  /** The handler key it reached (an event type, `$any`, `$deleted`); null for none. */
  handler: string | null;
  /** Every query function called for it, in order (`partitionBy`, `$init`, `$initShared`, `$created`, the handler). */
  calls: string[];
}

export interface BatchOutcome {
  emitted: EmittedEvent[];
  changed: ChangedPartition[];
  logs: string[];
  handled: number;
  /** Partitions whose state changed since the last collection (not yet serialised). */
  touched?: number;
  /** Events consumed before a fault (all of them when there was none). */
  processed: number;
  fault: { message: string; index: number } | null;
  /** Events a system projection skipped, with the store's reason (none for sandboxed projections). */
  skipped?: string[];
  /** Results per event (§11), in event order: [partition, result JSON, or null when it became null]. */
  results?: [string, string | null][];
  /** Partitions resident in the sandbox after the batch. */
  resident?: number;
  /** With `trace` started: what ran for each event, in event order (up to and including a failing one). */
  trace?: EventTrace[];
}

export interface SandboxLimits {
  memoryLimitMb: number;
  /** CPU time allowed for one call (the definition run, or one batch). */
  timeoutMs: number;
}

/** The exports of language/prelude.js the host calls. */
const ENTRY_POINTS = ['closeDefinition', 'start', 'process', 'supply', 'collect', 'partition'] as const;
type EntryPoints = Record<(typeof ENTRY_POINTS)[number], ivm.Reference<(...args: unknown[]) => string>>;

/**
 * The language's module files, read once per process from next to this file (src/ under the
 * tests, dist/ where tsc emits them for `npm start`); each isolate compiles its own modules.
 */
const LANGUAGE = new URL('./language/', import.meta.url);
const languageTexts = new Map<string, string>();

/** @param file a name in the language folder, as imported ('./name.js') */
function languageText(file: string): string {
  let text = languageTexts.get(file);
  if (text === undefined) languageTexts.set(file, text = readFileSync(new URL(file, LANGUAGE), 'utf8'));
  return text;
}

/**
 * Evaluates language/prelude.js and the modules it imports (all in that one folder, imported as
 * './name.js') in the context; returns its entry points. They are exports, not globals: the
 * query is a script, which cannot import, so it cannot call them (e.g. to turn emit on).
 */
async function loadLanguage(isolate: ivm.Isolate, context: ivm.Context): Promise<EntryPoints> {
  const modules = new Map<string, Promise<ivm.Module>>();
  const load = (file: string): Promise<ivm.Module> => {
    let module = modules.get(file);
    if (!module) {
      module = isolate.compileModule(languageText(file), { filename: `language/${file.replace(/^\.\//, '')}` });
      modules.set(file, module);
    }
    return module;
  };
  const prelude = await load('./prelude.js');
  await prelude.instantiate(context, (specifier) => load(specifier));
  await prelude.evaluate();
  const entry = {} as EntryPoints;
  for (const name of ENTRY_POINTS) entry[name] = await prelude.namespace.get(name, { reference: true }) as EntryPoints[typeof name];
  return entry;
}

/** The query could not be defined, or its definition cannot run: the reason is the message. */
export class DefinitionError extends Error {
  constructor(message: string,
    /** What the query declared, when it ran but its definition cannot run (definitionProblem). */
    readonly definition?: SourceDefinition) {
    super(message);
  }
}

export class Sandbox {
  /** Partitions resident in the isolate, as its last batch or collection reported. */
  resident = 0;

  private constructor(
    private readonly isolate: ivm.Isolate,
    private readonly entry: EntryPoints,
    private readonly limits: SandboxLimits,
    readonly definition: SourceDefinition,
    /** What the query can observe of event objects (found from its source). */
    readonly eventUse: EventUse,
  ) {}

  /** Runs the query once to record its definition. */
  static async create(source: string, limits: SandboxLimits): Promise<Sandbox> {
    const isolate = new ivm.Isolate({ memoryLimit: limits.memoryLimitMb });
    try {
      const context = await isolate.createContext();
      const entry = await loadLanguage(isolate, context);
      try {
        const script = await isolate.compileScript(source, { filename: 'query.js' });
        await script.run(context, { timeout: limits.timeoutMs });
      } catch (err) {
        throw new DefinitionError(describe(err));
      }
      const definitionJson = await entry.closeDefinition.apply(undefined, [], { result: { copy: true }, timeout: limits.timeoutMs }) as string;
      return new Sandbox(isolate, entry, limits, JSON.parse(definitionJson) as SourceDefinition, analyseEventUse(source));
    } catch (err) {
      if (!isolate.isDisposed) isolate.dispose();
      throw err;
    }
  }

  /**
   * Switches to the execution phase with the stored partition states ({partition: [state, result]}).
   * `plainEvents`: handlers get unfrozen event objects with only the fields they read (see event-use.ts).
   */
  async start(config: { emitEnabled: boolean; resultsPerEvent: boolean; partitionCache: number; maxEmitsPerEvent: number; trace?: boolean },
    states: Record<string, StoredPartition>): Promise<{ plainEvents: boolean }> {
    const text = await this.entry.start.apply(undefined, [JSON.stringify({ ...config, eventUse: this.eventUse }), JSON.stringify(states)],
      { arguments: { copy: true }, result: { copy: true }, timeout: this.limits.timeoutMs }) as string;
    return JSON.parse(text) as { plainEvents: boolean };
  }

  /**
   * Handles one batch (the wire format of wire.ts). A timeout or the memory limit becomes a fault at the batch's first event.
   * With `collect` false the changed partitions are left for collect() (done at checkpoints).
   * Partitions of the batch that are not resident (with a partition cache) are read with `lookup`
   * and handed in before the batch runs: one more call, only for batches that need it.
   * Many emitted events come after the outcome in pages (language/execution.js), parsed here
   * between turns of the event loop.
   */
  async process(batch: string, collect = true, lookup: PartitionLookup = noneStored): Promise<BatchOutcome> {
    try {
      const options = { arguments: { copy: true }, result: { copy: true }, timeout: this.limits.timeoutMs } as const;
      // Each text goes in wrapped in an array: isolated-vm hands a string of 1 KB or more to the
      // isolate as an external string, whose memory the isolate's GC does not see, so dead batches
      // piled up until its heap filled for other reasons (measured: ~10 MB per isolate, 200 MB for
      // twenty projections). Inside an array it is serialised and arrives as a heap string.
      let text = await this.entry.process.apply(undefined, [[batch], collect], options) as string;
      if (text.startsWith('{"needs":')) {
        const { needs } = JSON.parse(text) as { needs: string[] };
        text = await this.entry.supply.apply(undefined, [[JSON.stringify(lookup(needs))]], options) as string;
      }
      const pages = text.indexOf('\n');
      const outcome = JSON.parse(pages < 0 ? text : text.slice(0, pages)) as BatchOutcome;
      if (pages >= 0) outcome.emitted = await emittedPages(text, pages + 1);
      if (outcome.resident !== undefined) this.resident = outcome.resident;
      return outcome;
    } catch (err) {
      return { emitted: [], changed: [], logs: [], handled: 0, processed: 0, fault: { message: describe(err), index: 0 } };
    }
  }

  /** Serialises the partitions changed since the last collection. */
  async collect(): Promise<ChangedPartition[]> {
    try {
      const text = await this.entry.collect.apply(undefined, [], { result: { copy: true }, timeout: this.limits.timeoutMs }) as string;
      const [changed, resident] = JSON.parse(text) as [ChangedPartition[], number];
      this.resident = resident;
      return changed;
    } catch (err) {
      throw new Error(describe(err));
    }
  }

  /** The live state and result of one partition (JSON texts, null when none); null when it is not resident. */
  async partition(partition: string): Promise<StoredPartition> {
    const text = await this.entry.partition.apply(undefined, [partition],
      { arguments: { copy: true }, result: { copy: true }, timeout: this.limits.timeoutMs }) as string;
    return JSON.parse(text) as StoredPartition;
  }

  get disposed(): boolean {
    return this.isolate.isDisposed;
  }

  dispose(): void {
    if (!this.isolate.isDisposed) this.isolate.dispose();
  }
}

/** The emitted events of an outcome's pages (one JSON array per line from `from` on), a page per slice of the event loop at most. */
async function emittedPages(text: string, from: number): Promise<EmittedEvent[]> {
  const emitted: EmittedEvent[] = [];
  const slices = new LoopSlices();
  for (let start = from; start < text.length;) {
    if (slices.due()) await slices.next();
    const end = text.indexOf('\n', start);
    const page = JSON.parse(text.slice(start, end < 0 ? text.length : end)) as EmittedEvent[];
    for (const e of page) emitted.push(e);
    start = end < 0 ? text.length : end + 1;
  }
  return emitted;
}

function noneStored(partitions: string[]): Record<string, StoredPartition> {
  return Object.fromEntries(partitions.map((p) => [p, null]));
}

function describe(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  if (/timed out/i.test(message)) return 'Projection script took too long to execute';
  if (/memory limit/i.test(message)) return 'Projection script exceeded its memory limit';
  return message;
}
