import type { Logger } from 'pino';
import { ExpectedVersion, jsonEvent, type EventRecord, type Store } from '../store/index.js';
import { makeFilter } from '../store/index.js';
import { PersistentGroup } from './group.js';
import type { Message } from './message.js';
import { MAX_GROUPS } from './limits.js';
import { appendKeepingLatest } from './streams.js';
import { fromEntry, toEntry, type FilterDefinition, type GroupSettings, type PersistedEntry } from './settings.js';
import { ALL_SOURCE, allSource, streamSource, type GroupSource } from './source.js';
import { SubscriptionError } from './errors.js';

// The persistent subscription groups of the node: their definitions (one document, rewritten
// on every change, in $persistentSubscriptionConfig, restored on start), the commit bus feeding
// them, and the tick that expires leases and writes timed checkpoints. A group's source is a
// stream, or `$all` (with its filter); both kinds live side by side, keyed `{source}::{group}`.

export const CONFIG_STREAM = '$persistentSubscriptionConfig';
export const CONFIG_EVENT_TYPE = '$PersistentConfig';
const TICK_MS = 100;

export class SubscriptionService {
  private readonly groups = new Map<string, PersistentGroup>();
  private readonly byStream = new Map<string, Set<PersistentGroup>>();
  private readonly allGroups = new Set<PersistentGroup>();
  /** The `$all` groups' filters as defined (an update keeps them). */
  private readonly filters = new Map<string, FilterDefinition>();
  /** Definition changes run one at a time: each rewrites the whole document. */
  private changes: Promise<unknown> = Promise.resolve();
  private unsubscribe: (() => void) | undefined;
  private timer: NodeJS.Timeout | undefined;
  private running = false;

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
      try {
        await this.addGroup(entry.stream, entry.group, settings, entry.filter, false);
      } catch (err) {
        this.log.error({ entry, err: (err as Error).message }, 'skipping a persistent subscription entry with an invalid filter');
      }
    }
    this.unsubscribe = this.store.bus.subscribe((commit) => this.notify(commit.records), 'persistent subscriptions');
    this.timer = setInterval(() => {
      const now = Date.now();
      for (const g of this.groups.values()) g.tick(now);
    }, TICK_MS);
    this.timer.unref();
    this.running = true;
  }

  private notify(records: readonly EventRecord[]): void {
    for (const record of records) {
      const groups = this.byStream.get(record.streamId);
      if (groups) for (const g of groups) g.notifyAppended(record.eventNumber);
    }
    for (const g of this.allGroups) {
      let last = -1;
      for (const r of records) if (g.source.takes(r)) last = r.position;
      g.notifyAppended(last);
    }
  }

  /** Stops every group, writing a last checkpoint of what is handled; connected consumers are dropped. */
  async stop(): Promise<void> {
    this.running = false;
    await this.changes.catch(() => undefined);
    await this.stopGroups();
  }

  private async stopGroups(): Promise<void> {
    this.running = false;
    this.unsubscribe?.();
    if (this.timer) clearInterval(this.timer);
    await Promise.all([...this.groups.values()].map((g) => g.stop(true)));
  }

  /** Stops every group (their consumers are dropped) and loads them again from their definitions and checkpoints. */
  restart(): Promise<void> {
    return this.serialised(async () => {
      if (!this.running) {
        throw new SubscriptionError('SUBSCRIPTIONS_NOT_READY', 'Persistent Subscriptions cannot be restarted as it is in the wrong state.');
      }
      await this.stopGroups();
      for (const g of [...this.groups.values()]) this.removeGroup(g);
      await this.start();
    });
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

  private sourceOf(stream: string, filter: FilterDefinition | undefined): GroupSource {
    if (stream !== ALL_SOURCE) return streamSource(this.store, stream);
    return allSource(this.store, filter && makeFilter(filter.on, filter.regex, filter.prefixes), filter?.window);
  }

  private async addGroup(stream: string, name: string, settings: GroupSettings, filter: FilterDefinition | undefined,
    isNew: boolean): Promise<PersistentGroup> {
    const group = new PersistentGroup(this.sourceOf(stream, filter), name, settings, this.store, this.log);
    this.groups.set(group.key, group);
    if (stream === ALL_SOURCE) {
      this.allGroups.add(group);
      if (filter) this.filters.set(group.key, filter);
    } else {
      let set = this.byStream.get(stream);
      if (!set) this.byStream.set(stream, (set = new Set()));
      set.add(group);
    }
    await group.load(isNew);
    return group;
  }

  private removeGroup(group: PersistentGroup): void {
    this.groups.delete(group.key);
    this.allGroups.delete(group);
    this.filters.delete(group.key);
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

  private entryOf(stream: string, name: string, settings: GroupSettings, filter: FilterDefinition | undefined): PersistedEntry {
    return toEntry(stream, name, settings, this.sourceOf(stream, filter).positionText(settings.startFrom), filter);
  }

  private entries(): PersistedEntry[] {
    return [...this.groups.values()].map((g) => this.entryOf(g.stream, g.name, g.settings, this.filters.get(g.key)));
  }

  /** A new group on `stream` (or `$all`, with `filter`). */
  create(stream: string, name: string, settings: GroupSettings, filter: FilterDefinition | undefined, by: string): Promise<PersistentGroup> {
    return this.serialised(async () => {
      this.requireRunning();
      if (this.groups.has(keyOf(stream, name))) {
        throw new SubscriptionError('SUBSCRIPTION_EXISTS', `Group '${name}' already exists.`, stream, name);
      }
      if (this.groups.size >= MAX_GROUPS) {
        throw new SubscriptionError('SUBSCRIPTION_LIMIT',
          `The node has ${this.groups.size} persistent subscription groups, the most it keeps; delete one first.`, stream, name);
      }
      const entry = this.entryOf(stream, name, settings, filter); // (a filter that cannot be compiled throws here, before the write)
      await this.saveEntries([...this.entries(), entry], by);
      return this.addGroup(stream, name, settings, filter, true);
    });
  }

  /** Replaces the group's settings (a `$all` group keeps its filter): its consumers and leases are dropped; it resumes from its checkpoint. */
  update(stream: string, name: string, settings: GroupSettings, by: string): Promise<PersistentGroup> {
    return this.serialised(async () => {
      const old = this.existing(stream, name);
      const filter = this.filters.get(old.key);
      const next = this.entries().map((e) => (e.stream === stream && e.group === name ? this.entryOf(stream, name, settings, filter) : e));
      await this.saveEntries(next, by);
      this.removeGroup(old);
      await old.stop(true);
      return this.addGroup(stream, name, settings, filter, false);
    });
  }

  /** Removes the group with its checkpoint and parked messages; its consumers are told it does not exist. */
  delete(stream: string, name: string, by: string): Promise<void> {
    return this.serialised(async () => {
      const group = this.existing(stream, name);
      await this.saveEntries(this.entries().filter((e) => !(e.stream === stream && e.group === name)), by);
      this.removeGroup(group);
      await group.stop(false, 'deleted');
      for (const streamId of [group.checkpoints.streamId, group.parked.streamId]) {
        const info = this.store.streamInfo(streamId);
        if (info && !info.tombstoned && info.lastEventNumber >= 0) await this.store.deleteStream(streamId, ExpectedVersion.any, false);
      }
    });
  }

  /** The group, or undefined when the node has none of that name on that stream. */
  find(stream: string, name: string): PersistentGroup | undefined {
    return this.groups.get(keyOf(stream, name));
  }

  /** The group a request names (`lookUp`: to read or consume it, not to change it); one that does not exist is refused. */
  existing(stream: string, name: string, lookUp = false): PersistentGroup {
    this.requireRunning();
    const group = this.find(stream, name);
    if (!group) throw new SubscriptionError('SUBSCRIPTION_NOT_FOUND', `Group '${name}' does not exist.`, stream, name, lookUp);
    return group;
  }

  private requireRunning(): void {
    if (!this.running) throw new SubscriptionError('SUBSCRIPTIONS_NOT_READY', 'The persistent subscriptions are not running on this node.');
  }

  list(): PersistentGroup[] {
    return [...this.groups.values()];
  }

  /** The groups of one source (a stream, or `$all`). */
  listStream(stream: string): PersistentGroup[] {
    return stream === ALL_SOURCE ? [...this.allGroups] : [...(this.byStream.get(stream) ?? [])];
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
      await this.store.bus.waitFor((r) => group.source.takes(r), Math.min(remaining, 200), signal);
      messages = group.take(count);
    }
    return messages;
  }
}

function keyOf(stream: string, group: string): string {
  return `${stream}::${group}`;
}
