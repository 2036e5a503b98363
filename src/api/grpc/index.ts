import type { Logger } from 'pino';
import { ANONYMOUS, SYSTEM, type Principal, type UserStore } from '../../auth/index.js';
import type { Config } from '../../config/index.js';
import { maxAppendBytes, type Verbs } from '../../verbs/index.js';
import type { LeaderRouting } from '../leader-routing.js';
import { methodOf } from './codecs.js';
import { decodeAppendReq, decodeBatchAppendReq } from './append-codec.js';
import { fail, grpcStatusOf, maximumAppendSizeExceeded, notLeader, unauthenticated } from './errors.js';
import { GrpcServer, type CallContext } from './server.js';
import { GrpcStatus } from './status.js';
import { supportedMethods } from './server-features.js';
import { appendHandler, batchAppendHandler, deleteHandler, readHandler, type StreamsDoor } from './streams.js';
import * as persistent from './persistent.js';
import type { ServedBy, ServiceDoor } from './door.js';
import { registerProjections } from './projections.js';
import { registerUsers } from './users.js';
import { registerGossip, registerMonitoring, registerOperations } from './node-services.js';
import type { LatencyObserver, RequestLatency } from '../../metrics/index.js';

// The gRPC door: the established server's client protocol (event_store.client.*) on the node's
// own port, served by grpc/server.ts and handed the HTTP/2 connections by api/listener.ts.
// Who calls: `authorization: Basic` (or `Bearer` carrying base64 user:pass, as the clients send
// it) is checked like the HTTP door's header; without it a call on a TLS node is anonymous, and
// on a plain node runs as `--insecure-grpc-user` (system by default: the official clients send
// no credentials over a plain connection, and the established server runs everything as
// system in insecure mode).

export { GrpcServer } from './server.js';

export interface GrpcDoorContext {
  verbs: Verbs;
  users: UserStore;
  config: Config;
  log: Logger;
  cluster?: LeaderRouting;
  /** Where call durations go (GET /metrics). */
  latency: RequestLatency;
  /** Told when a unary or client-streaming call, or one append of a BatchAppend call, is answered (big HTTP pages stand back for them: send-queue.ts). */
  onAnswered?: () => void;
}

const STREAMS = 'event_store.client.streams.Streams';
const PERSISTENT = 'event_store.client.persistent_subscriptions.PersistentSubscriptions';

/** Each answer of a BatchAppend call is an answered request too (the call itself stays open). */
function answered(latency: LatencyObserver, onAnswered: (() => void) | undefined): LatencyObserver {
  return onAnswered ? { observe: (seconds) => { latency.observe(seconds); onAnswered(); } } : latency;
}

export function createGrpcDoor(ctx: GrpcDoorContext): GrpcServer {
  const { config } = ctx;
  const server = new GrpcServer({
    log: ctx.log, statusOf: (err) => grpcStatusOf(err, config.maxAppendSize), latencyOf: (path) => ctx.latency.grpc(path),
    onAnswered: ctx.onAnswered,
  });
  const services: ServiceDoor = {
    verbs: ctx.verbs,
    callerOf: async (call, servedBy) => {
      requireLeader(ctx.cluster, call, servedBy);
      return callerOf(ctx, call);
    },
  };
  const door: StreamsDoor = {
    verbs: ctx.verbs,
    maxAppendBytes: maxAppendBytes(config.maxAppendSize),
    maxAppendSize: config.maxAppendSize,
    callerOf: (call, write) => services.callerOf(call, write ? 'leader' : 'leaderIfAsked'),
    batchAppendLatency: answered(ctx.latency.grpc(methodOf(STREAMS, 'BatchAppend').path), ctx.onAnswered),
  };
  const appendLimits = { maxMessageBytes: door.maxAppendBytes, tooLarge: () => maximumAppendSizeExceeded(config.maxAppendSize) };
  server.add(methodOf(STREAMS, 'Read'), { kind: 'serverStream', handle: readHandler(door) });
  // The events of an append are read off the wire by hand (append-codec.ts), not by protobufjs.
  server.add({ ...methodOf(STREAMS, 'Append'), requestDeserialize: decodeAppendReq }, { kind: 'clientStream', handle: appendHandler(door) }, appendLimits);
  server.add({ ...methodOf(STREAMS, 'BatchAppend'), requestDeserialize: decodeBatchAppendReq }, { kind: 'bidi', handle: batchAppendHandler(door) }, appendLimits);
  server.add(methodOf(STREAMS, 'Delete'), { kind: 'unary', handle: deleteHandler(door, false) });
  server.add(methodOf(STREAMS, 'Tombstone'), { kind: 'unary', handle: deleteHandler(door, true) });
  server.add(methodOf(PERSISTENT, 'Create'), { kind: 'unary', handle: persistent.createHandler(door) });
  server.add(methodOf(PERSISTENT, 'Update'), { kind: 'unary', handle: persistent.updateHandler(door) });
  server.add(methodOf(PERSISTENT, 'Delete'), { kind: 'unary', handle: persistent.deleteHandler(door) });
  server.add(methodOf(PERSISTENT, 'Read'), { kind: 'bidi', handle: persistent.readHandler(door) });
  server.add(methodOf(PERSISTENT, 'GetInfo'), { kind: 'unary', handle: persistent.getInfoHandler(door) });
  server.add(methodOf(PERSISTENT, 'List'), { kind: 'unary', handle: persistent.listHandler(door) });
  server.add(methodOf(PERSISTENT, 'ReplayParked'), { kind: 'unary', handle: persistent.replayParkedHandler(door) });
  server.add(methodOf(PERSISTENT, 'RestartSubsystem'), { kind: 'unary', handle: persistent.restartHandler(door) });
  const features = methodOf('event_store.client.server_features.ServerFeatures', 'GetSupportedMethods');
  server.add(features, { kind: 'unary', handle: async () => supportedMethods(server.paths()) });
  registerProjections(server, services);
  registerUsers(server, services);
  registerOperations(server, services);
  registerGossip(server, services);
  registerMonitoring(server, services);
  return server;
}

async function callerOf(ctx: GrpcDoorContext, call: CallContext): Promise<Principal> {
  const header = call.metadata.authorization;
  if (header === undefined) return !call.secure && ctx.config.insecureGrpcUser === 'system' ? SYSTEM : ANONYMOUS;
  const value = String(header);
  // Bearer tokens of the clients carry base64 user:pass, as Basic does.
  const basic = /^Bearer\s+/i.test(value) ? `Basic ${value.replace(/^Bearer\s+/i, '')}` : value;
  const result = await ctx.users.authenticate(basic);
  if (!result.ok) fail(unauthenticated());
  return result.principal;
}

/** A follower refuses what the leader serves, and reads the client wants from the leader (`requires-leader: true`), naming the leader. */
function requireLeader(cluster: LeaderRouting | undefined, call: CallContext, servedBy: ServedBy): void {
  if (!cluster || cluster.isLeader || servedBy === 'anyNode') return;
  const requires = String(call.metadata['requires-leader'] ?? '').toLowerCase() === 'true';
  if (servedBy === 'leaderIfAsked' && !requires) return;
  const url = cluster.leaderHttpUrl();
  if (!url) fail({ code: GrpcStatus.UNKNOWN, message: 'No leader info available in response' });
  const leader = new URL(url);
  fail(notLeader(leader.hostname.replace(/^\[|\]$/g, ''), Number(leader.port || (leader.protocol === 'https:' ? 443 : 80))));
}
