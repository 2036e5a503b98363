import {
  ExpectedVersion, jsonEvent, SCAVENGE_POINT_EVENT_TYPE, SCAVENGE_POINTS_STREAM, type Store,
} from '../store/index.js';
import { accumulate } from './accumulate.js';
import { calculate } from './calculate.js';
import { lastChunk, type RunContext } from './context.js';
import { executeChunks, mergeChunks, type ExecutionTotals } from './execute.js';
import type { Checkpoint, ScavengePoint, ScavengeState, Stage } from './state.js';
import type { ScavengeRequest } from './types.js';
import type { LogAppend } from './history.js';

// One run: Beginning (which scavenge point), then Accumulation → Calculation → Chunk execution →
// Chunk merging → Index execution → Cleaning → Done, each checkpointed in the state database so
// that a stopped or killed run resumes where it was.

const STAGES: Stage[] = ['Accumulating', 'Calculating', 'ExecutingChunks', 'MergingChunks', 'ExecutingIndex', 'Cleaning', 'Done'];

/** The latest scavenge point in the log, if any. */
export function latestPoint(store: Store): ScavengePoint | undefined {
  const found = store.readEvent(SCAVENGE_POINTS_STREAM, -1);
  if (found.status !== 'ok' || !found.event.event) return undefined;
  const record = found.event.event;
  let threshold = 0;
  try {
    const body = JSON.parse(record.data.toString('utf8')) as { threshold?: unknown };
    if (typeof body.threshold === 'number' && Number.isInteger(body.threshold)) threshold = body.threshold;
  } catch { /* a point without a body has threshold 0 */ }
  return { position: record.position, eventNumber: record.eventNumber, effectiveNow: record.created, threshold };
}

export type Beginning =
  | { kind: 'resume'; checkpoint: Checkpoint }
  | { kind: 'start'; point: ScavengePoint }
  | { kind: 'nothing' };

/** Decides what this run does: resume the unfinished one, use an unreached point, write a new one, or nothing (syncOnly). */
export async function begin(store: Store, append: LogAppend, state: ScavengeState, request: ScavengeRequest,
  log: RunContext['log']): Promise<Beginning> {
  const checkpoint = state.checkpoint();
  if (checkpoint && checkpoint.stage !== 'Done') {
    log.info(`SCAVENGING: Continuing a scavenge from ${checkpoint.stage} (scavenge point ${checkpoint.point.eventNumber})`);
    return { kind: 'resume', checkpoint };
  }
  const latest = latestPoint(store);
  const done = checkpoint?.point.eventNumber ?? -1;
  if (latest && latest.eventNumber > done) {
    log.info(`SCAVENGING: Using existing scavenge point ${latest.eventNumber}`);
    return { kind: 'start', point: latest };
  }
  if (request.syncOnly) {
    log.info('SCAVENGING: No existing scavenge point to sync with, nothing to do.');
    return { kind: 'nothing' };
  }
  const number = (latest?.eventNumber ?? -1) + 1;
  log.info(`SCAVENGING: Creating the next scavenge point: ${number}`);
  try {
    await append(SCAVENGE_POINTS_STREAM, latest ? ExpectedVersion.exact(latest.eventNumber) : ExpectedVersion.noStream, [
      jsonEvent(SCAVENGE_POINT_EVENT_TYPE, request.threshold !== 0 ? { threshold: request.threshold } : {}),
    ]);
  } catch (err) {
    // In a cluster another node's scavenge, started at the same time, may have written the next
    // point first (the leader then refuses this one's expected version): it is as good as ours,
    // once it is replicated here. Any other failure is the run's.
    const theirs = await pointAfter(store, latest?.eventNumber ?? -1, OTHER_POINT_WAIT_MS);
    if (!theirs) throw err;
    log.info(`SCAVENGING: Another node created scavenge point ${theirs.eventNumber} first; using it`);
    return { kind: 'start', point: theirs };
  }
  const point = latestPoint(store);
  if (!point || point.eventNumber !== number) throw new Error(`Unable to read back the new scavenge point ${number}`);
  return { kind: 'start', point };
}

/** How long a run whose new scavenge point was refused waits for another node's to reach this one. */
const OTHER_POINT_WAIT_MS = 5_000;

/** The latest scavenge point once one after `eventNumber` is in this node's log (undefined: none came within `timeoutMs`). */
async function pointAfter(store: Store, eventNumber: number, timeoutMs: number): Promise<ScavengePoint | undefined> {
  const newer = () => {
    const point = latestPoint(store);
    return point && point.eventNumber > eventNumber ? point : undefined;
  };
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const point = newer();
    const left = deadline - performance.now();
    if (point || left <= 0) return point;
    // (a point replicated but not yet visible here shows at a later commit)
    await store.bus.waitFor(() => true, left);
  }
}

/** Runs the phases from `checkpoint`'s stage on. */
export async function runPhases(ctx: RunContext, checkpoint: Checkpoint | undefined, totals: ExecutionTotals): Promise<void> {
  const from = checkpoint ? STAGES.indexOf(checkpoint.stage) : 0;
  const at = (stage: Stage) => STAGES.indexOf(stage) >= from;
  const same = (stage: Stage) => checkpoint?.stage === stage;
  const save = (stage: Stage) => ctx.state.commit({ checkpoint: { scavengeId: ctx.scavengeId, point: ctx.point, stage } });

  if (at('Accumulating')) {
    await phase(ctx, 'Accumulation', () => accumulate(ctx));
    save('Calculating');
  }
  if (at('Calculating')) {
    await phase(ctx, 'Calculation', () => calculate(ctx, same('Calculating') ? checkpoint?.doneStream : undefined));
    save('ExecutingChunks');
  }
  if (at('ExecutingChunks')) {
    // A resumed run goes on after its last chunk done, or from the start chunk this run asks for if that is later.
    const resumeAt = same('ExecutingChunks') && checkpoint?.doneChunk !== undefined ? checkpoint.doneChunk + 1 : 0;
    const fromChunk = Math.max(resumeAt, ctx.startFromChunk);
    await phase(ctx, 'ChunkExecution', () => executeChunks(ctx, fromChunk, totals));
    save('MergingChunks');
  }
  if (at('MergingChunks')) {
    if (ctx.disableMerging) ctx.log.info('SCAVENGING: Chunk merging is disabled (DisableScavengeMerging)');
    else await phase(ctx, 'ChunkMerging', () => mergeChunks(ctx));
    save('ExecutingIndex');
  }
  if (at('ExecutingIndex')) {
    await phase(ctx, 'IndexExecution', async () => {
      ctx.log.info('SCAVENGING: Index execution has nothing left to do: the index and event-id entries of every removed record were removed with it in chunk execution');
    });
    save('Cleaning');
  }
  if (at('Cleaning')) {
    await phase(ctx, 'Cleaning', () => clean(ctx));
  }
  save('Done');
}

const PHASE_NAMES: Record<string, string> = {
  Accumulation: 'Accumulation', Calculation: 'Calculation', ChunkExecution: 'Chunk execution', ChunkMerging: 'Chunk merging',
  IndexExecution: 'Index execution', Cleaning: 'Cleaning',
};

async function phase(ctx: RunContext, name: 'Accumulation' | 'Calculation' | 'ChunkExecution' | 'ChunkMerging' | 'IndexExecution' | 'Cleaning',
  work: () => Promise<void>): Promise<void> {
  ctx.progress.phase = name;
  const started = performance.now();
  ctx.log.info(`SCAVENGING: Scavenge ${PHASE_NAMES[name]} Phase Started.`);
  await work();
  ctx.log.info(`SCAVENGING: Scavenge ${PHASE_NAMES[name]} Phase Completed. Took ${Math.round(performance.now() - started)} ms.`);
}

/** Forgets streams with nothing left to remove, once every weighed chunk was executed. */
async function clean(ctx: RunContext): Promise<void> {
  const weights = ctx.state.weights(0, lastChunk(ctx));
  if ([...weights.values()].some((w) => w > 0)) {
    ctx.log.info('SCAVENGING: Skipping cleanup because some chunks have not been executed');
    return;
  }
  let after: string | undefined;
  let forgotten = 0;
  for (;;) {
    const { names, last } = ctx.state.spentStreams(after, 10_000);
    if (last === undefined) break;
    if (names.length > 0) ctx.state.commit({ removedStreams: names });
    forgotten += names.length;
    after = last;
    ctx.checkStop();
    // like every other phase: a throttled run rests here too (a kill or a stop can land mid-way)
    await ctx.throttle.rest();
  }
  ctx.log.info(`SCAVENGING: Cleaning forgot ${forgotten} streams with nothing left to remove`);
}
