import { isMetastream, originalStreamOf, type EventRecord } from '../store/index.js';
import { JsonBatchWriter } from './batch-writer.js';
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
  /** Records read per batch, when the engine wants other than the default. */
  readonly readBatchSize?: number;
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
  private readonly writer = new JsonBatchWriter();

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
    const w = this.writer;
    w.reset();
    w.ascii('[');
    for (let i = 0; i < batch.length; i++) {
      if (i > 0) w.raw(F.comma);
      this.encodeEvent(w, batch[i]);
    }
    return w.ascii(']').text();
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
   * The event as the sandbox reads it, written straight as JSON text. JSON data is copied in
   * as stored (it was validated when written), so it is parsed once, inside the sandbox.
   * Absent members read as null inside: only what is there crosses.
   */
  private encodeEvent(w: JsonBatchWriter, { event, link, category, deletedPartition }: Selected): void {
    w.raw(F.eventType).string(event.eventType).raw(F.streamId).string(event.streamId)
      .raw(F.sequenceNumber).int(event.eventNumber).raw(F.eventId).guid(event.eventId)
      .raw(event.isJson ? F.isJsonTrue : F.isJsonFalse);
    if (event.dataIsJson && !this.rawBody) w.raw(F.body).raw(event.data);
    else w.raw(F.bodyRaw).textOf(event.data);
    if (event.metadata.length > 0) w.raw(F.metadataRaw).textOf(event.metadata);
    const linkMetadataRaw = link && link.metadata.length > 0 ? link.metadata.toString('utf8') : null;
    if (linkMetadataRaw !== null) w.raw(F.linkMetadataRaw).textOf(link!.metadata);
    const partitionStream = partitionStreamOf(event, linkMetadataRaw);
    if (partitionStream !== event.streamId) w.raw(F.partitionStream).string(partitionStream);
    if (category !== null) w.raw(F.category).string(category);
    if (deletedPartition !== undefined) w.raw(F.deletedPartition).string(deletedPartition);
    w.raw(F.close);
  }
}

/** The constant pieces of an encoded event. */
const F = {
  eventType: JsonBatchWriter.fragment('{"eventType":'),
  streamId: JsonBatchWriter.fragment(',"streamId":'),
  sequenceNumber: JsonBatchWriter.fragment(',"sequenceNumber":'),
  eventId: JsonBatchWriter.fragment(',"eventId":'),
  isJsonTrue: JsonBatchWriter.fragment(',"isJson":true,'),
  isJsonFalse: JsonBatchWriter.fragment(',"isJson":false,'),
  body: JsonBatchWriter.fragment('"body":'),
  bodyRaw: JsonBatchWriter.fragment('"bodyRaw":'),
  metadataRaw: JsonBatchWriter.fragment(',"metadataRaw":'),
  linkMetadataRaw: JsonBatchWriter.fragment(',"linkMetadataRaw":'),
  partitionStream: JsonBatchWriter.fragment(',"partitionStream":'),
  category: JsonBatchWriter.fragment(',"category":'),
  deletedPartition: JsonBatchWriter.fragment(',"deletedPartition":'),
  close: JsonBatchWriter.fragment('}'),
  comma: JsonBatchWriter.fragment(','),
};

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
