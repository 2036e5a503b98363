import type { Registry } from 'prom-client';
import type { Store } from '../store/index.js';
import type { Projection, ProjectionManager, ProjectionStatistics } from '../projections/index.js';
import type { PersistentGroup, SubscriptionService } from '../subscriptions/index.js';
import type { Scavenger } from '../scavenge/index.js';
import { one, scrapedCounter, scrapedGauge, type Sample } from './scrape.js';

// The node's subsystems, read at scrape time: each projection, each persistent subscription
// group, the scavenge in progress, and the node's role. Labels name things that exist by
// configuration (a projection, a group: created by $ops or a client, few, and they stay), so each
// set is bounded by what the node holds; transient projections are left out, a client's
// throw-away queries, each named afresh (often a random id), which would make a series per query.

export interface SubsystemSources {
  store: Store;
  projections: ProjectionManager;
  subscriptions: SubscriptionService;
  scavenger: Scavenger;
  /** The node's state as gossip names it: Leader on a single node; Follower, CatchingUp... in a cluster. */
  role(): string;
}

export function registerSubsystemMetrics(registry: Registry, sources: SubsystemSources): void {
  registerProjectionMetrics(registry, sources);
  registerSubscriptionMetrics(registry, sources.subscriptions);
  registerScavengeMetrics(registry, sources.scavenger);
  scrapedGauge({
    registry, name: 'svc_node_role', labelNames: ['role'],
    help: 'The node\'s role: 1 on the series of its current one (Leader, Follower, CatchingUp, PreReplica, DiscoverLeader...).',
    read: () => [{ labels: { role: sources.role() }, value: 1 }],
  });
}

function registerProjectionMetrics(registry: Registry, { store, projections }: SubsystemSources): void {
  const labelNames = ['projection'] as const;
  /** One series per projection that is not transient, valued by `value`; undefined: not measured for it. */
  const each = (value: (p: Projection, s: ProjectionStatistics) => number | undefined) => (): Sample<'projection'>[] => {
    const out: Sample<'projection'>[] = [];
    for (const p of projections.list((q) => q.persisted.mode !== 'Transient')) {
      const v = value(p, p.snapshot());
      if (v !== undefined) out.push({ labels: { projection: p.name }, value: v });
    }
    return out;
  };
  scrapedGauge({
    registry, name: 'svc_projection_position_bytes', labelNames, help: 'Log position of the next record the projection reads.',
    read: each((_p, s) => s.position),
  });
  scrapedCounter({
    registry, name: 'svc_projection_events_processed_total', labelNames,
    help: 'Events the projection handled since it last started (it starts again from 0 when the projection restarts).',
    read: each((_p, s) => s.eventsProcessedAfterRestart),
  });
  scrapedGauge({
    registry, name: 'svc_projection_running', labelNames, help: '1 while the projection runs, else 0 (stopped, faulted, completed...).',
    read: each((_p, s) => (s.status === 'Running' ? 1 : 0)),
  });
  scrapedGauge({
    registry, name: 'svc_projection_faulted', labelNames, help: '1 when the projection is faulted (its reason is in its statistics), else 0.',
    read: each((_p, s) => (s.status === 'Faulted' ? 1 : 0)),
  });
  scrapedGauge({
    registry, name: 'svc_projection_lag_bytes', labelNames, help: 'Bytes of log after the projection\'s position: what it has still to read.',
    read: each((_p, s) => Math.max(0, store.headPosition - s.position)),
  });
  scrapedGauge({
    registry, name: 'svc_projection_checkpoint_lag_bytes', labelNames,
    help: 'Bytes of log after the projection\'s last checkpoint: what a restart reads again. Absent for a projection without checkpoints.',
    read: each((p, s) => (p.checkpoints ? Math.max(0, store.headPosition - Math.max(0, s.lastCheckpointPosition)) : undefined)),
  });
}

function registerSubscriptionMetrics(registry: Registry, subscriptions: SubscriptionService): void {
  const labelNames = ['stream', 'group'] as const;
  const each = (value: (g: PersistentGroup) => number) => (): Sample<'stream' | 'group'>[] =>
    subscriptions.list().map((g) => ({ labels: { stream: g.stream, group: g.name }, value: value(g) }));
  scrapedGauge({
    registry, name: 'svc_persistent_subscription_in_flight_messages', labelNames,
    help: 'Messages handed out to the group\'s consumers and not yet acknowledged, nacked or timed out.',
    read: each((g) => g.heldMessages.leased),
  });
  scrapedGauge({
    registry, name: 'svc_persistent_subscription_parked_messages', labelNames, help: 'Messages in the group\'s parked stream not yet replayed.',
    read: each((g) => g.parked.count()),
  });
}

function registerScavengeMetrics(registry: Registry, scavenger: Scavenger): void {
  scrapedGauge({
    registry, name: 'svc_scavenge_running', help: '1 while a scavenge runs on this node, else 0.',
    read: () => one(scavenger.current() ? 1 : 0),
  });
  // Chunks of the running scavenge's current phase (accumulation, then execution); absent when none runs.
  const chunks = (pick: (done: number, total: number) => number) => () => {
    const current = scavenger.current();
    return current ? one(pick(current.progress.chunksDone, current.progress.chunksTotal)) : [];
  };
  scrapedGauge({
    registry, name: 'svc_scavenge_chunks_done', help: 'Chunks the running scavenge\'s current phase has done.', read: chunks((done) => done),
  });
  scrapedGauge({
    registry, name: 'svc_scavenge_chunks_in_phase', help: 'Chunks the running scavenge\'s current phase works through.', read: chunks((_d, total) => total),
  });
}
