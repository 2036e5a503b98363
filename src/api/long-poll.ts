import type { FastifyRequest } from 'fastify';
import type { EventRecord, Store } from '../store/index.js';
import { integerHeader } from './headers.js';

// Long polls (SVC-LongPoll: seconds). A read that finds nothing new waits up to that long for a
// commit it cares about on the store's bus, then reads once more; a client that hangs up ends
// the wait early.

/** The wait the request asks for, in ms (0: none; a negative header is none), at most `maxSeconds`. */
export function longPollMs(req: FastifyRequest, maxSeconds = Number.POSITIVE_INFINITY): number {
  return Math.min(Math.max(integerHeader(req, 'LongPoll') ?? 0, 0), maxSeconds) * 1000;
}

/** Fires when the client closes the connection. */
export function hangUpSignal(req: FastifyRequest): AbortSignal {
  const abort = new AbortController();
  req.raw.once('close', () => abort.abort());
  return abort.signal;
}

/** Reads; when `isEmpty` and the client waits, waits for a commit that `matches` and reads again. */
export async function readWithLongPoll<T>(req: FastifyRequest, bus: Store['bus'], waitMs: number, read: () => T | Promise<T>,
  isEmpty: (page: T) => boolean, matches: (record: EventRecord) => boolean): Promise<T> {
  const page = await read();
  if (waitMs <= 0 || !isEmpty(page)) return page;
  await bus.waitFor(matches, waitMs, hangUpSignal(req));
  return read();
}
