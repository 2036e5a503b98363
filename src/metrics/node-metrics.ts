import { collectDefaultMetrics, Registry } from 'prom-client';
import { ClientCounters } from './client-counters.js';
import { RequestLatency } from './request-latency.js';
import { registerLogMetrics, type LogSources } from './log-metrics.js';
import { registerSubsystemMetrics, type SubsystemSources } from './subsystem-metrics.js';

// A node's metrics as GET /metrics serves them, in Prometheus's text format (version 0.0.4). Two
// registries: the node's own (svc_*: counted on the hot path by the verbs and doors, or read at
// scrape time from the objects that keep the figures), and the process's (prom-client's default
// process_* and nodejs_* metrics: resident memory, CPU seconds, heap, event-loop delay, GC), made
// once per process, since its collectors (a GC observer, an event-loop monitor) run for as long
// as the process does and a node restarted in the same process must not add another set.

let processRegistry: Registry | undefined;

function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

export type MetricSources = LogSources & SubsystemSources;

export class NodeMetrics {
  /** The media type of the exposition: `text/plain; version=0.0.4; charset=utf-8`. */
  static readonly contentType = Registry.PROMETHEUS_CONTENT_TYPE;
  private readonly registry = new Registry();
  /** Appends and reads, by result (the stream verbs count them). */
  readonly clients = new ClientCounters(this.registry);
  /** Request durations (the doors observe them). */
  readonly latency = new RequestLatency(this.registry);
  private readonly process = processMetrics();

  constructor(sources: MetricSources) {
    registerLogMetrics(this.registry, sources);
    registerSubsystemMetrics(this.registry, sources);
  }

  /** Every metric now, as the text a scrape gets. */
  async exposition(): Promise<string> {
    return (await this.registry.metrics()) + (await this.process.metrics());
  }
}
