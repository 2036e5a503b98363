import { tmpdir } from 'node:os';

// The knobs of one bench run, all from the environment so `npm run bench` needs no arguments.

const SCENARIO_IDS = ['a', 'b', 'c', 'd'] as const;
export type ScenarioId = (typeof SCENARIO_IDS)[number];

export interface BenchConfig {
  /** Measured seconds per scenario and server. */
  seconds: number;
  /** Seconds of unmeasured load before each measurement (JIT, RocksDB memtables, TCP). */
  warmupSeconds: number;
  connections: number;
  /** Scenarios to run, e.g. BENCH_ONLY=a for profiling one of them. */
  only: ScenarioId[];
  /** Parent of the node's temporary data directory: must be a real disk for fsync to cost what it costs. */
  dataParent: string;
  /** When set, the node under test runs with --cpu-prof and writes its profile here. */
  cpuProfDir: string | undefined;
}

/** A number from the environment variable `name` (`fallback` when unset), refused below `min`. */
export function envNumber(name: string, fallback: number, min: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < min) throw new Error(`${name} must be a number >= ${min}, got '${raw}'`);
  return n;
}

function scenarios(): ScenarioId[] {
  const raw = process.env.BENCH_ONLY;
  if (!raw) return [...SCENARIO_IDS];
  const ids = raw.split(',').map((s) => s.trim());
  for (const id of ids) if (!(SCENARIO_IDS as readonly string[]).includes(id)) throw new Error(`BENCH_ONLY: unknown scenario '${id}'`);
  return ids as ScenarioId[];
}

export function benchConfig(): BenchConfig {
  return {
    seconds: envNumber('BENCH_SECONDS', 10, 1),
    warmupSeconds: envNumber('BENCH_WARMUP_SECONDS', 2, 0),
    connections: Math.floor(envNumber('BENCH_CONNECTIONS', 64, 1)),
    only: scenarios(),
    dataParent: process.env.BENCH_DATA_DIR || tmpdir(),
    cpuProfDir: process.env.BENCH_CPU_PROF || undefined,
  };
}
