import type { Message } from './message.js';

// A group's messages waiting to be handed out, in the order they go: the retry list (nacked or
// timed out, in source order), then replayed parked messages (in parked order), then the read
// buffer (new events, in source order). Together they hold at most `bufferSize` messages, the
// replayed ones read from the parked stream only as there is room. A pull takes from the front;
// a push offers each message in order to the group's strategy, which may keep one back (a full
// pinned consumer) while later ones go out.

export type OfferOutcome = 'sent' | 'kept' | 'full';

export class GroupBuffers {
  private retry: Message[] = [];
  private replayed: Message[] = [];
  private read: Message[] = [];
  private readHead = 0;

  /** `nextReplayed(room)`: up to `room` more replayed parked messages (none when no replay is under way). */
  constructor(private readonly bufferSize: number, private readonly nextReplayed: (room: number) => Message[]) {}

  get size(): number {
    return this.retry.length + this.replayed.length + this.read.length - this.readHead;
  }

  /** Room left for new events. */
  get free(): number {
    return this.bufferSize - this.size;
  }

  addRead(m: Message): void {
    this.read.push(m);
  }

  /** Reads the next page of a parked replay in progress while the retry and replay lists have room. */
  loadReplayed(): void {
    for (const m of this.nextReplayed(this.bufferSize - this.retry.length - this.replayed.length)) this.replayed.push(m);
  }

  /** A message to hand out again: before new events, in source order; a replayed parked one behind the replayed ones. */
  retryLater(m: Message): void {
    if (m.parkedNumber >= 0) {
      this.replayed.push(m);
      return;
    }
    // Binary search: the first retry further on in the source (timeouts arrive mostly in order).
    let lo = 0;
    let hi = this.retry.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.retry[mid].position > m.position) hi = mid;
      else lo = mid + 1;
    }
    this.retry.splice(lo, 0, m);
  }

  /** The next message in order (an HTTP pull takes it). */
  take(): Message | undefined {
    const retried = this.retry.shift();
    if (retried) return retried;
    if (this.replayed.length === 0) this.loadReplayed();
    const replayed = this.replayed.shift();
    if (replayed) return replayed;
    if (this.readHead >= this.read.length) return undefined;
    const m = this.read[this.readHead++];
    this.compactRead();
    return m;
  }

  /** Offers every message in order until one answers 'full'; those sent leave, those kept stay in place. Whether it stopped full. */
  offer(offer: (m: Message) => OfferOutcome): boolean {
    let full: boolean;
    [this.retry, full] = offerEach(this.retry, offer);
    if (full) return true;
    this.loadReplayed();
    [this.replayed, full] = offerEach(this.replayed, offer);
    if (full) return true;
    const kept: Message[] = [];
    let i = this.readHead;
    for (; i < this.read.length; i++) {
      const outcome = offer(this.read[i]);
      if (outcome === 'full') {
        full = true;
        break;
      }
      if (outcome === 'kept') kept.push(this.read[i]);
    }
    // The kept ones go back in the slots just before `i`, in order.
    this.readHead = i - kept.length;
    for (let k = 0; k < kept.length; k++) this.read[this.readHead + k] = kept[k];
    this.compactRead();
    return full;
  }

  private compactRead(): void {
    if (this.readHead > 1024 && this.readHead * 2 > this.read.length) {
      this.read = this.read.slice(this.readHead);
      this.readHead = 0;
    }
  }

  /** What /info counts: new events buffered (and how many arrived while live), retries and replayed messages waiting. */
  counts(): { read: number; live: number; retry: number; replayed: number } {
    let live = 0;
    for (let i = this.readHead; i < this.read.length; i++) if (this.read[i].live) live++;
    return { read: this.read.length - this.readHead, live, retry: this.retry.length, replayed: this.replayed.length };
  }
}

/** Offers `list` in order until one answers 'full': what was sent leaves it. The list left, and whether it stopped full. */
function offerEach(list: Message[], offer: (m: Message) => OfferOutcome): [Message[], boolean] {
  if (list.length === 0) return [list, false];
  const left: Message[] = [];
  for (let i = 0; i < list.length; i++) {
    const outcome = offer(list[i]);
    if (outcome === 'full') {
      for (let j = i; j < list.length; j++) left.push(list[j]);
      return [left, true];
    }
    if (outcome === 'kept') left.push(list[i]);
  }
  return [left, false];
}
