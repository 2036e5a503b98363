// Metrics, the folder's face: a node's metrics for GET /metrics (node-metrics.ts), with the
// counters the stream verbs bump and the latency histogram the doors observe. What each metric
// means is written in docs/operations.md (Metrics).
export { NodeMetrics, type MetricSources } from './node-metrics.js';
export { ClientCounters, type AppendResult, type ReadResult } from './client-counters.js';
export { RequestLatency, type LatencyObserver, type RouteFamily } from './request-latency.js';
