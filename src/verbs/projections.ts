import { ALL_STREAM, type Principal } from '../auth/index.js';
import type { Store } from '../store/index.js';
import {
  DEFAULT_DEBUG_EVENTS, MAX_DEBUG_EVENTS, parseReadEventsRequest, ProjectionDebugger, ProjectionError, readEvents,
  type CreateRequest, type DebugEvents, type DebugReport, type DeleteFlags, type Projection, type ProjectionConfig,
  type ProjectionManager, type ProjectionMode, type ReadEventsResult, type RunAs, type SourceDefinition,
} from '../projections/index.js';
import { StreamDeletedError } from '../store/index.js';
import { InvalidRequestError } from './errors.js';
import { demand, type Right } from './rights.js';
import type { StreamVerbs } from './streams.js';

// The projection verbs: what a client can do to projections, whichever door it comes through
// (the HTTP projections API, gRPC's Projections service). Each checks who may (anyone
// authenticated reads; continuous and one-time projections take $ops to create or change, a
// transient one is anyone's; config, delete and a subsystem restart take $ops) and asks the
// manager (src/projections), which owns what a projection may become. The figures a projection
// reports are gathered here once, for both doors' answers. Reading a query's events (read-events)
// and debugging a query take any authenticated user, and read access to every stream they read,
// checked as a stream read checks it: nothing can be read through them that a read of the streams
// would refuse.

/** Which projections a listing shows. */
export type ProjectionListing = 'any' | 'all-non-transient' | ProjectionMode;

/** What a create asks for; the projection runs as its creator. */
export type ProjectionCreate = Omit<CreateRequest, 'runAs'>;

/** A projection's figures as both doors report them (projections.md §16). */
export interface ProjectionFigures {
  coreProcessingTime: number;
  version: number;
  epoch: number;
  effectiveName: string;
  writesInProgress: number;
  readsInProgress: number;
  partitionsCached: number;
  /** `Running`, `Stopped`, `Faulted`...; a stopped or faulted projection that is enabled adds ` (Enabled)`. */
  status: string;
  stateReason: string;
  name: string;
  mode: ProjectionMode;
  position: string;
  progress: number;
  lastCheckpoint: string;
  eventsProcessedAfterRestart: number;
  /** Not in the established servers: events a system projection could not index, counted since the start. */
  eventsSkipped: number;
  checkpointStatus: string;
  bufferedEvents: number;
  writePendingEventsBeforeCheckpoint: number;
  writePendingEventsAfterCheckpoint: number;
}

/** What a debug run asks for: a query, or a projection (its query and settings), and the events to run it over. */
export interface DebugRequest {
  /** The source to run; with `name`, instead of that projection's own query (in its settings). */
  query?: string;
  name?: string;
  /** For a new query: whether it may emit (as `emit` at creation; never for a transient one). Default false. */
  emit?: boolean;
  /** For a new query: the mode it would run in (its results: each change, or at the end). Default Continuous. */
  mode?: ProjectionMode;
  /** Default: the first DEFAULT_DEBUG_EVENTS events of the query's source. */
  events?: DebugEvents;
}

/** Who may create a projection of a mode. */
export function createRight(mode: ProjectionMode): Right {
  return mode === 'Transient' ? 'authenticated' : 'ops';
}

const logPosition = (position: number) => `C:${position}/P:${position}`;
const runAs = (who: Principal): RunAs => ({ name: who.name, roles: [...who.roles] });

export class ProjectionVerbs {
  /** Made at the first debug run (verbs made for the streams alone have no projection manager). */
  private debugRuns: ProjectionDebugger | undefined;

  constructor(private readonly manager: ProjectionManager, private readonly store: Store, private readonly streams: StreamVerbs) {}

  list(who: Principal, listing: ProjectionListing): Projection[] {
    demand(who, 'authenticated', 'projections');
    if (listing === 'any') return this.manager.list();
    if (listing === 'all-non-transient') return this.manager.list((p) => p.persisted.mode !== 'Transient');
    return this.manager.list((p) => p.persisted.mode === listing);
  }

  /** One projection by name (PROJECTION_NOT_FOUND when there is none). */
  find(who: Principal, name: string): Projection {
    demand(who, 'authenticated', 'projections');
    return this.manager.get(name);
  }

  figures(p: Projection): ProjectionFigures {
    const s = p.snapshot();
    let status: string = s.status;
    if ((s.status === 'Stopped' || s.status === 'Faulted') && p.persisted.enabled) status += ' (Enabled)';
    return {
      coreProcessingTime: Math.round(s.coreProcessingTimeMs), version: p.persisted.version, epoch: p.persisted.epoch,
      effectiveName: p.name, writesInProgress: s.writesInProgress, readsInProgress: s.readsInProgress, partitionsCached: s.partitionsCached,
      status, stateReason: s.stateReason, name: p.name, mode: p.persisted.mode, position: logPosition(s.position), progress: s.progress,
      lastCheckpoint: logPosition(s.lastCheckpointPosition), eventsProcessedAfterRestart: s.eventsProcessedAfterRestart,
      eventsSkipped: s.eventsSkipped, checkpointStatus: s.writesInProgress > 0 ? `Writing (${s.writeRecordsInFlight})` : '',
      bufferedEvents: s.bufferedEvents, writePendingEventsBeforeCheckpoint: s.writePendingEventsBeforeCheckpoint,
      writePendingEventsAfterCheckpoint: s.writePendingEventsAfterCheckpoint,
    };
  }

  /** Raw state and result JSON of a partition ('' when none) and the position they are at. */
  async read(who: Principal, name: string, partition: string): Promise<{ state: string; result: string; position: number }> {
    const p = this.find(who, name);
    const { state, result } = await p.read(partition);
    return { state, result, position: p.snapshot().position };
  }

  create(who: Principal, request: ProjectionCreate): Promise<Projection> {
    demand(who, createRight(request.mode), 'projections');
    return this.manager.create({ ...request, runAs: runAs(who) });
  }

  /** A new query (and, when given, whether it may emit); a running projection restarts with it. */
  async updateQuery(who: Principal, name: string, query: string, emit: boolean | undefined): Promise<void> {
    this.demandChange(who, name);
    await this.manager.updateQuery(name, query, emit);
  }

  config(who: Principal, name: string): ProjectionConfig {
    demand(who, 'ops', 'projections');
    return this.manager.get(name).persisted.config;
  }

  async updateConfig(who: Principal, name: string, config: (current: ProjectionConfig) => ProjectionConfig): Promise<ProjectionConfig> {
    demand(who, 'ops', 'projections');
    const p = this.manager.get(name);
    await this.manager.updateConfig(name, config(p.persisted.config));
    return p.persisted.config;
  }

  /** Runs the projection; `runAsCaller`: from now on as the caller. */
  async enable(who: Principal, name: string, runAsCaller = false): Promise<void> {
    this.demandChange(who, name);
    await this.manager.enable(name, runAsCaller ? runAs(who) : undefined);
  }

  /** Stops the projection: with `writeCheckpoint` it saves its progress first (Stopped), without it aborts (Aborted). */
  async disable(who: Principal, name: string, writeCheckpoint: boolean): Promise<void> {
    this.demandChange(who, name);
    await (writeCheckpoint ? this.manager.disable(name) : this.manager.abort(name));
  }

  async reset(who: Principal, name: string): Promise<void> {
    this.demandChange(who, name);
    await this.manager.reset(name);
  }

  async delete(who: Principal, name: string, flags: DeleteFlags): Promise<void> {
    demand(who, 'ops', 'projections');
    await this.manager.delete(name, flags);
  }

  /** Stops every projection and starts them again from their definitions in the log. */
  async restartSubsystem(who: Principal): Promise<void> {
    demand(who, 'ops', 'projections');
    await this.manager.restart();
  }

  /** The events a source definition reads from a position (POST /projections/read-events; its body, checked there). */
  readEvents(who: Principal, body: unknown): ReadEventsResult {
    demand(who, 'authenticated', 'projections');
    const request = parseReadEventsRequest(body);
    this.authorizeSource(who, request.definition);
    return readEvents(this.store, request);
  }

  /**
   * Runs a query over a few events and reports each step (src/projections/debugger.ts); writes
   * nothing. The events are read as `who`: the query's sources (first N), or the stream (a range).
   */
  async debug(who: Principal, request: DebugRequest): Promise<DebugReport> {
    demand(who, 'authenticated', 'projections');
    const events = request.events ?? { first: DEFAULT_DEBUG_EVENTS };
    const count = 'first' in events ? events.first : events.count;
    if (!Number.isInteger(count) || count < 1 || count > MAX_DEBUG_EVENTS) {
      throw new InvalidRequestError(`A debug run takes 1 to ${MAX_DEBUG_EVENTS} events.`);
    }
    if ('stream' in events && (!Number.isInteger(events.from) || events.from < 0)) throw new InvalidRequestError('from must be an event number of at least 0.');
    const p = request.name === undefined ? undefined : this.manager.get(request.name);
    if (p && p.persisted.handlerType !== 'JS') throw new ProjectionError('PROJECTION_REFUSED', `${p.name} is a system projection: only JavaScript queries can be debugged.`, p.name);
    const query = request.query ?? p?.persisted.query;
    if (query === undefined) throw new InvalidRequestError('Give the query to debug, or the name of a projection.');
    const mode = p?.persisted.mode ?? request.mode ?? 'Continuous';
    this.debugRuns ??= new ProjectionDebugger(this.store, this.manager.limits);
    const run = await this.debugRuns.prepare({
      query, name: p?.name ?? 'debug', mode,
      emitEnabled: p ? p.persisted.config.emitEnabled : mode !== 'Transient' && request.emit === true,
      executionTimeoutMs: p?.persisted.config.projectionExecutionTimeout ?? null,
    });
    try {
      if ('first' in events) {
        this.authorizeSource(who, run.definition);
        return await run.run(await run.sourceEvents(events.first));
      }
      const page = this.streams.readStream(who, events.stream, events.from, events.count, 'forward', false);
      if (page.status === 'noStream') throw new ProjectionError('PROJECTION_NOT_FOUND', `Stream ${events.stream} not found.`);
      if (page.status === 'deleted') throw new StreamDeletedError(events.stream);
      return await run.run(run.streamEvents(events.stream, page.events.map((e) => e.event!)));
    } finally {
      run.dispose();
    }
  }

  /** Read access to every stream a source definition reads ($all for fromAll, `$ce-{c}` for a category). */
  private authorizeSource(who: Principal, definition: SourceDefinition): void {
    if (definition.allStreams) this.streams.authorize(who, 'r', ALL_STREAM);
    for (const stream of definition.streams) this.streams.authorize(who, 'r', stream);
    for (const category of definition.categories) this.streams.authorize(who, 'r', `$ce-${category}`);
  }

  /** Changing a projection takes $ops, unless it is transient (anyone's). */
  private demandChange(who: Principal, name: string): void {
    const p = this.find(who, name);
    if (p.persisted.mode !== 'Transient') demand(who, 'ops', 'projections');
  }
}
