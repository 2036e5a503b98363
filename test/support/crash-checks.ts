// The checks of the crash harness (crash-harness.ts), each over what a client can read back: the
// log ($all and every stream), the projections' state and emitted streams, and what the
// persistent subscription delivered. Each check answers its failures as sentences (none: it
// passed), so a vitest spec and the soak script judge the same way. No vitest import here: the
// soak script is compiled by tsc and runs without it.

const ADMIN = 'Basic ' + Buffer.from('admin:changeit').toString('base64');
const ATOM_JSON = 'application/vnd.eventstore.atom+json';
const PAGE = 500;
/** Failures listed per check; the rest are counted. */
const SHOWN = 8;

export interface Target { url: string }

export interface CheckResult { name: string; failures: string[] }

/** An append the node answered 201: its events are at `firstNumber`, `firstNumber + 1`, ... */
export interface AckedAppend {
  stream: string;
  eventIds: string[];
  firstNumber: number;
  /** When its first attempt was sent, and when the 201 arrived (performance.now()). */
  firstSentAt: number;
  ackedAt: number;
}

/** What the writers and the consumer saw, for the checks to hold the log to. */
export interface Ledger {
  acked: AckedAppend[];
  /** Appends answered 400 (wrong expected version), possibly after attempts whose outcome was unknown. */
  rejected: { stream: string; eventIds: string[] }[];
  /** Event numbers of the subscription's stream delivered to the consumer, and how often. */
  delivered: Map<number, number>;
  /** Failures seen by the workload itself (an unexpected status, a retry answered differently, ...). */
  workloadFailures: string[];
}

export interface LoggedEvent { streamId: string; eventNumber: number; eventId: string; eventType: string; data: string | null; allIndex: number }

export async function get(t: Target, path: string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(t.url + path, { headers: { Authorization: ADMIN, ...headers }, signal: AbortSignal.timeout(15_000) });
}

async function getJson(t: Target, path: string, headers: Record<string, string> = {}): Promise<any> {
  const res = await get(t, path, { Accept: ATOM_JSON, ...headers });
  if (res.status !== 200) throw new Error(`GET ${path} answered ${res.status}`);
  return res.json();
}

function result(name: string, failures: string[]): CheckResult {
  const shown = failures.slice(0, SHOWN);
  if (failures.length > SHOWN) shown.push(`... and ${failures.length - SHOWN} more`);
  return { name, failures: shown };
}

function entryOf(e: any): Omit<LoggedEvent, 'allIndex'> {
  return { streamId: e.streamId, eventNumber: e.eventNumber, eventId: e.eventId, eventType: e.eventType, data: e.data ?? null };
}

/** Every record of $all, oldest first, and whether the page positions only ever went forward. */
export async function readAll(t: Target): Promise<{ events: LoggedEvent[]; failures: string[] }> {
  const events: LoggedEvent[] = [];
  const failures: string[] = [];
  let position = '0'.repeat(32);
  for (;;) {
    const doc = await getJson(t, `/streams/%24all/${position}/forward/${PAGE}?embed=body`);
    for (const e of [...doc.entries].reverse()) events.push({ ...entryOf(e), allIndex: events.length });
    const previous: string | undefined = doc.links.find((l: any) => l.relation === 'previous')?.uri;
    if (doc.entries.length === 0 || !previous) break;
    const next = /\/([0-9A-Fa-f]{32})\/forward\//.exec(previous)![1];
    // 32 hex digits of equal length: string order is numeric order
    if (!(next.toLowerCase() > position.toLowerCase())) failures.push(`$all paging went from position ${position} to ${next}`);
    position = next;
  }
  return { events, failures };
}

/** Every event of a stream, oldest first, links not resolved; [] when it does not exist. */
export async function readStream(t: Target, stream: string): Promise<Omit<LoggedEvent, 'allIndex'>[]> {
  const out: Omit<LoggedEvent, 'allIndex'>[] = [];
  for (let from = 0; ;) {
    const res = await get(t, `/streams/${encodeURIComponent(stream)}/${from}/forward/${PAGE}?embed=tryharder`,
      { Accept: ATOM_JSON, 'SVC-ResolveLinkTos': 'false' });
    if (res.status === 404) return out;
    if (res.status !== 200) throw new Error(`GET ${stream} answered ${res.status}`);
    const entries = [...(await res.json() as any).entries].reverse().map(entryOf);
    out.push(...entries);
    if (entries.length < PAGE) return out;
    from = out[out.length - 1].eventNumber + 1;
  }
}

/** Positions only go forward; each stream's events in $all are numbered 0, 1, 2, ... in $all order. */
export function checkAllOrder(all: LoggedEvent[], pagingFailures: string[]): CheckResult {
  const failures = [...pagingFailures];
  const next = new Map<string, number>();
  for (const e of all) {
    const expected = next.get(e.streamId) ?? 0;
    if (e.eventNumber !== expected) failures.push(`$all holds ${e.eventNumber}@${e.streamId} where ${expected}@${e.streamId} was due`);
    next.set(e.streamId, e.eventNumber + 1);
  }
  return result('$all in commit order, every stream contiguous in it', failures);
}

/** A stream read shows exactly its events of $all, in the same order. */
export function checkStreamsMatchAll(all: LoggedEvent[], streams: Map<string, Omit<LoggedEvent, 'allIndex'>[]>): CheckResult {
  const failures: string[] = [];
  for (const [stream, read] of streams) {
    const inAll = all.filter((e) => e.streamId === stream).map((e) => `${e.eventNumber}:${e.eventId}`);
    const inStream = read.map((e) => `${e.eventNumber}:${e.eventId}`);
    if (inStream.join() !== inAll.join()) {
      failures.push(`${stream}: a stream read gives ${inStream.length} events (${inStream.slice(-3).join(' ')}), $all ${inAll.length} (${inAll.slice(-3).join(' ')})`);
    }
  }
  return result('stream reads equal $all', failures);
}

/**
 * Every acknowledged event is in the log exactly once, at the number it was acknowledged with;
 * no event of a rejected append is there; an append acknowledged before another was sent comes
 * first in $all (commit order).
 */
export function checkAcknowledged(all: LoggedEvent[], ledger: Ledger): CheckResult {
  const failures: string[] = [];
  const byId = new Map<string, LoggedEvent[]>();
  for (const e of all) {
    const list = byId.get(e.eventId);
    if (list) list.push(e);
    else byId.set(e.eventId, [e]);
  }
  for (const a of ledger.acked) {
    a.eventIds.forEach((id, i) => {
      const found = byId.get(id) ?? [];
      const want = `${a.firstNumber + i}@${a.stream}`;
      if (found.length !== 1) failures.push(`acknowledged event ${id} (${want}) is in $all ${found.length} times`);
      else if (`${found[0].eventNumber}@${found[0].streamId}` !== want) failures.push(`acknowledged event ${id} is ${found[0].eventNumber}@${found[0].streamId}, acknowledged as ${want}`);
    });
  }
  for (const r of ledger.rejected) {
    for (const id of r.eventIds) if (byId.has(id)) failures.push(`event ${id} of an append answered 400 is in $all at ${byId.get(id)![0].eventNumber}@${r.stream}`);
  }
  // A before B whenever A's 201 arrived before B was first sent.
  const located = ledger.acked.filter((a) => byId.get(a.eventIds[0])?.length === 1)
    .map((a) => ({ ...a, index: byId.get(a.eventIds[0])![0].allIndex }));
  const byAck = [...located].sort((x, y) => x.ackedAt - y.ackedAt);
  const bySend = [...located].sort((x, y) => x.firstSentAt - y.firstSentAt);
  let latest: (typeof located)[number] | undefined;
  let i = 0;
  for (const b of bySend) {
    while (i < byAck.length && byAck[i].ackedAt < b.firstSentAt) {
      if (!latest || byAck[i].index > latest.index) latest = byAck[i];
      i++;
    }
    if (latest && latest.index > b.index) {
      failures.push(`${b.firstNumber}@${b.stream} (sent after ${latest.firstNumber}@${latest.stream} was acknowledged) comes before it in $all`);
    }
  }
  return result('acknowledged events present once, at their acknowledged numbers, in commit order', failures);
}

/** The expected state of the count projection, per stream: from the `type` events in the log. */
export function countsByStream(all: LoggedEvent[], type: string): Map<string, { count: number; sum: number }> {
  const counts = new Map<string, { count: number; sum: number }>();
  for (const e of all) {
    if (e.eventType !== type) continue;
    const c = counts.get(e.streamId) ?? { count: 0, sum: 0 };
    c.count += 1;
    c.sum += JSON.parse(e.data!).v;
    counts.set(e.streamId, c);
  }
  return counts;
}

/** Repeats `attempt` (its failures) until it answers none or `timeoutMs` passed; answers the last failures. */
export async function untilNoFailures(attempt: () => Promise<string[]>, timeoutMs: number, pollMs = 100): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const failures = await attempt();
    if (failures.length === 0 || Date.now() >= deadline) return failures;
    await new Promise((r) => setTimeout(r, pollMs));
  }
}

export async function projectionState(t: Target, name: string, partition?: string): Promise<unknown> {
  const q = partition === undefined ? '' : `?partition=${encodeURIComponent(partition)}`;
  const res = await get(t, `/projection/${encodeURIComponent(name)}/state${q}`);
  const text = await res.text();
  if (res.status !== 200) return `answered ${res.status}: ${text}`;
  return text === '' ? undefined : JSON.parse(text);
}

/**
 * The emitted stream `stream` of a projection: one event per source event of the log (in $all
 * order), none twice. `sourceOf` names the source (`n@stream`) of an emitted event.
 */
export function checkEmitted(stream: string, emitted: Omit<LoggedEvent, 'allIndex'>[], sources: LoggedEvent[],
  sourceOf: (e: Omit<LoggedEvent, 'allIndex'>) => string): string[] {
  const failures: string[] = [];
  const seen = new Set<string>();
  for (const e of emitted) {
    const source = sourceOf(e);
    if (seen.has(source)) failures.push(`${stream} holds ${source} twice (again at ${e.eventNumber})`);
    seen.add(source);
  }
  const wanted = sources.map((e) => `${e.eventNumber}@${e.streamId}`);
  const got = emitted.map(sourceOf);
  if (failures.length === 0 && got.join() !== wanted.join()) {
    const at = got.findIndex((g, i) => g !== wanted[i]);
    failures.push(`${stream} holds ${got.length} events for ${wanted.length} in the log; first difference at ${at}: ${got[at]} for ${wanted[at]}`);
  }
  return failures;
}

/** Every event of the subscription's stream was delivered at least once. */
export function undelivered(streamLength: number, delivered: Map<number, number>): number[] {
  const missing: number[] = [];
  for (let n = 0; n < streamLength; n++) if (!delivered.has(n)) missing.push(n);
  return missing;
}

export { result as checkResult };
