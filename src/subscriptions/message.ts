import type { ResolvedEvent } from '../store/index.js';

// A message of a persistent subscription group: one event on its way from the group's source
// (or its parked stream) to a consumer, with what the group tracks about its delivery. The
// group, its parked messages and its consumers all make or read them, so the type lives below
// them all.

export interface Message {
  readonly event: ResolvedEvent;
  /** The ack/nack id: the id of the event as read (a resolved link's own id; a replayed message's parked link id). */
  readonly id: string;
  /** Where it is in the group's source: its event number in a stream group, its log position in a `$all` group (orders retries). */
  readonly position: number;
  retryCount: number;
  /** Order of reading from the source; -1 for replayed parked messages (they never move checkpoints). */
  seq: number;
  /** Position of what was read just before it (-1: unknown): the checkpoint while this one is unhandled. */
  previousPosition: number;
  /** A replayed parked message: its number in the parked stream; else -1. */
  readonly parkedNumber: number;
  expiresAt: number;
  /** Read while the group was live (for liveBufferCount). */
  live: boolean;
  /** The push consumer it is in flight to (undefined: buffered, or pulled over HTTP). */
  consumer?: MessageHolder;
  /** When it was handed out (ms), for a consumer's ack latencies. */
  sentAt: number;
}

/** What a message in flight to a push consumer tells that consumer when it is settled. */
export interface MessageHolder {
  settled(m: Message, acked: boolean, now: number): void;
}

export function messageIdOf(event: ResolvedEvent): string {
  return (event.link ?? event.event)!.eventId.toString('hex');
}

/** A message as read from the group's source, not handed out yet. */
export function newMessage(event: ResolvedEvent, position: number, live: boolean): Message {
  return {
    event, id: messageIdOf(event), position, retryCount: 0, seq: -1, previousPosition: -1, parkedNumber: -1, expiresAt: 0, live, sentAt: 0,
  };
}
