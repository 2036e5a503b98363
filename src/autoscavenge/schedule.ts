import { createRequire } from 'node:module';
import type { CronExpression } from 'cron-parser';
import { DomainError } from '../errors.js';

// The cluster scavenge schedule: a five-field cron expression (minute hour day-of-month month
// day-of-week) evaluated by cron-parser in UTC. The established servers evaluate it in the
// leader's local time zone; UTC makes every node of a cluster (and every test machine) agree on
// when "0 3 * * *" is, whatever its TZ. Seconds fields, @aliases and six-field forms are refused.

export class InvalidScheduleError extends DomainError {
  readonly code = 'INVALID_SCHEDULE';
}

const FIELDS = 5;

/**
 * cron-parser (and luxon, which it loads) is read when a schedule is first checked, not by every
 * start: most nodes run no auto-scavenge, and loading it took ~25 ms of each start.
 */
let parser: typeof import('cron-parser').CronExpressionParser | undefined;
const cronParser = () => (parser ??= (createRequire(import.meta.url)('cron-parser') as typeof import('cron-parser')).CronExpressionParser);

/** Checks a schedule; throws InvalidScheduleError with the parser's message when it is not one. */
export function parseSchedule(schedule: string, currentDate?: Date): CronExpression {
  const fields = schedule.trim().split(/\s+/).filter(Boolean);
  if (fields.length !== FIELDS) {
    throw new InvalidScheduleError(`Invalid CRON expression: expected 5 fields (minute hour day-of-month month day-of-week), got ${fields.length}`);
  }
  try {
    return cronParser().parse(fields.join(' '), { tz: 'UTC', ...(currentDate ? { currentDate } : {}) });
  } catch (err) {
    throw new InvalidScheduleError(`Invalid CRON expression: ${(err as Error).message}`);
  }
}

/** The first time the schedule fires strictly after `after` (ms since the epoch). */
export function nextOccurrence(schedule: string, after: number): number {
  return parseSchedule(schedule, new Date(after)).next().getTime();
}

/**
 * A duration as .NET's TimeSpan "c" format prints it: `[d.]hh:mm:ss[.fffffff]`
 * (e.g. "1.13:14:32.6299115"; "00:00:00" for zero), the form /auto-scavenge/status answers.
 */
export function constantTimeSpan(ms: number): string {
  const ticks = Math.max(0, Math.round(ms * 10_000));
  const totalSeconds = Math.floor(ticks / 10_000_000);
  const fraction = ticks % 10_000_000;
  const days = Math.floor(totalSeconds / 86_400);
  const two = (n: number) => String(n).padStart(2, '0');
  const clock = `${two(Math.floor((totalSeconds % 86_400) / 3600))}:${two(Math.floor((totalSeconds % 3600) / 60))}:${two(totalSeconds % 60)}`;
  return `${days > 0 ? `${days}.` : ''}${clock}${fraction > 0 ? `.${String(fraction).padStart(7, '0')}` : ''}`;
}
