import type { Principal } from '../../auth/index.js';
import { ALL_SOURCE, type ConnectionInfo, type GroupInfo, type NackAction, type Verbs } from '../../verbs/index.js';
import { SubscriptionError } from '../../subscriptions/index.js';
import { fail, invalidArgument } from './errors.js';
import { isSet, streamNameOf, uuidBytes } from './messages.js';
import { encodePersistentEvents, type UuidForm } from './read-codec.js';
import { groupDefinitionOf, groupSettingsOf } from './persistent-settings.js';
import { GrpcStatus, StatusError } from './status.js';
import type { CallContext, RequestStream, ResponseWriter } from './server.js';

// The PersistentSubscriptions service (event_store.client.persistent_subscriptions): Create,
// Update and Delete of a group on a stream or on `$all`, Read (a push consumer: options first,
// then acks and nacks; the group's messages with their retry counts), GetInfo, List,
// ReplayParked and RestartSubsystem (grpc.md §5). Each decodes its request, calls the verbs
// (verbs/persistent.ts, which the HTTP routes call too) and encodes the answer.

type Message = Record<string, unknown>;

export interface PersistentDoor {
  verbs: Verbs;
  /** Who calls; the persistent subscriptions run on the leader, so a cluster follower refuses every call (not-leader). */
  callerOf(call: CallContext, write: boolean): Promise<Principal>;
}

const NACK_ACTIONS: Record<string, NackAction> = { Park: 'Park', Retry: 'Retry', Skip: 'Skip', Stop: 'Stop', Unknown: 'Unknown' };

function optionsOf(request: unknown): Message {
  const o = (request as Message).options as Message | undefined;
  if (!o) return fail(invalidArgument("'options' is a required argument"));
  return o;
}

function groupNameOf(o: Message): string {
  return typeof o.group_name === 'string' ? o.group_name : '';
}

/** A stream named in a stream form; `$all` has forms of its own. */
function streamOf(identifier: unknown): string {
  const name = streamNameOf(identifier);
  if (name === ALL_SOURCE) fail(invalidArgument("'$all' is not a stream here: name it with the request's 'all' option"));
  return name;
}

/** The source of GetInfo, Delete and ReplayParked: `stream_identifier` or `all`. */
function sourceOf(o: Message): string {
  return isSet(o.all) ? ALL_SOURCE : streamOf(o.stream_identifier);
}

/** The source of Create and Update: `stream`, `all`, or the older clients' `stream_identifier` (their start is in the settings). */
function definedSourceOf(o: Message): string {
  if (o.stream_option === 'all') return ALL_SOURCE;
  return streamOf(o.stream_option === 'stream' ? (o.stream as Message).stream_identifier : o.stream_identifier);
}

/** A unary method: its options decoded, its caller known (the persistent subscriptions run on the leader), then `run`. */
function unary(door: PersistentDoor, run: (o: Message, who: Principal) => Promise<Message | void> | Message | void) {
  return async (request: unknown, call: CallContext): Promise<Message> => {
    const o = optionsOf(request);
    const who = await door.callerOf(call, true);
    return (await run(o, who)) ?? {};
  };
}

export function createHandler(door: PersistentDoor) {
  return unary(door, (o, who) => door.verbs.persistent.create(who, definedSourceOf(o), groupNameOf(o), () => groupDefinitionOf(o)));
}

export function updateHandler(door: PersistentDoor) {
  return unary(door, (o, who) => door.verbs.persistent.update(who, definedSourceOf(o), groupNameOf(o), () => groupSettingsOf(o)));
}

export function deleteHandler(door: PersistentDoor) {
  return unary(door, (o, who) => door.verbs.persistent.delete(who, sourceOf(o), groupNameOf(o)));
}

export function getInfoHandler(door: PersistentDoor) {
  return unary(door, (o, who) => ({ subscription_info: subscriptionInfo(door.verbs.persistent.info(who, sourceOf(o), groupNameOf(o))) }));
}

export function listHandler(door: PersistentDoor) {
  return unary(door, (o, who) => {
    const forStream = o.list_for_stream as Message | undefined;
    if (!forStream && !isSet(o.list_all_subscriptions)) fail(invalidArgument("'list_option' is a required argument"));
    const source = forStream ? (isSet(forStream.all) ? ALL_SOURCE : streamOf(forStream.stream)) : undefined;
    return { subscriptions: door.verbs.persistent.list(who, source).map(subscriptionInfo) };
  });
}

export function replayParkedHandler(door: PersistentDoor) {
  // stop_at is an int64: a negative one is the verbs' to refuse, as a failure of the group.
  return unary(door, (o, who) => door.verbs.persistent.replayParked(who, sourceOf(o), groupNameOf(o), isSet(o.stop_at) ? Number(o.stop_at) : undefined));
}

export function restartHandler(door: PersistentDoor) {
  return async (_request: unknown, call: CallContext): Promise<Message> => {
    await door.verbs.persistent.restart(await door.callerOf(call, true));
    return {};
  };
}

/** Read: a push consumer of the group until the client cancels, or the group lets it go. */
export function readHandler(door: PersistentDoor) {
  return async (requests: RequestStream, call: CallContext, out: ResponseWriter): Promise<void> => {
    const incoming = (requests as AsyncIterable<Message>)[Symbol.asyncIterator]();
    const first = await incoming.next();
    const o = first.done ? undefined : (first.value.options as Message | undefined);
    if (!o) throw new StatusError({ code: GrpcStatus.UNKNOWN, message: 'The first message of a persistent subscription read must carry its options' });
    const uuid = o.uuid_option as Message | undefined;
    const form: UuidForm | undefined = isSet(uuid?.structured) ? 'structured' : isSet(uuid?.string) ? 'string' : undefined;
    if (!form) fail(invalidArgument("'uuidOption' is a required argument of type UUIDOption"));
    const source = o.stream_option === 'all' ? ALL_SOURCE : streamOf(o.stream_identifier);
    const group = groupNameOf(o);
    const who = await door.callerOf(call, true);
    let drop: (err: unknown) => void = () => undefined;
    const ended = new Promise<never>((_, reject) => {
      drop = reject;
      if (call.signal.aborted) reject(call.signal.reason);
      else call.signal.addEventListener('abort', () => reject(call.signal.reason), { once: true });
    });
    ended.catch(() => undefined);
    const consumer = door.verbs.persistent.connect(who, source, group, {
      capacity: Number(o.buffer_size ?? 0),
      username: who.name,
      connectionName: String(call.metadata['connection-name'] ?? '<unknown>'),
      from: '',
      deliver: (messages) => {
        if (!out.ended) out.writeFramed(encodePersistentEvents(messages, form!));
      },
      dropped: (reason) => drop(new SubscriptionError(reason === 'deleted' ? 'SUBSCRIPTION_NOT_FOUND' : 'SUBSCRIPTION_DROPPED',
        `The group ${group} on ${source} let its consumers go`, source, group)),
    });
    try {
      out.write({ subscription_confirmation: { subscription_id: `${source}::${group}` } });
      const settling = (async () => {
        for (let next = await incoming.next(); !next.done; next = await incoming.next()) {
          const r = next.value;
          const settle = (r.ack ?? r.nack) as Message | undefined;
          if (!settle) throw new StatusError({ code: GrpcStatus.UNKNOWN, message: 'After the options a persistent subscription read carries acks and nacks only' });
          const ids = ((settle.ids ?? []) as unknown[]).map((id) => uuidBytes(id, 'ids').toString('hex'));
          if (r.ack) consumer.ack(ids);
          else consumer.nack(ids, NACK_ACTIONS[String(settle.action ?? 'Unknown')] ?? 'Unknown', typeof settle.reason === 'string' ? settle.reason : '');
        }
      })();
      // A client that half-closes sends no more acks; its messages keep coming until it cancels.
      await Promise.race([ended, settling.then(() => ended)]);
    } finally {
      consumer.close();
    }
  };
}

/** A group's settings and statistics as `SubscriptionInfo` (the figures /info shows over HTTP). */
function subscriptionInfo(g: GroupInfo): Message {
  const s = g.settings;
  return {
    event_source: g.source, group_name: g.group, status: g.status, connections: g.connections.map(connectionInfo),
    average_per_second: g.averagePerSecond, total_items: String(g.totalItems), count_since_last_measurement: String(g.countSinceLastMeasurement),
    last_checkpointed_event_position: g.lastCheckpointedPosition ?? '', last_known_event_position: g.lastKnownPosition ?? '',
    resolve_link_tos: s.resolveLinkTos, start_from: g.startFrom, message_timeout_milliseconds: s.messageTimeoutMs,
    extra_statistics: s.extraStatistics, max_retry_count: s.maxRetryCount, live_buffer_size: s.liveBufferSize, buffer_size: s.bufferSize,
    read_batch_size: s.readBatchSize, check_point_after_milliseconds: s.checkPointAfterMs, min_check_point_count: s.minCheckPointCount,
    max_check_point_count: s.maxCheckPointCount, read_buffer_count: g.readBufferCount, live_buffer_count: String(g.liveBufferCount),
    retry_buffer_count: g.retryBufferCount, total_in_flight_messages: g.totalInFlightMessages,
    outstanding_messages_count: g.outstandingMessagesCount, named_consumer_strategy: s.namedConsumerStrategy,
    max_subscriber_count: s.maxSubscriberCount, parked_message_count: String(g.parkedMessageCount),
  };
}

function connectionInfo(c: ConnectionInfo): Message {
  return {
    from: c.from, username: c.username, average_items_per_second: c.averageItemsPerSecond, total_items: String(c.totalItems),
    count_since_last_measurement: String(c.countSinceLastMeasurement),
    observed_measurements: c.observedMeasurements.map((m) => ({ key: m.key, value: String(m.value) })),
    available_slots: c.availableSlots, in_flight_messages: c.inFlightMessages, connection_name: c.connectionName,
  };
}
