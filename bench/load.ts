import autocannon from 'autocannon';
import { cpuMs } from './cpu.js';
import type { Scenario } from './workload.js';

// One autocannon run, reduced to the numbers the report needs. Only 2xx answers count as
// throughput: a server that answers errors fast must not look fast.

export interface Measurement {
  /** Successful (2xx) requests per second. */
  reqPerSec: number;
  eventsPerSec: number;
  p50: number;
  p99: number;
  /** Everything that went wrong: non-2xx answers, connection errors, timeouts. */
  non2xx: number;
  errors: number;
  timeouts: number;
  statusCodes: Record<string, number>;
  /** The server's CPU time (user + system, all its threads) per successful request, in µs; NaN if unknown. */
  cpuPerRequestUs: number;
}

export interface LoadOptions {
  seconds: number;
  connections: number;
  /** The server's process, to measure its CPU time. */
  pid?: number;
}

export async function runLoad(url: string, scenario: Scenario, options: LoadOptions): Promise<Measurement> {
  const cpuBefore = options.pid === undefined ? undefined : cpuMs(options.pid);
  const result = await autocannon({
    url,
    connections: options.connections,
    duration: options.seconds,
    requests: scenario.requests(),
  });
  const statusCodes: Record<string, number> = {};
  for (const [code, { count }] of Object.entries(result.statusCodeStats)) statusCodes[code] = Number(count);
  const reqPerSec = result['2xx'] / result.duration;
  const cpuAfter = options.pid === undefined ? undefined : cpuMs(options.pid);
  const cpu = cpuBefore === undefined || cpuAfter === undefined ? NaN : cpuAfter - cpuBefore;
  return {
    reqPerSec,
    eventsPerSec: reqPerSec * scenario.eventsPerRequest,
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    statusCodes,
    cpuPerRequestUs: result['2xx'] > 0 ? (cpu * 1000) / result['2xx'] : NaN,
  };
}

export function failures(m: Measurement): number {
  return m.non2xx + m.errors;
}

/** Warm-up then measurement; warm-up failures are kept too, since they mean the setup is broken. */
export async function measure(url: string, scenario: Scenario, options: LoadOptions & { warmupSeconds: number }):
  Promise<{ measured: Measurement; warmupFailures: number }> {
  let warmupFailures = 0;
  if (options.warmupSeconds > 0) {
    warmupFailures = failures(await runLoad(url, scenario, { ...options, seconds: options.warmupSeconds }));
  }
  return { measured: await runLoad(url, scenario, options), warmupFailures };
}
