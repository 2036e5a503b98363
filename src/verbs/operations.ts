import type { Principal } from '../auth/index.js';
import { ScavengeNotFoundError, type Scavenger } from '../scavenge/index.js';
import { InvalidRequestError } from './errors.js';
import { demand } from './rights.js';

// The node's operations, whichever door asks (the HTTP admin routes, gRPC's Operations,
// Gossip and Monitoring services): scavenge start and stop, merge indexes, shutdown, resign,
// the node's priority, the statistics and the cluster's members. Operations take $ops (admins too); statistics any
// authenticated user; the members anyone (clients discover the cluster before they log in).
// A scavenge request is checked here by SCAVENGE_RULES, which the HTTP query schema is also
// built from; what this node cannot do as asked is refused with the reason, never taken and ignored.

/** A scavenge as a client asks for it. */
export interface ScavengeAsk {
  threads: number;
  threshold: number;
  throttlePercent: number;
  syncOnly: boolean;
  /** The established servers take it and ignore it; here only 0 (from the start) is taken. */
  startFromChunk: number;
}

export const SCAVENGE_RULES = {
  threads: { minimum: 1, maximum: 4, tooFew: 'threads must be a 1 or above', tooMany: 'threads must be 4 or below' },
  threshold: { message: 'threshold must be an integer' },
  throttlePercent: {
    minimum: 1, maximum: 100, message: 'throttlePercent must be between 1 and 100 inclusive',
    multiThreaded: 'throttlePercent must be 100 for a multi-threaded scavenge',
  },
  syncOnly: { message: 'syncOnly must be a boolean' },
  startFromChunk: {
    minimum: 0, message: 'startFromChunk must be a positive integer',
  },
} as const;

/** A node priority is an int32 on both doors (the gRPC field's type): what does not fit is refused, not wrapped. */
export const NODE_PRIORITY_RULE = {
  minimum: -2_147_483_648, maximum: 2_147_483_647,
  message: 'The node priority must be an integer from -2147483648 to 2147483647.',
} as const;

/** A member of the cluster as clients discover it (a single node is its own only member, Leader). */
export interface ClusterMember {
  instanceId: string;
  /** When the member last published itself (ISO 8601). */
  timeStamp: string;
  /** VNodeState name: Leader, Follower, CatchingUp, Unknown (a dead member)... */
  state: string;
  isAlive: boolean;
  /** The address and port clients dial. */
  httpEndPointIp: string;
  httpEndPointPort: number;
}

/** The statistics keys of every level joined by `-` (`proc-gc-allocationSpeed`), as the established servers flatten them. */
export function flattenStatistics(value: Record<string, unknown>, prefix = '', out: Record<string, unknown> = {}): Record<string, unknown> {
  for (const [k, v] of Object.entries(value)) {
    const key = prefix ? `${prefix}-${k}` : k;
    if (typeof v === 'object' && v !== null && !Array.isArray(v)) flattenStatistics(v as Record<string, unknown>, key, out);
    else out[key] = v;
  }
  return out;
}

/** What the operations need of the node (api/context.ts NodeControl). */
export interface NodeOperations {
  readonly stats: { collect(): Record<string, unknown> };
  gossip(): Record<string, unknown>;
  requestShutdown(): void;
  resign(): Promise<boolean>;
  /** Takes effect at the next election; lasts until the node restarts. */
  setPriority(priority: number): Promise<void>;
}

export class OperationVerbs {
  constructor(private readonly scavenger: Scavenger, private readonly node: NodeOperations) {}

  /** Starts a scavenge in the background; its id. Throws SCAVENGE_ALREADY_RUNNING (with the running one's id) or BACKUP_RUNNING. */
  startScavenge(who: Principal, ask: ScavengeAsk): string {
    demand(who, 'ops', 'node');
    checkScavenge(ask);
    return this.scavenger.start({
      threads: ask.threads, threshold: ask.threshold, throttlePercent: ask.throttlePercent, syncOnly: ask.syncOnly, startFromChunk: ask.startFromChunk,
    });
  }

  /** Stops a running scavenge (`current`: whichever runs) and resolves its id once it has stopped. */
  async stopScavenge(who: Principal, scavengeId: string): Promise<string> {
    demand(who, 'ops', 'node');
    const id = scavengeId === 'current' ? this.scavenger.current()?.scavengeId : scavengeId;
    if (id === undefined || !(await this.scavenger.stop(id))) throw new ScavengeNotFoundError(scavengeId);
    return id;
  }

  mergeIndexes(who: Principal): { mergeIndexesId: string; message: string } {
    demand(who, 'ops', 'node');
    return this.scavenger.mergeIndexes();
  }

  /** The shutdown, to run once the door has answered (the answer must get out first). */
  shutdown(who: Principal): () => void {
    demand(who, 'ops', 'node');
    return () => this.node.requestShutdown();
  }

  /** A cluster leader gives up its term (another node leads); whether it did (a follower or a single node has nothing to give up). */
  resign(who: Principal): Promise<boolean> {
    demand(who, 'ops', 'node');
    return this.node.resign();
  }

  /** This node's priority in the next leader election (the higher leads among equally up-to-date logs). */
  async setNodePriority(who: Principal, priority: number): Promise<void> {
    demand(who, 'ops', 'node');
    const { minimum, maximum, message } = NODE_PRIORITY_RULE;
    if (!Number.isInteger(priority) || priority < minimum || priority > maximum) throw new InvalidRequestError(message);
    await this.node.setPriority(priority);
  }

  /** The node's statistics, grouped as GET /stats shows them. */
  statistics(who: Principal): Record<string, unknown> {
    demand(who, 'authenticated', 'node');
    return this.node.stats.collect();
  }

  /** The cluster's members, from this node's view (no rights needed: clients discover before they authenticate). */
  members(): ClusterMember[] {
    const members = (this.node.gossip().members ?? []) as Record<string, unknown>[];
    return members.map((m) => ({
      instanceId: String(m.instanceId), timeStamp: String(m.timeStamp), state: String(m.state), isAlive: m.isAlive === true,
      httpEndPointIp: String(m.httpEndPointIp), httpEndPointPort: Number(m.httpEndPointPort),
    }));
  }
}

function checkScavenge(ask: ScavengeAsk): void {
  const { threads, throttlePercent, startFromChunk } = SCAVENGE_RULES;
  if (!Number.isInteger(ask.threads) || ask.threads < threads.minimum) throw new InvalidRequestError(threads.tooFew);
  if (ask.threads > threads.maximum) throw new InvalidRequestError(threads.tooMany);
  if (!Number.isInteger(ask.threshold)) throw new InvalidRequestError(SCAVENGE_RULES.threshold.message);
  if (!(ask.throttlePercent >= throttlePercent.minimum && ask.throttlePercent <= throttlePercent.maximum)) {
    throw new InvalidRequestError(throttlePercent.message);
  }
  if (ask.threads > 1 && ask.throttlePercent !== 100) throw new InvalidRequestError(throttlePercent.multiThreaded);
  if (!Number.isInteger(ask.startFromChunk) || ask.startFromChunk < startFromChunk.minimum) throw new InvalidRequestError(startFromChunk.message);
}
