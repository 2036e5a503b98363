import type { Logger } from 'pino';
import {
  ExpectedVersion, jsonEvent, LINK_EVENT_TYPE, metadataEvent, metastreamOf, proposedEvent, type ProposedEvent,
} from '../store/index.js';

/** Appends to the log: the store's own append, or in a cluster through the leader. */
export type LogAppend = (stream: string, expected: ExpectedVersion, events: ProposedEvent[]) => Promise<{ firstEventNumber: number }>;

// The scavenge history: `$scavenges-{id}` holds one run's events (started, each chunk, each
// merge, completed), and `$scavenges` links to every run's started and completed events. Both
// are readable by $ops and expire after ScavengeHistoryMaxAge days.

export const SCAVENGES_STREAM = '$scavenges';

export function scavengeStream(scavengeId: string): string {
  return `${SCAVENGES_STREAM}-${scavengeId}`;
}

export function historyMetadata(maxAgeDays: number): Record<string, unknown> {
  return { $maxAge: maxAgeDays * 86_400, $acl: { $r: ['$ops'], $w: [], $d: [], $mr: [], $mw: [] } };
}

/** A duration as .NET prints a TimeSpan: `[d.]hh:mm:ss.fffffff`. */
export function timeSpan(ms: number): string {
  const ticks = Math.max(0, Math.round(ms * 10_000));
  const totalSeconds = Math.floor(ticks / 10_000_000);
  const fraction = String(ticks % 10_000_000).padStart(7, '0');
  const days = Math.floor(totalSeconds / 86_400);
  const hh = String(Math.floor((totalSeconds % 86_400) / 3600)).padStart(2, '0');
  const mm = String(Math.floor((totalSeconds % 3600) / 60)).padStart(2, '0');
  const ss = String(totalSeconds % 60).padStart(2, '0');
  return `${days > 0 ? `${days}.` : ''}${hh}:${mm}:${ss}.${fraction}`;
}

const WRITE_ATTEMPTS = 5;
/** Waits before the 2nd..5th attempt of a patient history (4 s in all: a cluster's failover takes 2-3 s). */
const RETRY_DELAYS_MS = [100, 300, 900, 2_700];

export class History {
  readonly stream: string;

  /**
   * `patient`: whether a failed write is tried again after a wait (a cluster node writing through
   * a leader that may be changing) rather than at once; asked before each wait (not while closing).
   */
  constructor(private readonly appendTo: LogAppend, readonly scavengeId: string, private readonly nodeEndpoint: string,
    private readonly maxAgeDays: number, private readonly log: Logger, private readonly patient: () => boolean = () => false) {
    this.stream = scavengeStream(scavengeId);
  }

  async started(): Promise<void> {
    await this.append(metastreamOf(this.stream), metadataEvent(historyMetadata(this.maxAgeDays)));
    const n = await this.write(this.stream, '$scavengeStarted', { scavengeId: this.scavengeId, nodeEndpoint: this.nodeEndpoint });
    if (n !== undefined) await this.link(n);
  }

  async chunkCompleted(fields: Record<string, unknown>): Promise<void> {
    await this.write(this.stream, '$scavengeChunksCompleted', this.payload(fields));
  }

  async mergeCompleted(fields: Record<string, unknown>): Promise<void> {
    await this.write(this.stream, '$scavengeMergeCompleted', this.payload(fields));
  }

  async completed(fields: Record<string, unknown>): Promise<void> {
    const n = await this.write(this.stream, '$scavengeCompleted', this.payload(fields));
    if (n !== undefined) await this.link(n);
  }

  private payload(fields: Record<string, unknown>): Record<string, unknown> {
    return { scavengeId: this.scavengeId, nodeEndpoint: this.nodeEndpoint, ...fields };
  }

  private async link(eventNumber: number): Promise<void> {
    await this.append(SCAVENGES_STREAM, proposedEvent({ eventType: LINK_EVENT_TYPE, data: `${eventNumber}@${this.stream}`, isJson: false }));
  }

  private write(stream: string, eventType: string, body: unknown): Promise<number | undefined> {
    return this.append(stream, jsonEvent(eventType, body));
  }

  /** Appends (the same event id on every attempt: a retry is idempotent); a history that cannot be written is logged, not fatal. */
  private async append(stream: string, event: ProposedEvent): Promise<number | undefined> {
    for (let attempt = 1; ; attempt++) {
      try {
        return (await this.appendTo(stream, ExpectedVersion.any, [event])).firstEventNumber;
      } catch (err) {
        if (attempt >= WRITE_ATTEMPTS) {
          this.log.warn({ err, stream }, `SCAVENGING: could not write ${event.eventType} to ${stream}`);
          return undefined;
        }
        if (this.patient()) await new Promise((r) => setTimeout(r, RETRY_DELAYS_MS[attempt - 1]));
      }
    }
  }
}
