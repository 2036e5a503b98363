import { Histogram, type Registry } from 'prom-client';

// How long requests take, by route family and protocol: the HTTP door times every answer (from
// the request's arrival to its being sent), the gRPC door its unary and client-streaming calls
// and each append of a BatchAppend call (the official clients' way to append). Other streaming
// calls last as long as their reader or subscription does: their length says nothing of the
// node's speed. The labels are two small closed sets, never a URL or a stream name: 5 families x
// 2 protocols = 10 series of buckets at most.

export type RouteFamily = 'streams' | 'subscriptions' | 'projections' | 'admin' | 'other';
export type Protocol = 'http' | 'grpc';

const FAMILIES: readonly RouteFamily[] = ['streams', 'subscriptions', 'projections', 'admin', 'other'];

/**
 * Seconds: from a cached read (~0.2 ms) and a group-committed append (1-5 ms) to long polls and
 * big feed pages (seconds); a long poll's full wait lands in the last buckets.
 */
const BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** What a door calls once a request is answered. */
export interface LatencyObserver {
  observe(seconds: number): void;
}

/** The family of an HTTP route template (`req.routeOptions.url`; undefined when no route matched). */
export function httpFamilyOf(url: string | undefined): RouteFamily {
  if (url === undefined) return 'other';
  if (url.startsWith('/streams')) return 'streams';
  if (url.startsWith('/subscriptions')) return 'subscriptions';
  if (url.startsWith('/projection')) return 'projections';
  if (url.startsWith('/admin') || url.startsWith('/users') || url.startsWith('/auto-scavenge')) return 'admin';
  return 'other'; // /info, /ping, /stats, /metrics, /gossip, the Admin UI, OPTIONS, not found
}

/** The family of a gRPC method path (`/event_store.client.streams.Streams/Append`). */
export function grpcFamilyOf(path: string): RouteFamily {
  const service = path.slice(1, path.indexOf('/', 1));
  if (service === 'event_store.client.streams.Streams') return 'streams';
  if (service === 'event_store.client.persistent_subscriptions.PersistentSubscriptions') return 'subscriptions';
  if (service === 'event_store.client.projections.Projections') return 'projections';
  if (service === 'event_store.client.users.Users' || service === 'event_store.client.operations.Operations') return 'admin';
  return 'other'; // gossip, monitoring, server features
}

export class RequestLatency {
  /** One bound child per protocol and family, made once: a request only looks its family up and observes. */
  private readonly byFamily: Record<Protocol, Record<RouteFamily, LatencyObserver>>;

  constructor(registry: Registry) {
    const histogram = new Histogram({
      name: 'svc_request_duration_seconds',
      help: 'Time from a request\'s arrival to its answer, by route family and protocol (gRPC: unary and client-streaming calls, and each append of a BatchAppend).',
      labelNames: ['protocol', 'family'] as const,
      buckets: BUCKETS,
      registers: [registry],
    });
    const children = (protocol: Protocol) => {
      const byFamily = {} as Record<RouteFamily, LatencyObserver>;
      for (const family of FAMILIES) byFamily[family] = histogram.labels(protocol, family);
      return byFamily;
    };
    this.byFamily = { http: children('http'), grpc: children('grpc') };
  }

  /** The observer of an HTTP route, by its template. */
  http(url: string | undefined): LatencyObserver {
    return this.byFamily.http[httpFamilyOf(url)];
  }

  /** The observer of a gRPC method, by its path (the door asks once per method, when it adds it). */
  grpc(path: string): LatencyObserver {
    return this.byFamily.grpc[grpcFamilyOf(path)];
  }
}
