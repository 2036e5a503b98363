import { parseLinkTarget } from '../store/index.js';
import type { Message } from './group.js';
import type { ConsumerStrategyName } from './settings.js';

// Push consumers and the strategies that choose which consumer gets a message, as the
// established servers define them. HTTP pulls bypass these (they lease straight from the
// buffers); a consumer here is a connection the node pushes messages to.

export interface Consumer {
  readonly id: string;
  /** Remote address, for /info. */
  readonly from: string;
  readonly username: string;
  readonly connectionName: string;
  /** Messages the consumer accepts in flight at once. */
  readonly maxInFlight: number;
  /** Receives a message (already leased to this consumer). */
  deliver(message: Message): void;
  /** The group dropped the consumer (updated or deleted): it must connect again. */
  dropped?(reason: string): void;
}

/** A connected consumer with what the group tracks about it. */
export class ConsumerSlot {
  readonly inFlight = new Set<string>();
  totalItems = 0;
  countSinceMeasurement = 0;
  averagePerSecond = 0;
  constructor(readonly consumer: Consumer) {}

  get hasCapacity(): boolean {
    return this.inFlight.size < this.consumer.maxInFlight;
  }

  get availableSlots(): number {
    return Math.max(0, this.consumer.maxInFlight - this.inFlight.size);
  }
}

export type PushResult = 'Sent' | 'Skipped' | 'NoMoreCapacity';

export interface ConsumerStrategy {
  add(slot: ConsumerSlot): void;
  remove(slot: ConsumerSlot): void;
  /** Picks the consumer for `m`: the one with capacity this strategy wants, or why there is none. */
  pick(m: Message): ConsumerSlot | Exclude<PushResult, 'Sent'>;
}

/** Each message goes to the next consumer in turn that has room. */
class RoundRobin implements ConsumerStrategy {
  protected readonly queue: ConsumerSlot[] = [];

  add(slot: ConsumerSlot): void {
    this.queue.push(slot);
  }

  remove(slot: ConsumerSlot): void {
    const i = this.queue.indexOf(slot);
    if (i >= 0) this.queue.splice(i, 1);
  }

  pick(): ConsumerSlot | 'NoMoreCapacity' {
    for (let i = 0; i < this.queue.length; i++) {
      const slot = this.queue.shift()!;
      this.queue.push(slot);
      if (slot.hasCapacity) return slot;
    }
    return 'NoMoreCapacity';
  }
}

/** One consumer gets everything until it is full; then the next. */
class DispatchToSingle extends RoundRobin {
  override pick(): ConsumerSlot | 'NoMoreCapacity' {
    for (let i = 0; i < this.queue.length; i++) {
      const slot = this.queue[0];
      if (slot.hasCapacity) return slot;
      this.queue.push(this.queue.shift()!);
    }
    return 'NoMoreCapacity';
  }
}

const BUCKETS = 1024;

/** A stable 32-bit FNV-1a hash of the UTF-16 code units (assignments live in memory only). */
function bucketOf(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    h ^= key.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) % BUCKETS;
}

/** Messages of one source stream (or correlation) stick to one consumer while it is connected. */
class Pinned implements ConsumerStrategy {
  private readonly owners: (ConsumerSlot | undefined)[] = new Array(BUCKETS).fill(undefined);
  private readonly slots: ConsumerSlot[] = [];

  constructor(private readonly keyOf: (m: Message) => string) {}

  private ownedBy(slot: ConsumerSlot): number[] {
    const owned: number[] = [];
    this.owners.forEach((o, i) => { if (o === slot) owned.push(i); });
    return owned;
  }

  add(slot: ConsumerSlot): void {
    this.slots.push(slot);
    // The newcomer takes the excess of those owning more than their share, least busy buckets first.
    const assigned = this.owners.filter((o) => o !== undefined).length;
    const share = Math.ceil(assigned / this.slots.length);
    for (const other of this.slots) {
      if (other === slot) continue;
      const owned = this.ownedBy(other);
      for (const bucket of owned.slice(share)) this.owners[bucket] = slot;
    }
  }

  remove(slot: ConsumerSlot): void {
    const i = this.slots.indexOf(slot);
    if (i >= 0) this.slots.splice(i, 1);
    for (let b = 0; b < BUCKETS; b++) if (this.owners[b] === slot) this.owners[b] = undefined;
  }

  pick(m: Message): ConsumerSlot | 'Skipped' | 'NoMoreCapacity' {
    if (!this.slots.some((s) => s.hasCapacity)) return 'NoMoreCapacity';
    const bucket = bucketOf(this.keyOf(m));
    let owner = this.owners[bucket];
    if (!owner) {
      const counts = new Map(this.slots.map((s) => [s, 0]));
      for (const o of this.owners) if (o) counts.set(o, (counts.get(o) ?? 0) + 1);
      owner = this.slots.reduce((best, s) => (counts.get(s)! < counts.get(best)! ? s : best));
      this.owners[bucket] = owner;
    }
    return owner.hasCapacity ? owner : 'Skipped';
  }
}

/** The source stream: the event's, or for an unresolved link the stream its data names. */
function sourceStreamOf(m: Message): string {
  if (m.event.event) return m.event.event.streamId;
  const link = m.event.link!;
  return parseLinkTarget(link.data)?.streamId ?? link.streamId;
}

function correlationOf(m: Message): string {
  const record = m.event.event ?? m.event.link!;
  if (record.metadata.length > 0) {
    try {
      const id = (JSON.parse(record.metadata.toString('utf8')) as { $correlationId?: unknown }).$correlationId;
      if (typeof id === 'string') return id;
    } catch {
      // Not JSON: fall back to the stream.
    }
  }
  return sourceStreamOf(m);
}

export function createStrategy(name: ConsumerStrategyName): ConsumerStrategy {
  switch (name) {
    case 'RoundRobin': return new RoundRobin();
    case 'DispatchToSingle': return new DispatchToSingle();
    case 'Pinned': return new Pinned(sourceStreamOf);
    case 'PinnedByCorrelation': return new Pinned(correlationOf);
  }
}
