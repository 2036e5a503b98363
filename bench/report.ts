import type { ScenarioId } from './config.js';
import { failures, type Measurement } from './load.js';
import type { Scenario } from './workload.js';

// Targets, verdicts and the printed tables (aligned text for the terminal, markdown for the README).

export interface Row {
  scenario: Scenario;
  node: Measurement;
  ceiling: Measurement | undefined;
  warmupFailures: number;
}

interface Target {
  text: string;
  /** Absent: the figure is reported, not judged. */
  met?(row: Row): boolean;
}

// The performance issue's targets (issue 33): appends of 1 event at 0.60 of bare fastify, of 100
// events at half the ceiling's events/s, 20-event pages with bodies at half of bare fastify
// serving the same bytes.
const TARGETS: Record<ScenarioId, Target> = {
  a: { text: '≥ 0.60 of ceiling', met: (r) => ratio(r) >= 0.6 },
  b: { text: '≥ 0.50 of ceiling', met: (r) => ratio(r) >= 0.5 },
  c: { text: '≥ 0.50 of ceiling', met: (r) => ratio(r) >= 0.5 },
  d: { text: 'reported' },
};

function ratio(row: Row): number {
  return row.ceiling && row.ceiling.reqPerSec > 0 ? row.node.reqPerSec / row.ceiling.reqPerSec : NaN;
}

/** A run with failed requests proves nothing, whatever its numbers say. */
export function rowFailures(row: Row): number {
  return failures(row.node) + (row.ceiling ? failures(row.ceiling) : 0) + row.warmupFailures;
}

function verdict(row: Row): string {
  if (rowFailures(row) > 0) return 'INVALID (errors)';
  const { met } = TARGETS[row.scenario.id];
  if (!met) return '-';
  return met(row) ? 'PASS' : 'MISS';
}

const int = (n: number) => Math.round(n).toLocaleString('en-US');
// autocannon's latency histogram has 1 ms resolution: decimals would be noise.
const ms = (n: number) => String(Math.round(n));

const HEADER = ['scenario', 'req/s', 'events/s', 'p50 ms', 'p99 ms', 'ceiling req/s', 'ratio', 'target', 'result'];

function cells(row: Row): string[] {
  const r = ratio(row);
  return [
    `(${row.scenario.id}) ${row.scenario.title}`, int(row.node.reqPerSec), int(row.node.eventsPerSec),
    ms(row.node.p50), ms(row.node.p99), row.ceiling ? int(row.ceiling.reqPerSec) : '-',
    Number.isNaN(r) ? '-' : r.toFixed(2), TARGETS[row.scenario.id].text, verdict(row),
  ];
}

export function textTable(rows: Row[]): string {
  const body = rows.map(cells);
  const widths = HEADER.map((h, i) => Math.max(h.length, ...body.map((c) => c[i].length)));
  const numeric = new Set([1, 2, 3, 4, 5, 6]);
  const line = (c: string[]) => c.map((v, i) => (numeric.has(i) ? v.padStart(widths[i]) : v.padEnd(widths[i]))).join('  ').trimEnd();
  return [line(HEADER), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(line)].join('\n');
}

export function markdownTable(rows: Row[]): string {
  const line = (c: string[]) => `| ${c.join(' | ')} |`;
  const align = HEADER.map((_, i) => (i >= 1 && i <= 6 ? '---:' : '---'));
  return [line(HEADER), line(align), ...rows.map((r) => line(cells(r)))].join('\n');
}

function describe(m: Measurement): string {
  const codes = Object.entries(m.statusCodes).map(([code, n]) => `${code}×${n}`).join(' ');
  return `${int(m.reqPerSec)} req/s, p50 ${ms(m.p50)} ms, p99 ${ms(m.p99)} ms, server CPU ${int(m.cpuPerRequestUs)} µs/req, `
    + `status [${codes}], non-2xx ${m.non2xx}, errors ${m.errors} (timeouts ${m.timeouts})`;
}

/**
 * The ratio of CPU per request, ceiling over node: what the throughput ratio would be if each
 * server had a core of its own. Other work on the machine moves it far less than req/s.
 */
function cpuRatio(row: Row): string {
  const r = row.ceiling ? row.ceiling.cpuPerRequestUs / row.node.cpuPerRequestUs : NaN;
  return Number.isFinite(r) ? r.toFixed(2) : '-';
}

/** Per-run details, including the ceiling's own latency and every status code seen. */
export function details(rows: Row[]): string {
  return rows.flatMap((r) => [
    `(${r.scenario.id}) node:    ${describe(r.node)}`,
    ...(r.ceiling ? [`(${r.scenario.id}) ceiling: ${describe(r.ceiling)}`, `(${r.scenario.id}) CPU per request, ceiling / node: ${cpuRatio(r)}`] : []),
    ...(r.warmupFailures > 0 ? [`(${r.scenario.id}) warm-up: ${r.warmupFailures} failed requests`] : []),
  ]).join('\n');
}

export function errorBanner(rows: Row[]): string | undefined {
  const bad = rows.filter((r) => rowFailures(r) > 0);
  if (bad.length === 0) return undefined;
  const list = bad.map((r) => `(${r.scenario.id}) ${rowFailures(r)} failed`).join(', ');
  const bar = '!'.repeat(78);
  return `${bar}\n!!! REQUESTS FAILED: ${list}\n!!! Results of these scenarios are INVALID; see the details above.\n${bar}`;
}
