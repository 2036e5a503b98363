import type { ProjectionStats } from './model';

// Events per second of each projection. The node's statistics carry a count
// (eventsProcessedAfterRestart), not a rate: the rate is the count's growth over the samples of
// the last RATE_WINDOW_MS, so a burst shows for a few refreshes rather than one. A count that
// went down (the projection restarted or was reset) starts the samples over.

export const RATE_WINDOW_MS = 10_000;

interface Sample { at: number; processed: number }

export class ProjectionRates {
  private readonly samples = new Map<string, Sample[]>();

  /** Takes one listing's counts, measured at `at` (ms). */
  record(projections: ProjectionStats[], at: number): void {
    const present = new Set<string>();
    for (const p of projections) {
      present.add(p.name);
      const sample = { at, processed: p.eventsProcessedAfterRestart };
      const kept = (this.samples.get(p.name) ?? []).filter((s, i, all) => i === all.length - 1 || s.at >= at - RATE_WINDOW_MS);
      const last = kept[kept.length - 1];
      this.samples.set(p.name, last && last.processed <= sample.processed ? [...kept, sample] : [sample]);
    }
    for (const name of [...this.samples.keys()]) if (!present.has(name)) this.samples.delete(name);
  }

  /** Events per second over the window; NaN until two samples exist. */
  perSecond(name: string): number {
    const s = this.samples.get(name) ?? [];
    if (s.length < 2) return NaN;
    const first = s[0];
    const last = s[s.length - 1];
    return last.at > first.at ? ((last.processed - first.processed) * 1000) / (last.at - first.at) : NaN;
  }
}
