import { Counter, Gauge, type Registry } from 'prom-client';

// Metrics read at scrape time from the object that already keeps the figure: nothing on the hot
// path, the value is taken when Prometheus asks. A counter mirrors a total kept elsewhere (the
// writer's records written); a gauge a level now (the writer's queue). Labelled ones are rebuilt
// on every scrape, so a projection or group that is gone stops being reported.

/** One series: its labels (none: {}) and value. */
export interface Sample<L extends string> {
  labels: Partial<Record<L, string>>;
  value: number;
}

interface Definition<L extends string> {
  registry: Registry;
  name: string;
  help: string;
  labelNames?: readonly L[];
  /** The series now; an empty list: nothing is measured, nothing is reported. */
  read: () => readonly Sample<L>[];
}

/** A counter whose total another object keeps; it only ever grows while that object lives. */
export function scrapedCounter<L extends string = never>(d: Definition<L>): Counter<L> {
  return new Counter<L>({
    name: d.name, help: d.help, labelNames: d.labelNames ?? [], registers: [d.registry],
    collect() {
      clear(this, d.labelNames);
      for (const s of d.read()) this.inc(s.labels, s.value);
    },
  });
}

export function scrapedGauge<L extends string = never>(d: Definition<L>): Gauge<L> {
  return new Gauge<L>({
    name: d.name, help: d.help, labelNames: d.labelNames ?? [], registers: [d.registry],
    collect() {
      clear(this, d.labelNames);
      for (const s of d.read()) this.set(s.labels, s.value);
    },
  });
}

/** No series: reset leaves an unlabelled metric at 0, which would report what was not measured. */
function clear(metric: Counter<string> | Gauge<string>, labelNames: readonly string[] | undefined): void {
  metric.reset();
  if (!labelNames?.length) metric.remove();
}

/** The one series of an unlabelled metric. */
export function one(value: number): Sample<never>[] {
  return [{ labels: {}, value }];
}
