import type { Logger } from 'pino';
import {
  NotLeaderError, ReplicationLostError, type AppendResult, type ExpectedVersion, type ProposedEvent, type ReplicationGate, type Store,
} from '../store/index.js';
import { childLogger } from '../logger.js';
import { lastEpoch, writeEpoch } from './epochs.js';
import { FollowerReplication } from './follower.js';
import { LeaderReplication } from './leader.js';
import {
  EtcdMembership, POLL_MS, type ClusterSnapshot, type LeaderRecord, type MemberRecord, type MemberState,
} from './membership.js';
import { ReplicationServer } from './server.js';
import type { Transport } from './transport.js';

// One cluster node's role, decided from what etcd shows (membership.ts) every POLL_MS:
//
//   Initializing → DiscoverLeader ─(a leader key)→ PreReplica → CatchingUp → Follower
//                        └─(no leader, a quorum of DiscoverLeader members, this log the most
//                           up to date)→ campaign → PreLeader (epoch record) → Leader
//
// A node only campaigns among a quorum of members that follow no one and have published where
// their logs end; it must hold the most up-to-date log of them (last epoch's term, then log end;
// between logs as up to date, the higher priority, then the lower name), so every record a quorum
// acknowledged is on the new leader. A node that stops leading (its lease or its key gone) and a
// follower that must drop an unreplicated tail restart (ClusterHooks.restart): their services and
// caches start afresh from the log.
//
// Somewhat over 400 lines on purpose: this is the one state machine of a node's role, and every
// transition reads the same few fields; the membership in etcd (membership.ts), the epochs
// (epochs.ts) and the replication itself (leader.ts, follower.ts) are already apart.

export interface ClusterAddresses {
  name: string;
  /** The advertised HTTP base URL (scheme://host:port). */
  httpUrl: string;
  intHost: string;
  intPort: number;
}

export interface ClusterHooks {
  /** Starts what runs on the leader only (default users, projections, subscriptions, scavenges). */
  lead(): Promise<void>;
  /** This node must start again (it lost its term, or must truncate its log first). */
  restart(reason: string): void;
  /** This node now leads (state Leader: lead() is done and the epoch is held by a quorum). */
  led?(): void;
  /** This node follows a leader, caught up (each time it does: the hook decides what runs once). */
  follow?(): void;
  /** Answers a request the leader sends a follower (LeaderReplication.request): the auto-scavenge coordinator's node scavenge calls. */
  serve?(request: unknown): Promise<unknown>;
}

export interface ClusterSettings {
  clusterSize: number;
  endpoints: string[];
  clusterName: string;
  leaseTtlSeconds: number;
  intIp: string;
  /** Connections between nodes are replaced after this long (certificate reloads take effect). */
  connectionLifetimeMs: number;
  /** This node's priority at start (--node-priority). */
  priority: number;
}

export interface ClusterNodeOptions {
  store: Store;
  settings: ClusterSettings;
  /** This run of the node: its member and leader records carry it. */
  instanceId: string;
  /** Plain TCP, or mutual TLS between the nodes. */
  transport: Transport;
  log: Logger;
}

/** How long a follower waits before reconnecting to the same leader. */
const RECONNECT_MS = 300;
/** A leader that resigns yields to nodes as up to date as it for this long, so that another node takes over. */
const RESIGN_ABSTAIN_SECONDS = 5;
/** A member record is republished at least this often (the positions gossip shows). */
const PUBLISH_MS = 1000;

export class ClusterNode {
  state: MemberState = 'Initializing';
  private term = 0;
  private priority: number;
  private readonly server: ReplicationServer;
  private leading: LeaderReplication | undefined;
  private following: FollowerReplication | undefined;
  private reconnectAt = 0;
  private snapshot: ClusterSnapshot = { members: new Map(), known: new Map(), resigned: new Set(), leader: undefined };
  private lastPublished = 0;
  private lastEtcdWarning = 0;
  private timer: NodeJS.Timeout | undefined;
  private ticking = false;
  private stopping = false;
  private restarting = false;
  private readonly log: Logger;
  private membership!: EtcdMembership;
  /** Set by join(). */
  self!: ClusterAddresses;
  private hooks!: ClusterHooks;

  private readonly store: Store;
  private readonly settings: ClusterSettings;
  readonly instanceId: string;
  private readonly transport: Transport;

  /** Takes hold of the store's writer at once: nothing is written here until this node leads. */
  constructor({ store, settings, instanceId, transport, log }: ClusterNodeOptions) {
    this.store = store;
    this.settings = settings;
    this.instanceId = instanceId;
    this.transport = transport;
    this.priority = settings.priority;
    this.log = childLogger(log, 'cluster');
    this.server = new ReplicationServer(transport, this.log);
    store.setReplicationGate(this.followerGate);
  }

  /** The writer's gate while this node does not lead: it takes no writes. */
  private readonly followerGate: ReplicationGate = {
    refusal: () => `this node is ${this.state}, not the leader`,
    shipped: () => {},
    whenReplicated: (_p, _settle, fail) => fail(new NotLeaderError()),
  };

  get quorum(): number {
    return Math.floor(this.settings.clusterSize / 2) + 1;
  }

  /** Listens on the replication port, joins etcd, and starts deciding its role. Resolves the replication port. */
  async join(self: ClusterAddresses, hooks: ClusterHooks): Promise<number> {
    this.hooks = hooks;
    const port = await this.server.listen(this.settings.intIp, self.intPort);
    this.self = { ...self, intPort: port };
    this.membership = new EtcdMembership({
      endpoints: this.settings.endpoints, cluster: this.settings.clusterName, name: self.name, leaseTtlSeconds: this.settings.leaseTtlSeconds,
    }, this.log, () => { void this.tick(); });
    await this.membership.start(() => this.stopping);
    this.log.info({ name: this.self.name, intPort: port, endpoints: this.settings.endpoints }, 'joined the cluster\'s etcd');
    this.timer = setInterval(() => { void this.tick(); }, POLL_MS);
    await this.tick();
    return port;
  }

  get isLeader(): boolean {
    return this.state === 'Leader';
  }

  /** A follower's distance behind its leader in bytes of log (FollowerReplication.lagBytes); undefined when it follows no leader. */
  get replicationLagBytes(): number | undefined {
    return this.following?.lagBytes;
  }

  /**
   * An append this node's own services need whatever its role (a node scavenge's point and
   * history): the leader appends it; a follower sends it to the leader over its replication
   * connection and resolves once the events are in its own copy.
   */
  append(stream: string, expected: ExpectedVersion, events: ProposedEvent[]): Promise<Pick<AppendResult, 'firstEventNumber' | 'position'>> {
    // Leading (also while it starts: its writer's gate is this term's, and answers once a quorum holds the write).
    if (this.leading) return this.store.append(stream, expected, events);
    if (this.following) return this.following.append(stream, expected, events);
    return Promise.reject(new NotLeaderError(`this node is ${this.state}: no leader to write through`));
  }

  /** A request to the follower named `name` over its replication connection (this node leads), or to this node itself. */
  memberRequest(name: string, request: unknown, timeoutMs: number): Promise<unknown> {
    if (name === this.self.name) return this.hooks.serve ? this.hooks.serve(request) : Promise.reject(new Error('this node serves no requests'));
    if (!this.isLeader || !this.leading) return Promise.reject(new NotLeaderError(`this node is ${this.state}, not the leader`));
    return this.leading.request(name, request, timeoutMs);
  }

  /** The leader's advertised HTTP URL, if one is known and it is not this node. */
  leaderHttpUrl(): string | undefined {
    const leader = this.snapshot.leader;
    return leader && leader.instanceId !== this.instanceId ? leader.httpUrl : undefined;
  }

  private async tick(): Promise<void> {
    if (this.ticking || this.stopping) return;
    this.ticking = true;
    try {
      if (this.membership.leaseLost) {
        this.stepDown('the etcd lease was lost');
        return;
      }
      let snapshot: ClusterSnapshot;
      try {
        snapshot = await this.membership.snapshot();
      } catch (err) {
        // Once a second at most while etcd stays unreachable (a tick runs every POLL_MS).
        if (performance.now() - this.lastEtcdWarning > 1000) {
          this.lastEtcdWarning = performance.now();
          this.log.warn({ err: (err as Error).message }, 'etcd read failed');
        }
        return;
      }
      this.remember(snapshot);
      await this.decide(snapshot);
      if (performance.now() - this.lastPublished > PUBLISH_MS) await this.publish();
    } catch (err) {
      this.log.error({ err }, 'cluster role decision failed');
    } finally {
      this.ticking = false;
    }
  }

  private readonly leaderListeners: (() => void)[] = [];

  /** Calls `listener` whenever etcd shows another leader (a new term) or none. */
  onLeaderChange(listener: () => void): void {
    this.leaderListeners.push(listener);
  }

  private remember(snapshot: ClusterSnapshot): void {
    if (snapshot.leader?.term !== this.snapshot.leader?.term) for (const listener of this.leaderListeners) listener();
    this.snapshot = snapshot;
  }

  private async decide(snapshot: ClusterSnapshot): Promise<void> {
    const leader = snapshot.leader;
    switch (this.state) {
      case 'PreLeader': case 'Leader':
        if (!leader || leader.term !== this.term) this.stepDown(leader ? `${leader.name} leads term ${leader.term}` : 'the leader key is gone');
        return;
      case 'PreReplica': case 'CatchingUp': case 'Follower':
        if (leader && leader.term === this.term) {
          if (!this.following && performance.now() >= this.reconnectAt) this.follow(leader);
          return;
        }
        // The leader is gone or replaced: drop it before saying where this log ends.
        await this.following?.stop();
        this.following = undefined;
        await this.setState('DiscoverLeader', 0);
        return;
      default:
        if (this.state === 'Initializing') await this.setState('DiscoverLeader', 0);
        if (leader) {
          if (leader.instanceId === this.instanceId) return;
          this.term = leader.term;
          await this.setState('PreReplica', leader.term);
          this.follow(leader);
          return;
        }
        await this.elect(snapshot);
    }
  }

  /** Campaigns when a quorum of members follows no one and this log is the most up to date of theirs. */
  private async elect(snapshot: ClusterSnapshot): Promise<void> {
    const candidates = [...snapshot.members.values()].filter((m) => m.state === 'DiscoverLeader');
    const mine = snapshot.members.get(this.self.name);
    if (!mine || mine.instanceId !== this.instanceId || mine.state !== 'DiscoverLeader') return; // our record is not out yet
    if (candidates.length < this.quorum) return;
    const best = candidates.reduce((a, b) => (preferred(b, a, snapshot.resigned) ? b : a));
    if (best.name !== this.self.name) return;
    const term = await this.membership.campaign(this.leaderRecord());
    if (term === undefined) return;
    this.term = term;
    await this.lead(term);
  }

  private leaderRecord(): LeaderRecord {
    return { name: this.self.name, instanceId: this.instanceId, httpUrl: this.self.httpUrl, intHost: this.self.intHost, intPort: this.self.intPort };
  }

  private async lead(term: number): Promise<void> {
    const leading = new LeaderReplication(this.store, term, this.settings.clusterSize, () => this.membership.leaseHolds(), this.log);
    this.leading = leading;
    this.server.leading = leading;
    this.store.setReplicationGate(leading);
    await this.setState('PreLeader', term);
    this.log.info({ term }, 'elected leader: writing the epoch record once a quorum follows');
    void (async () => {
      try {
        const epoch = await writeEpoch(this.store, term, { name: this.self.name, instanceId: this.instanceId });
        await this.hooks.lead();
        if (this.leading !== leading) return;
        await this.setState('Leader', term);
        this.log.info({ term, epochPosition: epoch.position }, 'leading');
        this.hooks.led?.();
      } catch (err) {
        this.stepDown(`the leader could not start: ${(err as Error).message}`);
      }
    })();
  }

  private follow(leader: NonNullable<ClusterSnapshot['leader']>): void {
    const following = new FollowerReplication(this.store, leader, { name: this.self.name, instanceId: this.instanceId }, this.transport, {
      started: () => { void this.setState('CatchingUp', leader.term); },
      serve: (request) => (this.hooks.serve ? this.hooks.serve(request) : Promise.reject(new Error('this node serves no requests'))),
      caughtUp: () => {
        void this.setState('Follower', leader.term);
        this.hooks.follow?.();
      },
      truncate: (common) => {
        this.log.warn({ leader: leader.name, term: leader.term, common, logEnd: this.store.logEnd },
          'this log holds records past where it agrees with the leader\'s (no quorum acknowledged them): truncating');
        this.store.setTruncateCheckpoint(common);
        this.restart('truncate the log to the leader\'s');
      },
      closed: (reason) => {
        if (this.following !== following) return;
        if (reason.startsWith('connection renewed')) this.log.info({ leader: leader.name }, 'replication connection renewed');
        else this.log.warn({ leader: leader.name, reason }, 'replication connection to the leader closed; reconnecting');
        this.following = undefined;
        this.reconnectAt = performance.now() + RECONNECT_MS;
        if (this.state !== 'DiscoverLeader') void this.setState('PreReplica', leader.term);
      },
    }, this.log, this.settings.connectionLifetimeMs);
    this.following = following;
    following.start();
  }

  /**
   * POST /admin/node/resign: a leader gives up its term, and for RESIGN_ABSTAIN_SECONDS yields to
   * any node whose log is as up to date (another node leads); a follower has nothing to give up.
   */
  async resign(): Promise<boolean> {
    if (this.state !== 'Leader' && this.state !== 'PreLeader') return false;
    await this.membership.abstain(RESIGN_ABSTAIN_SECONDS);
    this.log.info({ term: this.term }, 'resigning leadership');
    await this.membership.resign(this.term).catch(() => undefined);
    this.stepDown('this node resigned');
    return true;
  }

  /**
   * POST /admin/node/priority: used from the next election on (it starts none, as in the
   * established server). Published at once, so that the others weigh it if the leader goes now.
   */
  async setPriority(priority: number): Promise<void> {
    this.priority = priority;
    this.log.info({ priority }, 'node priority set');
    // Before join() the first tick publishes it.
    if (this.timer) await this.publish();
  }

  private stepDown(reason: string): void {
    if (this.leading) {
      this.leading.end(new ReplicationLostError(`this node stopped leading: ${reason}`));
      this.store.setReplicationGate(this.followerGate);
    }
    this.restart(reason);
  }

  private restart(reason: string): void {
    // Once: a lost lease is noticed by the lease's event and by the next poll alike.
    if (this.stopping || this.restarting) return;
    this.restarting = true;
    this.log.warn({ reason }, 'the node restarts');
    this.hooks.restart(reason);
  }

  private async setState(state: MemberState, term: number): Promise<void> {
    if (this.state === state && this.term === term) return;
    this.state = state;
    this.term = term;
    this.log.info({ state, term }, `cluster state ${state}`);
    await this.publish(true);
  }

  /** `stateChanged`: also recorded as this member's last known state (gossip shows it once the node is gone). */
  private async publish(stateChanged = false): Promise<void> {
    this.lastPublished = performance.now();
    try {
      await this.membership.publish(this.memberRecord(), stateChanged);
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, 'publishing the member record failed');
    }
  }

  memberRecord(): MemberRecord {
    const epoch = lastEpoch(this.store);
    return {
      name: this.self.name, instanceId: this.instanceId, state: this.state, httpUrl: this.self.httpUrl,
      intHost: this.self.intHost, intPort: this.self.intPort, epochTerm: epoch.term, epochPosition: epoch.position,
      logEnd: this.store.logEnd, term: this.term, priority: this.priority, timeStamp: new Date().toISOString(),
    };
  }

  /** Every member etcd knows (this node as it is now), and those seen before that are gone. */
  members(): { record: MemberRecord; alive: boolean; leader: boolean }[] {
    const leaderId = this.snapshot.leader?.instanceId;
    const out = [{ record: this.memberRecord(), alive: true, leader: this.state === 'Leader' }];
    for (const record of this.snapshot.members.values()) {
      if (record.name === this.self.name) continue;
      out.push({ record, alive: true, leader: record.instanceId === leaderId && record.state === 'Leader' });
    }
    // Members that are gone (their lease ran out), as they last were: a bounded few, by name.
    const gone = [...this.snapshot.known.values()].filter((r) => r.name !== this.self.name && !this.snapshot.members.has(r.name))
      .sort((a, b) => (a.name < b.name ? -1 : 1)).slice(0, this.settings.clusterSize * 2);
    for (const record of gone) out.push({ record, alive: false, leader: false });
    return out;
  }

  /** Leaves the cluster: a leader gives up its key (another node takes over at once) and the lease is revoked. */
  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    clearInterval(this.timer);
    const term = this.term;
    const wasLeading = this.leading !== undefined;
    this.leading?.end(new ReplicationLostError('this node is shutting down'));
    this.store.setReplicationGate(this.followerGate);
    await this.following?.stop();
    await this.server.close();
    if (!this.membership) return;
    if (wasLeading) await this.membership.resign(term).catch(() => undefined);
    await this.membership.close();
  }
}

/**
 * Raft's up-to-date rule on epochs: a later last term wins, then a longer log; between logs as up
 * to date, one that did not just resign, then the higher priority, then the lower name (a stable
 * tie-break). Neither a resign nor a priority outweighs a more up-to-date log: no acknowledged
 * write is given up. A resign goes before the priority, or a leader of the highest priority could
 * never hand over.
 */
export function preferred(a: MemberRecord, b: MemberRecord, resigned: ReadonlySet<string>): boolean {
  if (a.epochTerm !== b.epochTerm) return a.epochTerm > b.epochTerm;
  if (a.logEnd !== b.logEnd) return a.logEnd > b.logEnd;
  if (resigned.has(a.name) !== resigned.has(b.name)) return !resigned.has(a.name);
  if (a.priority !== b.priority) return a.priority > b.priority;
  return a.name < b.name;
}
