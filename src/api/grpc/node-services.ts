import { ScavengeAlreadyRunningError } from '../../scavenge/types.js';
import { methodOf } from './codecs.js';
import type { ServiceDoor } from './door.js';
import { optionsOf } from './messages.js';
import type { CallContext, GrpcServer } from './server.js';

// The node's own services: Operations (scavenge start and stop, merge indexes, shutdown, resign).
// Each node answers for itself, as its HTTP admin routes do, through the same verbs
// (src/verbs/operations.ts).
//
// Not served (so not advertised): SetNodePriority (leadership is an etcd election here, in which
// a priority has no part) and RestartPersistentSubscriptions (with the persistent subscriptions service).

type Message = Record<string, unknown>;

const OPERATIONS = 'event_store.client.operations.Operations';

export function registerOperations(server: GrpcServer, door: ServiceDoor): void {
  const verbs = door.verbs.operations;
  const caller = (call: CallContext) => door.callerOf(call, 'anyNode');
  const empty = (name: string, run: (call: CallContext) => Promise<unknown>) =>
    server.add(methodOf(OPERATIONS, name), { kind: 'unary', handle: async (_request, call) => { await run(call); return {}; } });

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
  // The node shuts down once this call's answer is out (its signal aborts when the call ends).
  empty('Shutdown', async (call) => call.signal.addEventListener('abort', verbs.shutdown(await caller(call)), { once: true }));

}
