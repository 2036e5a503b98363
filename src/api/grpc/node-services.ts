import { setTimeout as sleep } from 'node:timers/promises';
import { parseUuid } from '../../store/index.js';
import { ScavengeAlreadyRunningError } from '../../scavenge/index.js';
import { flattenStatistics, type ClusterMember } from '../../verbs/index.js';
import { methodOf } from './codecs.js';
import type { ServiceDoor } from './door.js';
import { optionsOf, ticksSinceEpoch } from './messages.js';
import type { CallContext, GrpcServer } from './server.js';

// The node's own services: Operations (scavenge start and stop, merge indexes, shutdown, resign,
// node priority), Gossip.Read (the members clients discover the leader by) and Monitoring.Stats
// (the node's statistics, streamed). Each node answers for itself, as its HTTP admin, /gossip and
// /stats routes do, through the same verbs (src/verbs/operations.ts).

type Message = Record<string, unknown>;

const OPERATIONS = 'event_store.client.operations.Operations';
const GOSSIP = 'event_store.client.gossip.Gossip';
const MONITORING = 'event_store.client.monitoring.Monitoring';

/** VNodeState names the proto knows; a state it does not know is sent as Unknown. */
const VNODE_STATES = new Set([
  'Initializing', 'DiscoverLeader', 'Unknown', 'PreReplica', 'CatchingUp', 'Clone', 'Follower', 'PreLeader', 'Leader', 'Manager',
  'ShuttingDown', 'Shutdown', 'ReadOnlyLeaderless', 'PreReadOnlyReplica', 'ReadOnlyReplica', 'ResigningLeader',
]);

/**
 * Monitoring.Stats without a period sends one a second: the statistics' rates are sampled each
 * second (stats/collector.ts), so faster adds nothing new; a period is at least 100 ms, so a
 * client cannot make the node spin (the established server would, on 0).
 */
const DEFAULT_STATS_PERIOD_MS = 1000;
const MIN_STATS_PERIOD_MS = 100;

export function registerOperations(server: GrpcServer, door: ServiceDoor): void {
  const verbs = door.verbs.operations;
  const caller = (call: CallContext) => door.callerOf(call, 'anyNode');
  const empty = (name: string, run: (call: CallContext, request: Message) => Promise<unknown>) =>
    server.add(methodOf(OPERATIONS, name), { kind: 'unary', handle: async (request, call) => { await run(call, request as Message); return {}; } });

  server.add(methodOf(OPERATIONS, 'StartScavenge'), {
    kind: 'unary',
    handle: async (request, call) => {
      const o = optionsOf(request);
      const who = await caller(call);
      try {
        const threads = Number(o.thread_count ?? 0);
        const scavengeId = verbs.startScavenge(who, {
          threads: threads === 0 ? 1 : threads, startFromChunk: Number(o.start_from_chunk ?? 0), threshold: 0, throttlePercent: 100, syncOnly: false,
        });
        return { scavenge_id: scavengeId, scavenge_result: 'Started' };
      } catch (err) {
        // As the established server answers a second start: the one running, in progress.
        if (err instanceof ScavengeAlreadyRunningError) return { scavenge_id: err.scavengeId, scavenge_result: 'InProgress' };
        throw err;
      }
    },
  });
  server.add(methodOf(OPERATIONS, 'StopScavenge'), {
    kind: 'unary',
    handle: async (request, call) => {
      const id = String(optionsOf(request).scavenge_id ?? '');
      return { scavenge_id: await verbs.stopScavenge(await caller(call), id), scavenge_result: 'Stopped' };
    },
  });
  empty('MergeIndexes', async (call) => verbs.mergeIndexes(await caller(call)));
  empty('ResignNode', async (call) => verbs.resign(await caller(call)));
  // proto3 leaves a 0 priority out of the message.
  empty('SetNodePriority', async (call, request) => verbs.setNodePriority(await caller(call), Number(request.priority ?? 0)));
  // The node shuts down once this call's answer is out (its signal aborts when the call ends).
  empty('Shutdown', async (call) => call.signal.addEventListener('abort', verbs.shutdown(await caller(call)), { once: true }));
  // The groups run on the leader (as PersistentSubscriptions.RestartSubsystem, the same verb).
  empty('RestartPersistentSubscriptions', async (call) => door.verbs.persistent.restart(await door.callerOf(call, 'leader')));
}

/** Gossip.Read: anyone may (the Node clients call it with no metadata at all); credentials sent must be right, as everywhere. */
export function registerGossip(server: GrpcServer, door: ServiceDoor): void {
  server.add(methodOf(GOSSIP, 'Read'), {
    kind: 'unary',
    handle: async (_request, call) => {
      await door.callerOf(call, 'anyNode');
      return { members: door.verbs.operations.members().map(memberInfo) };
    },
  });
}

export function registerMonitoring(server: GrpcServer, door: ServiceDoor): void {
  const verbs = door.verbs.operations;
  server.add(methodOf(MONITORING, 'Stats'), {
    kind: 'serverStream',
    handle: async (request, call, out) => {
      const who = await door.callerOf(call, 'anyNode');
      const asked = Number((request as Message).refresh_time_period_in_ms ?? 0);
      const period = asked > 0 ? Math.max(MIN_STATS_PERIOD_MS, asked) : DEFAULT_STATS_PERIOD_MS;
      while (!call.signal.aborted && !out.ended) {
        if (!out.write({ stats: statsMessage(verbs.statistics(who)) })) await out.drained();
        await sleep(period, undefined, { signal: call.signal }).catch(() => undefined);
      }
    },
  });
}

/** Flat keys, values as text; the statistics this node has none of (null) are left out. */
function statsMessage(grouped: Record<string, unknown>): Record<string, string> {
  const stats: Record<string, string> = {};
  for (const [key, value] of Object.entries(flattenStatistics(grouped))) {
    if (value === null || value === undefined) continue;
    stats[key] = typeof value === 'object' ? JSON.stringify(value) : String(value);
  }
  return stats;
}

function memberInfo(m: ClusterMember): Message {
  return {
    instance_id: structuredUuid(m.instanceId), time_stamp: ticksSinceEpoch(m.timeStamp),
    state: VNODE_STATES.has(m.state) ? m.state : 'Unknown', is_alive: m.isAlive,
    http_end_point: { address: m.httpEndPointIp, port: m.httpEndPointPort },
  };
}

/** The established server sends member ids in the structured form (two big-endian signed halves). */
function structuredUuid(text: string): Message {
  const bytes = parseUuid(text);
  if (!bytes) return { string: text };
  return { structured: { most_significant_bits: bytes.readBigInt64BE(0).toString(), least_significant_bits: bytes.readBigInt64BE(8).toString() } };
}
