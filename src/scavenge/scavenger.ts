import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Store } from '../store/index.js';
import {
  ScavengeAlreadyRunningError, type LastScavengeResult, type ScavengeProgress, type ScavengeRequest, type ScavengeResult,
} from './types.js';

// The node's scavenger: one scavenge at a time, run in the background while the node serves.
// (Phases: see run.ts.)

export interface ScavengerOptions {
  /** Where the scavenge state database lives (`<db>/scavenging`). */
  stateDir: string;
  chunkSize: number;
  disableMerging: boolean;
  historyMaxAgeDays: number;
  backendPageSize: number;
  backendCacheSize: number;
  streamCacheCapacity: number;
  /** `host:port` written in the history events (known once the node listens). */
  nodeEndpoint: () => string;
}

export interface CurrentScavenge {
  scavengeId: string;
  progress: ScavengeProgress;
}

export class Scavenger {
  private running: { id: string; progress: ScavengeProgress; stop: () => Promise<void> } | undefined;
  private lastRun: { id: string; result: LastScavengeResult } | undefined;

  constructor(private readonly store: Store, private readonly options: ScavengerOptions, private readonly log: Logger) {}

  /** Starts a scavenge in the background and returns its id at once. */
  start(request: ScavengeRequest): string {
    if (this.running) throw new ScavengeAlreadyRunningError(this.running.id);
    const id = randomUUID();
    void request;
    throw new Error(`scavenge ${id}: not built yet`);
  }

  current(): CurrentScavenge | undefined {
    return this.running ? { scavengeId: this.running.id, progress: { ...this.running.progress } } : undefined;
  }

  /** The scavenge started last since this process started (undefined: none). */
  last(): { scavengeId: string; result: LastScavengeResult } | undefined {
    if (this.running) return { scavengeId: this.running.id, result: 'InProgress' };
    return this.lastRun ? { scavengeId: this.lastRun.id, result: this.lastRun.result } : undefined;
  }

  /** Stops the scavenge with this id ('current': whichever runs); resolves false when no such scavenge runs. */
  async stop(id: string): Promise<boolean> {
    const run = this.running;
    if (!run || (id !== 'current' && id !== run.id)) return false;
    await run.stop();
    return true;
  }

  /** What POST /admin/mergeindexes does here. */
  mergeIndexes(): { mergeIndexesId: string; message: string } {
    const message = 'Nothing to merge: the index is one RocksDB key space, whose files RocksDB merges itself by compaction; '
      + 'a scavenge removes index entries together with their records.';
    this.log.info(message);
    return { mergeIndexesId: randomUUID(), message };
  }

  /** Stops a running scavenge (it resumes at the next start) and closes the state database. */
  async close(): Promise<void> {
    await this.running?.stop();
  }
}

export type { ScavengeResult };
