import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { ExpectedVersion, metadataEvent, metastreamOf, parseLinkTarget, StoreClosedError, type Store } from '../store/index.js';
import { ScavengeStoppedError, type RunContext } from './context.js';
import { History, historyMetadata, type LogAppend, SCAVENGES_STREAM, scavengeStream, timeSpan } from './history.js';
import { begin, runPhases } from './run.js';
import { ScavengeState } from './state.js';
import { Throttle } from './throttle.js';
import {
  BackupRunningError, ScavengeAlreadyRunningError, type LastScavengeResult, type ScavengeProgress, type ScavengeRequest, type ScavengeResult,
} from './types.js';

// The node's scavenger: one scavenge at a time, run in the background while the node serves
// reads, appends, projections and subscriptions. See run.ts for the phases, and
// docs/scavenging.md for how the established servers' concepts map onto this store.

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
  /**
   * How the scavenge point and history are appended (default: to this store). In a cluster, through
   * the leader: a follower's node scavenge writes them there and scavenges once they are replicated.
   */
  append?: LogAppend;
  /** Whether a backup runs now: a scavenge does not start then (BackupRunningError). */
  backupRunning?: () => boolean;
  /**
   * A cluster node: of the scavenges left unfinished in the (shared) history, it records as
   * Interrupted only its own (started with its nodeEndpoint): another node's may still be running.
   * And its history writes wait out a leader change.
   */
  clustered?: boolean;
}

export interface CurrentScavenge {
  scavengeId: string;
  progress: ScavengeProgress;
}

interface Running {
  id: string;
  progress: ScavengeProgress;
  stopRequested: boolean;
  throttle: Throttle;
  done: Promise<void>;
}

export class Scavenger {
  private running: Running | undefined;
  private lastRun: { id: string; result: LastScavengeResult } | undefined;
  private state: ScavengeState | undefined;
  private closed = false;

  private readonly appender: LogAppend;
  private recording: Promise<void> = Promise.resolve();

  /** A cluster node's history waits out a leader change (History's `patient`), unless the node is closing. */
  private readonly patient = (): boolean => this.options.clustered === true && !this.closed;

  constructor(private readonly store: Store, private readonly options: ScavengerOptions, private readonly log: Logger) {
    this.appender = options.append ?? ((stream, expected, events) => store.append(stream, expected, events));
  }

  /**
   * At node start (in a cluster, once this node leads): gives the history streams their metadata
   * and records as Interrupted every scavenge that started but never completed (the process was
   * killed).
   */
  async open(): Promise<void> {
    const wanted = historyMetadata(this.options.historyMaxAgeDays);
    if (JSON.stringify(this.store.metadataOf(SCAVENGES_STREAM).raw) !== JSON.stringify(wanted)) {
      await this.store.append(metastreamOf(SCAVENGES_STREAM), ExpectedVersion.any, [metadataEvent(wanted)]);
    }
    await this.recordInterrupted();
  }

  /**
   * Records as Interrupted each scavenge that started and never completed, and is not running here
   * (in a cluster, of those this node started). A cluster follower calls it once it follows.
   */
  recordInterrupted(): Promise<void> {
    // One at a time: a cluster node records them when it follows and again when it leads.
    const next = this.recording.then(() => this.recordInterruptedNow());
    this.recording = next.catch(() => undefined);
    return next;
  }

  private async recordInterruptedNow(): Promise<void> {
    let recorded = 0;
    const started = new Set<string>();
    const completed = new Set<string>();
    const self = this.options.nodeEndpoint();
    for (const link of this.store.streamRecords(SCAVENGES_STREAM)) {
      const target = parseLinkTarget(link.data);
      if (!target) continue;
      const found = this.store.readEvent(target.streamId, target.eventNumber);
      if (found.status !== 'ok' || !found.event.event) continue;
      const { eventType, data } = found.event.event;
      const id = target.streamId.slice(SCAVENGES_STREAM.length + 1);
      if (eventType === '$scavengeStarted' && (!this.options.clustered || endpointOf(data) === self)) started.add(id);
      else if (eventType === '$scavengeCompleted') completed.add(id);
    }
    for (const id of started) {
      if (completed.has(id) || this.running?.id === id) continue;
      let spaceSaved = 0;
      let maxChunkScavenged = -1;
      let eventsExamined = 0;
      let eventsRemoved = 0;
      let first: number | undefined;
      for (const e of this.store.streamRecords(scavengeStream(id))) {
        first ??= e.created;
        if (e.eventType !== '$scavengeChunksCompleted') continue;
        const body = JSON.parse(e.data.toString('utf8')) as Record<string, number>;
        spaceSaved += body.spaceSaved ?? 0;
        maxChunkScavenged = Math.max(maxChunkScavenged, body.chunkEndNumber ?? -1);
        eventsExamined += body.eventsExamined ?? 0;
        eventsRemoved += body.eventsRemoved ?? 0;
      }
      this.log.warn(`SCAVENGING: scavenge ${id} was interrupted by a restart`);
      recorded++;
      await new History(this.appender, id, this.options.nodeEndpoint(), this.options.historyMaxAgeDays, this.log, this.patient).completed({
        result: 'Interrupted', error: 'The node was restarted.',
        timeTaken: timeSpan(first === undefined ? 0 : (Date.now() * 1000 - first) / 1000),
        spaceSaved, maxChunkScavenged, eventsExamined, eventsRemoved,
      });
    }
    this.log.info(`SCAVENGING: ${recorded} unfinished scavenge${recorded === 1 ? '' : 's'} recorded as Interrupted`);
  }

  /** Starts a scavenge in the background and returns its id at once. */
  start(request: ScavengeRequest): string {
    if (this.running) throw new ScavengeAlreadyRunningError(this.running.id);
    if (this.options.backupRunning?.()) throw new BackupRunningError();
    if (this.closed) throw new StoreClosedError(); // a refusal (503), not a fault of ours
    const id = randomUUID();
    const progress: ScavengeProgress = {
      phase: 'Beginning', scavengePoint: -1, chunksDone: 0, chunksTotal: 0, eventsExamined: 0, eventsRemoved: 0, spaceSaved: 0,
      restedForClientsMs: 0,
    };
    const log = this.log.child({ scavengeId: id });
    const run: Running = { id, progress, stopRequested: false, throttle: new Throttle(request.throttlePercent, log), done: Promise.resolve() };
    this.running = run;
    run.done = this.run(run, request, log).finally(() => {
      this.running = undefined;
    });
    return id;
  }

  private async run(run: Running, request: ScavengeRequest, log: Logger): Promise<void> {
    const started = performance.now();
    const history = new History(this.appender, run.id, this.options.nodeEndpoint(), this.options.historyMaxAgeDays, log, this.patient);
    const totals = { spaceSaved: 0, maxChunkScavenged: -1 };
    const before = this.store.diskUsage();
    let result: ScavengeResult = 'Success';
    let error: string | null = null;
    await history.started();
    try {
      this.state ??= await ScavengeState.open(this.options.stateDir, {
        pageSize: this.options.backendPageSize, cacheSize: this.options.backendCacheSize,
        streamCacheCapacity: this.options.streamCacheCapacity,
      });
      const state = this.state;
      const beginning = await begin(this.store, this.appender, state, request, log);
      if (beginning.kind !== 'nothing') {
        const point = beginning.kind === 'resume' ? beginning.checkpoint.point : beginning.point;
        run.progress.scavengePoint = point.eventNumber;
        const ctx: RunContext = {
          store: this.store, state, log, chunkSize: this.options.chunkSize, point, scavengeId: run.id, progress: run.progress,
          throttle: run.throttle, history, threads: request.threads, startFromChunk: request.startFromChunk, disableMerging: this.options.disableMerging,
          checkStop: () => {
            if (run.stopRequested) throw new ScavengeStoppedError();
          },
        };
        await runPhases(ctx, beginning.kind === 'resume' ? beginning.checkpoint : undefined, totals);
      }
    } catch (err) {
      if (err instanceof ScavengeStoppedError) {
        result = 'Stopped';
      } else {
        result = 'Errored';
        error = `Error while scavenging DB: ${(err as Error).message}.`;
        log.error({ err }, `SCAVENGING: ${error}`);
      }
    }
    const took = performance.now() - started;
    const after = this.store.diskUsage();
    const verb = result === 'Success' ? 'Completed' : result === 'Stopped' ? 'Stopped' : 'Failed';
    log.info({
      streamCacheMissesSinceStart: this.state?.cacheMisses ?? 0,
      eventsExamined: run.progress.eventsExamined, eventsRemoved: run.progress.eventsRemoved, spaceSaved: totals.spaceSaved,
      restedForClientsMs: Math.round(run.throttle.restedForClients),
      sstFilesBytesBefore: before.sstFilesBytes, sstFilesBytesAfter: after.sstFilesBytes,
      liveDataBytesBefore: before.liveDataBytes, liveDataBytesAfter: after.liveDataBytes,
    }, `SCAVENGING: Scavenge ${verb}. Total time taken: ${timeSpan(took)}. Total space saved: ${totals.spaceSaved}.`);
    await history.completed({
      result, error, timeTaken: timeSpan(took), spaceSaved: totals.spaceSaved, maxChunkScavenged: totals.maxChunkScavenged,
      eventsExamined: run.progress.eventsExamined, eventsRemoved: run.progress.eventsRemoved,
    });
    this.lastRun = { id: run.id, result };
  }

  current(): CurrentScavenge | undefined {
    const running = this.running;
    if (!running) return undefined;
    return { scavengeId: running.id, progress: { ...running.progress, restedForClientsMs: Math.round(running.throttle.restedForClients) } };
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
    run.stopRequested = true;
    run.throttle.interrupt();
    await run.done;
    return true;
  }

  /** What POST /admin/mergeindexes does here: nothing physical, and it says so. */
  mergeIndexes(): { mergeIndexesId: string; message: string } {
    const message = 'Nothing to merge: the index is one RocksDB key space, whose files RocksDB merges itself by compaction; '
      + 'a scavenge removes index entries together with their records.';
    this.log.info(`SCAVENGING: ${message}`);
    return { mergeIndexesId: randomUUID(), message };
  }

  /** Stops a running scavenge (the next one resumes it) and closes the state database. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.running) await this.stop(this.running.id);
    await this.state?.close();
    this.state = undefined;
  }
}

export type { ScavengeResult };

/** The node a history event names (`nodeEndpoint`), if it parses. */
function endpointOf(data: Buffer): string | undefined {
  try {
    const value = JSON.parse(data.toString('utf8')) as { nodeEndpoint?: unknown };
    return typeof value.nodeEndpoint === 'string' ? value.nodeEndpoint : undefined;
  } catch {
    return undefined;
  }
}
