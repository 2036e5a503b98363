import type { FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import type { Store } from '../store/index.js';
import { ANONYMOUS, type AccessControl, type Principal, type UserStore } from '../auth/index.js';
import type { Config, ConfigSource, OptionName } from '../config/index.js';
import type { StatsCollector } from '../stats/index.js';
import type { ProjectionManager } from '../projections/index.js';
import type { SubscriptionService } from '../subscriptions/index.js';
import type { Scavenger } from '../scavenge/index.js';
import type { BackupService } from '../backup/index.js';
import type { AutoScavengeCoordinator } from '../autoscavenge/index.js';
import type { Verbs } from '../verbs/index.js';
import type { SendQueue } from './send-queue.js';
import type { NodeMetrics } from '../metrics/index.js';

// What the HTTP plugins get from the node, and who is asking (set by the authentication hook).

export interface ReloadOutcome {
  result: 'Reloaded' | 'Failed' | 'AlreadyInProgress';
  message: string;
}

/** The node's own controls, for the node and admin endpoints. */
export interface NodeControl {
  readonly version: string;
  readonly stats: StatsCollector;
  currentConfig(): { config: Config; sources: Record<OptionName, ConfigSource> };
  gossip(): Record<string, unknown>;
  /** The node's state as gossip names it (Leader on a single node; Follower, CatchingUp... in a cluster). */
  state(): string;
  requestShutdown(): void;
  /** Gives up leadership if this node leads a cluster (another node takes over); whether it did. */
  resign(): Promise<boolean>;
  /** This node's priority in leader elections from now until it restarts (republished to the cluster). */
  setPriority(priority: number): Promise<void>;
  reload(): Promise<ReloadOutcome>;
}

/** What the HTTP plugins get from the node. */
export interface ApiContext {
  store: Store;
  users: UserStore;
  access: AccessControl;
  /** What clients do, the same for every door (src/verbs). */
  verbs: Verbs;
  config: Config;
  log: Logger;
  node: NodeControl;
  projections: ProjectionManager;
  subscriptions: SubscriptionService;
  scavenger: Scavenger;
  backups: BackupService;
  autoScavenge: AutoScavengeCoordinator;
  /** What big feed pages hold for their clients, all together (send-queue.ts). */
  sends: SendQueue;
  /** GET /metrics, and the request durations both doors observe. */
  metrics: NodeMetrics;
}

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal;
  }
}

export function principalOf(req: FastifyRequest): Principal {
  return req.principal ?? ANONYMOUS;
}
