import type { Selected } from './source.js';
import { JsonBatchWriter } from './batch-writer.js';
import { WIRE } from './language/wire-format.js';
import { isMetastream, originalStreamOf, type EventRecord } from '../store/index.js';

// The host's side of the batch wire format (language/wire-format.js defines it, and its decoder
// reads it inside the sandbox): log records in, one JSON text out, written into one reused buffer.

/** What of each event crosses, decided once per projection from what its query can observe. */
export interface Delivery {
  /** The data of JSON events (parsed inside; as raw text too when `rawBody`). */
  body: boolean;
  /** JSON data crosses as raw text (bodyRaw), not spliced into the batch. */
  rawBody: boolean;
  eventId: boolean;
  metadata: boolean;
  linkMetadata: boolean;
}

export const FULL_DELIVERY: Delivery = { body: true, rawBody: false, eventId: true, metadata: true, linkMetadata: true };

/** Encodes batches of selected log records; one per projection (it reuses its buffer). */
export class BatchEncoder {
  private readonly writer = new JsonBatchWriter();
  private readonly index = new Map<string, number>();
  private strings: string[] = [];

  constructor(private readonly delivery: Delivery) {}

  encode(batch: Selected[]): string {
    const w = this.writer;
    w.reset();
    this.index.clear();
    this.strings = [];
    w.byte(0x5b); // [
    for (const selected of batch) {
      this.encodeEvent(w, selected);
      w.byte(0x2c); // ,
    }
    w.byte(0x5b);
    this.strings.forEach((s, i) => {
      if (i > 0) w.byte(0x2c);
      w.string(s);
    });
    return w.byte(0x5d).byte(0x5d).text();
  }

  private indexOf(text: string): number {
    let i = this.index.get(text);
    if (i === undefined) {
      i = this.strings.length;
      this.strings.push(text);
      this.index.set(text, i);
    }
    return i;
  }

  private encodeEvent(w: JsonBatchWriter, { event, link, category, deletedPartition }: Selected): void {
    const d = this.delivery;
    const bodyWay = !d.body && !d.rawBody ? 0 : event.dataIsJson && !d.rawBody ? WIRE.BODY : WIRE.RAW;
    const metadata = d.metadata && event.metadata.length > 0;
    const linkMetadataRaw = link && link.metadata.length > 0 ? link.metadata.toString('utf8') : null;
    const partitionStream = partitionStreamOf(event, linkMetadataRaw);
    const flags = (event.isJson ? WIRE.JSON : 0) | bodyWay | (metadata ? WIRE.METADATA : 0)
      | (d.linkMetadata && linkMetadataRaw !== null ? WIRE.LINK_METADATA : 0)
      | (partitionStream !== event.streamId ? WIRE.PARTITION : 0) | (category !== null ? WIRE.CATEGORY : 0)
      | (deletedPartition !== undefined ? WIRE.DELETED : 0) | (d.eventId ? WIRE.ID : 0);
    w.int(flags).byte(0x2c).int(this.indexOf(event.eventType)).byte(0x2c).int(this.indexOf(event.streamId))
      .byte(0x2c).int(event.eventNumber);
    if (flags & WIRE.ID) w.byte(0x2c).guid(event.eventId);
    if (bodyWay === WIRE.BODY) w.byte(0x2c).raw(event.data);
    else if (bodyWay === WIRE.RAW) w.byte(0x2c).textOf(event.data);
    if (metadata) w.byte(0x2c).textOf(event.metadata);
    if (flags & WIRE.LINK_METADATA) w.byte(0x2c).textOf(link!.metadata);
    if (flags & WIRE.PARTITION) w.byte(0x2c).int(this.indexOf(partitionStream));
    if (category !== null) w.byte(0x2c).int(this.indexOf(category));
    if (deletedPartition !== undefined) w.byte(0x2c).int(this.indexOf(deletedPartition));
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
