import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { ExpectedVersion, jsonEvent, type Store } from '../store/index.js';
import { MemberCallError, nodeName, sameNode, type ClusterMembership, type ClusterView, type NodeId } from './cluster.js';
import { AutoScavengeFailedError, AutoScavengeNotEnabledError, AutoScavengeRejectedError } from './errors.js';
import { AUTO_SCAVENGES_STREAM, CONFIGURATION_STREAM, decodeEvent, type AutoScavengeEvent } from './events.js';
import { constantTimeSpan, nextOccurrence, parseSchedule } from './schedule.js';
import { apply, configured, inCycle, initialState, initialized, type CoordinatorState, type Status } from './state.js';

// The auto-scavenge coordinator (reference §3.4): on the leader, one loop takes gossip rounds and
// API commands one at a time from a bounded queue. A command's events are persisted, then applied
// (state.ts), then Assess runs and repeats while it produces events: start a cycle when the
// schedule is due, designate the next member (followers furthest behind first, the leader last
// after resigning), start its node scavenge through the member's admin API, watch it, and close
// the cycle. Each step is an event in $auto-scavenges, so a new leader (or this node after a
// restart) rebuilds the state from the stream and carries on: an interrupted cycle resumes, a
// schedule that fired meanwhile is skipped.

export interface Clock {
  now(): number;
}

/** Calls `round` every `ms`; returns the function that stops it. Tests pass one they drive by hand. */
export type Ticker = (ms: number, round: () => void) => () => void;

export const realClock: Clock = { now: () => Date.now() };
export const realTicker: Ticker = (ms, round) => {
  const timer = setInterval(round, ms);
  timer.unref();
  return () => clearInterval(timer);
};

export interface CoordinatorOptions {
  /** From the license and configuration checks; off, every control command answers 503. */
  enabled: boolean;
  /** Why it is off, for the log and the troubleshooting checklist. */
  disabledReason?: string;
  clock?: Clock;
  ticker?: Ticker;
  /** How often a gossip round runs (a single node re-injects its own gossip every 5 s). */
  roundIntervalMs?: number;
  /** A member admin call that takes longer fails and is retried at the next round (the established servers: 1 s). */
  memberCallTimeoutMs?: number;
}

export type PauseOutcome = 'Paused' | 'Pausing';

export interface StatusAnswer {
  state: 'NotConfigured' | 'Waiting' | 'InProgress' | 'Pausing' | 'Paused';
  schedule: string | null;
  timeUntilNextCycle: string | null;
}

/** The five states the API shows; the internal ones name what a cycle is doing. */
const STATE_NAMES: Record<Status, StatusAnswer['state']> = {
  NotConfigured: 'NotConfigured', Waiting: 'Waiting', PausedWhileIdle: 'Paused',
  ContinuingClusterScavenge: 'InProgress', StartingNodeScavenge: 'InProgress', MonitoringNodeScavenge: 'InProgress',
  Pausing: 'Pausing', PausedWhileScavengingCluster: 'Paused',
};

const QUEUE_LIMIT = 32;
/** Assess stops after this many events in one go: a loop that keeps producing events is a bug, not progress. */
const MAX_EVENTS_PER_ASSESS = 1000;

export class AutoScavengeCoordinator {
  private state: CoordinatorState = initialState();
  /** The last event number of $auto-scavenges this leader knows (-1: none): the expected version of its next write. */
  private lastNumber = -1;
  private leading = false;
  private failure: Error | undefined;
  private queue: Promise<void> = Promise.resolve();
  private queued = 0;
  private stopTicking: (() => void) | undefined;
  private stopped = false;
  private readonly clock: Clock;

  constructor(private readonly store: Store, private readonly cluster: ClusterMembership,
    private readonly options: CoordinatorOptions, private readonly log: Logger) {
    this.clock = options.clock ?? realClock;
  }

  get enabled(): boolean {
    return this.options.enabled;
  }

  /** Starts the gossip rounds (nothing when the feature is off: the node's start line says why). */
  start(): void {
    if (!this.options.enabled) return;
    this.log.info('AutoScavenge coordinator started; it runs nothing until a schedule is configured (schedules are evaluated in UTC)');
    const round = () => void this.round().catch(() => undefined);
    this.stopTicking = (this.options.ticker ?? realTicker)(this.options.roundIntervalMs ?? 5000, round);
    round(); // the first gossip at once: a node that leads takes commands from its start
  }

  /** The node's role changed (a cluster node began leading): a round now rather than at the next tick. */
  roleChanged(): void {
    if (!this.options.enabled || this.stopped || this.failure || !this.stopTicking) return;
    void this.round().catch(() => undefined);
  }

  /** Stops the rounds and waits for the one in progress. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.stopTicking?.();
    await this.queue;
  }

  /** One gossip round: notices a change of leadership or of members, then assesses. */
  round(): Promise<void> {
    return this.enqueue(async () => {
      this.followLeadership();
      if (this.leading) await this.noticeMemberChanges();
    }, true);
  }

  status(): StatusAnswer {
    this.requireEnabled();
    const s = this.state;
    const schedule = s.schedule ?? null;
    const now = this.clock.now();
    const state = STATE_NAMES[s.status];
    let until: string | null = null;
    if (inCycle(s)) until = constantTimeSpan(0);
    else if (configured(s) && s.status === 'PausedWhileIdle') until = constantTimeSpan(nextOccurrence(s.schedule!, now) - now);
    else if (configured(s)) until = constantTimeSpan(Math.max(0, nextOccurrence(s.schedule!, s.anchor ?? s.startingPoint!) - now));
    return { state, schedule, timeUntilNextCycle: until };
  }

  /** Sets the schedule (any state); throws InvalidScheduleError with the parser's message. */
  async configure(schedule: string): Promise<void> {
    parseSchedule(schedule); // a malformed schedule is refused (400) whether or not the feature is on
    this.requireEnabled();
    return this.command(async () => {
      const event: AutoScavengeEvent = { type: '$configuration-updated', data: { schedule: schedule.trim().split(/\s+/).join(' '), updatedAt: this.timestamp() } };
      await this.store.append(CONFIGURATION_STREAM, ExpectedVersion.any, [jsonEvent(event.type, event.data)]);
      this.state = apply(this.state, event);
    });
  }

  /** 'Paused' (200): nothing runs now; 'Pausing' (202): a node scavenge may still run until it is stopped. */
  async pause(): Promise<PauseOutcome> {
    this.requireEnabled();
    return this.command(async () => {
      switch (this.state.status) {
        case 'PausedWhileIdle': case 'PausedWhileScavengingCluster': return 'Paused';
        case 'Pausing': return 'Pausing';
        case 'StartingNodeScavenge': case 'MonitoringNodeScavenge':
          await this.persist({ type: '$pause-requested', data: { requestedAt: this.timestamp() } });
          return 'Pausing';
        default:
          await this.persist({ type: '$paused', data: { pausedAt: this.timestamp() } });
          return 'Paused';
      }
    });
  }

  /** Continues where the pause left off (a cycle in progress goes on; otherwise the next due time counts from now). */
  async resume(): Promise<void> {
    this.requireEnabled();
    return this.command(async () => {
      if (this.state.status === 'Pausing') throw new AutoScavengeRejectedError('Auto scavenge process is currently pausing');
      if (this.state.status === 'PausedWhileIdle' || this.state.status === 'PausedWhileScavengingCluster') {
        await this.persist({ type: '$resumed', data: { resumedAt: this.timestamp() } });
      }
    });
  }

  // ---- the loop ----

  private requireEnabled(): void {
    if (!this.options.enabled) throw new AutoScavengeNotEnabledError();
  }

  /** A command runs on the leader, in turn with the gossip rounds; Assess follows it. */
  private command<T>(run: () => Promise<T>): Promise<T> {
    return this.enqueue(async () => {
      this.followLeadership(); // as the node is now, not as the last round found it
      if (!this.leading) throw new AutoScavengeRejectedError('Node is not the leader');
      return run();
    });
  }

  /**
   * Runs `job` after those queued before it, then Assess (on the leader). A command's promise
   * settles as soon as the job is done, so an answer does not wait for a node scavenge to stop; a
   * round's (`untilAssessed`) once Assess is done too.
   */
  private enqueue<T>(job: () => Promise<T>, untilAssessed = false): Promise<T> {
    if (this.failure) return Promise.reject(new AutoScavengeFailedError('auto-scavenge errored'));
    if (this.stopped) return Promise.reject(new AutoScavengeFailedError('AutoScavenge is no longer running'));
    if (this.queued >= QUEUE_LIMIT) return Promise.reject(new AutoScavengeFailedError('AutoScavenge queue is full'));
    this.queued++;
    return new Promise<T>((resolve, reject) => {
      this.queue = this.queue.then(async () => {
        this.queued--;
        if (this.failure) return reject(new AutoScavengeFailedError('auto-scavenge errored'));
        let result: T;
        try {
          result = await job();
        } catch (err) {
          if (!(err instanceof AutoScavengeRejectedError)) this.fail(err as Error);
          return reject(err);
        }
        if (!untilAssessed) resolve(result);
        try {
          if (this.leading && !this.stopped) await this.assess();
        } catch (err) {
          this.fail(err as Error);
        }
        resolve(result);
      });
    });
  }

  private fail(err: Error): void {
    if (this.failure) return;
    this.failure = err;
    this.stopTicking?.();
    this.log.error({ err }, 'AutoScavenge failed: its loop stopped; later requests answer 500');
  }

  private followLeadership(): void {
    const leader = this.cluster.isLeader();
    if (leader && !this.leading) this.load();
    if (!leader && this.leading) {
      this.state = initialState();
      this.lastNumber = -1;
    }
    this.leading = leader;
  }

  /** Rebuilds the state as a new leader: the last configuration, then the cycle in progress (events since the last completed one). */
  private load(): void {
    let state = initialState();
    const config = this.store.readStreamBackward(CONFIGURATION_STREAM, -1, 1);
    if (config.status === 'ok' && config.events[0]?.event) {
      const event = decodeEvent(config.events[0].event.eventType, config.events[0].event.data);
      if (event) state = apply(state, event);
    }
    const cycle: AutoScavengeEvent[] = [];
    this.lastNumber = -1;
    for (let from = -1; ;) {
      const page = this.store.readStreamBackward(AUTO_SCAVENGES_STREAM, from, 100);
      if (page.status !== 'ok') break;
      if (this.lastNumber === -1) this.lastNumber = page.lastEventNumber;
      let done = false;
      for (const { event: e } of page.events) {
        if (!e) continue;
        if (e.eventType === '$cluster-scavenge-completed') {
          done = true;
          break;
        }
        const event = decodeEvent(e.eventType, e.data);
        if (event) cycle.push(event);
        from = e.eventNumber - 1;
      }
      if (done || page.isEndOfStream || from < 0) break;
    }
    for (const event of cycle.reverse()) state = apply(state, event);
    this.state = initialized(state, this.clock.now());
    this.log.info({ status: this.state.status, clusterScavengeId: this.state.clusterScavengeId || undefined },
      `AutoScavenge: leading; state ${this.state.status} rebuilt from ${AUTO_SCAVENGES_STREAM}`);
  }

  private async noticeMemberChanges(): Promise<void> {
    const view = this.cluster.view();
    if (!inCycle(this.state) || !healthy(view)) return;
    const seen = view.members.map((m) => m.nodeId);
    const added = seen.filter((n) => !this.state.clusterMembers.some((m) => sameNode(m, n)));
    const removed = this.state.clusterMembers.filter((m) => !seen.some((n) => sameNode(m, n)));
    if (added.length || removed.length) {
      this.log.info({ added: added.map(nodeName), removed: removed.map(nodeName) }, 'AutoScavenge: cluster members changed');
      await this.persist({ type: '$cluster-members-changed', data: { added, removed } });
    }
  }

  private async assess(): Promise<void> {
    for (let n = 0; n < MAX_EVENTS_PER_ASSESS; n++) {
      const event = await this.nextEvent();
      if (!event) return;
      await this.persist(event);
    }
    throw new Error(`Assess produced ${MAX_EVENTS_PER_ASSESS} events in a row`);
  }

  /** What the state calls for now; undefined: nothing (wait for the next round). */
  private async nextEvent(): Promise<AutoScavengeEvent | undefined> {
    const s = this.state;
    const view = this.cluster.view();
    const now = this.timestamp();
    switch (s.status) {
      case 'NotConfigured': case 'PausedWhileIdle': case 'PausedWhileScavengingCluster':
        return undefined;
      case 'Waiting': {
        if (this.clock.now() < nextOccurrence(s.schedule!, s.anchor ?? s.startingPoint!)) return undefined;
        if (!healthy(view)) {
          this.log.info('Autoscavenge is due. Waiting for a healthy cluster');
          return undefined;
        }
        const members = view.members.map((m) => m.nodeId);
        return { type: '$cluster-scavenge-started', data: { clusterScavengeId: randomUUID(), members, startedAt: now } };
      }
      case 'ContinuingClusterScavenge': {
        if (!healthy(view)) return undefined;
        const next = nextToScavenge(s, view);
        if (!next) return { type: '$cluster-scavenge-completed', data: { clusterScavengeId: s.clusterScavengeId, members: s.clusterMembers, completedAt: now } };
        return { type: '$node-designated', data: { nodeId: next, designatedAt: now } };
      }
      case 'StartingNodeScavenge':
        return this.startDesignated(view, now);
      case 'MonitoringNodeScavenge':
        return this.watchDesignated(now);
      case 'Pausing':
        return this.stopDesignated(now);
    }
  }

  private async startDesignated(view: ClusterView, now: string): Promise<AutoScavengeEvent | undefined> {
    const nodeId = this.state.designatedNode!;
    if (sameNode(nodeId, view.self) && view.clusterSize > 1) {
      // The leader scavenges last, as a follower: the next leader finds it designated and starts it.
      this.log.info('AutoScavenge: resigning leadership to scavenge this node');
      await this.memberCall(this.cluster.resignLeadership());
      return undefined;
    }
    const scavengeId = await this.memberCall(this.cluster.startScavenge(nodeId));
    if (scavengeId === undefined) return undefined;
    this.log.info({ node: nodeName(nodeId), scavengeId }, 'AutoScavenge: node scavenge started');
    return { type: '$node-scavenge-started', data: { nodeId, scavengeId, startedAt: now } };
  }

  private async watchDesignated(now: string): Promise<AutoScavengeEvent | undefined> {
    const { designatedNode: nodeId, nodeScavengeId } = this.state;
    const last = await this.memberCall(this.cluster.lastScavenge(nodeId!));
    if (!last || last.result === 'InProgress') return undefined;
    let result = last.result;
    if (result === 'Unknown') {
      // The member restarted: its history says how the scavenge ended, or it ended with the process.
      const recorded = this.cluster.recordedScavengeResult(nodeScavengeId);
      if (recorded === undefined || recorded === 'Interrupted') {
        this.log.info({ node: nodeName(nodeId!), scavengeId: nodeScavengeId }, 'AutoScavenge: node scavenge was interrupted; starting it again');
        return { type: '$node-designated', data: { nodeId: nodeId!, designatedAt: now } };
      }
      result = recorded;
    } else if (last.scavengeId !== nodeScavengeId) {
      this.log.warn({ expected: nodeScavengeId, found: last.scavengeId }, 'AutoScavenge: the node reports another scavenge than the one started');
    }
    // Errored and Stopped count as done for this cycle: a failing node is not retried until the next one.
    this.log.info({ node: nodeName(nodeId!), scavengeId: nodeScavengeId, result }, 'AutoScavenge: node scavenge completed');
    return { type: '$node-scavenge-completed', data: { nodeId: nodeId!, completedAt: now, result } };
  }

  private async stopDesignated(now: string): Promise<AutoScavengeEvent | undefined> {
    const { designatedNode: nodeId, nodeScavengeId } = this.state;
    if (nodeId) {
      const stopped = await this.memberCall(this.cluster.stopScavenge(nodeId, nodeScavengeId || 'current'));
      if (stopped === undefined) return undefined;
    }
    return { type: '$paused', data: { pausedAt: now } };
  }

  /** A member call's answer, or undefined when it failed or took too long (retried at the next round). */
  private async memberCall<T>(call: Promise<T>): Promise<T | undefined> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new MemberCallError('timed out')), this.options.memberCallTimeoutMs ?? 1000);
    });
    try {
      return await Promise.race([call, timeout]);
    } catch (err) {
      this.log.info({ err: (err as Error).message }, 'AutoScavenge: a member call failed; retrying at the next round');
      return undefined;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Persists, then applies (a write that fails leaves the state as it was, and stops the loop). */
  private async persist(event: AutoScavengeEvent): Promise<void> {
    const expected = this.lastNumber < 0 ? ExpectedVersion.noStream : ExpectedVersion.exact(this.lastNumber);
    const written = await this.store.append(AUTO_SCAVENGES_STREAM, expected, [jsonEvent(event.type, event.data)]);
    this.lastNumber = written.lastEventNumber;
    this.state = apply(this.state, event);
  }

  private timestamp(): string {
    return new Date(this.clock.now()).toISOString();
  }
}

/** Every voting member gossips (read-only replicas do not count, but are scavenged). */
function healthy(view: ClusterView): boolean {
  return view.members.filter((m) => m.instanceId !== '' && !m.isReadOnlyReplica).length === view.clusterSize;
}

/** The remaining non-leader with the lowest writer checkpoint; the leader only when it is all that remains. */
function nextToScavenge(s: CoordinatorState, view: ClusterView): NodeId | undefined {
  const remaining = s.clusterMembers.filter((m) => !s.scavengedNodes.some((d) => sameNode(d, m)));
  if (!remaining.length) return undefined;
  const gossip = (n: NodeId) => view.members.find((m) => sameNode(m.nodeId, n));
  const followers = remaining.filter((n) => !gossip(n)?.isLeader)
    .sort((a, b) => (gossip(a)?.writerCheckpoint ?? 0) - (gossip(b)?.writerCheckpoint ?? 0));
  return followers[0] ?? remaining[0];
}
