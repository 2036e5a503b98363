import {
  isMetastream, isSoftDeleted, isSystemRecordStream, LINK_EVENT_TYPE, METADATA_EVENT_TYPE, originalStreamOf, parseMetadata, type EventRecord, type Store,
} from '../store/index.js';
import type { EventFilter } from './definition.js';
import type { SourceDefinition } from './language/source-definition.js';

// What a query's source reads from the log (reference §9): fromAll skips system streams (but
// not the metadata streams of user streams) and links unless $includeLinks; stream and category
// sources read their streams, resolving links; then the event-type filter and content validation.

/** An event the source selected: the event (resolved), the link it was read through, its category. */
export interface Selected {
  event: EventRecord;
  link: EventRecord | undefined;
  category: string | null;
  /** Set when this is a "partition deleted" notification rather than an event. */
  deletedPartition: string | undefined;
}

/** The event a query reads for this log record, or undefined when it reads none. */
export function selectEvent(def: SourceDefinition, filter: EventFilter, store: Store, record: EventRecord): Selected | undefined {
  let event: EventRecord = record;
  let link: EventRecord | undefined;
  let category: string | null = null;
  if (def.allStreams) {
    if (isSystemRecordStream(record.streamId)) return undefined; // system streams, but a user stream's metastream is read
    if (record.eventType === LINK_EVENT_TYPE && !def.includeLinks) return undefined;
  } else {
    const categoryStream = def.categories.length > 0 ? def.categories.find((c) => record.streamId === `$ce-${c}`) : undefined;
    if (categoryStream !== undefined) category = categoryStream;
    else if (!def.streams.includes(record.streamId)) return undefined;
    // Stream sources read what a stream read shows: truncated, expired and deleted events are not read.
    if (!store.isVisible(record)) return undefined;
    if (record.eventType === LINK_EVENT_TYPE) {
      const resolved = store.resolveLink(record);
      if (!resolved.event) return undefined;
      event = resolved.event;
      link = record;
    } else if (category !== null) {
      return undefined; // category streams hold links; anything else is not an event of the category
    }
  }
  const deleted = deletedPartitionOf(event);
  if (deleted !== undefined && def.handlesDeletedNotifications) return { event, link, category, deletedPartition: deleted };
  if (!filter.all && !filter.types.has(event.eventType)) return undefined;
  // Content validation: an event flagged JSON whose data is empty or not JSON is not delivered.
  if (event.isJson && !event.dataIsJson) return undefined;
  return { event, link, category, deletedPartition: undefined };
}

/** A tombstone or a soft-deleting metadata event: the partition (stream) it deletes. */
function deletedPartitionOf(event: EventRecord): string | undefined {
  if (event.tombstone) return event.streamId;
  if (isMetastream(event.streamId) && event.eventType === METADATA_EVENT_TYPE && isSoftDeleted(parseMetadata(event.data))) {
    return originalStreamOf(event.streamId);
  }
  return undefined;
}
