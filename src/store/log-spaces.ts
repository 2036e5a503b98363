import type { Rocks } from './rocks.js';
import { logKey, positionOfLogKey, SPACE, spaceEnd, systemLogKey } from './keys.js';

// Where a log record lives. The records of system streams (`$...`, but not `$$name`, the
// metastream of a user stream: exactly what a `fromAll` source skips) written since `splitFrom`
// are kept in a key space of their own, SYSLOG, and the others in LOG, both keyed by position.
// A reader of the user streams' records (a projection over $all) reads LOG alone, and so never
// reads the projections' checkpoints, partition states and the system projections' links,
// which are most of a log with many projections (measured at a million events and twenty
// projections: ~5 of every 6 records). A reader of the whole log merges the two by position.
// Below `splitFrom` (a database written before the split) every record is in LOG.

/** Whether records of `streamId` are system records: in a system stream, not a user stream's metastream. */
export function isSystemRecordStream(streamId: string): boolean {
  if (streamId.length === 0 || streamId.charCodeAt(0) !== DOLLAR) return false;
  return streamId.length < 2 || streamId.charCodeAt(1) !== DOLLAR || (streamId.length > 2 && streamId.charCodeAt(2) === DOLLAR);
}
const DOLLAR = 0x24;

/** Records found by a scan: their positions and encoded bytes, in the scan's order. */
export interface LogRows {
  positions: number[];
  values: Buffer[];
}

export class LogSpaces {
  constructor(private readonly rocks: Rocks, readonly splitFrom: number) {}

  /** The key of the record at `position` of `streamId`. */
  key(position: number, streamId: string): Buffer {
    return this.keyOf(position, isSystemRecordStream(streamId));
  }

  /** The key of the record at `position` of a system stream or not (PackedPlaces keeps which). */
  keyOf(position: number, systemStream: boolean): Buffer {
    return systemStream && position >= this.splitFrom ? systemLogKey(position) : logKey(position);
  }

  get(position: number, streamId: string): Buffer | undefined {
    return this.rocks.get(this.key(position, streamId));
  }

  /** Records of one stream at `positions`; without a stream, each is looked for in both spaces. */
  getMany(positions: readonly number[], streamId?: string): (Buffer | undefined)[] {
    if (streamId !== undefined) return this.rocks.getMany(positions.map((p) => this.key(p, streamId)));
    const found = this.rocks.getMany(positions.map(logKey));
    const missing: number[] = [];
    found.forEach((v, i) => { if (v === undefined && positions[i] >= this.splitFrom) missing.push(i); });
    if (missing.length > 0) {
      const system = this.rocks.getMany(missing.map((i) => systemLogKey(positions[i])));
      missing.forEach((i, j) => { found[i] = system[j]; });
    }
    return found;
  }

  /**
   * At most `limit` records at or after `from` and before `to` (the end of the log if undefined),
   * in log order; `userOnly`: the records in LOG only (see above).
   */
  forward(from: number, limit: number | undefined, to?: number, userOnly = false): LogRows {
    const start = Math.max(0, from);
    const user = this.rows(this.rocks.scan({ gte: logKey(start), lt: to === undefined ? spaceEnd(SPACE.LOG) : logKey(to), limit }));
    if (userOnly || (to !== undefined && to <= this.splitFrom)) return user;
    // System records count only up to the last user record read when the limit cut the user ones.
    const full = limit !== undefined && user.positions.length === limit;
    const bound = full ? user.positions[user.positions.length - 1] : to;
    const sysStart = Math.max(start, this.splitFrom);
    if (bound !== undefined && bound <= sysStart) return user;
    const system = this.rows(this.rocks.scan({
      gte: systemLogKey(sysStart), lt: bound === undefined ? spaceEnd(SPACE.SYSLOG) : systemLogKey(bound), limit,
    }));
    return merge(user, system, false, limit);
  }

  /** At most `limit` records before `before`, newest first, from both spaces. */
  backward(before: number, limit: number): LogRows {
    const user = this.rows(this.rocks.scan({ gte: logKey(0), lt: logKey(before), limit, reverse: true }));
    // System records count only down to the oldest user record read when the limit cut the user ones.
    const full = user.positions.length === limit;
    const low = Math.max(this.splitFrom, full ? user.positions[user.positions.length - 1] + 1 : 0);
    if (low >= before) return user;
    const system = this.rows(this.rocks.scan({ gte: systemLogKey(low), lt: systemLogKey(before), limit, reverse: true }));
    return merge(user, system, true, limit);
  }

  /**
   * The records in [from, to), a page at a time off the event loop (see Rocks.scanPages): those
   * in LOG first, then those in SYSLOG, each part in log order. `visit` returns false to stop.
   */
  async pages(from: number, to: number, pageSize: number,
    visit: (positions: number[], values: Buffer[]) => Promise<boolean> | boolean): Promise<void> {
    let stopped = false;
    const each = async (keys: Buffer[], values: Buffer[]) => {
      if (!(await visit(keys.map(positionOfLogKey), values))) stopped = true;
      return !stopped;
    };
    await this.rocks.scanPages({ gte: logKey(from), lt: logKey(to) }, pageSize, each);
    if (stopped || to <= this.splitFrom) return;
    await this.rocks.scanPages({ gte: systemLogKey(Math.max(from, this.splitFrom)), lt: systemLogKey(to) }, pageSize, each);
  }

  private rows({ keys, values }: { keys: Buffer[]; values: Buffer[] }): LogRows {
    return { positions: keys.map(positionOfLogKey), values };
  }
}

/** Two position-ordered row lists as one (descending if `reverse`), at most `limit` rows. */
function merge(a: LogRows, b: LogRows, reverse: boolean, limit: number | undefined): LogRows {
  if (b.positions.length === 0) return a;
  if (a.positions.length === 0) return limit !== undefined && b.positions.length > limit ? cut(b, limit) : b;
  const out: LogRows = { positions: [], values: [] };
  const max = limit ?? Infinity;
  let i = 0;
  let j = 0;
  while (out.positions.length < max && (i < a.positions.length || j < b.positions.length)) {
    const takeA = j >= b.positions.length
      || (i < a.positions.length && (reverse ? a.positions[i] > b.positions[j] : a.positions[i] < b.positions[j]));
    const from = takeA ? a : b;
    const k = takeA ? i++ : j++;
    out.positions.push(from.positions[k]);
    out.values.push(from.values[k]);
  }
  return out;
}

function cut(rows: LogRows, limit: number): LogRows {
  return { positions: rows.positions.slice(0, limit), values: rows.values.slice(0, limit) };
}
