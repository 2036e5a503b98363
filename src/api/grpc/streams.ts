import { randomUUID } from 'node:crypto';
import { ExpectedVersion, StreamDeletedError, WrongExpectedVersionError, type ResolvedEvent } from '../../store/index.js';
import type { Principal } from '../../auth/index.js';
import {
  makeFilter, type AllStart, type AppendOutcome, type EventFilter, type StreamStart, type SubscriptionItem, type Verbs,
} from '../../verbs/index.js';
import { GrpcStatus, StatusError, type Status } from './status.js';
import { deleteWrongExpectedVersion, fail, grpcStatusOf, invalidArgument, maximumAppendSizeExceeded } from './errors.js';
import { encodeReadEvents, type UuidForm } from './read-codec.js';
import {
  deadlineMs, expectedOf, isSet, positionMessage, proposedEvent, proposedSize, streamIdentifier, streamNameOf, timestampNow, u64,
  U64_MAX,
} from './messages.js';
import { Encoded, type CallContext, type RequestStream, type ResponseWriter } from './server.js';
import { encodeMessage } from './codecs.js';
import { encodeAppendSuccess, encodeBatchAppendSuccess, type AppendSuccess, type WireAppendReq, type WireBatchAppendReq } from './append-codec.js';
import type { LatencyObserver } from '../../metrics/index.js';

// The Streams service (event_store.client.streams.Streams): Read (finite reads and catch-up
// subscriptions of a stream or `$all`), Append, BatchAppend, Delete and Tombstone. Each decodes
// its request (Append's and BatchAppend's by hand: append-codec.ts), calls the verbs
// (src/verbs), and encodes the answer as the official clients expect it (grpc.md §3).

type Message = Record<string, unknown>;

export interface StreamsDoor {
  verbs: Verbs;
  /** Bytes one append may hold (all its events), as at the HTTP door. */
  maxAppendBytes: number;
  /** The largest event (`maxAppendSize`), for the error's figure. */
  maxAppendSize: number;
  /** Who calls (authenticated from `authorization`); `write`: the call writes, so a cluster follower refuses it (not-leader). */
  callerOf(call: CallContext, write: boolean): Promise<Principal>;
  /**
   * Where each append of a BatchAppend call is timed, from its last message to its answer (the
   * call itself lasts as long as the client keeps it, so the server does not time it).
   */
  batchAppendLatency: LatencyObserver;
}

/** Events read per page of a finite read (and encoded into one write). */
const READ_PAGE = 512;
/** Appends one BatchAppend call may have open at once (their events held until `is_final`). */
const MAX_OPEN_BATCHES = 1024;

export function readHandler(door: StreamsDoor) {
  return async (request: unknown, call: CallContext, out: ResponseWriter): Promise<void> => {
    const o = (request as Message).options as Message | undefined;
    if (!o) fail(invalidArgument("'options' is a required argument"));
    const uuid = o.uuid_option as Message | undefined;
    const form: UuidForm | undefined = isSet(uuid?.structured) ? 'structured' : isSet(uuid?.string) ? 'string' : undefined;
    if (!form) fail(invalidArgument("'uuidOption' is a required argument of type UUIDOption"));
    const backward = o.read_direction === 'Backwards';
    if (o.read_direction !== undefined && o.read_direction !== 'Forwards' && !backward) fail(invalidArgument('Unknown read direction'));
    const subscription = isSet(o.subscription);
    const filtered = isSet(o.filter);
    const combination = `${o.stream ? 'stream' : o.all ? 'all' : 'none'}, ${subscription ? 'subscription' : isSet(o.count) ? 'count' : 'none'}, `
      + `${backward ? 'backwards' : 'forwards'}, ${filtered ? 'filter' : 'no filter'}`;
    const valid = (o.stream || o.all) && (subscription || isSet(o.count)) && !(subscription && backward) && !(o.stream && filtered);
    if (!valid) fail(invalidArgument(`The combination of (${combination}) is invalid.`));
    const who = await door.callerOf(call, false);
    const resolveLinks = o.resolve_links === true;
    const compatibility = Number((o.control_option as Message | undefined)?.compatibility ?? 0);
    const w = new Writer(out, call, form);
    if (o.stream) {
      const s = o.stream as Message;
      const name = streamNameOf(s.stream_identifier);
      if (subscription) {
        const start: StreamStart = isSet(s.revision) ? { kind: 'after', revision: u64(s.revision, 'revision') }
          : isSet(s.end) ? { kind: 'end' } : { kind: 'start' };
        const items = door.verbs.subscriptions.toStream(who, name, start, { resolveLinks, signal: call.signal });
        return w.subscription(items, compatibility);
      }
      return readStream(door, w, who, name, s, u64(o.count, 'count'), backward, resolveLinks, compatibility);
    }
    const a = o.all as Message;
    const filter = filtered ? filterOf(o.filter as Message) : undefined;
    if (subscription) {
      const start: AllStart = isSet(a.position) ? { kind: 'after', position: u64((a.position as Message).commit_position, 'commit_position') }
        : isSet(a.end) ? { kind: 'end' } : { kind: 'start' };
      const items = door.verbs.subscriptions.toAll(who, start, {
        resolveLinks, signal: call.signal, filter: filter?.filter, checkpointInterval: filter?.checkpointInterval,
      });
      return w.subscription(items, compatibility);
    }
    const head = door.verbs.streams.headPosition;
    const position = isSet(a.position) ? u64((a.position as Message).commit_position, 'commit_position')
      : isSet(a.end) ? head : 0;
    if (position > head) fail(invalidArgument('Trying to read from an invalid position.'));
    let remaining = u64(o.count, 'count');
    let from = position;
    while (remaining > 0 && !call.signal.aborted) {
      const n = Math.min(READ_PAGE, remaining);
      const page = door.verbs.streams.readAll(who, from, n, backward ? 'backward' : 'forward', resolveLinks, filter?.filter, filter ? filter.window * 16 : undefined);
      await w.events(page.events);
      remaining -= page.events.length;
      from = page.nextPosition;
      if (page.isEnd) break;
    }
  };
}

async function readStream(door: StreamsDoor, w: Writer, who: Principal, name: string, s: Message, count: number, backward: boolean,
  resolveLinks: boolean, compatibility: number): Promise<void> {
  const verbs = door.verbs.streams;
  // From the end: backward from the last event (-1), forward nothing; from the start: event 0.
  let from = isSet(s.revision) ? u64(s.revision, 'revision') : isSet(s.end) ? (backward ? -1 : Number.MAX_SAFE_INTEGER) : 0;
  let remaining = count;
  let last = -1;
  let first = true;
  while (remaining > 0 && !w.call.signal.aborted) {
    const n = Math.min(READ_PAGE, remaining);
    const page = verbs.readStream(who, name, from, n, backward ? 'backward' : 'forward', resolveLinks);
    if (page.status === 'deleted') throw new StreamDeletedError(name);
    if (page.status === 'noStream') {
      if (first) await w.message({ stream_not_found: { stream_identifier: streamIdentifier(name) } });
      return;
    }
    last = page.lastEventNumber;
    if (first && compatibility >= 1 && !backward && page.events.length === 0 && from !== last + 1) {
      await w.message({ first_stream_position: String(Math.max(0, last + 1)) });
    }
    first = false;
    await w.events(page.events);
    remaining -= page.events.length;
    if (page.isEndOfStream) break;
    if (page.events.length === 0) {
      // The whole range is hidden ($maxAge hides events one by one): the next range.
      from = backward ? (from < 0 ? last : from) - n : from + n;
    } else {
      const edge = (page.events[page.events.length - 1].link ?? page.events[page.events.length - 1].event)!.eventNumber;
      from = backward ? edge - 1 : edge + 1;
    }
    if (backward && from < 0) break;
  }
  if (compatibility >= 1 && last >= 0) await w.message({ last_stream_position: String(last) });
}

function filterOf(f: Message): { filter: EventFilter; window: number; checkpointInterval: number } {
  const expression = (f.stream_identifier ?? f.event_type) as Message | undefined;
  if (!expression) fail(invalidArgument("A filter needs 'stream_identifier' or 'event_type'"));
  const on = f.stream_identifier ? 'streamName' : 'eventType';
  const regex = typeof expression.regex === 'string' && expression.regex !== '' ? expression.regex : undefined;
  const prefixes = Array.isArray(expression.prefix) ? (expression.prefix as string[]) : [];
  const window = isSet(f.max) ? Number(f.max) : 32;
  if (!Number.isInteger(window) || window <= 0) fail(invalidArgument("The filter's window 'max' must be at least 1"));
  const multiplier = Number(f.checkpointIntervalMultiplier ?? 0);
  if (!Number.isInteger(multiplier) || multiplier <= 0) fail(invalidArgument("'checkpointIntervalMultiplier' must be at least 1"));
  return { filter: makeFilter(on, regex, prefixes), window, checkpointInterval: window * multiplier };
}

/** Writes a read's answer, waiting whenever the call's write buffer is full. */
class Writer {
  constructor(private readonly out: ResponseWriter, readonly call: CallContext, private readonly form: UuidForm) {}

  async events(events: readonly ResolvedEvent[]): Promise<void> {
    if (events.length === 0) return;
    if (!this.out.writeFramed(encodeReadEvents(events, this.form))) await this.out.drained();
  }

  async message(message: Message): Promise<void> {
    if (!this.out.write(message)) await this.out.drained();
  }

  async subscription(items: AsyncGenerator<SubscriptionItem>, compatibility: number): Promise<void> {
    await this.message({ confirmation: { subscription_id: randomUUID() } });
    try {
      for await (const item of items) {
        if (this.call.signal.aborted || this.out.ended) return;
        switch (item.kind) {
          case 'events':
            await this.events(item.events);
            break;
          case 'checkpoint':
            await this.message({ checkpoint: { ...positionMessage(item.position), timestamp: timestampNow() } });
            break;
          case 'caughtUp':
            await this.message({ caught_up: liveState(item) });
            break;
          case 'fellBehind':
            // Only clients that asked for it know the message (older ones would fail on it); the others see caught_up again.
            if (compatibility >= 2) await this.message({ fell_behind: liveState(item) });
            break;
        }
      }
    } finally {
      await items.return(undefined);
    }
  }
}

function liveState(item: { revision?: number; position?: number }): Message {
  return {
    timestamp: timestampNow(),
    ...(item.revision !== undefined ? { stream_revision: String(item.revision) } : {}),
    ...(item.position !== undefined ? { position: positionMessage(item.position) } : {}),
  };
}

/** What a successful append answers: the stream's revision, and where its last event is (none when no event was given). */
function successOf(result: AppendOutcome, written: number): AppendSuccess {
  return { revision: result.lastEventNumber, position: written > 0 ? result.lastPosition : undefined };
}

function wrongExpectedVersion(expected: ExpectedVersion, current: number): Message {
  const currentArms = current < 0 ? { current_no_stream: {}, no_stream_20_6_0: {} }
    : { current_revision: String(current), current_revision_20_6_0: String(current) };
  const expectedArms = expected.kind === 'exact' ? { expected_revision: String(expected.version), expected_revision_20_6_0: String(expected.version) }
    : expected.kind === 'noStream' ? { expected_no_stream: {}, expected_revision_20_6_0: U64_MAX }
      : expected.kind === 'streamExists' ? { expected_stream_exists: {}, stream_exists_20_6_0: {} }
        : { expected_any: {}, any_20_6_0: {} };
  return { ...currentArms, ...expectedArms };
}

export function appendHandler(door: StreamsDoor) {
  return async (requests: RequestStream, call: CallContext): Promise<Message | Encoded> => {
    let name: string | undefined;
    let expected: ExpectedVersion = ExpectedVersion.any;
    let who: Principal | undefined;
    const events = [];
    let bytes = 0;
    for await (const r of requests as AsyncIterable<WireAppendReq>) {
      if (name === undefined) {
        if (!r.options) throw new StatusError({ code: GrpcStatus.UNKNOWN, message: 'The first message of an append must carry its options' });
        const o = r.options;
        name = streamNameOf(o.stream_identifier);
        expected = expectedOf(o, 'revision');
        who = await door.callerOf(call, true);
        door.verbs.streams.authorizeAppend(who, name); // before reading the events
        continue;
      }
      if (!r.proposed_message) throw new StatusError({ code: GrpcStatus.UNKNOWN, message: 'After the options an append carries proposed events only' });
      const event = proposedEvent(r.proposed_message);
      bytes += proposedSize(event);
      if (bytes > door.maxAppendBytes) fail(maximumAppendSizeExceeded(door.maxAppendBytes));
      events.push(event);
    }
    if (name === undefined || !who) return fail(invalidArgument("'options' is a required argument"));
    if (call.aborted) throw call.signal.reason;
    try {
      const result = await door.verbs.streams.append(who, name, expected, events);
      return new Encoded(encodeAppendSuccess(successOf(result, events.length)));
    } catch (err) {
      if (err instanceof WrongExpectedVersionError) return { wrong_expected_version: wrongExpectedVersion(expected, err.currentVersion) };
      throw err;
    }
  };
}

export function deleteHandler(door: StreamsDoor, hard: boolean) {
  return async (request: unknown, call: CallContext): Promise<Message> => {
    const o = (request as Message).options as Message | undefined;
    if (!o) fail(invalidArgument("'options' is a required argument"));
    const name = streamNameOf(o.stream_identifier);
    const expected = expectedOf(o, 'revision');
    const who = await door.callerOf(call, true);
    try {
      const result = await door.verbs.streams.delete(who, name, expected, hard);
      return { position: positionMessage(result.position) };
    } catch (err) {
      if (err instanceof WrongExpectedVersionError) fail(deleteWrongExpectedVersion(name, expected, err.currentVersion));
      throw err;
    }
  };
}

interface OpenBatch {
  name: string;
  expected: ExpectedVersion;
  who: Principal;
  events: ReturnType<typeof proposedEvent>[];
  bytes: number;
  timer?: NodeJS.Timeout;
  idMessage: unknown;
  /** The correlation id's message as the client sent it: echoed in the answer. */
  correlation: Buffer;
}

/** BatchAppend: many appends interleaved on one call, matched by correlation id, one answer each. */
export function batchAppendHandler(door: StreamsDoor) {
  return async (requests: RequestStream, call: CallContext, out: ResponseWriter): Promise<void> => {
    const open = new Map<string, OpenBatch>();
    const dropped = new Set<string>();
    const running = new Set<Promise<void>>();
    const answer = (batch: Pick<OpenBatch, 'idMessage' | 'name'>, result: Message) => {
      if (!out.ended) out.write({ correlation_id: batch.idMessage, stream_identifier: streamIdentifier(batch.name), ...result });
    };
    const refuse = (key: string, batch: Pick<OpenBatch, 'idMessage' | 'name'>, status: Status, detailType: string, detail: Message = {}) => {
      const b = open.get(key);
      if (b?.timer) clearTimeout(b.timer);
      open.delete(key);
      if (dropped.size > MAX_OPEN_BATCHES * 4) dropped.clear();
      dropped.add(key);
      answer(batch, { error: { code: status.code, message: status.message, details: { type_url: `type.googleapis.com/${detailType}`, value: encodeMessage(detailType, detail) } } });
    };
    try {
      for await (const r of requests as AsyncIterable<WireBatchAppendReq>) {
        const idMessage = r.correlation_id;
        const key = correlationKey(idMessage);
        if (r.options) {
          const o = r.options;
          const name = streamNameOf(o.stream_identifier);
          const who = await door.callerOf(call, true);
          try {
            door.verbs.streams.authorizeAppend(who, name);
          } catch {
            refuse(key, { idMessage, name }, { code: GrpcStatus.PERMISSION_DENIED, message: 'AccessDenied' }, 'event_store.client.AccessDenied');
            continue;
          }
          if (open.size >= MAX_OPEN_BATCHES) fail({ code: GrpcStatus.RESOURCE_EXHAUSTED, message: `At most ${MAX_OPEN_BATCHES} appends may be open on one BatchAppend call` });
          const batch: OpenBatch = { name, expected: expectedOf(o, 'stream_position'), who, events: [], bytes: 0, idMessage, correlation: r.correlation_bytes! };
          dropped.delete(key);
          const timeout = deadlineMs(o.deadline_21_10_0, o.deadline);
          if (timeout !== undefined && timeout <= 0) {
            refuse(key, batch, { code: GrpcStatus.DEADLINE_EXCEEDED, message: 'Timeout' }, 'event_store.client.Timeout');
            continue;
          }
          if (timeout !== undefined) {
            batch.timer = setTimeout(() => refuse(key, batch, { code: GrpcStatus.DEADLINE_EXCEEDED, message: 'Timeout' }, 'event_store.client.Timeout'),
              Math.min(timeout, 2 ** 31 - 1));
          }
          open.set(key, batch);
        }
        const batch = open.get(key);
        if (!batch || dropped.has(key)) continue; // an unknown or dropped correlation: ignored, as the established server does
        for (const m of r.proposed_messages) {
          const event = proposedEvent(m);
          batch.bytes += proposedSize(event);
          if (batch.bytes > door.maxAppendBytes) {
            refuse(key, batch, { code: GrpcStatus.INVALID_ARGUMENT, message: 'MaximumAppendSizeExceeded' },
              'event_store.client.MaximumAppendSizeExceeded', { maxAppendSize: door.maxAppendBytes });
            break;
          }
          batch.events.push(event);
        }
        if (!r.is_final || !open.has(key)) continue;
        open.delete(key);
        const write = commitBatch(door, batch, out, (status, type, detail) => refuse(key, batch, status, type, detail));
        running.add(write);
        void write.finally(() => running.delete(write));
      }
      await Promise.all(running);
    } finally {
      for (const batch of open.values()) if (batch.timer) clearTimeout(batch.timer);
    }
  };
}

async function commitBatch(door: StreamsDoor, batch: OpenBatch, out: ResponseWriter,
  refuse: (status: Status, detailType: string, detail?: Message) => void): Promise<void> {
  const started = performance.now();
  try {
    const result = await door.verbs.streams.append(batch.who, batch.name, batch.expected, batch.events);
    if (batch.timer) clearTimeout(batch.timer);
    if (!out.ended) out.write(new Encoded(encodeBatchAppendSuccess(batch.correlation, batch.name, successOf(result, batch.events.length))));
  } catch (err) {
    if (batch.timer) clearTimeout(batch.timer);
    if (err instanceof WrongExpectedVersionError) {
      const e = batch.expected;
      refuse({ code: GrpcStatus.ALREADY_EXISTS, message: 'WrongExpectedVersion' }, 'event_store.client.WrongExpectedVersion', {
        ...(err.currentVersion < 0 ? { current_no_stream: {} } : { current_stream_revision: String(err.currentVersion) }),
        ...(e.kind === 'exact' ? { expected_stream_position: String(e.version) } : e.kind === 'noStream' ? { expected_no_stream: {} }
          : e.kind === 'streamExists' ? { expected_stream_exists: {} } : { expected_any: {} }),
      });
    } else if (err instanceof StreamDeletedError) {
      refuse({ code: GrpcStatus.NOT_FOUND, message: 'StreamDeleted' }, 'event_store.client.StreamDeleted', { stream_identifier: streamIdentifier(batch.name) });
    } else {
      const status = grpcStatusOf(err, door.maxAppendSize);
      if (status?.trailers?.exception === 'maximum-append-size-exceeded') {
        refuse({ code: GrpcStatus.INVALID_ARGUMENT, message: 'MaximumAppendSizeExceeded' }, 'event_store.client.MaximumAppendSizeExceeded', { maxAppendSize: door.maxAppendSize });
      } else if (status?.code === GrpcStatus.INVALID_ARGUMENT) {
        // The reason goes in the status message too: clients that do not know the BadRequest detail show the message.
        refuse({ code: GrpcStatus.INVALID_ARGUMENT, message: status.message }, 'event_store.client.BadRequest', { message: status.message });
      } else if (status?.code === GrpcStatus.RESOURCE_EXHAUSTED) {
        // A full disk: the status and its message as a unary Append answers them. The clients know
        // no detail for it and show the message (the Node clients: "Could not recognize No space left on device: ...").
        refuse(status, 'google.rpc.ResourceInfo', { resource_type: 'disk', description: status.message });
      } else {
        refuse({ code: GrpcStatus.UNKNOWN, message: 'Unknown' }, 'event_store.client.Unknown');
      }
    }
  } finally {
    door.batchAppendLatency.observe((performance.now() - started) / 1000);
  }
}

function correlationKey(id: unknown): string {
  const u = id as Message | undefined;
  if (typeof u?.string === 'string') return u.string.toLowerCase();
  if (u?.structured) {
    const s = u.structured as Message;
    return `${String(s.most_significant_bits ?? 0)}/${String(s.least_significant_bits ?? 0)}`;
  }
  return fail(invalidArgument("'correlation_id' is a required argument"));
}

