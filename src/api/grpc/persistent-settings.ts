import type { GroupDefinition } from '../../verbs/index.js';
import {
  SettingsError, STRATEGIES, type ConsumerStrategyName, type FilterDefinition, type GroupSettings,
} from '../../subscriptions/index.js';
import { fail, invalidArgument } from './errors.js';
import { isSet, u64, U64_MAX } from './messages.js';

// A group's definition as Create and Update carry it (grpc.md §5.1–5.2), read into the settings
// the verbs check: the start (a stream's revision, `$all`'s position, or the older clients'
// `settings.revision`), the settings, and a `$all` group's filter. What this node cannot honour
// is refused here with the reason, never dropped: a time that is not whole milliseconds, a
// position whose commit and prepare differ (they are one number on this node), a checkpoint
// interval multiplier (persistent subscriptions checkpoint by their own counts; 1, the clients'
// default, means none). The rules every door shares (ranges, buffer sizes) are the verbs'.

type Message = Record<string, unknown>;

const TICKS_PER_MS = 10_000;
const INT32_MAX = 2 ** 31 - 1;

/** Create's definition: settings, start and, for `$all`, the filter. */
export function groupDefinitionOf(o: Message): GroupDefinition {
  const all = o.stream_option === 'all' ? (o.all as Message) : undefined;
  const filter = all?.filter_option === 'filter' ? filterOf(all.filter as Message) : undefined;
  return { settings: groupSettingsOf(o), ...(filter ? { filter } : {}) };
}

/** The settings of Create or Update (Update's have no string strategy; absent fields are proto3 zeros). */
export function groupSettingsOf(o: Message): GroupSettings {
  const s = (o.settings ?? {}) as Message;
  const int = (field: string): number => Number(s[field] ?? 0);
  return {
    resolveLinkTos: s.resolve_links === true,
    startFrom: startOf(o, s),
    extraStatistics: s.extra_statistics === true,
    messageTimeoutMs: millisecondsOf(s, 'message_timeout', 'Message timeout'),
    maxRetryCount: int('max_retry_count'),
    liveBufferSize: int('live_buffer_size'),
    bufferSize: int('history_buffer_size'),
    readBatchSize: int('read_batch_size'),
    checkPointAfterMs: millisecondsOf(s, 'checkpoint_after', 'Checkpoint after'),
    minCheckPointCount: int('min_checkpoint_count'),
    maxCheckPointCount: int('max_checkpoint_count'),
    maxSubscriberCount: int('max_subscriber_count'),
    namedConsumerStrategy: strategyOf(s),
  };
}

/** Where the group starts: an event number or log position, -1 for the end. */
function startOf(o: Message, s: Message): number {
  if (o.stream_option === 'all') {
    const a = o.all as Message;
    if (a.all_option === 'start') return 0;
    if (a.all_option === 'end') return -1;
    if (a.all_option !== 'position') return fail(invalidArgument("'all' needs 'position', 'start' or 'end'"));
    const p = a.position as Message;
    const commit = u64(p.commit_position ?? '0', 'commit_position');
    const prepare = u64(p.prepare_position ?? '0', 'prepare_position');
    if (commit !== prepare) {
      throw new SettingsError(`Position C:${commit}/P:${prepare} is not one of this node's: its commit and prepare positions are one number.`);
    }
    return commit;
  }
  const stream = o.stream_option === 'stream' ? (o.stream as Message) : undefined;
  if (stream?.revision_option === 'start') return 0;
  if (stream?.revision_option === 'end') return -1;
  const revision = stream?.revision_option === 'revision' ? stream.revision : s.revision;
  if (!isSet(revision) || revision === U64_MAX) return isSet(revision) ? -1 : 0;
  return u64(revision, 'revision');
}

/** A time given in ms or in 100-ns ticks (the oneof `name`); neither: 0. */
function millisecondsOf(s: Message, name: string, label: string): number {
  if (s[name] === `${name}_ms`) return Number(s[`${name}_ms`]);
  if (s[name] !== `${name}_ticks`) return 0;
  const ticks = BigInt(String(s[`${name}_ticks`]));
  const ms = Number(ticks / BigInt(TICKS_PER_MS));
  if (ticks % BigInt(TICKS_PER_MS) !== 0n) throw new SettingsError(`${label} of ${ticks} ticks is not a whole number of milliseconds.`);
  if (Math.abs(ms) > INT32_MAX) throw new SettingsError(`${label} of ${ms} ms is more than the ${INT32_MAX} ms a group takes.`);
  return ms;
}

/** Create's string strategy wins when given; else the enum, whose zero (absent on the wire) is DispatchToSingle. */
function strategyOf(s: Message): ConsumerStrategyName {
  const named = typeof s.consumer_strategy === 'string' && s.consumer_strategy !== '' ? s.consumer_strategy : s.named_consumer_strategy ?? 'DispatchToSingle';
  const found = STRATEGIES.find((name) => name === named);
  if (!found) throw new SettingsError(`Consumer strategy ${String(named)} does not exist.`);
  return found;
}

function filterOf(f: Message): FilterDefinition {
  const expression = (f.stream_identifier ?? f.event_type) as Message | undefined;
  if (!expression) return fail(invalidArgument("A filter needs 'stream_identifier' or 'event_type'"));
  const regex = typeof expression.regex === 'string' && expression.regex !== '' ? expression.regex : undefined;
  const prefixes = Array.isArray(expression.prefix) ? (expression.prefix as string[]) : [];
  const multiplier = Number(f.checkpointIntervalMultiplier ?? 1);
  if (multiplier > 1) {
    throw new SettingsError(`A checkpoint interval multiplier (${multiplier}) is not taken by persistent subscriptions: `
      + 'they checkpoint by their min/max checkpoint counts; leave it at 1.');
  }
  const window = isSet(f.max) ? Number(f.max) : undefined;
  if (window !== undefined && window < 1) throw new SettingsError("The filter's window 'max' must be at least 1.");
  return {
    on: f.stream_identifier ? 'streamName' : 'eventType', ...(regex ? { regex } : {}), prefixes,
    ...(window !== undefined ? { window } : {}),
  };
}
