import { cpSync, existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { eventually } from './support/node.js';
import { killAndRemove, killOnOutput, MAIN, spawnNode, type NodeProcess } from './support/process.js';
import {
  CHUNK_SIZE, SCAVENGE_STREAM, buildDataset, datasetStreams, pointsIn, readAll, readStreams, scavengeOk, startScavenge, waitForEnd,
  waitForPhase,
  type LogRecord, type Target,
} from './support/scavenge.js';

// kill -9 in every phase of one scavenge (issue 14): the run is killed after accumulating its
// first chunk, then (each time resumed by POST /admin/scavenge after a restart) its calculation,
// chunk execution, chunk merging and cleaning; the node says which stage each resumed run
// continues from. The end state (every stream read, $all) equals that of one uninterrupted
// scavenge of a copy of the same data directory. (scavenge-crash.e2e.spec.ts kills mid-way
// through accumulation and between executed chunks, and checks the history of killed runs.)

/** Each phase as its start is logged, and the stage a run killed in it continues from. */
const PHASES = [
  ['Accumulation', 'Accumulating'], ['Calculation', 'Calculating'], ['Chunk execution', 'ExecutingChunks'],
  ['Chunk merging', 'MergingChunks'], ['Cleaning', 'Cleaning'],
] as const;

/**
 * 1%: the run rests ~99 times its work, at least 100 ms at a time, at each step of every phase,
 * so a kill on a phase's first line lands before that phase's first rest ends even when only a
 * millisecond of work precedes that rest (cleaning: at 5% such a phase ran to its end first).
 */
const CRAWL = 1;

/** How long a phase may take to begin: a loaded 2-core machine crawled through chunk execution for over 30 s. */
const PHASE_WAIT_MS = 150_000;

/** The log without the scavenges' own streams (their ids, times and the killed runs' records differ). */
function withoutScavengeStreams(records: LogRecord[]): LogRecord[] {
  return records.filter((r) => !SCAVENGE_STREAM.test(r.streamId));
}

describe('kill -9 in each phase of a scavenge', () => {
  const dirs: string[] = [];
  let proc: NodeProcess | undefined;
  afterAll(() => killAndRemove(proc, dirs));

  it('resumed after a kill in each phase, the scavenge ends where an uninterrupted one ends', async () => {
    expect(existsSync(MAIN), 'build first: npm run build').toBe(true);
    const dir = mkdtempSync(join(tmpdir(), 'svc-scavenge-phases-'));
    const copy = `${dir}-uninterrupted`;
    dirs.push(dir, copy);
    const start = async (on: string) => {
      proc = await spawnNode(['--db', on, '--chunk-size', String(CHUNK_SIZE)]);
      return { url: proc.url } as Target;
    };
    // no $maxAge stream: each run's scavenge point has its own time, which would decide what $maxAge removes
    const dataset = await buildDataset(await start(dir), { maxAge: false });
    const streams = datasetStreams(dataset);
    proc!.child.kill('SIGTERM');
    await proc!.exited;
    cpSync(dir, copy, { recursive: true });

    const reference = await start(copy);
    await scavengeOk(reference);
    const referenceAll = await readAll(reference);
    const expected = { all: withoutScavengeStreams(referenceAll), streams: await readStreams(reference, streams), points: pointsIn(referenceAll) };
    expect(expected.points).toHaveLength(1);
    await killAndRemove(proc, []);

    let node = await start(dir);
    let id = await startScavenge(node, { throttlePercent: CRAWL });
    // after its first chunk: killed before that, a run leaves no checkpoint, and the next one
    // starts afresh from the same point (as the contract says; it reads the same chunks)
    await waitForPhase(node, id, 'Accumulation', 1);
    let killed: Promise<void> = killAndRemove(proc, []);
    for (const [i, [, stage]] of PHASES.entries()) {
      await killed;
      node = await start(dir);
      const next = PHASES[i + 1];
      // watching before the run resumes: the kill comes as the next phase logs its start
      if (next) killed = killOnOutput(proc!, `Scavenge ${next[0]} Phase Started.`, PHASE_WAIT_MS);
      // the last resumed run at full speed: nothing left to kill
      id = await startScavenge(node, { throttlePercent: next ? CRAWL : 100 });
      const resumed = proc!;
      await eventually(async () => expect(resumed.output()).toContain(`Continuing a scavenge from ${stage} `));
    }
    expect(await waitForEnd(node, id)).toBe('Success');

    const after = await readAll(node);
    expect(pointsIn(after).map((p) => p.position)).toEqual(expected.points.map((p) => p.position));
    expect(withoutScavengeStreams(after)).toEqual(expected.all);
    expect(await readStreams(node, streams)).toEqual(expected.streams);
  }, 600_000);
});
