import type { Principal } from '../auth/index.js';
import {
  ALL_SOURCE, checkClientSettings, SettingsError, SubscriptionError, type ConsumerOptions, type FilterDefinition, type GroupInfo,
  type GroupSettings, type Message, type NackAction, type PersistentGroup, type SubscriptionService,
} from '../subscriptions/index.js';
import { demand } from './rights.js';
import type { StreamVerbs } from './streams.js';

// The persistent subscription verbs, for every door (the HTTP routes of api/subscriptions.ts and
// the gRPC service of api/grpc/persistent.ts): who may do what, the rules a client's settings
// must meet, and the group each call names. A group is named by its source (a stream, or `$all`)
// and its name. Managing groups (create, update, delete, replay parked messages, restart) takes
// a member of $ops or $admins; listings and info take an authenticated user; consuming (pull or
// connect, ack, nack) takes read access to the source, as reading it would.
//
// A door decodes its protocol into the settings and hands them over as a function: they are read
// once the caller is known to be allowed, so a refused caller learns nothing about its input.

export { ALL_SOURCE };
export type { GroupInfo, NackAction, Message };
export type { ConnectionInfo, ConsumerOptions, DropReason } from '../subscriptions/index.js';

export interface GroupDefinition {
  readonly settings: GroupSettings;
  /** `$all` groups only. */
  readonly filter?: FilterDefinition;
}

/** A connected push consumer, for its door: settles what it was given, and leaves. */
export interface PushConsumer {
  ack(ids: readonly string[]): void;
  nack(ids: readonly string[], action: NackAction, reason: string): void;
  /** The consumer leaves; what it holds goes back to the group. */
  close(): void;
}

export class PersistentVerbs {
  constructor(private readonly service: SubscriptionService, private readonly streams: StreamVerbs) {}

  async create(who: Principal, source: string, group: string, define: () => GroupDefinition): Promise<void> {
    demand(who, 'ops', 'subscriptions');
    const { settings, filter } = checked(source, group, define);
    if (filter && source !== ALL_SOURCE) throw new SettingsError('Only a group on $all takes a filter.', source, group);
    if (source === ALL_SOURCE && settings.startFrom > this.streams.headPosition) {
      throw new SettingsError(`The start position ${settings.startFrom} is past the end of the log (${this.streams.headPosition}).`, source, group);
    }
    await this.service.create(source, group, settings, filter, who.name);
  }

  /** New settings for the group (a `$all` group keeps its filter): its consumers are dropped and it resumes from its checkpoint. */
  async update(who: Principal, source: string, group: string, define: () => GroupSettings): Promise<void> {
    demand(who, 'ops', 'subscriptions');
    const { settings } = checked(source, group, () => ({ settings: define() }));
    await this.service.update(source, group, settings, who.name);
  }

  async delete(who: Principal, source: string, group: string): Promise<void> {
    demand(who, 'ops', 'subscriptions');
    await this.service.delete(source, group, who.name);
  }

  /** Replays the group's parked messages numbered below `stopAt` (all when undefined). */
  replayParked(who: Principal, source: string, group: string, stopAt: number | undefined): void {
    demand(who, 'ops', 'subscriptions');
    if (stopAt !== undefined && (!Number.isSafeInteger(stopAt) || stopAt < 0)) {
      throw new SettingsError('Cannot stop replaying parked message at a negative version.', source, group);
    }
    this.service.existing(source, group, true).replayParked(stopAt);
  }

  /** Stops every group, dropping their consumers, and loads them again. */
  async restart(who: Principal): Promise<void> {
    demand(who, 'ops', 'subscriptions');
    await this.service.restart();
  }

  info(who: Principal, source: string, group: string): GroupInfo {
    demand(who, 'authenticated', 'subscriptions');
    return this.service.existing(source, group, true).info();
  }

  /** Every group (`source` undefined), or the groups of one source, of which there must be one at least. */
  list(who: Principal, source?: string): GroupInfo[] {
    demand(who, 'authenticated', 'subscriptions');
    const groups = source === undefined ? this.service.list() : this.service.listStream(source);
    if (source !== undefined && groups.length === 0) {
      throw new SubscriptionError('SUBSCRIPTION_NOT_FOUND', `No persistent subscription groups on '${source}'.`, source, '', true);
    }
    return groups.map((g) => g.info());
  }

  /** Leases up to `count` messages to an HTTP pull, waiting up to `waitMs` for one (long poll). */
  pull(who: Principal, source: string, group: string, count: number, waitMs: number, signal?: AbortSignal): Promise<Message[]> {
    const g = this.consumable(who, source, group);
    return this.service.pull(g, count, waitMs, signal);
  }

  ack(who: Principal, source: string, group: string, ids: readonly string[]): void {
    this.consumable(who, source, group).ack(ids);
  }

  nack(who: Principal, source: string, group: string, ids: readonly string[], action: NackAction, reason: string): void {
    this.consumable(who, source, group).nack(ids, action, reason);
  }

  /** A push consumer joins the group (`options.capacity`: messages it may hold unsettled, at least 1). */
  connect(who: Principal, source: string, group: string, options: ConsumerOptions): PushConsumer {
    const g = this.consumable(who, source, group);
    if (!Number.isSafeInteger(options.capacity) || options.capacity < 1) {
      throw new SettingsError(`A consumer's buffer size (${options.capacity}) must be at least 1.`, source, group);
    }
    const consumer = g.connect(options);
    return {
      ack: (ids) => g.ack(ids),
      nack: (ids, action, reason) => g.nack(ids, action, reason),
      close: () => g.disconnect(consumer),
    };
  }

  /** The group, if `who` may read its source. */
  private consumable(who: Principal, source: string, group: string): PersistentGroup {
    const g = this.service.existing(source, group, true);
    this.streams.authorize(who, 'r', g.stream);
    return g;
  }
}

/** The definition a client sent, read and checked; a refusal names the group. */
function checked(source: string, group: string, define: () => GroupDefinition): GroupDefinition {
  try {
    if (source.trim() === '') throw new SettingsError('Bad stream name.');
    if (group.trim() === '') throw new SettingsError('Bad group name.');
    const definition = define();
    checkClientSettings(definition.settings);
    return definition;
  } catch (err) {
    throw err instanceof SettingsError ? err.about(source, group) : err;
  }
}
