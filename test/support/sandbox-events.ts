// Batches from event values, for tests that hand the sandbox events they describe rather than
// records read from a store: the same wire format as the runtime's BatchEncoder (src/projections/wire.ts).

import { WIRE } from '../../src/projections/language/wire-format.js';

/**
 * An event as the sandbox reads it, for hosts that hold events as values (the language tests):
 * the data either parsed (`body`) or as text (`bodyRaw`).
 */
export interface SandboxEvent {
  eventType: string;
  streamId: string;
  sequenceNumber: number;
  eventId: string;
  isJson: boolean;
  bodyRaw?: string | null;
  body?: unknown;
  metadataRaw: string | null;
  linkMetadataRaw: string | null;
  /** The partition of a foreachStream projection (the original stream, `$o` of a link, x of $$x). */
  partitionStream: string;
  category?: string | null;
  /** Set for a "partition deleted" notification instead of an event. */
  deletedPartition?: string;
}

/** The same wire format from event values; with `spliceBodies`, valid JSON data crosses as `body` the way the runtime sends it. */
export function encodeSandboxEvents(events: SandboxEvent[], spliceBodies = false): string {
  const strings: string[] = [];
  const index = new Map<string, number>();
  const indexOf = (s: string): number => {
    if (!index.has(s)) index.set(s, strings.push(s) - 1);
    return index.get(s)!;
  };
  const parts: string[] = [];
  for (const e of events) {
    const raw = e.bodyRaw ?? null;
    const splice = e.body === undefined && spliceBodies && e.isJson && raw !== null && isJsonText(raw);
    const values: unknown[] = [];
    let flags = WIRE.ID | (e.isJson ? WIRE.JSON : 0);
    if (e.body !== undefined) flags |= WIRE.BODY;
    else if (splice) flags |= WIRE.BODY;
    else if (raw !== null) flags |= WIRE.RAW;
    if (e.metadataRaw !== null) flags |= WIRE.METADATA;
    if (e.linkMetadataRaw !== null) flags |= WIRE.LINK_METADATA;
    if (e.partitionStream !== e.streamId) flags |= WIRE.PARTITION;
    if (e.category !== undefined && e.category !== null) flags |= WIRE.CATEGORY;
    if (e.deletedPartition !== undefined) flags |= WIRE.DELETED;
    values.push(flags, indexOf(e.eventType), indexOf(e.streamId), e.sequenceNumber, JSON.stringify(e.eventId));
    if (e.body !== undefined) values.push(JSON.stringify(e.body));
    else if (splice) values.push(raw);
    else if (raw !== null) values.push(JSON.stringify(raw));
    if (e.metadataRaw !== null) values.push(JSON.stringify(e.metadataRaw));
    if (e.linkMetadataRaw !== null) values.push(JSON.stringify(e.linkMetadataRaw));
    if (flags & WIRE.PARTITION) values.push(indexOf(e.partitionStream));
    if (flags & WIRE.CATEGORY) values.push(indexOf(e.category!));
    if (e.deletedPartition !== undefined) values.push(indexOf(e.deletedPartition));
    parts.push(values.join(','));
  }
  parts.push(JSON.stringify(strings));
  return `[${parts.join(',')}]`;
}

function isJsonText(text: string): boolean {
  if (text.trim() === '') return false;
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}
