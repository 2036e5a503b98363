import type { EventRecord } from './record.js';
import { InvalidFilterError } from './errors.js';

// Server-side filters of `$all` reads and subscriptions: on the stream name or the event type,
// by a regular expression or by prefixes (a regular expression wins when both are given).

export interface EventFilter {
  readonly on: 'streamName' | 'eventType';
  readonly regex?: RegExp;
  readonly prefixes: readonly string[];
}

const MAX_REGEX_LENGTH = 1000;
const MAX_PREFIXES = 1000;
/**
 * A group that repeats and holds a repeat itself (`(a+)+`, `(a|aa)*`-like nesting) can backtrack
 * exponentially on a long name, and a filter runs on every event in the node's event loop:
 * such an expression is refused rather than tried.
 */
const NESTED_REPEAT = /\((?:[^()\\]|\\.)*(?:[*+]|\{\d*,?\d*\})(?:[^()\\]|\\.)*\)\s*(?:[*+]|\{\d*,\d*\})/;

export function makeFilter(on: EventFilter['on'], regex: string | undefined, prefixes: readonly string[]): EventFilter {
  if (regex) {
    if (regex.length > MAX_REGEX_LENGTH) throw new InvalidFilterError(`A filter's regular expression is limited to ${MAX_REGEX_LENGTH} characters.`);
    if (NESTED_REPEAT.test(regex)) {
      throw new InvalidFilterError("A filter's regular expression may not repeat a group that repeats (it could backtrack without end).");
    }
    try {
      return { on, regex: new RegExp(regex), prefixes: [] };
    } catch (err) {
      throw new InvalidFilterError(`Invalid filter regular expression: ${(err as Error).message}`);
    }
  }
  if (prefixes.length > MAX_PREFIXES) throw new InvalidFilterError(`A filter takes at most ${MAX_PREFIXES} prefixes.`);
  return { on, prefixes: [...prefixes] };
}

export function matchesFilter(filter: EventFilter, record: EventRecord): boolean {
  const subject = filter.on === 'streamName' ? record.streamId : record.eventType;
  if (filter.regex) return filter.regex.test(subject);
  if (filter.prefixes.length === 0) return true;
  for (const p of filter.prefixes) if (subject.startsWith(p)) return true;
  return false;
}
