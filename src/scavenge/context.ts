import type { Logger } from 'pino';
import type { Store } from '../store/index.js';
import type { History } from './history.js';
import type { ScavengeState, ScavengePoint } from './state.js';
import type { Throttle } from './throttle.js';
import type { ScavengeProgress } from './types.js';

/** What every phase of one run works with. */
export interface RunContext {
  readonly store: Store;
  readonly state: ScavengeState;
  readonly log: Logger;
  readonly chunkSize: number;
  readonly point: ScavengePoint;
  readonly scavengeId: string;
  readonly progress: ScavengeProgress;
  readonly throttle: Throttle;
  readonly history: History;
  readonly threads: number;
  /** The first chunk this run executes (ScavengeRequest.startFromChunk). */
  readonly startFromChunk: number;
  readonly disableMerging: boolean;
  /** Throws ScavengeStoppedError once a stop was asked for. */
  checkStop(): void;
}

export class ScavengeStoppedError extends Error {
  constructor() {
    super('the scavenge was stopped');
  }
}

export function chunkOf(ctx: RunContext, position: number): number {
  return Math.floor(position / ctx.chunkSize);
}

/** The logical chunk holding the scavenge point: the last one a run covers. */
export function lastChunk(ctx: RunContext): number {
  return chunkOf(ctx, ctx.point.position);
}

export function addWeight(weights: Map<number, number>, chunk: number, weight: number): void {
  weights.set(chunk, (weights.get(chunk) ?? 0) + weight);
}
