// A strict reader of Prometheus's text exposition format, version 0.0.4 (what Prometheus
// scrapes from /metrics; the format's documentation, "Exposition formats"): HELP and TYPE lines,
// samples `name{label="value",...} value [timestamp]` with the label escapes \\ \" \n, and the
// format's rules checked as it reads: every family declares its HELP and TYPE before its samples,
// a family's lines stand together, no series appears twice, a sample's name is its family's (a
// histogram's: _bucket, _sum, _count), and a histogram's buckets are cumulative up to le="+Inf",
// which equals its _count. Any breach throws, naming the line.
//
// Why not the npm package parse-prometheus-text-format: it merges every series of a labelled
// histogram into one (its 1.1.1 reads `x_bucket{le="1",family="a"}` and `{le="1",family="b"}`
// as one sample), and the request-duration histogram here is labelled.

export type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';

export interface Series {
  /** The sample's own name (a histogram's carries its suffix). */
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

export interface MetricFamily {
  readonly name: string;
  readonly help: string;
  readonly type: MetricType;
  readonly series: Series[];
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set<MetricType>(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

export function parseExposition(text: string): Map<string, MetricFamily> {
  const families = new Map<string, MetricFamily>();
  const helps = new Map<string, string>();
  const seen = new Set<string>();
  let current: MetricFamily | undefined;
  const fail = (n: number, line: string, why: string): never => { throw new Error(`line ${n + 1} (${JSON.stringify(line)}): ${why}`); };
  text.split('\n').forEach((line, n) => {
    if (line === '') return;
    if (line.startsWith('#')) {
      const m = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
      if (!m) return; // a comment
      const [, kind, name, rest] = m;
      if (!NAME.test(name)) fail(n, line, 'not a metric name');
      if (kind === 'HELP') {
        if (helps.has(name)) fail(n, line, 'a second HELP');
        helps.set(name, rest.replace(/\\(\\|n)/g, (_s, c: string) => (c === 'n' ? '\n' : '\\')));
        return;
      }
      if (!TYPES.has(rest as MetricType)) fail(n, line, `unknown type ${rest}`);
      if (families.has(name)) fail(n, line, 'a second TYPE (or the family\'s lines are not together)');
      if (!helps.has(name)) fail(n, line, 'TYPE before (or without) HELP');
      current = { name, help: helps.get(name)!, type: rest as MetricType, series: [] };
      families.set(name, current);
      return;
    }
    const sample = parseSample(line, (why) => fail(n, line, why));
    if (!current || !namesOf(current).includes(sample.name)) fail(n, line, 'a sample outside its family\'s TYPE');
    const key = `${sample.name}${JSON.stringify(Object.entries(sample.labels).sort())}`;
    if (seen.has(key)) fail(n, line, 'the same series twice');
    seen.add(key);
    current!.series.push(sample);
  });
  for (const f of families.values()) if (f.type === 'histogram') checkHistogram(f);
  return families;
}

function namesOf(f: MetricFamily): string[] {
  if (f.type === 'histogram') return [`${f.name}_bucket`, `${f.name}_sum`, `${f.name}_count`];
  if (f.type === 'summary') return [f.name, `${f.name}_sum`, `${f.name}_count`];
  return [f.name];
}

function parseSample(line: string, fail: (why: string) => never): Series {
  const nameEnd = line.search(/[{ ]/);
  if (nameEnd <= 0) fail('no value');
  const name = line.slice(0, nameEnd);
  if (!NAME.test(name)) fail('not a metric name');
  const labels: Record<string, string> = {};
  let at = nameEnd;
  if (line[at] === '{') {
    at++;
    while (line[at] !== '}') {
      const eq = line.indexOf('=', at);
      const label = line.slice(at, eq);
      if (eq < 0 || !LABEL_NAME.test(label) || line[eq + 1] !== '"') fail('a malformed label');
      if (label in labels) fail(`label ${label} twice`);
      let value = '';
      at = eq + 2;
      for (;;) {
        const c = line[at++];
        if (c === undefined) fail('an unterminated label value');
        if (c === '"') break;
        if (c !== '\\') { value += c; continue; }
        const escaped = line[at++];
        if (escaped === 'n') value += '\n';
        else if (escaped === '\\' || escaped === '"') value += escaped;
        else fail(`an unknown escape \\${escaped}`);
      }
      labels[label] = value;
      if (line[at] === ',') at++;
      else if (line[at] !== '}') fail('labels not separated by commas');
    }
    at++;
  }
  const parts = line.slice(at).trim().split(' ');
  if (line[at] !== ' ' || parts.length < 1 || parts.length > 2) fail('not `name{labels} value [timestamp]`');
  if (parts[1] !== undefined && !/^-?\d+$/.test(parts[1])) fail('a malformed timestamp');
  const value = parseValue(parts[0]);
  if (value === undefined) fail(`not a number: ${parts[0]}`);
  return { name, labels, value: value! };
}

/** A float as Prometheus reads one (Go's ParseFloat: NaN and Inf in any case; prom-client writes `Nan`). */
function parseValue(text: string): number | undefined {
  if (/^\+?inf(inity)?$/i.test(text)) return Infinity;
  if (/^-inf(inity)?$/i.test(text)) return -Infinity;
  if (/^nan$/i.test(text)) return NaN;
  const n = Number(text);
  return text.trim() !== '' && !Number.isNaN(n) ? n : undefined;
}

/** Each labelled series of a histogram: buckets cumulative, ending with le="+Inf" equal to its _count, and a _sum. */
function checkHistogram(f: MetricFamily): void {
  const byLabels = new Map<string, { buckets: [number, number][]; count?: number; sum?: number }>();
  for (const s of f.series) {
    const { le, ...rest } = s.labels;
    const key = JSON.stringify(Object.entries(rest).sort());
    const entry = byLabels.get(key) ?? { buckets: [] };
    byLabels.set(key, entry);
    if (s.name.endsWith('_bucket')) {
      const bound = parseValue(le ?? '');
      if (bound === undefined) throw new Error(`${f.name}: a bucket without a numeric le`);
      entry.buckets.push([bound, s.value]);
    } else if (s.name.endsWith('_count')) entry.count = s.value;
    else entry.sum = s.value;
  }
  for (const [key, { buckets, count, sum }] of byLabels) {
    const where = `${f.name}${key}`;
    if (count === undefined || sum === undefined) throw new Error(`${where}: no _count or _sum`);
    for (let i = 1; i < buckets.length; i++) {
      if (!(buckets[i][0] > buckets[i - 1][0]) || buckets[i][1] < buckets[i - 1][1]) throw new Error(`${where}: buckets not cumulative`);
    }
    const last = buckets[buckets.length - 1];
    if (!last || last[0] !== Infinity || last[1] !== count) throw new Error(`${where}: le="+Inf" is not the _count`);
  }
}

/** The value of the one series named `name` whose labels include `labels`; undefined when there is none. */
export function valueOf(m: Map<string, MetricFamily>, name: string, labels: Record<string, string> = {}): number | undefined {
  const family = m.get(name.replace(/_(bucket|sum|count)$/, '')) ?? m.get(name);
  const found = (family?.series ?? []).filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  if (found.length > 1) throw new Error(`${name} ${JSON.stringify(labels)} names ${found.length} series`);
  return found[0]?.value;
}
