import { parseLinkTarget } from '../store/index.js';
import type { Consumer } from './consumer.js';
import type { Message } from './message.js';
import type { ConsumerStrategyName } from './settings.js';

// How a group shares its messages among its push consumers (reference §1.4). For each buffered
// message, in order, the group asks its strategy: a consumer to send it to, SKIP (this message
// waits, try the next one: its pinned consumer is full), or undefined (no consumer has room:
// stop). HTTP pulls bypass the strategy, as on the established servers.
//
//  RoundRobin           rotate through the consumers once per message, first with room wins
//  DispatchToSingle     fill the first consumer, then rotate it to the back and fill the next
//  Pinned               1024 buckets by the event's stream; a bucket belongs to one consumer
//  PinnedByCorrelation  as Pinned, by the `$correlationId` of the event's metadata (else its stream)

export const SKIP = 'skip';

export interface ConsumerStrategy {
  add(consumer: Consumer): void;
  remove(consumer: Consumer): void;
  pick(m: Message): Consumer | typeof SKIP | undefined;
}

export function strategyOf(name: ConsumerStrategyName): ConsumerStrategy {
  switch (name) {
    case 'RoundRobin': return new RotatingStrategy(true);
    case 'DispatchToSingle': return new RotatingStrategy(false);
    case 'Pinned': return new PinnedStrategy(streamKey);
    case 'PinnedByCorrelation': return new PinnedStrategy((m) => correlationKey(m) ?? streamKey(m));
  }
}

/** RoundRobin (`perMessage`: rotate after every message) and DispatchToSingle (rotate when the head is full). */
class RotatingStrategy implements ConsumerStrategy {
  private readonly queue: Consumer[] = [];

  constructor(private readonly perMessage: boolean) {}

  add(consumer: Consumer): void {
    this.queue.push(consumer);
  }

  remove(consumer: Consumer): void {
    const i = this.queue.indexOf(consumer);
    if (i >= 0) this.queue.splice(i, 1);
  }

  pick(): Consumer | undefined {
    for (let tried = 0; tried < this.queue.length; tried++) {
      const head = this.queue[0];
      if (this.perMessage || head.freeSlots <= 0) this.queue.push(this.queue.shift()!);
      if (head.freeSlots > 0) return head;
    }
    return undefined;
  }
}

const BUCKETS = 1024;

/** Pinned: each bucket of keys belongs to one consumer; new and orphaned buckets go to the consumer owning fewest. */
class PinnedStrategy implements ConsumerStrategy {
  private readonly owners = new Array<Consumer | undefined>(BUCKETS).fill(undefined);
  private readonly owned = new Map<Consumer, number>();

  constructor(private readonly keyOf: (m: Message) => string) {}

  add(consumer: Consumer): void {
    // Each consumer owning more than its share gives the excess to the newcomer.
    const share = Math.ceil(this.assigned() / (this.owned.size + 1));
    this.owned.set(consumer, 0);
    for (const [other, count] of this.owned) {
      let excess = count - share;
      for (let b = 0; b < BUCKETS && excess > 0; b++) {
        if (this.owners[b] !== other) continue;
        this.assign(b, consumer);
        excess--;
      }
    }
  }

  remove(consumer: Consumer): void {
    this.owned.delete(consumer);
    for (let b = 0; b < BUCKETS; b++) if (this.owners[b] === consumer) this.owners[b] = undefined;
  }

  pick(m: Message): Consumer | typeof SKIP | undefined {
    let free = false;
    for (const c of this.owned.keys()) if (c.freeSlots > 0) free = true;
    if (!free) return undefined;
    const bucket = hash(this.keyOf(m)) % BUCKETS;
    const owner = this.owners[bucket];
    if (owner) return owner.freeSlots > 0 ? owner : SKIP;
    let fewest: Consumer | undefined;
    for (const [c, count] of this.owned) if (c.freeSlots > 0 && (!fewest || count < this.owned.get(fewest)!)) fewest = c;
    this.assign(bucket, fewest!);
    return fewest;
  }

  private assign(bucket: number, consumer: Consumer): void {
    const previous = this.owners[bucket];
    if (previous) this.owned.set(previous, this.owned.get(previous)! - 1);
    this.owners[bucket] = consumer;
    this.owned.set(consumer, (this.owned.get(consumer) ?? 0) + 1);
  }

  private assigned(): number {
    let n = 0;
    for (const count of this.owned.values()) n += count;
    return n;
  }
}

/** The event's own stream; for a link whose target is gone, the stream its data names. */
function streamKey(m: Message): string {
  if (m.event.event) return m.event.event.streamId;
  const link = m.event.link!;
  return parseLinkTarget(link.data)?.streamId ?? link.streamId;
}

function correlationKey(m: Message): string | undefined {
  const record = m.event.event ?? m.event.link!;
  if (record.metadata.length === 0) return undefined;
  try {
    const id = (JSON.parse(record.metadata.toString('utf8')) as { $correlationId?: unknown }).$correlationId;
    return typeof id === 'string' ? id : undefined;
  } catch {
    return undefined;
  }
}

/** FNV-1a over the UTF-16 code units: stable, and assignments live in memory only. */
function hash(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    h ^= key.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}
