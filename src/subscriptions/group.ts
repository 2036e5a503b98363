import type { Logger } from 'pino';
import { firstVisibleEventNumber, jsonEvent, OutOfSpaceError, type Store } from '../store/index.js';
import type { GroupSettings } from './settings.js';
import { MAX_LEASED_MESSAGES } from './limits.js';
import { messageIdOf, type Message } from './message.js';
import { ParkedMessages } from './parked.js';
import { appendKeepingLatest } from './streams.js';

// One persistent subscription group: the competing-consumer state machine of the established
// servers. Messages flow  stream → read buffer (or retry list, or replayed from the parked
// stream) → outstanding (handed out, with a deadline) → handled (ack, skip) or retried or parked.
// Buffers, deadlines and retry counts live in memory, within the bounds of limits.ts; the
// checkpoint (the last event such that it and everything before it is handled) and the parked
// messages live in the log, so a restart redelivers at most what was handed out after the last
// checkpoint and never skips an event. Consumers pull over HTTP: a pull takes straight from the
// buffers, bypassing consumer strategies, as the reference describes; the node has no push
// transport (TCP/gRPC), so it keeps no push consumers.

export type NackAction = 'Park' | 'Retry' | 'Skip' | 'Stop' | 'Unknown';

export const CHECKPOINT_EVENT_TYPE = '$SubscriptionCheckpoint';
const LEGACY_CHECKPOINT_EVENT_TYPE = 'SubscriptionCheckpoint';
/** Page size cap of history reads, as the established servers cap it. */
const MAX_READ_BATCH = 100;

export function checkpointStreamOf(stream: string, group: string): string {
  return `$persistentsubscription-${stream}::${group}-checkpoint`;
}

export function parkedStreamOf(stream: string, group: string): string {
  return `$persistentsubscription-${stream}::${group}-parked`;
}

export class PersistentGroup {
  readonly checkpointStream: string;
  readonly parked: ParkedMessages;
  /** Messages to hand out again (nacked, timed out), in event order; they go before everything else. */
  private retry: Message[] = [];
  /** Replayed parked messages read from the parked stream, in parked order; they go before new events. */
  private replayed: Message[] = [];
  private read: Message[] = [];
  private readHead = 0;
  private readonly outstanding = new Map<string, Message>();
  /** Handed-out messages not yet handled, by seq; insertion order is seq order, so the first is the lowest. */
  private readonly unhandled = new Map<number, Message>();
  private nextEventNumber = 0;
  private lastKnown = -1;
  private nextSeq = 0;
  private lastHandedOutSeq = -1;
  private lastHandedOutEventNumber = -1;
  private lastCheckpointedSeq = -1;
  private lastCheckpointed = -1;
  private lastCheckpointAt = Date.now();
  private checkpointWriting = false;
  private checkpointAgain = false;
  private fillScheduled = false;
  private caughtUpBeforeAppend = false;
  private stopped = false;
  private totalItems = 0;
  private countSinceMeasurement = 0;
  private averagePerSecond = 0;
  private lastMeasurementAt = Date.now();

  constructor(readonly stream: string, readonly name: string, readonly settings: GroupSettings,
    private readonly store: Store, private readonly log: Logger) {
    this.checkpointStream = checkpointStreamOf(stream, name);
    this.parked = new ParkedMessages(store, parkedStreamOf(stream, name), log, settings.readBatchSize, {
      onParked: (m) => this.handled(m),
      onParkFailed: (m) => this.insertRetry(m),
    });
  }

  /** Reads the checkpoint; without one, starts at `startFrom` (a live start is written down as a checkpoint). */
  async load(isNew: boolean): Promise<void> {
    const checkpoint = this.readCheckpoint();
    if (checkpoint !== undefined) {
      this.resumeAfter(checkpoint);
    } else if (this.settings.startFrom === -1) {
      const end = this.store.streamInfo(this.stream)?.lastEventNumber ?? -1;
      this.resumeAfter(end);
      // Written down, so events appended while the node is down are not skipped after a restart.
      if (isNew) await this.writeCheckpoint(0, end);
    } else {
      this.nextEventNumber = this.settings.startFrom;
    }
    this.lastKnown = Math.max(this.lastKnown, this.store.streamInfo(this.stream)?.lastEventNumber ?? -1);
    this.fill();
  }

  private resumeAfter(checkpoint: number): void {
    this.nextEventNumber = checkpoint + 1;
    this.lastCheckpointed = checkpoint;
    this.lastCheckpointedSeq = 0;
    this.lastHandedOutSeq = 0;
    this.lastHandedOutEventNumber = checkpoint;
    this.nextSeq = 1;
  }

  private readCheckpoint(): number | undefined {
    const found = this.store.readEvent(this.checkpointStream, -1, false);
    if (found.status !== 'ok' || !found.event.event) return undefined;
    const record = found.event.event;
    if (record.eventType !== CHECKPOINT_EVENT_TYPE && record.eventType !== LEGACY_CHECKPOINT_EVENT_TYPE) return undefined;
    try {
      const value = JSON.parse(record.data.toString('utf8')) as unknown;
      const n = Number(value);
      return Number.isSafeInteger(n) && n >= -1 ? n : undefined;
    } catch {
      return undefined;
    }
  }

  /** Stops the group; with `checkpoint`, first writes what is handled (a graceful shutdown). */
  async stop(checkpoint: boolean): Promise<void> {
    if (checkpoint && !this.stopped) {
      const candidate = this.checkpointCandidate();
      if (candidate && candidate.seq > this.lastCheckpointedSeq && !this.checkpointWriting) {
        await this.writeCheckpoint(candidate.seq, candidate.eventNumber);
      }
    }
    this.stopped = true;
    await this.parked.idle();
  }

  get isStopped(): boolean {
    return this.stopped;
  }

  // ---- reading into the buffer -------------------------------------------------------------

  /** A commit touched the group's stream: note what is known and top the buffer up soon. */
  notifyAppended(lastEventNumber: number): void {
    if (this.isLive) this.caughtUpBeforeAppend = true; // what arrives now arrives live
    if (lastEventNumber > this.lastKnown) this.lastKnown = lastEventNumber;
    if (this.fillScheduled || this.stopped) return;
    this.fillScheduled = true;
    setImmediate(() => {
      this.fillScheduled = false;
      if (!this.stopped) this.fill();
    });
  }

  private get bufferedCount(): number {
    return this.retry.length + this.replayed.length + this.read.length - this.readHead;
  }

  /** Reads the next page of a parked replay in progress while the retry and replay lists have room. */
  private loadReplayed(): void {
    const room = this.settings.bufferSize - this.retry.length - this.replayed.length;
    for (const m of this.parked.nextReplayed(room)) this.replayed.push(m);
  }

  /** Pages replayed parked messages, then history, into the buffers while there is room (reads are synchronous). */
  fill(): void {
    this.loadReplayed();
    const batch = Math.min(this.settings.readBatchSize, MAX_READ_BATCH);
    const wasLive = this.isLive || this.caughtUpBeforeAppend;
    this.caughtUpBeforeAppend = false;
    while (this.settings.bufferSize - this.bufferedCount > batch) {
      const from = this.nextEventNumber;
      // Whole pages that fit, in one read: each store read has a fixed cost, and reads are synchronous.
      const free = this.settings.bufferSize - this.bufferedCount;
      const count = free - (free % batch);
      const page = this.store.readStreamForward(this.stream, from, count, this.settings.resolveLinkTos);
      if (page.status !== 'ok') return;
      if (page.lastEventNumber > this.lastKnown) this.lastKnown = page.lastEventNumber;
      let next = Math.min(from + count, page.lastEventNumber + 1);
      for (const e of page.events) {
        const original = (e.link ?? e.event)!;
        if (original.eventNumber < from) continue;
        this.read.push({
          event: e, id: messageIdOf(e), eventNumber: original.eventNumber, retryCount: 0, seq: -1,
          previousEventNumber: -1, parkedNumber: -1, expiresAt: 0, live: wasLive,
        });
        next = Math.max(next, original.eventNumber + 1);
      }
      // Past what reads hide ($tb, $maxCount; visibility.ts), and no further than the stream's end.
      next = Math.max(next, Math.min(firstVisibleEventNumber(page.lastEventNumber, page.metadata), page.lastEventNumber + 1));
      this.nextEventNumber = Math.max(this.nextEventNumber, next);
      if (this.nextEventNumber > page.lastEventNumber) return;
    }
  }

  get isLive(): boolean {
    return this.nextEventNumber > this.lastKnown;
  }

  // ---- handing out and settling ------------------------------------------------------------

  /**
   * Leases up to `count` messages: retries first, then replayed parked messages, then new events,
   * in event order; fewer when the group has MAX_LEASED_MESSAGES out.
   */
  take(count: number, now = Date.now()): Message[] {
    this.fill();
    const out: Message[] = [];
    const wanted = Math.min(count, MAX_LEASED_MESSAGES - this.outstanding.size);
    while (out.length < wanted) {
      const m = this.retry.shift() ?? this.nextReplayed() ?? this.nextRead();
      if (!m) break;
      if (this.outstanding.has(m.id)) {
        // Two events with one id: the established servers deliver the second untracked; it counts as handled.
        this.log.warn({ group: this.key, id: m.id }, 'skipping tracking of a message with a duplicate event id');
        this.assignSeq(m);
        this.handled(m);
        out.push(m);
        continue;
      }
      this.lease(m, now);
      out.push(m);
    }
    this.totalItems += out.length;
    this.countSinceMeasurement += out.length;
    if (out.length > 0) this.fill();
    return out;
  }

  private lease(m: Message, now: number): void {
    this.assignSeq(m);
    m.expiresAt = now + this.settings.messageTimeoutMs;
    this.outstanding.set(m.id, m);
  }

  private nextReplayed(): Message | undefined {
    if (this.replayed.length === 0) this.loadReplayed();
    return this.replayed.shift();
  }

  private nextRead(): Message | undefined {
    if (this.readHead >= this.read.length) return undefined;
    const m = this.read[this.readHead++];
    if (this.readHead > 1024 && this.readHead * 2 > this.read.length) {
      this.read = this.read.slice(this.readHead);
      this.readHead = 0;
    }
    return m;
  }

  private assignSeq(m: Message): void {
    if (m.seq >= 0 || m.parkedNumber >= 0) return;
    m.seq = this.nextSeq++;
    m.previousEventNumber = this.lastHandedOutEventNumber;
    this.lastHandedOutSeq = m.seq;
    this.lastHandedOutEventNumber = m.eventNumber;
    this.unhandled.set(m.seq, m);
  }

  ack(ids: readonly string[]): void {
    for (const id of ids) {
      const m = this.outstanding.get(id);
      if (!m) continue;
      this.outstanding.delete(m.id);
      this.handled(m);
    }
    this.tryCheckpoint(false);
  }

  nack(ids: readonly string[], action: NackAction, reason: string): void {
    for (const id of ids) {
      const m = this.outstanding.get(id);
      if (!m) continue;
      this.outstanding.delete(m.id);
      if (action === 'Park') this.parked.park(m, `Client explicitly NAK'ed message.\n${reason}`);
      else if (action === 'Skip' || action === 'Stop') this.handled(m);
      else this.retryOrPark(m);
    }
    this.tryCheckpoint(false);
  }

  private handled(m: Message): void {
    if (m.seq >= 0) this.unhandled.delete(m.seq);
    if (m.parkedNumber >= 0) this.parked.replayedHandled(m.parkedNumber);
    if (!this.stopped) this.tryCheckpoint(false);
  }

  private retryOrPark(m: Message): void {
    if (m.retryCount >= this.settings.maxRetryCount) {
      this.parked.park(m, `Reached retry count of ${this.settings.maxRetryCount}`);
      return;
    }
    m.retryCount++;
    this.insertRetry(m);
  }

  /** Retries go out before new events, in event order; a replayed parked message queues behind the replayed ones. */
  private insertRetry(m: Message): void {
    if (this.stopped) return;
    if (m.parkedNumber >= 0) {
      this.replayed.push(m);
      return;
    }
    // Binary search: the first retry with a higher event number (timeouts arrive mostly in order).
    let lo = 0;
    let hi = this.retry.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.retry[mid].eventNumber > m.eventNumber) hi = mid;
      else lo = mid + 1;
    }
    this.retry.splice(lo, 0, m);
  }

  /** The periodic tick: expire leases, checkpoint by time, measure rates. */
  tick(now = Date.now()): void {
    if (this.stopped) return;
    // Every lease has the same timeout, so the outstanding map (insertion order) is in deadline order.
    for (const m of this.outstanding.values()) {
      if (m.expiresAt > now) break;
      this.outstanding.delete(m.id);
      this.retryOrPark(m);
    }
    this.tryCheckpoint(true, now);
    if (now - this.lastMeasurementAt >= 1000) {
      this.averagePerSecond = Math.round((this.countSinceMeasurement * 1000) / (now - this.lastMeasurementAt));
      this.countSinceMeasurement = 0;
      this.lastMeasurementAt = now;
    }
  }

  // ---- checkpoints -------------------------------------------------------------------------

  /** The last event such that it and every event handed out before it are handled. */
  private checkpointCandidate(): { seq: number; eventNumber: number } | undefined {
    for (const lowest of this.unhandled.values()) {
      if (lowest.previousEventNumber < 0) return undefined;
      return { seq: lowest.seq - 1, eventNumber: lowest.previousEventNumber };
    }
    if (this.lastHandedOutSeq < 0) return undefined;
    return { seq: this.lastHandedOutSeq, eventNumber: this.lastHandedOutEventNumber };
  }

  private tryCheckpoint(byTimer: boolean, now = Date.now()): void {
    if (this.stopped) return;
    if (this.checkpointWriting) {
      this.checkpointAgain = true;
      return;
    }
    const candidate = this.checkpointCandidate();
    if (!candidate) return;
    const due = candidate.seq - this.lastCheckpointedSeq;
    if (due <= 0) return;
    const { maxCheckPointCount, minCheckPointCount, checkPointAfterMs } = this.settings;
    const byCount = due >= maxCheckPointCount;
    const byTime = byTimer && checkPointAfterMs > 0 && now - this.lastCheckpointAt >= checkPointAfterMs && due >= minCheckPointCount;
    if (byCount || byTime) void this.writeCheckpoint(candidate.seq, candidate.eventNumber);
  }

  private async writeCheckpoint(seq: number, eventNumber: number): Promise<void> {
    this.checkpointWriting = true;
    try {
      const event = jsonEvent(CHECKPOINT_EVENT_TYPE, String(eventNumber), { idempotent: false });
      await appendKeepingLatest(this.store, this.checkpointStream, event, 2);
      if (seq > this.lastCheckpointedSeq) {
        this.lastCheckpointedSeq = seq;
        this.lastCheckpointed = eventNumber;
      }
      this.lastCheckpointAt = Date.now();
    } catch (err) {
      // A full disk is logged once for all writes (the node's out-of-space episode), not per checkpoint.
      if (!(err instanceof OutOfSpaceError)) this.log.warn({ group: this.key, err: (err as Error).message }, 'checkpoint write failed; the next one retries');
    } finally {
      this.checkpointWriting = false;
    }
    if (this.checkpointAgain) {
      this.checkpointAgain = false;
      this.tryCheckpoint(false);
    }
  }

  // ---- parked messages ---------------------------------------------------------------------

  /** Puts parked messages (those numbered below `stopAt`) back in front of new ones. */
  replayParked(stopAt: number | undefined): void {
    if (this.stopped) return;
    this.parked.replay(stopAt);
    this.fill();
  }

  // ---- what /info shows --------------------------------------------------------------------

  get key(): string {
    return `${this.stream}::${this.name}`;
  }

  get statusText(): string {
    const flags: string[] = [this.isLive ? 'Live' : 'Behind'];
    if (this.parked.replaying) flags.push('ReplayingParkedMessages');
    return flags.join(', ');
  }

  get statistics() {
    let live = 0;
    for (let i = this.readHead; i < this.read.length; i++) if (this.read[i].live) live++;
    return {
      totalItems: this.totalItems,
      countSinceLastMeasurement: this.countSinceMeasurement,
      averagePerSecond: this.averagePerSecond,
      lastCheckpointed: this.lastCheckpointed,
      lastKnown: this.lastKnown,
      lastProcessed: this.lastHandedOutEventNumber,
      readBufferCount: this.read.length - this.readHead,
      liveBufferCount: live,
      retryBufferCount: this.retry.length + this.replayed.length,
      outstandingMessagesCount: this.outstanding.size,
      parkedMessageCount: this.parked.count(),
      oldestParkedMessage: this.parked.oldestAgeSeconds(),
      // The reference counts only push connections and what is in flight to them (§1.9); the node
      // has no push transport, so there are no connections. Messages handed out to HTTP pulls and
      // not yet settled are in flight to their consumers all the same (issue 21 over the reference).
      connectionCount: 0,
      totalInFlightMessages: this.outstanding.size,
    };
  }

  /** How many messages each in-memory structure holds (the bounds are in limits.ts). */
  get heldMessages() {
    return {
      readBuffer: this.read.length - this.readHead,
      retry: this.retry.length,
      replayed: this.replayed.length,
      leased: this.outstanding.size,
      unhandled: this.unhandled.size,
      replayPending: this.parked.pendingReplayCount,
    };
  }
}
