import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newEvent, startTestNode, type TestNode } from './support/node.js';
import {
  CHUNK_SIZE, appendOk, buildDataset, current, expectLogBetween, expectLogIs, historyOf, last, pointsIn, readAll, removableBy,
  request, startScavenge, waitForEnd, waitForPhase, type Dataset, type LogRecord,
} from './support/scavenge.js';

// Stop and resume: a scavenge slowed down (throttlePercent=1) is stopped during chunk execution
// (DELETE /admin/scavenge/{id} answers once it has stopped, result Stopped); the log is then
// between the start and the model; the next POST resumes with the stopped run's point and
// threshold (its own threshold and syncOnly are ignored) and ends exactly where one run ends.
// Then syncOnly with a point no scavenge has reached (written to $scavengePoints directly):
// it scavenges up to that point and writes no point of its own.

let t: TestNode;
beforeAll(async () => { t = await startTestNode({ chunkSize: CHUNK_SIZE, memDb: false }); });
afterAll(async () => { await t?.dispose(); });

describe('stop, then resume', () => {
  let d: Dataset;
  let before: LogRecord[];

  it('a run stopped during chunk execution resumes with its own point and threshold and ends where one run ends', async () => {
    d = await buildDataset(t);
    before = await readAll(t);
    const first = await startScavenge(t, { throttlePercent: 1 });
    const progress = await waitForPhase(t, first, 'ChunkExecution', 30_000);
    expect(Object.keys(progress).sort()).toEqual(['chunksDone', 'chunksTotal', 'eventsExamined', 'eventsRemoved', 'phase', 'scavengePoint', 'spaceSaved']);
    expect(progress.scavengePoint).toBe(0);
    const running = await current(t);
    expect(running.scavengeId).toBe(first);
    expect(running.scavengeLink).toBe(`/admin/scavenge/${first}`);
    expect(await last(t)).toEqual({ scavengeId: first, scavengeLink: `/admin/scavenge/${first}`, scavengeResult: 'InProgress' });

    const stop = await request(t, `/admin/scavenge/${first}`, { method: 'DELETE' });
    expect(stop.status).toBe(200);
    expect(await stop.text()).toBe(first);
    expect(await current(t)).toEqual({ scavengeId: '', scavengeLink: '' });
    expect(await last(t)).toEqual({ scavengeId: first, scavengeLink: `/admin/scavenge/${first}`, scavengeResult: 'Stopped' });
    const stopped = (await historyOf(t, first)).at(-1)!;
    expect(stopped.eventType).toBe('$scavengeCompleted');
    expect(stopped.data).toMatchObject({ scavengeId: first, result: 'Stopped' });
    expect((await request(t, `/admin/scavenge/${first}`, { method: 'DELETE' })).status).toBe(404);

    const mid = await readAll(t);
    const points = pointsIn(mid);
    expect(points).toHaveLength(1);
    const removed = removableBy(before, points[0]);
    const done = expectLogBetween(mid, before, removed);
    expect(done, 'removed before the stop').toBeLessThan(removed.length);

    // the resuming request's threshold and syncOnly are ignored: the stopped run's point (threshold 0) rules
    const second = await startScavenge(t, { threshold: 1_000_000, syncOnly: true });
    expect(second).not.toBe(first);
    expect(await waitForEnd(t, second)).toBe('Success');
    const after = await readAll(t);
    expect(pointsIn(after)).toEqual(points);
    expectLogIs(after, before, removed);
    const history = await historyOf(t, second);
    expect(history.at(-1)?.data).toMatchObject({ scavengeId: second, result: 'Success' });
  });

  it('syncOnly with a scavenge point no run has reached scavenges up to it and writes no point', async () => {
    // more to remove: 5 more events in the $maxCount 3 stream, then a point written directly
    await appendOk(t, d.maxCount, Array.from({ length: 5 }, (_, i) => newEvent('Counted', { i: 20 + i })));
    await appendOk(t, '$scavengePoints', [newEvent('$scavengePoint', {})], { 'SVC-ExpectedVersion': '0' });
    const now = await readAll(t);
    const points = pointsIn(now);
    expect(points.map((p) => p.eventNumber)).toEqual([0, 1]);

    const sync = await startScavenge(t, { syncOnly: true });
    expect(await waitForEnd(t, sync)).toBe('Success');
    const then = await readAll(t);
    expect(pointsIn(then)).toEqual(points);
    const removed = removableBy(now, points[1]);
    expect(removed.filter((r) => r.streamId === d.maxCount).map((r) => r.eventNumber)).toEqual([17, 18, 19, 20, 21]);
    expectLogIs(then, now, removed);

    // nothing unreached is left: syncOnly has nothing to do
    const idle = await startScavenge(t, { syncOnly: true });
    expect(await waitForEnd(t, idle)).toBe('Success');
    const end = await readAll(t);
    expect(pointsIn(end)).toEqual(points);
    expectLogIs(end, then, []);
  });
});
