import type { Logger } from 'pino';
import type { Store } from '../store/index.js';
import type { GroupSettings } from './settings.js';
import { MAX_LEASED_MESSAGES } from './limits.js';
import { newMessage, type Message } from './message.js';
import { ParkedMessages } from './parked.js';
import { Checkpoints } from './checkpoints.js';
import { Consumer, type ConnectionInfo, type ConsumerOptions, type DropReason } from './consumer.js';
import { SKIP, strategyOf, type ConsumerStrategy } from './strategies.js';
import type { GroupSource } from './source.js';
import { SubscriptionError } from './errors.js';
import { GroupBuffers, type OfferOutcome } from './buffers.js';

// One persistent subscription group: the competing-consumer state machine of the established
// servers. Messages flow  source → read buffer (or retry list, or replayed from the parked
// stream) → outstanding (handed out, with a deadline) → handled (ack, skip) or retried or parked.
// Two ways out of the buffers: push consumers (gRPC Read calls) get messages as the group's
// strategy shares them, each up to its own capacity; HTTP pulls take straight from the buffers,
// bypassing the strategy, as the reference describes. Both lease from the same buffers into the
// same outstanding set, so a message is with one consumer at a time, whichever door it took.
// Buffers, deadlines and retry counts live in memory, within the bounds of limits.ts; the
// checkpoint (checkpoints.ts) and the parked messages live in the log.
//
// Over 400 lines on purpose: the message state machine above is one set of transitions over one
// outstanding set, kept in one file so that every path that leases, acks, retries or parks a
// message reads in one place; the buffers, parked stream, checkpoints, consumers and strategies
// are apart already.

export type NackAction = 'Park' | 'Retry' | 'Skip' | 'Stop' | 'Unknown';

/** Page size cap of history reads, as the established servers cap it. */
const MAX_READ_BATCH = 100;

export function checkpointStreamOf(source: string, group: string): string {
  return `$persistentsubscription-${source}::${group}-checkpoint`;
}

export function parkedStreamOf(source: string, group: string): string {
  return `$persistentsubscription-${source}::${group}-parked`;
}

/** What /info (HTTP) and GetInfo (gRPC) show of a group, protocol-neutral. */
export interface GroupInfo {
  readonly source: string;
  readonly group: string;
  readonly status: string;
  readonly settings: GroupSettings;
  /** `startFrom` as the source writes positions: '0' / '-1' / 'n' for a stream, 'C:n/P:n' for `$all` (-1: the end). */
  readonly startFrom: string;
  readonly parkedStream: string;
  readonly averagePerSecond: number;
  readonly totalItems: number;
  readonly countSinceLastMeasurement: number;
  /** Source positions as text; undefined when there is none yet. */
  readonly lastCheckpointedPosition?: string;
  readonly lastKnownPosition?: string;
  /** The numbers behind them (-1: none), and the last position handed out for the first time. */
  readonly lastCheckpointed: number;
  readonly lastKnown: number;
  readonly lastProcessed: number;
  readonly readBufferCount: number;
  readonly liveBufferCount: number;
  readonly retryBufferCount: number;
  readonly outstandingMessagesCount: number;
  readonly totalInFlightMessages: number;
  readonly parkedMessageCount: number;
  readonly oldestParkedMessage: number;
  readonly connections: readonly ConnectionInfo[];
}

export class PersistentGroup {
  readonly checkpoints: Checkpoints;
  readonly parked: ParkedMessages;
  /** What waits to be handed out: retries, replayed parked messages, new events. */
  private readonly buffers: GroupBuffers;
  private readonly outstanding = new Map<string, Message>();
  private readonly consumers = new Set<Consumer>();
  private readonly strategy: ConsumerStrategy;
  /** Where the next read of the source starts. */
  private next = 0;
  private lastKnown = -1;
  private caughtUp = false;
  private lastHandedOut = -1;
  private fillScheduled = false;
  private caughtUpBeforeAppend = false;
  private pushing = false;
  private stopped = false;
  private totalItems = 0;
  private countSinceMeasurement = 0;
  private averagePerSecond = 0;
  private lastMeasurementAt = Date.now();

  constructor(readonly source: GroupSource, readonly name: string, readonly settings: GroupSettings,
    private readonly store: Store, private readonly log: Logger) {
    this.checkpoints = new Checkpoints(store, checkpointStreamOf(source.name, name), source, settings, log);
    this.strategy = strategyOf(settings.namedConsumerStrategy);
    this.parked = new ParkedMessages(store, parkedStreamOf(source.name, name), log, settings.readBatchSize, source.positionOf, {
      onParked: (m) => {
        this.handled(m);
        this.checkpoints.consider(false);
      },
      onParkFailed: (m) => this.retryLater(m),
    });
    this.buffers = new GroupBuffers(settings.bufferSize, (room) => this.parked.nextReplayed(room));
  }

  /** The stream name, or `$all`. */
  get stream(): string {
    return this.source.name;
  }

  get key(): string {
    return `${this.source.name}::${this.name}`;
  }

  /** Reads the checkpoint; without one, starts at `startFrom` (a live start is written down as a checkpoint). */
  async load(isNew: boolean): Promise<void> {
    const checkpoint = this.checkpoints.load();
    if (checkpoint !== undefined) {
      this.resumeAfter(checkpoint);
    } else if (this.settings.startFrom === -1) {
      const end = this.source.lastPosition();
      this.resumeAfter(end);
      // Written down, so events appended while the node is down are not skipped after a restart.
      if (isNew) await this.checkpoints.write(0, end);
    } else {
      this.next = this.settings.startFrom;
    }
    this.fill();
  }

  private resumeAfter(position: number): void {
    this.next = position + 1;
    this.lastHandedOut = position;
    this.checkpoints.resumeAfter(position);
  }

  /**
   * Stops the group: its consumers are let go (`reason`), their messages with the group (a group
   * that replaces it redelivers from the checkpoint); with `checkpoint`, first writes what is handled.
   */
  async stop(checkpoint: boolean, reason: DropReason = 'dropped'): Promise<void> {
    const wasStopped = this.stopped;
    this.stopped = true;
    for (const c of [...this.consumers]) {
      this.consumers.delete(c);
      this.strategy.remove(c);
      c.options.dropped(reason);
    }
    await this.checkpoints.stop(checkpoint && !wasStopped);
    await this.parked.idle();
  }

  get isStopped(): boolean {
    return this.stopped;
  }

  // ---- reading into the buffer -------------------------------------------------------------

  /** A commit reached the source: `last` is the position of the last record the group takes (-1: none). */
  notifyAppended(last: number): void {
    if (last >= 0) {
      if (this.caughtUp) this.caughtUpBeforeAppend = true; // what arrives now arrives live
      this.caughtUp = false;
      if (last > this.lastKnown) this.lastKnown = last;
    }
    this.scheduleFill();
  }

  private scheduleFill(): void {
    if (this.fillScheduled || this.stopped) return;
    this.fillScheduled = true;
    setImmediate(() => {
      this.fillScheduled = false;
      if (this.stopped) return;
      this.fill();
      this.push();
    });
  }

  /** Pages replayed parked messages, then the source, into the buffers while there is room (reads are synchronous). */
  fill(): void {
    if (this.stopped) return;
    this.buffers.loadReplayed();
    const batch = Math.min(this.settings.readBatchSize, MAX_READ_BATCH);
    const live = this.caughtUp || this.caughtUpBeforeAppend;
    this.caughtUpBeforeAppend = false;
    while (this.buffers.free > batch) {
      // Whole pages that fit, in one read: each store read has a fixed cost, and reads are synchronous.
      const free = this.buffers.free;
      const count = free - (free % batch);
      const page = this.source.read(this.next, count, this.settings.resolveLinkTos);
      if (page.lastKnown !== undefined && page.lastKnown > this.lastKnown) this.lastKnown = page.lastKnown;
      let taken = 0;
      for (const entry of page.entries) {
        if ('skipped' in entry) {
          this.checkpoints.skipped(entry.skipped, entry.position);
          continue;
        }
        const m = newMessage(entry.event, entry.position, live);
        this.checkpoints.read(m);
        this.buffers.addRead(m);
        taken++;
      }
      this.next = Math.max(this.next, page.next);
      this.caughtUp = page.atEnd;
      if (page.atEnd) return;
      if (taken < count) {
        // The read stopped short of the end (a `$all` filter scanned its limit): the rest in a later turn.
        this.scheduleFill();
        return;
      }
    }
  }

  get isLive(): boolean {
    return this.caughtUp;
  }

  // ---- handing out -------------------------------------------------------------------------

  /**
   * Leases up to `count` messages to an HTTP pull: retries first, then replayed parked messages,
   * then new events, in source order; fewer when the group has MAX_LEASED_MESSAGES out.
   */
  take(count: number, now = Date.now()): Message[] {
    this.fill();
    const out: Message[] = [];
    const wanted = Math.min(count, MAX_LEASED_MESSAGES - this.outstanding.size);
    while (out.length < wanted) {
      const m = this.buffers.take();
      if (!m) break;
      this.lease(m, now, undefined);
      out.push(m);
    }
    this.countHandedOut(out.length);
    if (out.length > 0) {
      this.fill();
      this.push(now);
    }
    return out;
  }

  /** Puts `m` in flight (to `consumer`, or to an HTTP pull); false when it is untracked (a duplicate id). */
  private lease(m: Message, now: number, consumer: Consumer | undefined): boolean {
    if (m.parkedNumber < 0 && m.position > this.lastHandedOut) this.lastHandedOut = m.position;
    if (this.outstanding.has(m.id)) {
      // Two events with one id: the established servers deliver the second untracked; it counts as handled.
      this.log.warn({ group: this.key, id: m.id }, 'skipping tracking of a message with a duplicate event id');
      this.handled(m);
      return false;
    }
    m.expiresAt = now + this.settings.messageTimeoutMs;
    m.sentAt = now;
    m.consumer = consumer;
    if (consumer) consumer.inFlight++;
    this.outstanding.set(m.id, m);
    return true;
  }

  private countHandedOut(n: number): void {
    this.totalItems += n;
    this.countSinceMeasurement += n;
  }

  // ---- push consumers ----------------------------------------------------------------------

  /** A push consumer joins; messages start going to it on the next turn of the event loop. */
  connect(options: ConsumerOptions): Consumer {
    const max = this.settings.maxSubscriberCount;
    if (max > 0 && this.consumers.size >= max) {
      throw new SubscriptionError('SUBSCRIPTION_FULL', `The group has ${max} consumers, its maxSubscriberCount.`, this.stream, this.name);
    }
    const consumer = new Consumer(options, this.settings.extraStatistics);
    this.consumers.add(consumer);
    this.strategy.add(consumer);
    setImmediate(() => this.push());
    return consumer;
  }

  /** A consumer leaves: what it held goes back to be retried (or parked, past the retry count). */
  disconnect(consumer: Consumer): void {
    if (!this.consumers.delete(consumer)) return;
    this.strategy.remove(consumer);
    const now = Date.now();
    for (const m of [...this.outstanding.values()]) {
      if (m.consumer !== consumer) continue;
      this.release(m, false, now);
      this.retryOrPark(m);
    }
    this.push(now);
  }

  /** Hands buffered messages to the push consumers as the strategy shares them, until none has room or none is left. */
  private push(now = Date.now()): void {
    if (this.consumers.size === 0 || this.pushing || this.stopped) return;
    this.pushing = true;
    try {
      for (;;) {
        const batches = new Map<Consumer, Message[]>();
        let room = MAX_LEASED_MESSAGES - this.outstanding.size;
        const offer = (m: Message): OfferOutcome => {
          if (room <= 0) return 'full';
          const c = this.strategy.pick(m);
          if (c === undefined) return 'full';
          if (c === SKIP) return 'kept';
          if (this.lease(m, now, c)) room--;
          const batch = batches.get(c);
          if (batch) batch.push(m);
          else batches.set(c, [m]);
          return 'sent';
        };
        const full = this.buffers.offer(offer);
        let sent = 0;
        for (const [c, messages] of batches) {
          sent += messages.length;
          c.handedOut(messages.length);
          try {
            c.options.deliver(messages);
          } catch (err) {
            this.log.warn({ group: this.key, err: (err as Error).message }, 'a consumer could not take its messages; they time out and are retried');
          }
        }
        this.countHandedOut(sent);
        if (sent === 0 || full) return;
        this.fill();
        if (this.buffers.size === 0) return;
      }
    } finally {
      this.pushing = false;
    }
  }

  // ---- settling ----------------------------------------------------------------------------

  /** Out of flight: its consumer (if any) gets the slot back. */
  private release(m: Message, acked: boolean, now: number): void {
    this.outstanding.delete(m.id);
    m.consumer?.settled(m, acked, now);
    m.consumer = undefined;
  }

  ack(ids: readonly string[], now = Date.now()): void {
    for (const id of ids) {
      const m = this.outstanding.get(id);
      if (!m) continue;
      this.release(m, true, now);
      this.handled(m);
    }
    this.checkpoints.consider(false);
    this.push(now);
  }

  nack(ids: readonly string[], action: NackAction, reason: string, now = Date.now()): void {
    for (const id of ids) {
      const m = this.outstanding.get(id);
      if (!m) continue;
      this.release(m, false, now);
      if (action === 'Park') this.parked.park(m, `Client explicitly NAK'ed message.\n${reason}`);
      else if (action === 'Skip' || action === 'Stop') this.handled(m); // Stop: a no-op on the established servers, so a skip
      else this.retryOrPark(m);
    }
    this.checkpoints.consider(false);
    this.push(now);
  }

  private handled(m: Message): void {
    if (m.parkedNumber >= 0) this.parked.replayedHandled(m.parkedNumber);
    this.checkpoints.handled(m);
  }

  private retryOrPark(m: Message): void {
    if (m.retryCount >= this.settings.maxRetryCount) {
      this.parked.park(m, `Reached retry count of ${this.settings.maxRetryCount}`);
      return;
    }
    m.retryCount++;
    this.retryLater(m);
  }

  private retryLater(m: Message): void {
    if (!this.stopped) this.buffers.retryLater(m);
  }

  /** The periodic tick: expire leases, checkpoint by time, measure rates, push what the expiries freed. */
  tick(now = Date.now()): void {
    if (this.stopped) return;
    // Every lease has the same timeout, so the outstanding map (insertion order) is in deadline order.
    for (const m of this.outstanding.values()) {
      if (m.expiresAt > now) break;
      this.release(m, false, now);
      this.retryOrPark(m);
    }
    this.checkpoints.consider(true, now);
    if (now - this.lastMeasurementAt >= 1000) {
      this.averagePerSecond = Math.round((this.countSinceMeasurement * 1000) / (now - this.lastMeasurementAt));
      this.countSinceMeasurement = 0;
      this.lastMeasurementAt = now;
    }
    for (const c of this.consumers) c.measure(now);
    this.push(now);
  }

  // ---- parked messages ---------------------------------------------------------------------

  /** Puts parked messages (those numbered below `stopAt`) back in front of new ones. */
  replayParked(stopAt: number | undefined): void {
    if (this.stopped) return;
    this.parked.replay(stopAt);
    this.fill();
    this.push();
  }

  // ---- what /info shows --------------------------------------------------------------------

  get statusText(): string {
    const flags: string[] = [this.isLive ? 'Live' : 'Behind'];
    if (this.parked.replaying) flags.push('ReplayingParkedMessages');
    return flags.join(', ');
  }

  get statistics() {
    const buffered = this.buffers.counts();
    return {
      totalItems: this.totalItems,
      countSinceLastMeasurement: this.countSinceMeasurement,
      averagePerSecond: this.averagePerSecond,
      lastCheckpointed: this.checkpoints.lastWritten,
      lastKnown: this.lastKnown,
      lastProcessed: this.lastHandedOut,
      readBufferCount: buffered.read,
      liveBufferCount: buffered.live,
      retryBufferCount: buffered.retry + buffered.replayed,
      outstandingMessagesCount: this.outstanding.size,
      parkedMessageCount: this.parked.count(),
      oldestParkedMessage: this.parked.oldestAgeSeconds(),
      connectionCount: this.consumers.size,
      // The reference counts what is in flight to push connections (§1.9); messages handed out to
      // HTTP pulls and not yet settled are in flight to their consumers all the same (issue 21).
      totalInFlightMessages: this.outstanding.size,
    };
  }

  info(): GroupInfo {
    const s = this.statistics;
    const text = (position: number) => (position >= 0 ? this.source.positionText(position) : undefined);
    return {
      source: this.source.name, group: this.name, status: this.statusText, settings: this.settings,
      startFrom: this.source.positionText(this.settings.startFrom),
      parkedStream: this.parked.streamId,
      averagePerSecond: s.averagePerSecond, totalItems: s.totalItems, countSinceLastMeasurement: s.countSinceLastMeasurement,
      lastCheckpointedPosition: text(s.lastCheckpointed), lastKnownPosition: text(s.lastKnown),
      lastCheckpointed: s.lastCheckpointed, lastKnown: s.lastKnown, lastProcessed: s.lastProcessed,
      readBufferCount: s.readBufferCount, liveBufferCount: s.liveBufferCount, retryBufferCount: s.retryBufferCount,
      outstandingMessagesCount: s.outstandingMessagesCount, totalInFlightMessages: s.totalInFlightMessages,
      parkedMessageCount: s.parkedMessageCount, oldestParkedMessage: s.oldestParkedMessage,
      connections: [...this.consumers].map((c) => c.info()),
    };
  }

  /** How many messages each in-memory structure holds (the bounds are in limits.ts). */
  get heldMessages() {
    const buffered = this.buffers.counts();
    return {
      readBuffer: buffered.read,
      retry: buffered.retry,
      replayed: buffered.replayed,
      leased: this.outstanding.size,
      unhandled: this.checkpoints.unhandledCount,
      replayPending: this.parked.pendingReplayCount,
    };
  }
}
