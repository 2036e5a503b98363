import type { ResolvedEvent } from '../store/index.js';

// A message of a persistent subscription group: one event on its way from the group's stream
// (or its parked stream) to a consumer, with what the group tracks about its delivery. The
// group and its parked messages both make and read them, so the type lives below both.

export interface Message {
  readonly event: ResolvedEvent;
  /** The ack/nack id: the id of the event as read (a resolved link's own id; a replayed message's parked link id). */
  readonly id: string;
  /** Its number in the group's stream (orders retries). */
  readonly eventNumber: number;
  retryCount: number;
  /** Order of first hand-out; -1 until then, and always -1 for replayed parked messages (they never move checkpoints). */
  seq: number;
  /** Event number handed out just before this one (-1: none): the checkpoint while this one is unhandled. */
  previousEventNumber: number;
  /** A replayed parked message: its number in the parked stream; else -1. */
  readonly parkedNumber: number;
  expiresAt: number;
  /** Read while the group was live (for liveBufferCount). */
  live: boolean;
}

export function messageIdOf(event: ResolvedEvent): string {
  return (event.link ?? event.event)!.eventId.toString('hex');
}
