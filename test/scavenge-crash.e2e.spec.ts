import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { eventually } from './support/node.js';
import { killAndRemove, MAIN, spawnNode, type NodeProcess } from './support/process.js';
import {
  CHUNK_SIZE, ZERO_GUID, buildDataset, expectLogBetween, expectLogIs, historyOf, last, pointsIn, readAll, removableBy,
  SLOW, startScavenge, streamEvents, waitForEnd, waitForPhase,
} from './support/scavenge.js';

// kill -9 of a node process during a scavenge, twice: while it accumulates, then (the resumed
// run) between chunks of its execution. After each restart the killed run is recorded
// Interrupted ("The node was restarted.", totals from its chunk events) in its history and
// linked from $scavenges; the log is between the start and the model; scavenging again resumes
// with the first run's point and ends exactly where one run ends.

const TIME_TAKEN = /^\d{2}:\d{2}:\d{2}\.\d{7}$/;

describe('kill -9 in the middle of a scavenge', () => {
  const dirs: string[] = [];
  let proc: NodeProcess | undefined;
  afterAll(() => killAndRemove(proc, dirs));

  it('killed runs are recorded Interrupted; scavenging again ends where one run ends', async () => {
    expect(existsSync(MAIN), 'build first: npm run build').toBe(true);
    const dir = mkdtempSync(join(tmpdir(), 'svc-scavenge-kill-'));
    dirs.push(dir);
    const args = ['--db', dir, '--chunk-size', String(CHUNK_SIZE)];
    proc = await spawnNode(args);
    const first = { url: proc.url };
    await buildDataset(first);
    const before = await readAll(first);

    // 1: killed while it accumulates (at 1% it rests ~100 times its work)
    const early = await startScavenge(first, { throttlePercent: 1 });
    await waitForPhase(first, early, 'Accumulation');
    proc.child.kill('SIGKILL');
    await proc.exited;
    proc = await spawnNode(args);
    const second = { url: proc.url };
    await eventually(async () => {
      expect((await historyOf(second, early)).at(-1)?.data).toMatchObject({ scavengeId: early, result: 'Interrupted', error: 'The node was restarted.' });
    }, 15_000);

    // 2: the resumed run killed between chunks of its execution
    const killed = await startScavenge(second, { throttlePercent: SLOW });
    await waitForPhase(second, killed, 'ChunkExecution', 2, 30_000);
    proc.child.kill('SIGKILL');
    await proc.exited;

    proc = await spawnNode(args);
    const node = { url: proc.url };
    const done = await eventually(async () => {
      const history = await historyOf(node, killed);
      expect(history.at(-1)?.eventType).toBe('$scavengeCompleted');
      return history.at(-1)!;
    }, 15_000);
    expect(done.data).toMatchObject({ scavengeId: killed, result: 'Interrupted', error: 'The node was restarted.' });
    expect(done.data.timeTaken).toMatch(TIME_TAKEN);
    // its totals are those of the chunk events the killed run wrote
    const chunks = (await historyOf(node, killed)).filter((e) => e.eventType === '$scavengeChunksCompleted').map((e) => e.data);
    expect(chunks.length).toBeGreaterThan(0);
    expect(done.data).toMatchObject({
      eventsRemoved: chunks.reduce((n, c) => n + c.eventsRemoved, 0),
      eventsExamined: chunks.reduce((n, c) => n + c.eventsExamined, 0),
      spaceSaved: chunks.reduce((n, c) => n + c.spaceSaved, 0),
      maxChunkScavenged: Math.max(...chunks.map((c) => c.chunkEndNumber)),
    });
    const links = (await streamEvents(node, '$scavenges')).map((e) => e.data).filter((x) => String(x).endsWith(`@$scavenges-${killed}`));
    expect(links).toEqual([`0@$scavenges-${killed}`, `${done.eventNumber}@$scavenges-${killed}`]);
    expect(await last(node)).toEqual({ scavengeId: ZERO_GUID, scavengeLink: '', scavengeResult: 'Unknown' });

    const mid = await readAll(node);
    const points = pointsIn(mid);
    expect(points).toHaveLength(1);
    const removed = removableBy(before, points[0]);
    const gone = expectLogBetween(mid, before, removed);
    expect(gone, 'removed before the kill').toBeGreaterThan(0);
    expect(gone, 'removed before the kill').toBeLessThan(removed.length);

    const again = await startScavenge(node);
    expect(await waitForEnd(node, again)).toBe('Success');
    const after = await readAll(node);
    expect(pointsIn(after)).toEqual(points);
    expectLogIs(after, before, removed);
  }, 120_000); // two slowed-down runs and three node starts, on a machine that may be loaded
});
