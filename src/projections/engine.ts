import { formatUuid, isMetastream, originalStreamOf, type EventRecord } from '../store/index.js';
import { Sandbox, DefinitionError, type BatchOutcome, type ChangedPartition, type EmittedEvent } from './sandbox.js';
import { definitionProblem, needsRawBody, type SourceDefinition } from './definition.js';

// What runs a projection's handlers over the events its source selected: the sandboxed
// JavaScript engine for user queries, or a native engine for the trusted system projections.

/** An event the source selected: the event (resolved), the link it was read through, its category. */
export interface Selected {
  event: EventRecord;
  link: EventRecord | undefined;
  category: string | null;
  /** Set when this is a "partition deleted" notification rather than an event. */
  deletedPartition: string | undefined;
}

export interface Engine {
  readonly definition: SourceDefinition;
  readonly disposed: boolean;
  /** Engines that read the log their own way (the system projections) choose their records here. */
  select?(record: EventRecord): Selected | undefined;
  /** Events written with each checkpoint, in the same transaction. */
  checkpointEvents?(tag: Record<string, unknown>): EmittedEvent[];
  /**
   * Turns selected events into what process() takes. Separate so the runner can prepare the
   * next batch while the engine works on the current one.
   */
  encode(batch: Selected[]): unknown;
  /** Handles one encoded batch; state changes stay inside until collect(). */
  process(encoded: unknown): Promise<BatchOutcome>;
  /** The partitions changed since the last collection, serialised. */
  collect(): Promise<ChangedPartition[]>;
  /** The live state and result of one partition. */
  partition(partition: string): Promise<[string | null, string | null]>;
  dispose(): void;
}

export interface EngineLimits { memoryLimitMb: number; timeoutMs: number }

/** User JavaScript in an isolated-vm sandbox; events cross as one JSON text per batch. */
export class JsEngine implements Engine {
  private constructor(private readonly sandbox: Sandbox, private readonly rawBody: boolean) {}

  static async create(query: string, limits: EngineLimits, emitEnabled: boolean,
    stored: Record<string, [string | null, string | null]>): Promise<JsEngine> {
    const sandbox = await Sandbox.create(query, limits);
    try {
      const problem = definitionProblem(sandbox.definition);
      if (problem) throw new DefinitionError(problem);
      await sandbox.start({ emitEnabled }, stored);
    } catch (err) {
      sandbox.dispose();
      throw err;
    }
    return new JsEngine(sandbox, needsRawBody(sandbox.definition, query));
  }

  get definition(): SourceDefinition {
    return this.sandbox.definition;
  }

  get disposed(): boolean {
    return this.sandbox.disposed;
  }

  /** One JSON text for the whole batch. */
  encode(batch: Selected[]): string {
    return `[${batch.map((s) => this.encodeEvent(s)).join(',')}]`;
  }

  process(encoded: unknown): Promise<BatchOutcome> {
    return this.sandbox.process(encoded as string, false);
  }

  collect(): Promise<ChangedPartition[]> {
    return this.sandbox.collect();
  }

  partition(partition: string): Promise<[string | null, string | null]> {
    return this.sandbox.partition(partition);
  }

  dispose(): void {
    this.sandbox.dispose();
  }

  /**
   * The event as the sandbox reads it, written straight as JSON text. JSON data is spliced in
   * as is (it was validated when written), so it is parsed once, inside the sandbox.
   */
  private encodeEvent({ event, link, category, deletedPartition }: Selected): string {
    const linkMetadataRaw = link && link.metadata.length > 0 ? link.metadata.toString('utf8') : null;
    const streamId = JSON.stringify(event.streamId);
    let text = `{"eventType":${JSON.stringify(event.eventType)},"streamId":${streamId},"sequenceNumber":${event.eventNumber},`
      + `"eventId":"${formatUuid(event.eventId)}","isJson":${event.isJson},`
      + (event.dataIsJson && !this.rawBody ? `"body":${event.data.toString('utf8')}` : `"bodyRaw":${JSON.stringify(event.data.toString('utf8'))}`);
    // Absent members read as null inside: only what is there crosses.
    if (event.metadata.length > 0) text += `,"metadataRaw":${JSON.stringify(event.metadata.toString('utf8'))}`;
    if (linkMetadataRaw !== null) text += `,"linkMetadataRaw":${JSON.stringify(linkMetadataRaw)}`;
    const partitionStream = partitionStreamOf(event, linkMetadataRaw);
    if (partitionStream !== event.streamId) text += `,"partitionStream":${JSON.stringify(partitionStream)}`;
    if (category !== null) text += `,"category":${JSON.stringify(category)}`;
    if (deletedPartition !== undefined) text += `,"deletedPartition":${JSON.stringify(deletedPartition)}`;
    return `${text}}`;
  }
}

/** The partition of a foreachStream projection: the original stream, `$o` of a link, x for $$x. */
export function partitionStreamOf(event: EventRecord, linkMetadataRaw: string | null): string {
  if (linkMetadataRaw) {
    try {
      const o = (JSON.parse(linkMetadataRaw) as { $o?: unknown }).$o;
      if (typeof o === 'string') return o;
    } catch {
      // link metadata that is not JSON carries no $o
    }
  }
  return isMetastream(event.streamId) ? originalStreamOf(event.streamId) : event.streamId;
}
