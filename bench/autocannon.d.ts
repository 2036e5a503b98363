// autocannon ships no TypeScript types; this declares only the part of its API the bench uses.
declare module 'autocannon' {
  namespace autocannon {
    type Context = Record<string, unknown>;

    interface Request {
      method?: string;
      path?: string;
      headers?: Record<string, string>;
      body?: string | Buffer;
      /** Called before every send; returns the (mutated) request, or a falsy value to restart the sequence. */
      setupRequest?: (request: Request, context: Context) => Request | null | undefined;
      onResponse?: (status: number, body: string, context: Context, headers: Record<string, string | string[]>) => void;
    }

    interface Options {
      url: string;
      connections?: number;
      duration?: number;
      pipelining?: number;
      /** Requests per second across all connections. */
      overallRate?: number;
      /** Record raw response times instead of "correcting" them for coordinated omission. */
      ignoreCoordinatedOmission?: boolean;
      timeout?: number;
      method?: string;
      headers?: Record<string, string>;
      body?: string | Buffer;
      requests?: Request[];
    }

    /** hdr-histogram summary; latency values are in milliseconds. */
    interface Histogram {
      average: number;
      mean: number;
      stddev: number;
      min: number;
      max: number;
      total: number;
      p50: number;
      p90: number;
      p97_5: number;
      p99: number;
    }

    interface Result {
      latency: Histogram;
      requests: Histogram & { sent: number };
      throughput: Histogram;
      /** Seconds. */
      duration: number;
      /** Connection errors, timeouts included. */
      errors: number;
      timeouts: number;
      mismatches: number;
      non2xx: number;
      resets: number;
      statusCodeStats: Record<string, { count: number }>;
      '1xx': number;
      '2xx': number;
      '3xx': number;
      '4xx': number;
      '5xx': number;
    }
  }

  /** The run; `stop()` ends it early (the promise then resolves with what was measured). */
  function autocannon(options: autocannon.Options): Promise<autocannon.Result> & { stop(): void };
  export default autocannon;
}
