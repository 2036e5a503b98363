import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';

// Two reasons a run rests.
//
// throttlePercent p (the operator's): the run rests so that rests are (1 − p/100) of its whole
// time. At each rest opportunity it owes (r·elapsed − rested)/(1 − r) ms; it sleeps once that
// debt reaches 100 ms (smaller debts add up; the established servers wait for a whole second,
// which leaves a small run unthrottled).
//
// The clients' work (the node's own): a run shares the event loop with every request, and on a
// node already half busy with appends a run at full speed saturated it: appends at half the
// maximum waited p50 73 ms / p99 2.2 s during a 1M-event scavenge (bench/latency.ts). So the run
// keeps account of the loop's time it uses itself (its own steps and its removals' writes) and,
// every WINDOW_MS, compares it with the loop's whole busy time (eventLoopUtilization): when the
// rest of the node keeps more than QUIET_SHARE of the loop busy, the run holds its own share to
// what leaves the loop at most BUSY_CEILING busy, never below SCAVENGE_FLOOR (so it ends), and
// rests for the difference. Alone, it runs at full speed as before. (A ceiling of 0.7 held the
// scavenge bench's run, beside its 200 appends a second, to half the loop.)
//
// A stop wakes either rest.

const SHORTEST_REST_MS = 100;
const LOGGED_REST_MS = 10_000;
/** The window over which the loop's use is judged. */
export const WINDOW_MS = 100;
/** The rest of the node's share of the loop below which a run goes at full speed. */
export const QUIET_SHARE = 0.1;
/** With clients busy, the loop's total use a run leaves room for. */
export const BUSY_CEILING = 0.9;
/** The least share of the loop a run keeps, however busy the clients. */
export const SCAVENGE_FLOOR = 0.1;
const LONGEST_CLIENT_REST_MS = 1000;

/**
 * The rest (ms) a run owes the clients after a window of `elapsedMs` in which the event loop was
 * busy `activeMs`, `oursMs` of it the run's own work.
 */
export function restForClients(elapsedMs: number, activeMs: number, oursMs: number): number {
  if (elapsedMs <= 0) return 0;
  const others = Math.max(0, activeMs - oursMs) / elapsedMs;
  if (others <= QUIET_SHARE) return 0;
  const allowed = Math.max(SCAVENGE_FLOOR, BUSY_CEILING - others);
  return Math.min(LONGEST_CLIENT_REST_MS, Math.max(0, oursMs / allowed - elapsedMs));
}

export class Throttle {
  private readonly r: number;
  private readonly started = performance.now();
  private rested = 0;
  private wake: (() => void) | undefined;
  private windowStart = performance.now();
  private windowElu = performance.eventLoopUtilization();
  private ours = 0;
  /** Ms rested so far because the clients kept the loop busy. */
  restedForClients = 0;

  constructor(throttlePercent: number, private readonly log: Logger) {
    this.r = 1 - throttlePercent / 100;
  }

  /** A rest opportunity: sleeps if the debt is large enough. */
  async rest(): Promise<void> {
    if (this.r <= 0) return;
    const elapsed = performance.now() - this.started;
    const debt = (this.r * elapsed - this.rested) / (1 - this.r);
    if (debt < SHORTEST_REST_MS) return;
    if (debt >= LOGGED_REST_MS) this.log.info(`SCAVENGING: resting ${Math.round(debt)} ms (throttle ${Math.round((1 - this.r) * 100)}%)`);
    this.rested += await this.sleep(debt);
    this.restartWindow();
  }

  /** The run used the event loop for `ms` (a step of its own, a removal's write). */
  spent(ms: number): void {
    this.ours += ms;
  }

  /** Runs `step` (synchronous) on the run's account. */
  timed<T>(step: () => T): T {
    const from = performance.now();
    try {
      return step();
    } finally {
      this.ours += performance.now() - from;
    }
  }

  /**
   * Between two steps: lets the event loop serve what waits, and once a window has passed rests
   * for as long as the clients are owed (see above).
   */
  async yieldToClients(): Promise<void> {
    await new Promise((resolve) => setImmediate(resolve));
    const now = performance.now();
    const elapsed = now - this.windowStart;
    if (elapsed < WINDOW_MS) return;
    const elu = performance.eventLoopUtilization(this.windowElu);
    const owed = restForClients(elapsed, elu.active, this.ours);
    if (owed > 0) {
      const slept = await this.sleep(owed);
      this.rested += slept;
      this.restedForClients += slept;
    }
    this.restartWindow();
  }

  /** Ends a rest at once (a stop). */
  interrupt(): void {
    this.wake?.();
  }

  private restartWindow(): void {
    this.windowStart = performance.now();
    this.windowElu = performance.eventLoopUtilization();
    this.ours = 0;
  }

  private async sleep(ms: number): Promise<number> {
    const from = performance.now();
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    this.wake = undefined;
    return performance.now() - from;
  }
}
