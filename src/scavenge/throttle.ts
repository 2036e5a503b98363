import type { Logger } from 'pino';

// throttlePercent p: the run rests so that rests are (1 − p/100) of its whole time. At each rest
// opportunity it owes (r·elapsed − rested)/(1 − r) ms; it sleeps once that debt reaches 100 ms
// (smaller debts add up; the established servers wait for a whole second, which leaves a small
// run unthrottled), and a stop wakes it.

const SHORTEST_REST_MS = 100;
const LOGGED_REST_MS = 10_000;

export class Throttle {
  private readonly r: number;
  private readonly started = performance.now();
  private rested = 0;
  private wake: (() => void) | undefined;

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
    const from = performance.now();
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, debt);
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    this.wake = undefined;
    this.rested += performance.now() - from;
  }

  /** Ends a rest at once (a stop). */
  interrupt(): void {
    this.wake?.();
  }
}
