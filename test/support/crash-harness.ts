import { randomInt, randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  checkAcknowledged, checkAllOrder, checkEmitted, checkResult, checkStreamsMatchAll, countsByStream, get, projectionState,
  readAll, readStream, undelivered, untilNoFailures, type CheckResult, type Ledger, type Target,
} from './crash-checks.js';
import { killAndRemove, MAIN, spawnNode, type NodeProcess } from './process.js';

// The crash harness (issue 14): the durability promise, tested. A node runs as a child process on
// one data directory; 64 writers append (expected versions exact, any and stale; idempotent
// retries with the same event ids after a connection error or a timeout, and deliberate
// re-sends of acknowledged appends), two continuous projections follow the log (a count per
// stream through partitionBy; one that links and emits every event into streams of its own), and
// a persistent subscription is pulled and acked over HTTP. At a random moment the node is killed
// with SIGKILL and started again on the same directory; the writers' unanswered appends are
// retried, and the checks (crash-checks.ts) hold the log, the projections and the subscription to
// what the clients were told. One cycle = load, kill, restart, settle, check.

const ADMIN = 'Basic ' + Buffer.from('admin:changeit').toString('base64');
const EVENTS_JSON = 'application/vnd.eventstore.events+json';
const COMPETING = 'application/vnd.eventstore.competingatom+json';
export const EVENT_TYPE = 'Written';
export const COUNT_PROJECTION = 'crash-count';
export const EMIT_PROJECTION = 'crash-emit';
export const COPIES_STREAM = 'crash-copies';
export const LINKS_STREAM = 'crash-links';
const WRITERS = 64;
const OWNED_STREAMS = 32;
const SHARED_STREAMS = 8;
export const SUBSCRIBED_STREAM = 'crash-shared-0';
const GROUP = 'crash-group';
/** An append not answered in this long is abandoned and retried with the same event ids. */
const APPEND_TIMEOUT_MS = 3000;
/** How long a projection or the subscription may take to catch up after a restart. */
const CATCH_UP_MS = 30_000;

const countQuery = `fromAll().partitionBy(function (e) { return e.streamId; }).when({
  $init: function () { return { count: 0, sum: 0 }; },
  ${EVENT_TYPE}: function (s, e) { s.count += 1; s.sum += e.body.v; }
})`;
const emitQuery = `fromAll().when({
  $init: function () { return { n: 0 }; },
  ${EVENT_TYPE}: function (s, e) {
    s.n += 1;
    linkTo('${LINKS_STREAM}', e);
    emit('${COPIES_STREAM}', 'Copied', { source: e.sequenceNumber + '@' + e.streamId });
  }
})`;

const delay = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface HarnessOptions {
  /** `dist/src/main.js` of the build under test. */
  main?: string;
  /** Load before each kill: a random time in [min, max] ms. */
  loadMs?: [number, number];
}

export interface CycleReport { cycle: number; acknowledged: number; checks: CheckResult[] }

/** The node under test, killed and started again on its directory; clients wait for it through `up()`. */
class CrashNode implements Target {
  proc: NodeProcess | undefined;
  generation = 0;
  private ready: Promise<void> = Promise.resolve();
  private release: () => void = () => {};

  constructor(readonly dir: string, private readonly main: string) {}

  get url(): string { return this.proc!.url; }

  /** Resolves while the node is up (at once, or when it is started again). */
  up(): Promise<void> { return this.ready; }

  /** Starts the node; `beforeClients` runs against it before any waiting client is let in. */
  async start(beforeClients?: (t: Target) => Promise<void>): Promise<void> {
    const proc = await spawnNode(['--db', this.dir], {}, { main: this.main });
    await beforeClients?.({ url: proc.url });
    this.proc = proc;
    this.generation++;
    this.release();
  }

  /** Kills it for good and lets waiting clients go (they see it is stopping). */
  async dispose(): Promise<void> {
    await killAndRemove(this.proc, [this.dir]);
    this.release();
  }

  async kill(): Promise<void> {
    this.ready = new Promise((resolve) => { this.release = resolve; });
    this.proc!.child.kill('SIGKILL');
    await this.proc!.exited;
  }
}

function call(t: Target, path: string, init: RequestInit & { timeoutMs?: number } = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  headers.set('Authorization', ADMIN);
  return fetch(t.url + path, { ...init, headers, redirect: 'manual', signal: AbortSignal.timeout(init.timeoutMs ?? APPEND_TIMEOUT_MS) });
}

async function callOk(t: Target, path: string, init: RequestInit, status = 200): Promise<void> {
  const res = await call(t, path, { ...init, timeoutMs: 15_000 });
  const text = await res.text();
  if (res.status !== status) throw new Error(`${init.method ?? 'GET'} ${path} answered ${res.status}: ${text}`);
}

/** The event number in the subscription's last checkpoint; -1 without one. */
async function subscriptionCheckpoint(t: Target): Promise<number> {
  const res = await get(t, `/streams/%24persistentsubscription-${SUBSCRIBED_STREAM}::${GROUP}-checkpoint/head`, { Accept: 'application/json' });
  const text = await res.text();
  if (res.status === 404) return -1;
  if (res.status !== 200) throw new Error(`reading the subscription's checkpoint answered ${res.status}: ${text}`);
  return Number(JSON.parse(text));
}

function numberIn(location: string | null): number {
  return Number(location?.split('/').pop());
}

export class CrashHarness {
  readonly ledger: Ledger = { acked: [], rejected: [], delivered: new Map(), workloadFailures: [] };
  private readonly node: CrashNode;
  private readonly loadMs: [number, number];
  private paused = true;
  private resumeGate: Promise<void>;
  private openGate: () => void = () => {};
  private inFlight = 0;
  private drained: (() => void) | undefined;
  private stopping = false;
  private running: Promise<void>[] = [];
  /** The subscription's durable checkpoint at the last start: nothing at or below it may come again. */
  private checkpointFloor = -1;
  private cycles = 0;
  /** Appends sent more than once because an attempt went unanswered (the kill, or a timeout). */
  retriedAppends = 0;

  private constructor(dir: string, opts: HarnessOptions) {
    this.node = new CrashNode(dir, opts.main ?? MAIN);
    this.loadMs = opts.loadMs ?? [200, 1500];
    this.resumeGate = new Promise((resolve) => { this.openGate = resolve; });
  }

  /** A node on a new data directory, with the projections and the subscription group created. */
  static async start(opts: HarnessOptions = {}): Promise<CrashHarness> {
    const h = new CrashHarness(mkdtempSync(join(tmpdir(), 'svc-crash-')), opts);
    await h.node.start();
    await h.setUp();
    h.running = [
      ...Array.from({ length: WRITERS }, (_, w) => h.writer(w)),
      h.consumer(),
    ];
    return h;
  }

  get acknowledgedEvents(): number {
    return this.ledger.acked.reduce((n, a) => n + a.eventIds.length, 0);
  }

  private async setUp(): Promise<void> {
    const n = this.node;
    for (const [name, query] of [[COUNT_PROJECTION, countQuery], [EMIT_PROJECTION, emitQuery]]) {
      await callOk(n, `/projections/continuous?name=${name}&emit=yes&enabled=no`, { method: 'POST', body: query }, 201);
      // Checkpoints every 50 events: a kill lands among checkpoint writes, not only between them.
      const config = await (await call(n, `/projection/${name}/config`, { timeoutMs: 15_000 })).json();
      await callOk(n, `/projection/${name}/config`, {
        method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ ...config, checkpointHandledThreshold: 50 }),
      });
      await callOk(n, `/projection/${name}/command/enable`, { method: 'POST' });
    }
    await callOk(n, `/subscriptions/${SUBSCRIBED_STREAM}/${GROUP}`, {
      method: 'PUT', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ minCheckPointCount: 1, maxCheckPointCount: 20, checkPointAfterMilliseconds: 100, messageTimeoutMilliseconds: 10_000, maxRetryCount: 100 }),
    });
  }

  // ---- the workload ---------------------------------------------------------------------------

  /** Writer `w`: its own stream with exact expected versions (writers below 32), else a shared one. */
  private async writer(w: number): Promise<void> {
    const owned = w < OWNED_STREAMS;
    const stream = owned ? `crash-own-${w}` : `crash-shared-${w % SHARED_STREAMS}`;
    let version = -1; // the last event number this writer knows of in its stream
    let last: { events: unknown[]; expected: string | undefined; firstNumber: number } | undefined;
    for (let seq = 0; ; seq++) {
      if (this.paused) await this.resumeGate;
      if (this.stopping) return;
      this.inFlight++;
      try {
        if (last && randomInt(20) === 0) {
          // An acknowledged append sent again: answered 201 with the same first number, written once.
          const res = await this.appendUntilAnswered(stream, last.events, last.expected);
          if (!res) return;
          if (res.status !== 201 || res.firstNumber !== last.firstNumber) {
            this.ledger.workloadFailures.push(`re-sent append to ${stream} answered ${res.status} at ${res.firstNumber}, first answered 201 at ${last.firstNumber}`);
          }
          continue;
        }
        const events = Array.from({ length: 1 + randomInt(4) }, (_, i) => ({
          eventId: randomUUID(), eventType: EVENT_TYPE, data: { v: 1 + randomInt(100), w, seq, i },
        }));
        // exact where the writer owns the stream; on a shared one mostly any, sometimes a guess that may be stale
        const expected = owned ? (randomInt(10) === 0 ? undefined : String(version)) : (randomInt(4) === 0 ? String(version) : undefined);
        const res = await this.appendUntilAnswered(stream, events, expected);
        if (!res) return;
        const eventIds = events.map((e) => e.eventId);
        if (res.status === 201) {
          this.ledger.acked.push({ stream, eventIds, firstNumber: res.firstNumber, firstSentAt: res.firstSentAt, ackedAt: res.answeredAt });
          version = Math.max(version, res.firstNumber + events.length - 1);
          last = { events, expected, firstNumber: res.firstNumber };
        } else if (res.status === 400 && !owned) {
          this.ledger.rejected.push({ stream, eventIds });
          version = res.currentVersion;
        } else {
          this.ledger.workloadFailures.push(`append to ${stream} (expected ${expected ?? 'any'}) answered ${res.status}`);
        }
      } finally {
        this.inFlight--;
        if (this.inFlight === 0) this.drained?.();
      }
    }
  }

  /** Sends an append until the node answers it, the same events each time. */
  private async appendUntilAnswered(stream: string, events: unknown[], expected: string | undefined) {
    const firstSentAt = performance.now();
    let retried = false;
    for (;;) {
      await this.node.up();
      if (this.stopping) return undefined;
      try {
        const res = await call(this.node, `/streams/${stream}`, {
          method: 'POST', body: JSON.stringify(events),
          headers: { 'Content-Type': EVENTS_JSON, ...(expected === undefined ? {} : { 'ES-ExpectedVersion': expected }) },
        });
        await res.arrayBuffer();
        if (res.status >= 500) continue;
        if (retried) this.retriedAppends++;
        return {
          status: res.status, firstNumber: numberIn(res.headers.get('location')), firstSentAt, answeredAt: performance.now(),
          currentVersion: Number(res.headers.get('es-currentversion') ?? -1),
        };
      } catch {
        // connection refused or reset (the node was killed), or no answer in time: the same events again
        retried = true;
        await delay(20);
      }
    }
  }

  /** Pulls the subscription and acks what it gets; nothing at or below the checkpoint it resumed from may come again. */
  private async consumer(): Promise<void> {
    const path = `/subscriptions/${SUBSCRIBED_STREAM}/${GROUP}`;
    for (;;) {
      await this.node.up();
      if (this.stopping) return;
      const floor = this.checkpointFloor;
      try {
        const res = await call(this.node, `${path}/50?embed=none`, { headers: { Accept: COMPETING, 'SVC-LongPoll': '1' } });
        if (res.status !== 200) throw new Error(`pull answered ${res.status}`);
        const entries = [...(await res.json() as any).entries].reverse();
        if (entries.length === 0) continue;
        const ids: string[] = [];
        for (const e of entries) {
          const n = Number(String(e.title).split('@')[0]);
          if (n <= floor) this.ledger.workloadFailures.push(`subscription delivered ${n} again after a restart at its checkpoint ${floor}`);
          this.ledger.delivered.set(n, (this.ledger.delivered.get(n) ?? 0) + 1);
          ids.push(e.links.find((l: any) => l.relation === 'ack').uri.split('/').pop());
        }
        await (await call(this.node, `${path}/ack?ids=${ids.join(',')}`, { method: 'POST' })).arrayBuffer();
      } catch {
        if (!this.stopping) await delay(20);
      }
    }
  }

  // ---- cycles ---------------------------------------------------------------------------------

  /** Load for a random time, SIGKILL, start again, let the retries finish, check. */
  async cycle(): Promise<CycleReport> {
    this.resume();
    await delay(this.loadMs[0] + randomInt(this.loadMs[1] - this.loadMs[0] + 1));
    await this.node.kill();
    // The subscription resumes after the last checkpoint written before the kill.
    await this.node.start(async (t) => { this.checkpointFloor = await subscriptionCheckpoint(t); });
    await this.quiesce();
    const checks = await this.check();
    return { cycle: ++this.cycles, acknowledged: this.acknowledgedEvents, checks };
  }

  private resume(): void {
    this.paused = false;
    this.openGate();
  }

  /** Stops new appends and waits until every append sent is answered. */
  private async quiesce(): Promise<void> {
    this.paused = true;
    this.resumeGate = new Promise((resolve) => { this.openGate = resolve; });
    if (this.inFlight > 0) await new Promise<void>((resolve) => { this.drained = resolve; });
    this.drained = undefined;
  }

  /** Every check, over the log as it is now (the writers paused). */
  async check(): Promise<CheckResult[]> {
    const n = this.node;
    const { events: all, failures: paging } = await readAll(n);
    const written = [...new Set(this.ledger.acked.map((a) => a.stream))];
    const streams = new Map(await Promise.all(written.map(async (s) => [s, await readStream(n, s)] as const)));
    const sources = all.filter((e) => e.eventType === EVENT_TYPE);
    const checks = [
      checkResult('workload answers', this.ledger.workloadFailures.splice(0)),
      checkAllOrder(all, paging),
      checkStreamsMatchAll(all, streams),
      checkAcknowledged(all, this.ledger),
    ];
    const counts = countsByStream(all, EVENT_TYPE);
    checks.push(checkResult(`${COUNT_PROJECTION} equals a count over the log`, await untilNoFailures(async () => {
      const failures: string[] = [];
      for (const [stream, expected] of counts) {
        const state = await projectionState(n, COUNT_PROJECTION, stream);
        if (JSON.stringify(state) !== JSON.stringify(expected)) failures.push(`${stream}: state ${JSON.stringify(state)}, the log says ${JSON.stringify(expected)}`);
      }
      return failures;
    }, CATCH_UP_MS)));
    checks.push(checkResult(`${EMIT_PROJECTION} state and emitted streams equal the log`, await untilNoFailures(async () => {
      const state = await projectionState(n, EMIT_PROJECTION);
      if (JSON.stringify(state) !== JSON.stringify({ n: sources.length })) return [`state ${JSON.stringify(state)}, the log has ${sources.length} events`];
      return [
        ...checkEmitted(COPIES_STREAM, await readStream(n, COPIES_STREAM), sources, (e) => JSON.parse(e.data!).source),
        ...checkEmitted(LINKS_STREAM, await readStream(n, LINKS_STREAM), sources, (e) => e.data!),
      ];
    }, CATCH_UP_MS)));
    const subscribed = all.filter((e) => e.streamId === SUBSCRIBED_STREAM).length;
    checks.push(checkResult('persistent subscription delivered every event', await untilNoFailures(async () => {
      const missing = undelivered(subscribed, this.ledger.delivered);
      return missing.length === 0 ? [] : [`${missing.length} of ${subscribed} events never delivered (first ${missing.slice(0, 5).join(', ')})`];
    }, CATCH_UP_MS)));
    return checks;
  }

  /** Stops the workload, kills the node and removes its directory. */
  async dispose(): Promise<void> {
    this.stopping = true;
    this.resume();
    await this.node.dispose();
    await Promise.all(this.running);
  }
}
