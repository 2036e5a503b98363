import type { Logger } from 'pino';
import { jsonEvent, OutOfSpaceError, type Store } from '../store/index.js';
import type { GroupSettings } from './settings.js';
import type { GroupSource } from './source.js';
import type { Message } from './message.js';
import { appendKeepingLatest } from './streams.js';

// A group's checkpoint: the last position of its source such that it and everything before it
// is handled (acked, skipped, or durably parked), written to
// $persistentsubscription-{source}::{group}-checkpoint as a JSON string literal ("42", or
// "C:42/P:42" for `$all`) — at-least-once: a restart redelivers what was handed out after it.
//
// Every message gets a sequence number as it is read from the source, and records a `$all`
// filter leaves out take numbers too (so the checkpoint moves past them without deliveries).
// The candidate is the position read just before the lowest unhandled message, or the last
// position read when nothing is unhandled; it is written when `maxCheckPointCount` numbers
// have passed since the last one, or on the timer after `checkPointAfterMs` with at least
// `minCheckPointCount` (reference §1.6). One write at a time; a request meanwhile runs after it.

export const CHECKPOINT_EVENT_TYPE = '$SubscriptionCheckpoint';
const LEGACY_CHECKPOINT_EVENT_TYPE = 'SubscriptionCheckpoint';

export class Checkpoints {
  /** Read from the source and not handled yet, by seq; insertion order is seq order, so the first is the lowest. */
  private readonly unhandled = new Map<number, Message>();
  private nextSeq = 0;
  private lastReadSeq = -1;
  private lastReadPosition = -1;
  private lastWrittenSeq = -1;
  /** The position last written (-1: none). */
  lastWritten = -1;
  private lastWriteAt = Date.now();
  private writing = false;
  private again = false;
  private stopped = false;

  constructor(private readonly store: Store, readonly streamId: string, private readonly source: GroupSource,
    private readonly settings: GroupSettings, private readonly log: Logger) {}

  /** The checkpoint written last, or undefined when there is none (or it cannot be read). */
  load(): number | undefined {
    const found = this.store.readEvent(this.streamId, -1, false);
    if (found.status !== 'ok' || !found.event.event) return undefined;
    const record = found.event.event;
    if (record.eventType !== CHECKPOINT_EVENT_TYPE && record.eventType !== LEGACY_CHECKPOINT_EVENT_TYPE) return undefined;
    try {
      const value = JSON.parse(record.data.toString('utf8')) as unknown;
      return this.source.parsePosition(String(value));
    } catch {
      return undefined;
    }
  }

  /** Continues after `position` (a checkpoint, or where a live start begins): it counts as handled and written. */
  resumeAfter(position: number): void {
    this.lastWritten = position;
    this.lastWrittenSeq = 0;
    this.lastReadSeq = 0;
    this.lastReadPosition = position;
    this.nextSeq = 1;
  }

  /** A message read from the source: unhandled until `handled`. */
  read(m: Message): void {
    m.seq = this.nextSeq++;
    m.previousPosition = this.lastReadPosition;
    this.lastReadSeq = m.seq;
    this.lastReadPosition = m.position;
    this.unhandled.set(m.seq, m);
  }

  /** Records the source left out (a `$all` filter), the last of them at `position`: they may move the checkpoint by count. */
  skipped(count: number, position: number): void {
    this.nextSeq += count;
    this.lastReadSeq = this.nextSeq - 1;
    this.lastReadPosition = position;
    this.consider(false);
  }

  /** Handled: it no longer holds the checkpoint back (the caller considers a checkpoint once for all it handled). */
  handled(m: Message): void {
    if (m.seq >= 0) this.unhandled.delete(m.seq);
  }

  get unhandledCount(): number {
    return this.unhandled.size;
  }

  /** The last position such that it and everything read before it is handled. */
  private candidate(): { seq: number; position: number } | undefined {
    for (const lowest of this.unhandled.values()) {
      if (lowest.previousPosition < 0) return undefined;
      return { seq: lowest.seq - 1, position: lowest.previousPosition };
    }
    if (this.lastReadSeq < 0) return undefined;
    return { seq: this.lastReadSeq, position: this.lastReadPosition };
  }

  /** Writes a checkpoint if one is due: by count, or (`byTimer`, the group's tick) by time. */
  consider(byTimer: boolean, now = Date.now()): void {
    if (this.stopped) return;
    if (this.writing) {
      this.again = true;
      return;
    }
    const candidate = this.candidate();
    if (!candidate) return;
    const due = candidate.seq - this.lastWrittenSeq;
    if (due <= 0) return;
    const { maxCheckPointCount, minCheckPointCount, checkPointAfterMs } = this.settings;
    const byCount = due >= maxCheckPointCount;
    const byTime = byTimer && checkPointAfterMs > 0 && now - this.lastWriteAt >= checkPointAfterMs && due >= minCheckPointCount;
    if (byCount || byTime) void this.write(candidate.seq, candidate.position);
  }

  /** Writes what is handled now (a graceful stop), then stops writing. */
  async stop(writeLast: boolean): Promise<void> {
    if (writeLast && !this.stopped) {
      const candidate = this.candidate();
      if (candidate && candidate.seq > this.lastWrittenSeq && !this.writing) await this.write(candidate.seq, candidate.position);
    }
    this.stopped = true;
  }

  /** Writes `position` as the checkpoint (also the live start of a new group: seq 0). */
  async write(seq: number, position: number): Promise<void> {
    this.writing = true;
    try {
      const event = jsonEvent(CHECKPOINT_EVENT_TYPE, this.source.positionText(position), { idempotent: false });
      await appendKeepingLatest(this.store, this.streamId, event, 2);
      if (seq > this.lastWrittenSeq) {
        this.lastWrittenSeq = seq;
        this.lastWritten = position;
      }
      this.lastWriteAt = Date.now();
    } catch (err) {
      // A full disk is logged once for all writes (the node's out-of-space episode), not per checkpoint.
      if (!(err instanceof OutOfSpaceError)) this.log.warn({ stream: this.streamId, err: (err as Error).message }, 'checkpoint write failed; the next one retries');
    } finally {
      this.writing = false;
    }
    if (this.again) {
      this.again = false;
      this.consider(false);
    }
  }
}
