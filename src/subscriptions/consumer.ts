import type { Message, MessageHolder } from './message.js';

// A push consumer of a group (a gRPC Read call): how many messages it may hold unsettled (its
// own buffer size, chosen when it connects), what it holds now, and the figures /info shows of
// it. The group hands it messages through `deliver`; an ack, a nack or a timeout gives the slot
// back (`settled`). With the group's extraStatistics, the time from hand-out to ack of its last
// LATENCY_SAMPLES acks is kept for the percentiles the established servers report.

/** Why the group let a consumer go: the group was deleted, or replaced (an update, a restart of the subsystem, the node stopping). */
export type DropReason = 'deleted' | 'dropped';

export interface ConsumerOptions {
  /** Messages it may hold unsettled at once (at least 1). */
  readonly capacity: number;
  readonly username: string;
  /** The client's name for its connection (`connection-name`). */
  readonly connectionName: string;
  /** Where it connects from ('' for gRPC consumers, as the established server reports them). */
  readonly from: string;
  /** Hands messages to the consumer, in the order given (the group calls it while pushing). */
  deliver(messages: readonly Message[]): void;
  /** The group let the consumer go; its messages in flight went back to the group. */
  dropped(reason: DropReason): void;
}

export interface ConnectionInfo {
  readonly from: string;
  readonly username: string;
  readonly connectionName: string;
  readonly averageItemsPerSecond: number;
  readonly totalItems: number;
  readonly countSinceLastMeasurement: number;
  readonly availableSlots: number;
  readonly inFlightMessages: number;
  /** Ack latencies in ms with the group's extraStatistics (empty without). */
  readonly observedMeasurements: readonly { key: string; value: number }[];
}

const LATENCY_SAMPLES = 1000;
const PERCENTILES: readonly [string, number][] = [
  ['Quintile 1', 20], ['Quintile 2', 40], ['Quintile 3', 60], ['Quintile 4', 80], ['Quintile 5', 100],
  ['90%', 90], ['95%', 95], ['99%', 99], ['99.5%', 99.5], ['99.9%', 99.9],
];

let nextConsumerId = 1;

export class Consumer implements MessageHolder {
  readonly id = nextConsumerId++;
  inFlight = 0;
  private totalItems = 0;
  private countSinceMeasurement = 0;
  private averagePerSecond = 0;
  private lastMeasurementAt = Date.now();
  private readonly latencies: number[] = [];
  private latencyAt = 0;

  constructor(readonly options: ConsumerOptions, private readonly measureLatency: boolean) {}

  get freeSlots(): number {
    return this.options.capacity - this.inFlight;
  }

  /** Messages handed to it (the group counts them in flight when it leases them). */
  handedOut(count: number): void {
    this.totalItems += count;
    this.countSinceMeasurement += count;
  }

  settled(m: Message, acked: boolean, now: number): void {
    this.inFlight--;
    if (!acked || !this.measureLatency) return;
    const ms = Math.max(0, now - m.sentAt);
    if (this.latencies.length < LATENCY_SAMPLES) this.latencies.push(ms);
    else this.latencies[this.latencyAt] = ms;
    this.latencyAt = (this.latencyAt + 1) % LATENCY_SAMPLES;
  }

  /** The 1 s tick: the rate since the previous measurement. */
  measure(now: number): void {
    if (now - this.lastMeasurementAt < 1000) return;
    this.averagePerSecond = Math.round((this.countSinceMeasurement * 1000) / (now - this.lastMeasurementAt));
    this.countSinceMeasurement = 0;
    this.lastMeasurementAt = now;
  }

  info(): ConnectionInfo {
    const { from, username, connectionName } = this.options;
    return {
      from, username, connectionName, averageItemsPerSecond: this.averagePerSecond, totalItems: this.totalItems,
      countSinceLastMeasurement: this.countSinceMeasurement, availableSlots: Math.max(0, this.freeSlots), inFlightMessages: this.inFlight,
      observedMeasurements: this.measureLatency ? latencyFigures(this.latencies) : [],
    };
  }
}

/** Mean, median, fastest, quintiles, high percentiles and highest of the samples (ms), as the established servers name them. */
function latencyFigures(samples: readonly number[]): { key: string; value: number }[] {
  if (samples.length === 0) return [];
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
  const mean = Math.round(sorted.reduce((sum, v) => sum + v, 0) / sorted.length);
  return [
    { key: 'Mean', value: mean }, { key: 'Median', value: at(50) }, { key: 'Fastest', value: sorted[0] },
    ...PERCENTILES.map(([key, p]) => ({ key, value: at(p) })),
    { key: 'Highest', value: sorted[sorted.length - 1] },
  ];
}
