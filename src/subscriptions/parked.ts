import type { Logger } from 'pino';
import {
  ExpectedVersion, LINK_EVENT_TYPE, metadataEvent, metastreamOf, nowMicros, OutOfSpaceError, proposedEvent, visibilityOf, type Store,
} from '../store/index.js';
import type { Message } from './message.js';

// A group's parked messages: `$>` links in $persistentsubscription-{stream}::{group}-parked.
// Replay puts them back in front of new events. The established servers hide the replayed
// range ($tb) at once, which loses them if the node stops before they are handled; here the
// range is hidden only as its messages get handled, and a replay in progress is remembered in
// memory so the same range is not replayed twice. The parked stream is the only full copy: a
// replay reads it a page at a time as the group has room (`nextReplayed`), so replaying a
// million parked messages holds no more of them in memory than the group's buffer.

const PARK_ATTEMPTS = 5;

export interface ParkedCallbacks {
  /** The park is durable: the message is handled. */
  onParked(m: Message): void;
  /** The park could not be written: the message goes back to the retry list rather than being lost. */
  onParkFailed(m: Message): void;
}

export class ParkedMessages {
  private writesInFlight = 0;
  private idleWaiters: (() => void)[] = [];
  /** Replayed messages read and not yet handled, by parked event number (insertion order is number order). */
  private readonly pendingReplayed = new Set<number>();
  /** Parked numbers below this were read for replay (the replay's cursor). */
  private replayedUpTo = 0;
  /** Where the replay in progress stops (exclusive); -1 when none is. */
  private replayStop = -1;
  private truncatedTo = -1;
  private truncating = false;
  private truncateAgain = false;

  constructor(private readonly store: Store, readonly streamId: string, private readonly log: Logger,
    private readonly readBatchSize: number, private readonly callbacks: ParkedCallbacks) {}

  /** Writes the park link; the message counts as unhandled (holding the checkpoint) until it is durable. */
  park(m: Message, reason: string): void {
    const target = m.event.event
      ? `${m.event.event.eventNumber}@${m.event.event.streamId}`
      : m.event.link!.data.toString('utf8');
    const metadata = { added: new Date().toISOString(), reason, subscriptionEventNumber: m.eventNumber };
    const event = proposedEvent({ eventType: LINK_EVENT_TYPE, data: target, isJson: false, metadata: JSON.stringify(metadata), idempotent: false });
    this.writesInFlight++;
    void (async () => {
      let lastError: unknown;
      for (let attempt = 1; attempt <= PARK_ATTEMPTS; attempt++) {
        try {
          await this.store.append(this.streamId, ExpectedVersion.any, [event]);
          this.callbacks.onParked(m);
          return;
        } catch (err) {
          lastError = err;
          await new Promise((r) => setTimeout(r, 50 * attempt));
        }
      }
      // A full disk is logged once for all writes (the node's out-of-space episode), not per message.
      if (!(lastError instanceof OutOfSpaceError)) this.log.error({ stream: this.streamId, err: (lastError as Error)?.message }, 'could not park a message; it will be retried');
      this.callbacks.onParkFailed(m);
    })().finally(() => {
      this.writesInFlight--;
      if (this.writesInFlight === 0) for (const resolve of this.idleWaiters.splice(0)) resolve();
    });
  }

  /** Resolves when no park write is in flight. */
  idle(): Promise<void> {
    if (this.writesInFlight === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private visibleStart(): number | undefined {
    const info = this.store.streamInfo(this.streamId);
    if (!info || info.lastEventNumber < 0) return undefined;
    const visible = visibilityOf(info, this.store.metadataOf(this.streamId));
    return visible.deleted ? undefined : Math.max(visible.firstEventNumber, this.replayedUpTo);
  }

  /** Parked messages not replayed. */
  count(): number {
    const start = this.visibleStart();
    if (start === undefined) return 0;
    return Math.max(0, this.store.streamInfo(this.streamId)!.lastEventNumber + 1 - start);
  }

  /** Seconds since the oldest parked message (not replayed) was parked; 0 when there is none. */
  oldestAgeSeconds(): number {
    const start = this.visibleStart();
    if (start === undefined) return 0;
    const found = this.store.readEvent(this.streamId, start, false);
    if (found.status !== 'ok') return 0;
    const record = found.event.link ?? found.event.event!;
    return Math.max(0, Math.floor((nowMicros() - record.created) / 1_000_000));
  }

  get replaying(): boolean {
    return this.replayStop >= 0;
  }

  /** Replayed messages read into memory and not handled yet. */
  get pendingReplayCount(): number {
    return this.pendingReplayed.size;
  }

  /** Starts replaying the parked messages numbered below `stopAt` (all when undefined); ignored while one is under way. */
  replay(stopAt: number | undefined): void {
    const start = this.visibleStart();
    if (this.replaying || start === undefined) return;
    const last = this.store.streamInfo(this.streamId)!.lastEventNumber;
    const stop = Math.min(stopAt ?? Number.MAX_SAFE_INTEGER, last + 1);
    if (start >= stop) return;
    if (this.truncatedTo < 0) this.truncatedTo = this.store.metadataOf(this.streamId).truncateBefore ?? 0;
    this.replayedUpTo = start;
    this.replayStop = stop;
  }

  /** The next replayed messages, at most `room` of them, read from the parked stream in pages. */
  nextReplayed(room: number): Message[] {
    if (!this.replaying || room <= 0) return [];
    const messages: Message[] = [];
    while (this.replaying && messages.length < room) {
      const from = this.replayedUpTo;
      const count = Math.min(this.readBatchSize, room - messages.length, this.replayStop - from);
      const page = this.store.readStreamForward(this.streamId, from, count, true);
      if (page.status !== 'ok') {
        this.replayStop = -1;
        break;
      }
      for (const e of page.events) {
        const link = e.link;
        // Not a link, or its event is gone: nothing to deliver.
        if (!link || !e.event || link.eventNumber < from || link.eventNumber >= this.replayStop) continue;
        this.pendingReplayed.add(link.eventNumber);
        messages.push({
          event: { event: e.event }, id: link.eventId.toString('hex'),
          eventNumber: subscriptionEventNumberOf(link.metadata) ?? e.event.eventNumber,
          retryCount: 0, seq: -1, previousEventNumber: -1, parkedNumber: link.eventNumber, expiresAt: 0, live: false,
        });
      }
      this.replayedUpTo = from + count;
      if (this.replayedUpTo >= this.replayStop) this.replayStop = -1;
    }
    this.truncateHandled();
    return messages;
  }

  /** A replayed message was handled (acked, skipped, or parked again). */
  replayedHandled(parkedNumber: number): void {
    if (this.pendingReplayed.delete(parkedNumber)) this.truncateHandled();
  }

  /** Hides the replayed messages that are handled: `$tb` up to the first one still pending. */
  private truncateHandled(): void {
    let target = this.replayedUpTo;
    for (const first of this.pendingReplayed.keys()) {
      target = first;
      break;
    }
    if (target <= this.truncatedTo) return;
    if (this.truncating) {
      this.truncateAgain = true;
      return;
    }
    this.truncating = true;
    const event = metadataEvent({ ...this.store.metadataOf(this.streamId).raw, $tb: target }, { idempotent: false });
    this.store.append(metastreamOf(this.streamId), ExpectedVersion.any, [event])
      .then(() => { this.truncatedTo = Math.max(this.truncatedTo, target); })
      .catch((err: Error) => this.log.warn({ stream: this.streamId, err: err.message }, 'could not hide replayed parked messages'))
      .finally(() => {
        this.truncating = false;
        if (this.truncateAgain) {
          this.truncateAgain = false;
          this.truncateHandled();
        }
      });
  }
}

function subscriptionEventNumberOf(metadata: Buffer): number | undefined {
  try {
    const n = (JSON.parse(metadata.toString('utf8')) as { subscriptionEventNumber?: unknown }).subscriptionEventNumber;
    return typeof n === 'number' && Number.isSafeInteger(n) ? n : undefined;
  } catch {
    return undefined;
  }
}
