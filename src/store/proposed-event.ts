import { METADATA_EVENT_TYPE } from './metadata.js';
import type { RecordPayload } from './record.js';
import { newUuid } from './uuid.js';

// The events a writer proposes, built one way: a new id unless one is given, text as UTF-8,
// no metadata unless given. A stream's metadata is an event too (the latest `$metadata` of its
// metastream `$$<stream>`): metadataEvent builds it, for the node's own writers and the store's.

/** An event to append: id, type, and the data and metadata bytes as received. */
export type ProposedEvent = RecordPayload;

export interface EventFields {
  eventType: string;
  /** The data: bytes as they are, or text (UTF-8). */
  data: Buffer | string;
  isJson: boolean;
  /** The event's metadata: bytes as they are, or text (UTF-8); none by default. */
  metadata?: Buffer | string;
  /** A new id unless given (a retry sends the same id). */
  eventId?: Buffer;
  /** False for writers that never retry with the same id (see RecordPayload.idempotent). */
  idempotent?: boolean;
}

const NO_BYTES = Buffer.alloc(0);

function bytesOf(value: Buffer | string): Buffer {
  return typeof value === 'string' ? Buffer.from(value, 'utf8') : value;
}

export function proposedEvent(e: EventFields): ProposedEvent {
  const event: ProposedEvent = {
    eventId: e.eventId ?? newUuid(), eventType: e.eventType, isJson: e.isJson,
    data: bytesOf(e.data), metadata: e.metadata === undefined ? NO_BYTES : bytesOf(e.metadata),
  };
  if (e.idempotent !== undefined) event.idempotent = e.idempotent;
  return event;
}

/** An event whose data is `body` as JSON. */
export function jsonEvent(eventType: string, body: unknown, options: Omit<EventFields, 'eventType' | 'data' | 'isJson'> = {}): ProposedEvent {
  return proposedEvent({ eventType, data: JSON.stringify(body), isJson: true, ...options });
}

/**
 * A stream's metadata document as the event to append to its metastream (metastreamOf). `doc` is
 * JSON text where a number must keep digits JSON.stringify would lose (a soft delete's `$tb`).
 */
export function metadataEvent(doc: Record<string, unknown> | string, options: Pick<EventFields, 'idempotent'> = {}): ProposedEvent {
  const data = typeof doc === 'string' ? doc : JSON.stringify(doc);
  return proposedEvent({ eventType: METADATA_EVENT_TYPE, data, isJson: true, ...options });
}
