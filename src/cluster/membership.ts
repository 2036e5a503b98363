import { Etcd3, type Lease } from 'etcd3';
import type { Logger } from 'pino';

// Membership and leader election through etcd (never a home-made consensus). Each node holds
// one lease (--lease-ttl seconds, kept alive by the etcd3 client) and keeps its member record
// under `<cluster>/members/<name>` on that lease: when the node dies or freezes, etcd removes
// the record once the lease runs out. The leader is whoever created `<cluster>/leader` (on its
// lease, by a transaction that succeeds only when the key is absent); the key's create revision
// is the leader's term, which only grows. Nodes read the whole prefix every POLL_MS: three
// records and a key, cheaper to reason about than watches that reconnect.

/** How often a node reads the cluster's keys; with a 2 s lease, failover takes about lease + 2 polls. */
export const POLL_MS = 150;
/** A leader stops acknowledging this long before its lease would run out by its own (monotonic) clock. */
const LEASE_MARGIN_MS = 400;

export type MemberState = 'Initializing' | 'DiscoverLeader' | 'PreReplica' | 'CatchingUp' | 'Follower' | 'PreLeader' | 'Leader'
  | 'ShuttingDown';

/** What a node tells the others about itself (its member record in etcd). */
export interface MemberRecord {
  name: string;
  instanceId: string;
  state: MemberState;
  /** The HTTP address clients and other nodes use (307 Location, forwarded writes). */
  httpUrl: string;
  intHost: string;
  intPort: number;
  /** Term of the last epoch in its log (0: none), and where its log ends: what the up-to-date rule compares. */
  epochTerm: number;
  epochPosition: number;
  logEnd: number;
  /** The leader's term it follows or leads (0: none). */
  term: number;
  /** Between logs as up to date, the higher leads (0 in a record from a node of a version before priorities). */
  priority: number;
  timeStamp: string;
}

export interface LeaderRecord {
  name: string;
  instanceId: string;
  httpUrl: string;
  intHost: string;
  intPort: number;
}

export interface ClusterSnapshot {
  /** The members whose lease holds (alive). */
  members: Map<string, MemberRecord>;
  /** Every member that ever joined, as it last published itself on a state change (no lease: a dead one stays). */
  known: Map<string, MemberRecord>;
  /** Members that resigned leadership a moment ago: they yield to any member as up to date in the next election. */
  resigned: Set<string>;
  leader: (LeaderRecord & { term: number }) | undefined;
}

export interface MembershipOptions {
  endpoints: string[];
  cluster: string;
  name: string;
  leaseTtlSeconds: number;
}

export class EtcdMembership {
  private readonly client: Etcd3;
  private lease: Lease | undefined;
  /** performance.now() until which the lease surely holds (the keep-alive's send time + TTL). */
  private leaseValidUntil = 0;
  private keepaliveSentAt = 0;
  private lost = false;
  private readonly prefix: string;

  constructor(private readonly options: MembershipOptions, private readonly log: Logger, private readonly onLeaseLost: () => void) {
    this.client = new Etcd3({
      hosts: options.endpoints, dialTimeout: 2000,
      defaultCallOptions: (context) => (context.isStream ? {} : { deadline: Date.now() + 2000 }),
    });
    this.prefix = `${options.cluster}/`;
  }

  get leaderKey(): string {
    return `${this.prefix}leader`;
  }

  private memberKey(name: string): string {
    return `${this.prefix}members/${name}`;
  }

  /** Grants the lease (retrying while etcd is unreachable, until `stopped`), then keeps it alive. */
  async start(stopped: () => boolean): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      const lease = this.client.lease(this.options.leaseTtlSeconds, { autoKeepAlive: true });
      const sentAt = performance.now();
      try {
        await lease.grant();
        this.lease = lease;
        this.leaseValidUntil = sentAt + this.options.leaseTtlSeconds * 1000;
        break;
      } catch (err) {
        lease.release();
        if (stopped()) throw err;
        if (attempt % 10 === 0) this.log.warn({ err: (err as Error).message, endpoints: this.options.endpoints }, 'etcd unreachable; retrying');
        await new Promise((r) => setTimeout(r, 500));
      }
    }
    const lease = this.lease;
    lease.on('keepaliveFired', () => { this.keepaliveSentAt = performance.now(); });
    lease.on('keepaliveSucceeded', () => {
      this.leaseValidUntil = Math.max(this.leaseValidUntil, this.keepaliveSentAt + this.options.leaseTtlSeconds * 1000);
    });
    lease.on('lost', (err) => {
      if (this.lost) return;
      this.lost = true;
      this.leaseValidUntil = 0;
      this.log.warn({ err: err.message }, 'etcd lease lost');
      this.onLeaseLost();
    });
  }

  /** Whether the lease surely still holds now: what a leader checks before acknowledging a write. */
  leaseHolds(): boolean {
    return !this.lost && performance.now() < this.leaseValidUntil - LEASE_MARGIN_MS;
  }

  get leaseLost(): boolean {
    return this.lost;
  }

  /** `durable`: also keep it as the member's last known record, which outlives the lease (state changes only). */
  async publish(record: MemberRecord, durable: boolean): Promise<void> {
    const value = JSON.stringify(record);
    await this.lease!.put(this.memberKey(record.name)).value(value).exec();
    if (durable) await this.client.put(`${this.prefix}known/${record.name}`).value(value).exec();
  }

  async snapshot(): Promise<ClusterSnapshot> {
    const response = await this.client.getAll().prefix(this.prefix).exec();
    const members = new Map<string, MemberRecord>();
    const known = new Map<string, MemberRecord>();
    const resigned = new Set<string>();
    let leader: ClusterSnapshot['leader'];
    for (const kv of response.kvs) {
      const key = kv.key.toString('utf8');
      if (key.startsWith(`${this.prefix}resigned/`)) {
        resigned.add(key.slice(`${this.prefix}resigned/`.length));
        continue;
      }
      const value = parseRecord(kv.value.toString('utf8'));
      if (!value) continue;
      if (key === this.leaderKey) leader = { ...(value as unknown as LeaderRecord), term: Number(kv.create_revision) };
      else if (key.startsWith(`${this.prefix}members/`)) members.set(String(value.name), memberOf(value));
      else if (key.startsWith(`${this.prefix}known/`)) known.set(String(value.name), memberOf(value));
    }
    return { members, known, resigned, leader };
  }

  /** Creates the leader key on this node's lease if no leader holds it; the new term, or undefined if another node won. */
  async campaign(record: LeaderRecord): Promise<number | undefined> {
    const result = await this.client.if(this.leaderKey, 'Create', '==', 0)
      .then(this.client.put(this.leaderKey).value(JSON.stringify(record)).lease(this.lease!.grant()))
      .commit();
    if (!result.succeeded) return undefined;
    return Number(result.header.revision);
  }

  /** Marks this member as resigned for `seconds` (a key on a lease of its own that is not kept alive). */
  async abstain(seconds: number): Promise<void> {
    const lease = this.client.lease(seconds, { autoKeepAlive: false });
    await lease.put(`${this.prefix}resigned/${this.options.name}`).value('1').exec();
  }

  /** Gives up leadership (a leader that resigns or shuts down): deletes the leader key if it is still this term's. */
  async resign(term: number): Promise<void> {
    await this.client.if(this.leaderKey, 'Create', '==', term).then(this.client.delete().key(this.leaderKey)).commit();
  }

  /** Revokes the lease (the member record and any leader key go at once) and closes the client. */
  async close(): Promise<void> {
    try {
      if (this.lease && !this.lost) await this.lease.revoke();
    } catch {
      // etcd unreachable: the lease runs out on its own.
    }
    this.client.close();
  }
}

/** A member record as published; one from a node of an older version has no priority, which counts as 0. */
export function memberOf(value: Record<string, unknown>): MemberRecord {
  return { ...(value as unknown as MemberRecord), priority: typeof value.priority === 'number' ? value.priority : 0 };
}

function parseRecord(text: string): Record<string, unknown> | undefined {
  try {
    const value = JSON.parse(text) as unknown;
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? value as Record<string, unknown> : undefined;
  } catch {
    return undefined;
  }
}
