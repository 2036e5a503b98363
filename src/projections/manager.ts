import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { DomainError } from '../errors.js';
import { ExpectedVersion, jsonEvent, OutOfSpaceError, proposedEvent, type SpaceEvent, type Store } from '../store/index.js';
import { Projection } from './projection.js';
import { JsEngine } from './engine.js';
import { isSystemProjection, NativeEngine, SYSTEM_PROJECTIONS } from './system.js';
import {
  DEFAULT_CONFIG, type PersistedProjection, type ProjectionConfig, type ProjectionMode, type RunAs, type RuntimeLimits,
} from './model.js';
import {
  checkpointStream, emittedStreamsStream, EVENT, partitionsStream, projectionStream, REGISTRY_STREAM,
} from './streams.js';
import { validateQuery } from './validate.js';

// The registry of projections. Definitions live in the log ($projections-$all lists names,
// $projections-<name> holds each definition) and are restored on start; transient projections
// live in memory only.
//
// A full disk, one rule: a projection faulted because the store refused its checkpoint for space
// (not by its query) is not recorded as faulted, and runs again from its last checkpoint as soon
// as the store writes again (the store's out-of-space episode ends: any write succeeds, a client's
// or the writer's own probe); a restart before that runs it from the same checkpoint too. Both
// ways it ends as if the disk had never filled, each emitted event written once. A fault of the
// query stays, and is recorded; if the full disk kept it from being recorded, it is recorded once
// writes succeed again.

/** A projection request refused: no such projection, a duplicate name, or a request it cannot take now or at all. */
export class ProjectionError extends DomainError {
  constructor(readonly code: 'PROJECTION_NOT_FOUND' | 'PROJECTION_EXISTS' | 'PROJECTION_REFUSED' | 'PROJECTION_BUSY', message: string,
    /** The projection asked for, where the refusal is about one. */
    readonly projection?: string) {
    super(message);
  }
}

export interface CreateRequest {
  name?: string;
  mode: ProjectionMode;
  query: string;
  enabled: boolean;
  emit: boolean;
  checkpoints: boolean;
  trackEmittedStreams: boolean;
  runAs: RunAs | null;
}

export interface DeleteFlags { deleteCheckpointStream: boolean; deleteEmittedStreams: boolean; deleteStateStream: boolean }

export type RunProjections = 'None' | 'System' | 'All';

export interface ManagerOptions extends RuntimeLimits {
  runProjections: RunProjections;
  startStandardProjections: boolean;
}

export class ProjectionManager {
  private readonly projections = new Map<string, Projection>();
  /** Faults of queries the full disk kept from being recorded, recorded once writes succeed again. */
  private readonly unrecordedFaults = new Map<Projection, string>();
  private unsubscribeSpace: (() => void) | undefined;
  private stopping = false;
  private restarting = false;

  constructor(private readonly store: Store, private readonly log: Logger, private readonly options: ManagerOptions) {}

  /** What the node's options allow every projection it runs (the debugger's runs too). */
  get limits(): RuntimeLimits {
    return this.options;
  }

  /**
   * Restores every persisted projection (creating the system ones on a new database) and starts
   * the enabled ones. With `serving`, they are prepared now and follow the log once it resolves:
   * a node's start hands the promise of its doors being open, so that a backlog to catch up (the
   * system projections behind twenty others' checkpoints) does not hold up the doors and the first
   * requests.
   */
  async start(serving?: Promise<void>): Promise<void> {
    this.stopping = false;
    this.unsubscribeSpace ??= this.store.space.subscribe((e) => this.spaceChanged(e), 'the projection manager');
    if (!this.store.streamInfo(REGISTRY_STREAM)) {
      await this.store.append(REGISTRY_STREAM, ExpectedVersion.noStream, [textEvent(EVENT.initialized, '')]);
    }
    const registered = this.registered();
    // Each sandbox is made concurrently: one after another, each start waited while the projections
    // already running caught up on the same event loop (measured: 20 projections Running 6.7 s
    // after the start of a node with a million events; together, most of that goes). And none
    // follows the log until all are prepared: a projection with much to catch up (the system
    // projections after twenty others wrote their partitions) took the event loop and the cores
    // from the sandboxes still being made.
    const starting: Promise<Projection | undefined>[] = [];
    for (const [name, id] of registered) {
      const found = this.store.readEvent(projectionStream(name), -1);
      if (found.status !== 'ok' || !found.event.event) continue;
      const persisted = JSON.parse(found.event.event.data.toString('utf8')) as PersistedProjection;
      const projection = this.projection(persisted, id);
      this.projections.set(name, projection);
      if (persisted.faultedReason !== undefined) projection.restoreFault(persisted.faultedReason);
      else if (persisted.enabled && this.mayRun(persisted)) starting.push(projection.prepare().then((ready) => (ready ? projection : undefined)));
    }
    const prepared = await Promise.all(starting);
    const begin = () => { for (const ready of prepared) ready?.begin(); };
    if (serving) void serving.then(begin);
    else begin();
    for (const spec of SYSTEM_PROJECTIONS) {
      if (registered.has(spec.name)) continue;
      await this.createPersisted({
        name: spec.name, handlerType: spec.handlerType, mode: 'Continuous', query: spec.config,
        enabled: this.options.startStandardProjections, checkpointsEnabled: true, epoch: -1, version: 0, runAs: null,
        // Links go out with checkpoints: at most every 50 ms keeps them well within 100 ms of their
        // event while a busy log's links are grouped into fewer durable writes (measured: 600 →
        // 800 appends/s with 20 projections running, GET /projections/any p99 2.6 s → 0.33 s).
        config: { ...DEFAULT_CONFIG, emitEnabled: true, checkpointAfterMs: 50 },
      });
    }
  }

  /** Whether --run-projections lets this projection run. */
  private mayRun(p: PersistedProjection): boolean {
    const run = this.options.runProjections;
    return run === 'All' || (run === 'System' && isSystemProjection(p.name));
  }

  private projection(persisted: PersistedProjection, id: number): Projection {
    const projection: Projection = new Projection(persisted, id, this.store, this.log, this.options, (other) => this.isLive(other),
      (p, limits, stored, partitionCache) => (p.handlerType === 'JS'
        ? JsEngine.create(p.query, limits, { emitEnabled: p.config.emitEnabled, mode: p.mode, partitionCache }, stored)
        : Promise.resolve(new NativeEngine(p.handlerType, p.query))),
      (reason, byFullDisk) => (byFullDisk ? this.resumeWhenWritesSucceed() : this.keepFault(projection, reason)));
    return projection;
  }

  /** Records a fault in the definition, so a restart does not replay the projection into it again. */
  private keepFault(p: Projection, reason: string): void {
    if (this.projections.get(p.name) !== p) return;
    this.unrecordedFaults.delete(p);
    this.persist(p, { ...p.persisted, faultedReason: reason }).catch((err: Error) => {
      if (err instanceof OutOfSpaceError) {
        this.unrecordedFaults.set(p, reason);
        this.log.warn({ projection: p.name }, 'the fault of a projection is recorded once writes succeed again: the disk is full');
      } else this.log.warn({ projection: p.name, err: err.message }, 'could not record the fault of a projection');
    });
  }

  /** A projection faulted by the full disk: it resumes when the episode ends, or now if it already has. */
  private resumeWhenWritesSucceed(): void {
    if (this.store.space.failingSince === undefined) setImmediate(() => this.resumeAfterFullDisk());
  }

  private spaceChanged(e: SpaceEvent): void {
    if (e.kind === 'back') this.resumeAfterFullDisk();
  }

  /** The store writes again: projections the full disk faulted run from their last checkpoint, and unrecorded faults are recorded. */
  private resumeAfterFullDisk(): void {
    if (this.stopping) return;
    for (const p of this.projections.values()) {
      if (!p.faultedByFullDisk || !p.persisted.enabled || !this.mayRun(p.persisted)) continue;
      this.log.info({ projection: p.name }, 'projection resumes from its last checkpoint: writes succeed again');
      p.resumeAfterFullDisk().catch((err: Error) => this.log.warn({ projection: p.name, err: err.message }, 'projection could not resume'));
    }
    for (const [p, reason] of this.unrecordedFaults) {
      if (p.status === 'Faulted' && !p.faultedByFullDisk) this.keepFault(p, reason);
      else this.unrecordedFaults.delete(p);
    }
  }

  private async createPersisted(persisted: PersistedProjection): Promise<Projection> {
    let id = -1;
    if (persisted.mode !== 'Transient') {
      const [created] = await this.store.transact([
        { streamId: REGISTRY_STREAM, expected: ExpectedVersion.any, events: [textEvent(EVENT.created, persisted.name)] },
        { streamId: projectionStream(persisted.name), expected: ExpectedVersion.any, events: [definitionEvent(persisted)] },
      ]);
      id = created.firstEventNumber;
    }
    const projection = this.projection(persisted, id);
    this.projections.set(persisted.name, projection);
    if (persisted.enabled && this.mayRun(persisted)) await projection.start();
    return projection;
  }

  /** Stops every projection, writing a last checkpoint. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.unsubscribeSpace?.();
    this.unsubscribeSpace = undefined;
    await Promise.all([...this.projections.values()].map((p) => p.stop(true, p.status === 'Running' ? 'Stopped' : p.status)));
  }

  /**
   * Stops every projection and starts the subsystem again from the definitions in the log, as a
   * node start does (transient projections, held in memory only, are gone). One at a time.
   */
  async restart(): Promise<void> {
    if (this.restarting) {
      throw new ProjectionError('PROJECTION_REFUSED', 'Projection Subsystem cannot be restarted as it is in the wrong state: Restarting');
    }
    this.restarting = true;
    try {
      await this.stop();
      this.projections.clear();
      await this.start();
    } finally {
      this.restarting = false;
    }
  }

  private isLive(id: number): boolean {
    for (const p of this.projections.values()) if (p.id === id) return true;
    return false;
  }

  list(filter: (p: Projection) => boolean = () => true): Projection[] {
    return [...this.projections.values()].filter(filter);
  }

  get(name: string): Projection {
    const p = this.projections.get(name);
    if (!p) throw new ProjectionError('PROJECTION_NOT_FOUND', `Projection ${name} not found`, name);
    return p;
  }

  async create(req: CreateRequest): Promise<Projection> {
    const name = req.name ?? (req.mode === 'Continuous' ? '' : randomUUID());
    if (!name) throw new ProjectionError('PROJECTION_REFUSED', 'Projection name is required');
    if (this.projections.has(name)) throw new ProjectionError('PROJECTION_EXISTS', `Duplicate projection names : ${name}`, name);
    validateQuery(req.query);
    const persisted: PersistedProjection = {
      name, handlerType: 'JS', mode: req.mode, query: req.query, enabled: req.enabled,
      checkpointsEnabled: req.mode === 'Continuous' ? true : req.mode === 'Transient' ? false : req.checkpoints,
      epoch: -1, version: 0, runAs: req.runAs,
      config: { ...DEFAULT_CONFIG, emitEnabled: req.mode !== 'Transient' && req.emit, trackEmittedStreams: req.emit && req.trackEmittedStreams },
    };
    return this.createPersisted(persisted);
  }

  async updateQuery(name: string, query: string, emit: boolean | undefined): Promise<void> {
    const p = this.get(name);
    if (p.persisted.handlerType === 'JS') validateQuery(query);
    else {
      try {
        new NativeEngine(p.persisted.handlerType, query).dispose(); // checks the configuration
      } catch (err) {
        throw new ProjectionError('PROJECTION_REFUSED', (err as Error).message);
      }
    }
    const wasRunning = p.status === 'Running' || p.persisted.enabled;
    await p.stop(true);
    const completed = p.status === 'Completed';
    const next: PersistedProjection = {
      ...p.persisted, query, version: p.persisted.version + 1, faultedReason: undefined,
      config: { ...p.persisted.config, ...(emit === undefined ? {} : { emitEnabled: emit }) },
    };
    if (completed) next.epoch = next.version; // a completed query is reset with its new code
    await this.persist(p, next);
    if (completed) p.clear();
    if (wasRunning && this.mayRun(next)) await p.start();
  }

  async updateConfig(name: string, config: ProjectionConfig): Promise<void> {
    const p = this.get(name);
    if (p.status !== 'Stopped' && p.status !== 'Faulted' && p.status !== 'Aborted') {
      throw new ProjectionError('PROJECTION_REFUSED', "Cannot update the config of a projection that hasn't been stopped or faulted.");
    }
    await this.persist(p, { ...p.persisted, config: { ...config, trackEmittedStreams: config.emitEnabled && config.trackEmittedStreams } });
  }

  async enable(name: string, runAs?: RunAs): Promise<void> {
    const p = this.get(name);
    if (p.status === 'Running') return;
    await this.persist(p, { ...p.persisted, enabled: true, faultedReason: undefined, ...(runAs ? { runAs } : {}) });
    if (this.mayRun(p.persisted)) await p.start();
  }

  async disable(name: string): Promise<void> {
    const p = this.get(name);
    await p.stop(true);
    await this.persist(p, { ...p.persisted, enabled: false });
  }

  async abort(name: string): Promise<void> {
    const p = this.get(name);
    await p.stop(false);
    await this.persist(p, { ...p.persisted, enabled: false });
  }

  /** Rebuilds from the beginning: a new epoch, so old checkpoints and results no longer count. */
  async reset(name: string): Promise<void> {
    const p = this.get(name);
    const wasEnabled = p.persisted.enabled;
    await p.stop(false);
    const version = p.persisted.version + 1;
    await this.persist(p, { ...p.persisted, version, epoch: version, faultedReason: undefined });
    p.clear();
    if (wasEnabled && this.mayRun(p.persisted)) await p.start();
  }

  async delete(name: string, flags: DeleteFlags): Promise<void> {
    const p = this.get(name);
    if (isSystemProjection(name)) throw new ProjectionError('PROJECTION_REFUSED', "We currently don't allow for the deletion of System Projections.");
    if (p.persisted.mode !== 'Transient' && p.status !== 'Stopped' && p.status !== 'Faulted' && p.status !== 'Aborted' && p.status !== 'Completed') {
      throw new ProjectionError('PROJECTION_REFUSED', "Cannot delete a projection that hasn't been stopped or faulted.");
    }
    await p.stop(false, p.status);
    this.projections.delete(name);
    if (p.persisted.mode === 'Transient') return;
    if (flags.deleteEmittedStreams && p.persisted.config.trackEmittedStreams) {
      for (const stream of this.emittedStreams(name)) await this.softDelete(stream);
      await this.softDelete(emittedStreamsStream(name));
    }
    if (flags.deleteCheckpointStream) {
      await this.softDelete(checkpointStream(name));
      await this.softDelete(partitionsStream(name));
    }
    await this.store.append(REGISTRY_STREAM, ExpectedVersion.any, [textEvent(EVENT.deleted, name)]);
    await this.softDelete(projectionStream(name)); // the name can be reused at once
  }

  private async softDelete(streamId: string): Promise<void> {
    const info = this.store.streamInfo(streamId);
    if (!info || info.tombstoned || info.lastEventNumber < 0) return;
    await this.store.deleteStream(streamId, ExpectedVersion.any, false);
  }

  private emittedStreams(name: string): string[] {
    const streams = new Set<string>();
    for (const record of this.store.streamRecords(emittedStreamsStream(name))) streams.add(record.data.toString('utf8'));
    return [...streams];
  }

  private async persist(p: Projection, next: PersistedProjection): Promise<void> {
    if (next.mode !== 'Transient') {
      await this.store.append(projectionStream(next.name), ExpectedVersion.any, [definitionEvent(next)]);
    }
    p.persisted = next;
  }

  /** Names in the registry that were created and not deleted since, with their ids. */
  private registered(): Map<string, number> {
    const names = new Map<string, number>();
    for (const record of this.store.streamRecords(REGISTRY_STREAM)) {
      const name = record.data.toString('utf8');
      if (record.eventType === EVENT.created) names.set(name, record.eventNumber);
      else if (record.eventType === EVENT.deleted) names.delete(name);
    }
    return names;
  }
}

function textEvent(eventType: string, text: string) {
  return proposedEvent({ eventType, data: text, isJson: false });
}

function definitionEvent(p: PersistedProjection) {
  return jsonEvent(EVENT.updated, p);
}
