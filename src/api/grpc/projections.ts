import type { ProjectionMode } from '../../projections/index.js';
import type { ProjectionFigures, ProjectionListing } from '../../verbs/index.js';
import { methodOf } from './codecs.js';
import type { ServiceDoor } from './door.js';
import { fail, invalidArgument } from './errors.js';
import { isSet, optionsOf, protoValue } from './messages.js';
import type { CallContext, GrpcServer, ResponseWriter } from './server.js';

// The Projections service (event_store.client.projections.Projections): create (one-time,
// continuous, transient), update, delete, statistics (one message per projection), enable,
// disable (Stopped with a checkpoint, Aborted without), reset, state and result of a partition
// as google.protobuf.Value, and a restart of the subsystem. The same projections the HTTP API
// shows, through the same verbs (src/verbs/projections.ts); projections run on a cluster's
// leader, so a follower answers every call not-leader.

type Message = Record<string, unknown>;

const SERVICE = 'event_store.client.projections.Projections';

/** Statistics' mode oneof arm → which projections it lists (none set: all). */
const LISTINGS: Record<string, ProjectionListing> = { all: 'any', transient: 'Transient', continuous: 'Continuous', one_time: 'OneTime' };

export function registerProjections(server: GrpcServer, door: ServiceDoor): void {
  const verbs = door.verbs.projections;
  const caller = (call: CallContext) => door.callerOf(call, 'leader');
  const unary = (name: string, handle: (options: Message, call: CallContext) => Promise<Message>) =>
    server.add(methodOf(SERVICE, name), { kind: 'unary', handle: (request, call) => handle(optionsOf(request), call) });
  const named = (o: Message): string => (typeof o.name === 'string' ? o.name : '');

  unary('Create', async (o, call) => {
    const who = await caller(call);
    await verbs.create(who, createRequest(o));
    return {};
  });
  unary('Update', async (o, call) => {
    const emit = o.emit_option === 'emit_enabled' ? o.emit_enabled === true : undefined;
    await verbs.updateQuery(await caller(call), named(o), typeof o.query === 'string' ? o.query : '', emit);
    return {};
  });
  unary('Delete', async (o, call) => {
    await verbs.delete(await caller(call), named(o), {
      deleteEmittedStreams: o.delete_emitted_streams === true, deleteStateStream: o.delete_state_stream === true,
      deleteCheckpointStream: o.delete_checkpoint_stream === true,
    });
    return {};
  });
  unary('Enable', async (o, call) => {
    await verbs.enable(await caller(call), named(o));
    return {};
  });
  unary('Disable', async (o, call) => {
    await verbs.disable(await caller(call), named(o), o.write_checkpoint === true);
    return {};
  });
  // The established server ignores Reset's write_checkpoint too: a reset starts a new epoch, whose checkpoints start afresh.
  unary('Reset', async (o, call) => {
    await verbs.reset(await caller(call), named(o));
    return {};
  });
  for (const [method, field] of [['State', 'state'], ['Result', 'result']] as const) {
    unary(method, async (o, call) => {
      const value = await verbs.read(await caller(call), named(o), typeof o.partition === 'string' ? o.partition : '');
      return { [field]: jsonValue(value[field]) };
    });
  }
  server.add(methodOf(SERVICE, 'RestartSubsystem'), {
    kind: 'unary',
    handle: async (_request, call) => {
      await verbs.restartSubsystem(await caller(call));
      return {};
    },
  });
  server.add(methodOf(SERVICE, 'Statistics'), {
    kind: 'serverStream',
    handle: async (request, call, out: ResponseWriter) => {
      const o = (request as Message).options as Message | undefined ?? {};
      const who = await caller(call);
      const mode = typeof o.mode === 'string' ? o.mode : undefined;
      const projections = mode === 'name' ? [verbs.find(who, String(o.name))] : verbs.list(who, LISTINGS[mode ?? 'all'] ?? 'any');
      for (const p of projections) {
        if (!out.write({ details: details(verbs.figures(p)) })) await out.drained();
      }
    },
  });
}

function createRequest(o: Message) {
  const query = typeof o.query === 'string' ? o.query : '';
  // 25+ clients send an engine version for engine v2 only: this node has one engine, and refuses to run a query on another than asked.
  if (isSet(o.engine_version) && Number(o.engine_version) > 1) {
    fail(invalidArgument(`Projection engine version ${String(o.engine_version)} is not served by this node (it runs engine version 1)`));
  }
  const arm = (o.transient ?? o.continuous ?? {}) as Message;
  const name = typeof arm.name === 'string' && arm.name !== '' ? arm.name : undefined;
  let mode: ProjectionMode;
  if (isSet(o.one_time)) mode = 'OneTime';
  else if (o.transient) mode = 'Transient';
  else if (o.continuous) mode = 'Continuous';
  else return fail(invalidArgument("'mode' is a required argument: one_time, transient or continuous"));
  const emit = mode === 'Continuous' && arm.emit_enabled === true;
  const trackEmittedStreams = mode === 'Continuous' && arm.track_emitted_streams === true;
  if (trackEmittedStreams && !emit) fail(invalidArgument('EmitEnabled must be set to true to track emitted streams.'));
  return { name: mode === 'OneTime' ? undefined : name, mode, query, enabled: true, emit, checkpoints: mode === 'Continuous', trackEmittedStreams };
}

/** StatisticsResp.Details: the figures both doors report, but the count HTTP adds. */
function details(figures: ProjectionFigures): Message {
  const { eventsSkipped: _notInTheProto, ...fields } = figures;
  return fields;
}

/** A partition's state or result text as a Value: none yet is an empty object, as the established server answers. */
function jsonValue(text: string): Message {
  if (text.trim() === '') return { structValue: { fields: {} } };
  try {
    return protoValue(JSON.parse(text));
  } catch {
    return { stringValue: text };
  }
}
