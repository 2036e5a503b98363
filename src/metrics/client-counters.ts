import { Counter, type Registry } from 'prom-client';

// What clients ask of the streams, counted as it happens: the stream verbs (src/verbs/streams.ts)
// call these for both doors, HTTP and gRPC. Each result is a child of its counter bound once
// here, so an append or a read only increments (prom-client's labelled inc, no label object
// made per call). The result sets are closed: a refusal the verbs do not name is `other`.

export type AppendResult = 'success' | 'wrong_expected_version' | 'stream_deleted' | 'access_denied' | 'other';
export type ReadResult = 'ok' | 'not_found' | 'deleted' | 'access_denied';

const APPEND_RESULTS: readonly AppendResult[] = ['success', 'wrong_expected_version', 'stream_deleted', 'access_denied', 'other'];
const READ_RESULTS: readonly ReadResult[] = ['ok', 'not_found', 'deleted', 'access_denied'];

interface Increment {
  inc(by?: number): void;
}

function bound<R extends string>(counter: Counter<'result'>, results: readonly R[]): Record<R, Increment> {
  return Object.fromEntries(results.map((r) => [r, counter.labels(r)])) as Record<R, Increment>;
}

export class ClientCounters {
  private readonly appends: Record<AppendResult, Increment>;
  private readonly appendedEvents: Increment;
  private readonly reads: Record<ReadResult, Increment>;
  private readonly eventsRead: Increment;

  constructor(registry: Registry) {
    const registers = [registry];
    this.appends = bound(new Counter({
      name: 'svc_appends_total', help: 'Appends clients asked for (HTTP and gRPC), by result.', labelNames: ['result'] as const, registers,
    }), APPEND_RESULTS);
    this.appendedEvents = new Counter({
      name: 'svc_appended_events_total', help: 'Events in the successful appends of clients (an idempotent repeat counts again).', registers,
    });
    this.reads = bound(new Counter({
      name: 'svc_reads_total',
      help: 'Reads clients asked for (a page of a stream or of $all, or one event; a long poll or a gRPC read of many pages counts each page), by result.',
      labelNames: ['result'] as const, registers,
    }), READ_RESULTS);
    this.eventsRead = new Counter({ name: 'svc_events_read_total', help: 'Events the counted reads returned.', registers });
  }

  appended(result: AppendResult, events: number): void {
    this.appends[result].inc();
    if (result === 'success') this.appendedEvents.inc(events);
  }

  read(result: ReadResult, events: number): void {
    this.reads[result].inc();
    if (events > 0) this.eventsRead.inc(events);
  }
}
