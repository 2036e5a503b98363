import {
  eventNumberAt, inDollarStream, inSystemStream, metadataLengthAt, type RecordSieve,
  isMetastream, isSoftDeleted, LINK_EVENT_TYPE, METADATA_EVENT_TYPE, originalStreamOf, parseMetadata, shownName, streamNameProblem, type EventRecord,
} from '../store/index.js';
import { blankDefinition, type SourceDefinition } from './language/source-definition.js';
import type { Engine } from './engine.js';
import type { Selected } from './source.js';
import type { BatchOutcome, ChangedPartition, EmittedEvent } from './sandbox.js';

// The standard system projections, run natively: they are trusted and sit on the hot path of
// every write, so they index the log in TypeScript instead of in a sandbox. They keep no state;
// what they write are link events, checkpointed and emitted like any projection's.

export interface SystemProjectionSpec { name: string; handlerType: string; config: string }

export const SYSTEM_PROJECTIONS: readonly SystemProjectionSpec[] = [
  { name: '$streams', handlerType: 'native:streams', config: '' },
  { name: '$stream_by_category', handlerType: 'native:stream_by_category', config: 'first\r\n-' },
  { name: '$by_category', handlerType: 'native:by_category', config: 'first\r\n-' },
  { name: '$by_event_type', handlerType: 'native:by_event_type', config: '' },
  { name: '$by_correlation_id', handlerType: 'native:by_correlation_id', config: '{"correlationIdProperty":"$correlationId"}' },
];

export function isSystemProjection(name: string): boolean {
  return SYSTEM_PROJECTIONS.some((s) => s.name === name);
}

/** Category rule: one character = last occurrence of it; or `first|last` and a separator on two lines. */
export function categoryRule(config: string): (streamId: string) => string | undefined {
  const lines = config.split(/\r?\n/);
  let which: 'first' | 'last' = 'last';
  let separator = '-';
  if (lines.length === 1 && lines[0].length === 1) separator = lines[0];
  else if (lines.length === 2 && (lines[0] === 'first' || lines[0] === 'last') && lines[1].length === 1) {
    which = lines[0];
    separator = lines[1];
  } else if (config.trim() !== '') {
    throw new Error(`Invalid category configuration '${config}': one separator character, or first|last and a separator on two lines`);
  }
  return (streamId) => {
    if (streamId.startsWith('$')) return undefined;
    const at = which === 'first' ? streamId.indexOf(separator) : streamId.lastIndexOf(separator);
    return at > 0 ? streamId.slice(0, at) : undefined;
  };
}

/** They read every record of the log, links included (see NativeEngine.select). */
const NATIVE_DEFINITION: SourceDefinition = { ...blankDefinition(), allEvents: true, allStreams: true, includeLinks: true };

/** A soft delete of a user stream: the `$metadata` event that sets its `$tb` to the maximum. */
function softDeletedStream(r: EventRecord): string | undefined {
  if (!isMetastream(r.streamId) || r.eventType !== METADATA_EVENT_TYPE) return undefined;
  const original = originalStreamOf(r.streamId);
  return !original.startsWith('$') && isSoftDeleted(parseMetadata(r.data)) ? original : undefined;
}

function link(streamId: string, data: string, metadata: Record<string, unknown>): EmittedEvent {
  return { streamId, eventType: LINK_EVENT_TYPE, data, isJson: false, metadata };
}

type Indexer = (record: EventRecord) => EmittedEvent | undefined;

/**
 * What each indexer can use, tested on the stored bytes (store/record.ts: RecordSieve): a record
 * refused here is one its indexer returns nothing for, so it is never decoded. After twenty
 * partitioned projections caught up over a million events the log held 2.4 million of their
 * checkpoint and partition events, in `$projections-` streams; the five system projections decoded
 * each of them to index ~555,000 (the first event of each new stream, in `$streams`).
 */
function sieveFor(handlerType: string): RecordSieve | undefined {
  switch (handlerType) {
    case 'native:streams': return (buf, start) => eventNumberAt(buf, start) === 0;
    case 'native:stream_by_category': return (buf, start) => eventNumberAt(buf, start) === 0 && !inDollarStream(buf, start);
    // (a metastream of a user stream stays: its soft delete is indexed)
    case 'native:by_category':
    case 'native:by_event_type': return (buf, start) => !inSystemStream(buf, start);
    case 'native:by_correlation_id': return (buf, start) => !inDollarStream(buf, start) && metadataLengthAt(buf, start) > 0;
    default: return undefined;
  }
}

function indexerFor(handlerType: string, config: string): Indexer {
  switch (handlerType) {
    case 'native:streams':
      return (r) => (r.eventNumber === 0 && r.streamId !== '$streams' ? link('$streams', `0@${r.streamId}`, {}) : undefined);
    case 'native:stream_by_category': {
      const category = categoryRule(config);
      return (r) => {
        if (r.eventNumber !== 0) return undefined;
        const c = category(r.streamId);
        return c === undefined ? undefined : { streamId: `$category-${c}`, eventType: '$@', data: r.streamId, isJson: false, metadata: {} };
      };
    }
    case 'native:by_category': {
      const category = categoryRule(config);
      return (r) => {
        const deleted = softDeletedStream(r);
        if (deleted !== undefined) {
          const dc = category(deleted);
          return dc === undefined ? undefined : link(`$ce-${dc}`, `${r.eventNumber}@${r.streamId}`, { $o: deleted, $deleted: -1 });
        }
        const c = category(r.streamId);
        if (c === undefined) return undefined;
        const target = r.eventType === LINK_EVENT_TYPE ? r.data.toString('utf8') : `${r.eventNumber}@${r.streamId}`;
        return link(`$ce-${c}`, target, r.tombstone ? { $o: r.streamId, $deleted: -1 } : { $o: r.streamId });
      };
    }
    case 'native:by_event_type':
      if (config.trim() !== '') throw new Error('The $by_event_type projection takes no configuration');
      return (r) => {
        const deleted = softDeletedStream(r);
        if (deleted !== undefined) return link('$et-$deleted', `${r.eventNumber}@${deleted}`, { $deleted: -1 });
        if (r.streamId.startsWith('$') || r.eventType === LINK_EVENT_TYPE) return undefined;
        if (r.tombstone) return link('$et-$deleted', `${r.eventNumber}@${r.streamId}`, { $deleted: -1 });
        return link(`$et-${r.eventType}`, `${r.eventNumber}@${r.streamId}`, {});
      };
    case 'native:by_correlation_id': {
      let property: string;
      try {
        const parsed = JSON.parse(config || '{}') as { correlationIdProperty?: unknown };
        property = typeof parsed.correlationIdProperty === 'string' ? parsed.correlationIdProperty : '$correlationId';
      } catch {
        throw new Error(`Invalid $by_correlation_id configuration: ${config}`);
      }
      return (r) => {
        if (r.streamId.startsWith('$') || r.metadata.length === 0) return undefined;
        let id: unknown;
        try {
          id = (JSON.parse(r.metadata.toString('utf8')) as Record<string, unknown>)[property];
        } catch {
          return undefined;
        }
        if (typeof id !== 'string' || id === '') return undefined;
        const target = r.eventType === LINK_EVENT_TYPE ? r.data.toString('utf8') : `${r.eventNumber}@${r.streamId}`;
        const timestamp = new Date(Math.floor(r.created / 1000)).toISOString();
        return link(`$bc-${id}`, target, r.eventType === LINK_EVENT_TYPE ? { $eventTimestamp: timestamp, $link: target } : { $eventTimestamp: timestamp });
      };
    }
    default:
      throw new Error(`Unknown native projection handler ${handlerType}`);
  }
}

/** A system projection's engine: it reads every record of the log and emits index links. */
export class NativeEngine implements Engine {
  readonly definition = NATIVE_DEFINITION;
  /** Native batches run on the event loop itself: keep each one short. */
  readonly readBatchSize = 250;
  /** Every reader of `$streams`, `$ce-` and `$et-` streams reads what they index: they keep up first. */
  readonly checkpointsAhead = true;
  disposed = false;
  readonly sieve: RecordSieve | undefined;
  private readonly index: Indexer;

  constructor(private readonly handlerType: string, config: string) {
    this.index = indexerFor(handlerType, config);
    this.sieve = sieveFor(handlerType);
  }

  /** $by_event_type also records each checkpoint in `$et` (readers of the $et- streams resume from it). */
  checkpointEvents(tag: Record<string, unknown>): EmittedEvent[] {
    if (this.handlerType !== 'native:by_event_type') return [];
    return [{ streamId: '$et', eventType: '$Checkpoint', data: JSON.stringify(tag), isJson: true, metadata: {} }];
  }

  /** Native projections see every record, system streams and links included, unresolved. */
  select(record: EventRecord): Selected {
    return { event: record, link: undefined, category: null, deletedPartition: undefined };
  }

  encode(batch: Selected[]): Selected[] {
    return batch;
  }

  async process(encoded: unknown): Promise<BatchOutcome> {
    const batch = encoded as Selected[];
    const emitted: EmittedEvent[] = [];
    const skipped: string[] = [];
    for (const { event } of batch) {
      const out = this.index(event);
      if (!out) continue;
      // One user's event must not stop an index for everyone: a stream the store would refuse
      // (a name over its limit, derived from a long category or correlation id) is skipped.
      const problem = streamNameProblem(out.streamId);
      if (problem) skipped.push(`event ${event.eventNumber}@${shownName(event.streamId)} would be indexed in '${shownName(out.streamId)}': ${problem}`);
      else emitted.push(out);
    }
    return { emitted, changed: [], logs: [], handled: emitted.length, processed: batch.length, fault: null, skipped };
  }

  async collect(): Promise<ChangedPartition[]> {
    return [];
  }

  async partition(): Promise<[string | null, string | null]> {
    return [null, null];
  }

  dispose(): void {
    this.disposed = true;
  }
}
