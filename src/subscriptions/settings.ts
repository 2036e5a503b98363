// A group's settings: the HTTP body (SubscriptionItem, names case-insensitive), its defaults,
// its validation, and the entry persisted in $persistentSubscriptionConfig. Defaults and messages
// are those of the established servers' HTTP API, so existing clients and scripts behave the same.

import { MAX_BUFFER_SIZE } from './limits.js';
import { SettingsError } from './errors.js';

export const STRATEGIES = ['RoundRobin', 'DispatchToSingle', 'Pinned', 'PinnedByCorrelation'] as const;
export type ConsumerStrategyName = (typeof STRATEGIES)[number];

export interface GroupSettings {
  resolveLinkTos: boolean;
  /**
   * Where to start when the group has no checkpoint: the first event number (a stream group) or
   * log position (a `$all` group) to deliver; -1: only events appended from now on.
   */
  startFrom: number;
  extraStatistics: boolean;
  messageTimeoutMs: number;
  maxRetryCount: number;
  liveBufferSize: number;
  bufferSize: number;
  readBatchSize: number;
  /** 0: never checkpoint by time. */
  checkPointAfterMs: number;
  minCheckPointCount: number;
  maxCheckPointCount: number;
  maxSubscriberCount: number;
  namedConsumerStrategy: ConsumerStrategyName;
}

export const DEFAULT_SETTINGS: Readonly<GroupSettings> = Object.freeze({
  resolveLinkTos: false,
  startFrom: 0,
  extraStatistics: false,
  messageTimeoutMs: 10_000,
  maxRetryCount: 10,
  liveBufferSize: 500,
  bufferSize: 500,
  readBatchSize: 20,
  checkPointAfterMs: 1_000,
  minCheckPointCount: 10,
  maxCheckPointCount: 500,
  maxSubscriberCount: 10,
  namedConsumerStrategy: 'RoundRobin',
});

/** A `$all` group's filter, as clients give it and the definitions document keeps it. */
export interface FilterDefinition {
  on: 'streamName' | 'eventType';
  /** Wins over the prefixes when given. */
  regex?: string;
  prefixes: string[];
  /** Records of the log scanned per read (the clients' max search window); undefined: the node's page. */
  window?: number;
}

/** HTTP body field (lower-cased) → setting. */
const NUMBER_FIELDS: Record<string, keyof GroupSettings> = {
  startfrom: 'startFrom',
  messagetimeoutmilliseconds: 'messageTimeoutMs',
  maxretrycount: 'maxRetryCount',
  livebuffersize: 'liveBufferSize',
  buffersize: 'bufferSize',
  readbatchsize: 'readBatchSize',
  checkpointaftermilliseconds: 'checkPointAfterMs',
  mincheckpointcount: 'minCheckPointCount',
  maxcheckpointcount: 'maxCheckPointCount',
  maxsubscribercount: 'maxSubscriberCount',
};
const BOOLEAN_FIELDS: Record<string, keyof GroupSettings> = {
  resolvelinktos: 'resolveLinkTos',
  extrastatistics: 'extraStatistics',
};

/** Settings from an HTTP body (already parsed JSON; undefined or null for no body). */
export function settingsFromBody(body: unknown): GroupSettings {
  if (body === undefined || body === null) return { ...DEFAULT_SETTINGS };
  if (typeof body !== 'object' || Array.isArray(body)) throw new SettingsError('The subscription settings must be a JSON object.');
  const settings: Record<string, unknown> = { ...DEFAULT_SETTINGS };
  let startPosition: unknown;
  let preferRoundRobin: boolean | undefined;
  let strategy: unknown;
  for (const [key, value] of Object.entries(body as Record<string, unknown>)) {
    if (value === null) continue;
    const k = key.toLowerCase();
    if (NUMBER_FIELDS[k]) {
      if (typeof value !== 'number' || !Number.isSafeInteger(value)) throw new SettingsError(`${key} must be an integer.`);
      settings[NUMBER_FIELDS[k]] = value;
    } else if (BOOLEAN_FIELDS[k]) {
      if (typeof value !== 'boolean') throw new SettingsError(`${key} must be true or false.`);
      settings[BOOLEAN_FIELDS[k]] = value;
    } else if (k === 'startposition') {
      startPosition = value;
    } else if (k === 'namedconsumerstrategy') {
      strategy = value;
    } else if (k === 'preferroundrobin') {
      if (typeof value !== 'boolean') throw new SettingsError(`${key} must be true or false.`);
      preferRoundRobin = value;
    }
  }
  if (startPosition !== undefined && startPosition !== '') {
    const n = typeof startPosition === 'number' ? startPosition : Number(String(startPosition).trim());
    if (!Number.isSafeInteger(n)) throw new SettingsError(`startPosition '${String(startPosition)}' is not a valid stream position.`);
    settings.startFrom = n;
  }
  if (strategy === undefined || strategy === '') {
    settings.namedConsumerStrategy = preferRoundRobin === false ? 'DispatchToSingle' : 'RoundRobin';
  } else {
    const found = typeof strategy === 'string' ? STRATEGIES.find((s) => s.toLowerCase() === strategy.toLowerCase()) : undefined;
    if (!found) throw new SettingsError(`Consumer strategy ${String(strategy)} does not exist.`);
    settings.namedConsumerStrategy = found;
  }
  return settings as unknown as GroupSettings;
}

/** The rules for settings a client sends (a create or an update, through any door). */
export function checkClientSettings(s: GroupSettings): void {
  validateSettings(s);
  // Checked on what clients send, not in validateSettings: a definition stored before the bound keeps loading.
  if (s.bufferSize > MAX_BUFFER_SIZE) {
    throw new SettingsError(`Buffer Size (${s.bufferSize}) must not exceed ${MAX_BUFFER_SIZE}, the most a group buffers on this node`);
  }
}

export function validateSettings(s: GroupSettings): void {
  if (s.bufferSize <= 0) throw new SettingsError(`Buffer Size (${s.bufferSize}) must be positive`);
  if (s.liveBufferSize <= 0) throw new SettingsError(`Live Buffer Size (${s.liveBufferSize}) must be positive`);
  if (s.readBatchSize <= 0) throw new SettingsError(`Read Batch Size (${s.readBatchSize}) must be positive`);
  if (s.bufferSize <= s.readBatchSize) {
    throw new SettingsError(`BufferSize (${s.bufferSize}) must be larger than ReadBatchSize (${s.readBatchSize})`);
  }
  if (s.startFrom < -1) throw new SettingsError(`Start From (${s.startFrom}) must be -1 (live) or a position in the source`);
  const nonNegative: [keyof GroupSettings, string][] = [
    ['messageTimeoutMs', 'Message Timeout'], ['maxRetryCount', 'Max Retry Count'],
    ['checkPointAfterMs', 'Checkpoint After'], ['minCheckPointCount', 'Min Checkpoint Count'],
    ['maxCheckPointCount', 'Max Checkpoint Count'], ['maxSubscriberCount', 'Max Subscriber Count'],
  ];
  for (const [key, label] of nonNegative) {
    if ((s[key] as number) < 0) throw new SettingsError(`${label} (${s[key] as number}) must not be negative`);
  }
  if (s.minCheckPointCount > s.maxCheckPointCount) {
    throw new SettingsError(`Min Checkpoint Count (${s.minCheckPointCount}) must not exceed Max Checkpoint Count (${s.maxCheckPointCount})`);
  }
}

/** The settings as /info echoes them (the HTTP body's field names); `startPosition` as the source writes positions. */
export function settingsJson(s: GroupSettings, startPosition: string): Record<string, unknown> {
  return {
    resolveLinktos: s.resolveLinkTos,
    startFrom: s.startFrom,
    startPosition,
    messageTimeoutMilliseconds: s.messageTimeoutMs,
    extraStatistics: s.extraStatistics,
    maxRetryCount: s.maxRetryCount,
    liveBufferSize: s.liveBufferSize,
    bufferSize: s.bufferSize,
    readBatchSize: s.readBatchSize,
    preferRoundRobin: s.namedConsumerStrategy === 'RoundRobin',
    checkPointAfterMilliseconds: s.checkPointAfterMs,
    minCheckPointCount: s.minCheckPointCount,
    maxCheckPointCount: s.maxCheckPointCount,
    maxSubscriberCount: s.maxSubscriberCount,
    namedConsumerStrategy: s.namedConsumerStrategy,
  };
}

/** One entry of the persisted configuration document (field names of the established servers). */
export interface PersistedEntry {
  /** The stream, or `$all`. */
  stream: string;
  group: string;
  /** `$all` groups only. */
  filter?: FilterDefinition;
  resolveLinkTos: boolean;
  extraStatistics: boolean;
  messageTimeout: number;
  startFrom: number;
  startPosition: string;
  liveBufferSize: number;
  historyBufferSize: number;
  maxRetryCount: number;
  readBatchSize: number;
  preferRoundRobin: boolean;
  checkPointAfter: number;
  minCheckPointCount: number;
  maxCheckPointCount: number;
  maxSubscriberCount: number;
  namedConsumerStrategy: string;
}

/** `startPosition`: the start as the source writes positions ('42', or 'C:42/P:42' for `$all`). */
export function toEntry(stream: string, group: string, s: GroupSettings, startPosition: string, filter?: FilterDefinition): PersistedEntry {
  return {
    stream, group, ...(filter ? { filter } : {}), resolveLinkTos: s.resolveLinkTos, extraStatistics: s.extraStatistics, messageTimeout: s.messageTimeoutMs,
    startFrom: s.startFrom, startPosition, liveBufferSize: s.liveBufferSize, historyBufferSize: s.bufferSize,
    maxRetryCount: s.maxRetryCount, readBatchSize: s.readBatchSize, preferRoundRobin: s.namedConsumerStrategy === 'RoundRobin',
    checkPointAfter: s.checkPointAfterMs, minCheckPointCount: s.minCheckPointCount, maxCheckPointCount: s.maxCheckPointCount,
    maxSubscriberCount: s.maxSubscriberCount, namedConsumerStrategy: s.namedConsumerStrategy,
  };
}

/** Settings of a persisted entry; undefined (the entry is skipped) when it is not valid. */
export function fromEntry(e: Partial<PersistedEntry>): GroupSettings | undefined {
  const num = (v: unknown, fallback: number) => (typeof v === 'number' && Number.isSafeInteger(v) ? v : fallback);
  const strategy = e.namedConsumerStrategy
    ? STRATEGIES.find((s) => s === e.namedConsumerStrategy)
    : (e.preferRoundRobin === false ? 'DispatchToSingle' : 'RoundRobin');
  if (!strategy) return undefined;
  // A stream's event number, or `$all`'s C:commit/P:prepare (equal on this node).
  const text = typeof e.startPosition === 'string' ? e.startPosition.replace(/^C:(-?\d+)\/P:-?\d+$/, '$1') : '';
  const startPosition = text !== '' ? Number(text) : undefined;
  const settings: GroupSettings = {
    resolveLinkTos: e.resolveLinkTos === true,
    startFrom: startPosition !== undefined && Number.isSafeInteger(startPosition) ? startPosition : num(e.startFrom, 0),
    extraStatistics: e.extraStatistics === true,
    messageTimeoutMs: num(e.messageTimeout, DEFAULT_SETTINGS.messageTimeoutMs),
    maxRetryCount: num(e.maxRetryCount, DEFAULT_SETTINGS.maxRetryCount),
    liveBufferSize: num(e.liveBufferSize, DEFAULT_SETTINGS.liveBufferSize),
    bufferSize: num(e.historyBufferSize, DEFAULT_SETTINGS.bufferSize),
    readBatchSize: num(e.readBatchSize, DEFAULT_SETTINGS.readBatchSize),
    checkPointAfterMs: num(e.checkPointAfter, DEFAULT_SETTINGS.checkPointAfterMs),
    minCheckPointCount: num(e.minCheckPointCount, DEFAULT_SETTINGS.minCheckPointCount),
    maxCheckPointCount: num(e.maxCheckPointCount, DEFAULT_SETTINGS.maxCheckPointCount),
    maxSubscriberCount: num(e.maxSubscriberCount, DEFAULT_SETTINGS.maxSubscriberCount),
    namedConsumerStrategy: strategy,
  };
  try {
    validateSettings(settings);
    return settings;
  } catch {
    return undefined;
  }
}
