import type { Logger } from 'pino';
import { DomainError } from '../errors.js';
import { ExpectedVersion, jsonEvent, type Store } from '../store/index.js';
import { PersistentGroup } from './group.js';
import type { Message } from './message.js';
import { MAX_GROUPS } from './limits.js';
import { appendKeepingLatest } from './streams.js';
import { fromEntry, toEntry, type GroupSettings, type PersistedEntry } from './settings.js';

// The persistent subscription groups of the node: their definitions (one document, rewritten
// on every change, in $persistentSubscriptionConfig, restored on start), the commit bus feeding
// them, and the tick that expires leases and writes timed checkpoints.

export const CONFIG_STREAM = '$persistentSubscriptionConfig';
export const CONFIG_EVENT_TYPE = '$PersistentConfig';
const TICK_MS = 100;

/** A change of the groups refused: the group exists already, does not exist, or the node keeps no more groups. */
export class SubscriptionError extends DomainError {
  constructor(readonly code: 'SUBSCRIPTION_EXISTS' | 'SUBSCRIPTION_NOT_FOUND' | 'SUBSCRIPTION_LIMIT', message: string) {
    super(message);
  }
}

export class SubscriptionService {
  private readonly groups = new Map<string, PersistentGroup>();
  private readonly byStream = new Map<string, Set<PersistentGroup>>();
  /** Definition changes run one at a time: each rewrites the whole document. */
  private changes: Promise<unknown> = Promise.resolve();
  private unsubscribe: (() => void) | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly store: Store, private readonly log: Logger) {}

  async start(): Promise<void> {
    for (const entry of this.loadEntries()) {
      const settings = fromEntry(entry);
      if (!settings || !entry.stream || !entry.group) {
        this.log.error({ entry }, 'skipping a persistent subscription entry with invalid settings');
        continue;
      }
      if (this.groups.has(keyOf(entry.stream, entry.group))) {
        this.log.warn({ stream: entry.stream, group: entry.group }, 'skipping a duplicate persistent subscription entry');
        continue;
      }
      await this.addGroup(entry.stream, entry.group, settings, false);
    }
    this.unsubscribe = this.store.bus.subscribe((commit) => {
      for (const record of commit.records) {
        const groups = this.byStream.get(record.streamId);
        if (groups) for (const g of groups) g.notifyAppended(record.eventNumber);
      }
    }, 'persistent subscriptions');
    this.timer = setInterval(() => {
      const now = Date.now();
      for (const g of this.groups.values()) g.tick(now);
    }, TICK_MS);
    this.timer.unref();
  }

  /** Stops every group, writing a last checkpoint of what is handled. */
  async stop(): Promise<void> {
    this.unsubscribe?.();
    if (this.timer) clearInterval(this.timer);
    await this.changes.catch(() => undefined);
    await Promise.all([...this.groups.values()].map((g) => g.stop(true)));
  }

  private loadEntries(): Partial<PersistedEntry>[] {
    const found = this.store.readEvent(CONFIG_STREAM, -1, false);
    if (found.status !== 'ok' || !found.event.event) return [];
    try {
      const doc = JSON.parse(found.event.event.data.toString('utf8')) as { entries?: Partial<PersistedEntry>[] };
      return Array.isArray(doc.entries) ? doc.entries : [];
    } catch (err) {
      this.log.error({ err: (err as Error).message }, 'the persistent subscription configuration is not valid JSON; no groups loaded');
      return [];
    }
  }

  private async addGroup(stream: string, name: string, settings: GroupSettings, isNew: boolean): Promise<PersistentGroup> {
    const group = new PersistentGroup(stream, name, settings, this.store, this.log);
    this.groups.set(group.key, group);
    let set = this.byStream.get(stream);
    if (!set) this.byStream.set(stream, (set = new Set()));
    set.add(group);
    await group.load(isNew);
    return group;
  }

  private removeGroup(group: PersistentGroup): void {
    this.groups.delete(group.key);
    const set = this.byStream.get(group.stream);
    set?.delete(group);
    if (set?.size === 0) this.byStream.delete(group.stream);
  }

  private serialised<T>(change: () => Promise<T>): Promise<T> {
    const run = this.changes.then(change, change);
    this.changes = run.catch(() => undefined);
    return run;
  }

  /** Writes the definitions document as it will be once `next` replaces the in-memory set. */
  private async saveEntries(next: PersistedEntry[], by: string): Promise<void> {
    const doc = { version: '2', updated: new Date().toISOString(), updatedBy: by, entries: next };
    await appendKeepingLatest(this.store, CONFIG_STREAM, jsonEvent(CONFIG_EVENT_TYPE, doc, { idempotent: false }), 2);
  }

  private entries(): PersistedEntry[] {
    return [...this.groups.values()].map((g) => toEntry(g.stream, g.name, g.settings));
  }

  create(stream: string, name: string, settings: GroupSettings, by: string): Promise<PersistentGroup> {
    return this.serialised(async () => {
      if (this.groups.has(keyOf(stream, name))) throw new SubscriptionError('SUBSCRIPTION_EXISTS', `Group '${name}' already exists.`);
      if (this.groups.size >= MAX_GROUPS) {
        throw new SubscriptionError('SUBSCRIPTION_LIMIT', `The node has ${this.groups.size} persistent subscription groups, the most it keeps; delete one first.`);
      }
      await this.saveEntries([...this.entries(), toEntry(stream, name, settings)], by);
      return this.addGroup(stream, name, settings, true);
    });
  }

  /** Replaces the group: its consumers and leases are dropped; it resumes from its checkpoint. */
  update(stream: string, name: string, settings: GroupSettings, by: string): Promise<PersistentGroup> {
    return this.serialised(async () => {
      const old = this.existing(stream, name);
      const next = this.entries().map((e) => (e.stream === stream && e.group === name ? toEntry(stream, name, settings) : e));
      await this.saveEntries(next, by);
      this.removeGroup(old);
      await old.stop(true);
      return this.addGroup(stream, name, settings, false);
    });
  }

  /** Removes the group with its checkpoint and parked messages. */
  delete(stream: string, name: string, by: string): Promise<void> {
    return this.serialised(async () => {
      const group = this.existing(stream, name);
      await this.saveEntries(this.entries().filter((e) => !(e.stream === stream && e.group === name)), by);
      this.removeGroup(group);
      await group.stop(false);
      for (const streamId of [group.checkpointStream, group.parked.streamId]) {
        const info = this.store.streamInfo(streamId);
        if (info && !info.tombstoned && info.lastEventNumber >= 0) await this.store.deleteStream(streamId, ExpectedVersion.any, false);
      }
    });
  }

  /** The group, or undefined when the node has none of that name on that stream. */
  find(stream: string, name: string): PersistentGroup | undefined {
    return this.groups.get(keyOf(stream, name));
  }

  /** The group a change applies to; a change of a group that does not exist is refused. */
  private existing(stream: string, name: string): PersistentGroup {
    const group = this.find(stream, name);
    if (!group) throw new SubscriptionError('SUBSCRIPTION_NOT_FOUND', `Group '${name}' does not exist.`);
    return group;
  }

  list(): PersistentGroup[] {
    return [...this.groups.values()];
  }

  listStream(stream: string): PersistentGroup[] {
    return [...(this.byStream.get(stream) ?? [])];
  }

  /**
   * Leases up to `count` messages; when there are none and `waitMs` > 0, waits (long poll) for
   * new events or retries until one arrives or the time is up.
   */
  async pull(group: PersistentGroup, count: number, waitMs: number, signal?: AbortSignal): Promise<Message[]> {
    let messages = group.take(count);
    const deadline = Date.now() + waitMs;
    while (messages.length === 0 && !group.isStopped && !signal?.aborted) {
      const remaining = deadline - Date.now();
      if (remaining <= 0) break;
      await this.store.bus.waitFor((r) => r.streamId === group.stream, Math.min(remaining, 200), signal);
      messages = group.take(count);
    }
    return messages;
  }
}

function keyOf(stream: string, group: string): string {
  return `${stream}::${group}`;
}
