import { readFileSync } from 'node:fs';
import { relative } from 'node:path';

// Summarises a V8 .cpuprofile (from BENCH_CPU_PROF=dir): the functions with the most self
// time, and the same time grouped by file, so the hot layer is visible at a glance.
// Usage: node dist/bench/profile-summary.js FILE.cpuprofile [TOP=25] [LAST_SECONDS]
// LAST_SECONDS keeps only the final samples: the measured scenario is the last thing the node
// does before it is stopped, so this leaves out start-up, seeding and warm-up.

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}

interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

function place(url: string): string {
  if (!url) return '(native)';
  const path = url.startsWith('file://') ? new URL(url).pathname : url;
  return path.startsWith('/') ? relative(process.cwd(), path) : path;
}

function table(title: string, totals: Map<string, number>, all: number, top: number): string {
  const rows = [...totals].sort((x, y) => y[1] - x[1]).slice(0, top);
  return [title, ...rows.map(([name, us]) =>
    `${(us / 1000).toFixed(0).padStart(8)} ms ${((100 * us) / all).toFixed(1).padStart(5)}%  ${name}`)].join('\n');
}

function main(): void {
  const [file, topArg, lastArg] = process.argv.slice(2);
  if (!file) throw new Error('usage: profile-summary FILE.cpuprofile [TOP] [LAST_SECONDS]');
  const top = Number(topArg ?? 25);
  const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));

  // Sample i happens at the sum of the deltas up to i; the window is measured back from the last one.
  const times: number[] = [];
  let t = 0;
  for (const delta of profile.timeDeltas) times.push((t += delta));
  const since = lastArg ? t - Number(lastArg) * 1e6 : -Infinity;

  // Self time per node: each sample's time delta belongs to the node it landed in.
  const self = new Map<number, number>();
  profile.samples.forEach((id, i) => {
    if (times[i] >= since) self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  });
  const all = [...self.values()].reduce((a, b) => a + b, 0);

  const byFunction = new Map<string, number>();
  const byFile = new Map<string, number>();
  for (const [id, us] of self) {
    const { functionName, url, lineNumber } = byId.get(id)!.callFrame;
    const where = place(url);
    const fn = `${functionName || '(anonymous)'}  ${where}${url ? `:${lineNumber + 1}` : ''}`;
    byFunction.set(fn, (byFunction.get(fn) ?? 0) + us);
    byFile.set(where, (byFile.get(where) ?? 0) + us);
  }
  const window = lastArg ? `, last ${lastArg} s` : '';
  process.stdout.write(`${file}: ${(all / 1000).toFixed(0)} ms sampled${window}\n\n`);
  process.stdout.write(`${table('Top self time by function', byFunction, all, top)}\n\n`);
  process.stdout.write(`${table('Self time by file', byFile, all, top)}\n`);
}

main();
