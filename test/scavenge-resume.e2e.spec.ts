import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, newEvent, startTestNode, type TestNode } from './support/node.js';
import {
  CHUNK_SIZE, SCAVENGE_STREAM, SLOW, appendOk, buildDataset, current, expectLogBetween, expectLogIs, historyOf, last, pointsIn,
  readAll, readStream, removableBy, request, setMetadata, startScavenge, waitForEnd, waitForPhase, type Dataset, type LogRecord,
} from './support/scavenge.js';

// Stop and resume: a slowed-down scavenge is stopped while it accumulates (DELETE by id), the
// resumed run is stopped between chunks of its execution (DELETE current); each answers once
// stopped, result Stopped; the log is then between the start and the model; the next POST
// resumes with the stopped runs' point and threshold (its own threshold and syncOnly are
// ignored) and ends exactly where one run ends.
// Then syncOnly with a point no scavenge has reached (written to $scavengePoints directly):
// it scavenges up to that point and writes no point of its own. Then writes while a run rests:
// what is written after its point (events, a first metadata) is untouched and not applied.

let t: TestNode;
beforeAll(async () => { t = await startTestNode({ chunkSize: CHUNK_SIZE, memDb: false }); });
afterAll(async () => { await t?.dispose(); });

describe('stop, then resume', () => {
  let d: Dataset;
  let before: LogRecord[];

  it('a run stopped twice (in accumulation, then in chunk execution) resumes with its own point and threshold and ends where one run ends', async () => {
    d = await buildDataset(t);
    before = await readAll(t);

    // 1: at 1% the run rests ~100 times its work: stopped (by id) while it accumulates
    const first = await startScavenge(t, { throttlePercent: 1 });
    await waitForPhase(t, first, 'Accumulation');
    const stop1 = await request(t, `/admin/scavenge/${first}`, { method: 'DELETE' });
    expect(stop1.status).toBe(200);
    expect(await stop1.text()).toBe(first);
    expect(await current(t)).toEqual({ scavengeId: '', scavengeLink: '' });
    expect(await last(t)).toEqual({ scavengeId: first, scavengeLink: `/admin/scavenge/${first}`, scavengeResult: 'Stopped' });
    expect((await historyOf(t, first)).at(-1)).toMatchObject({ eventType: '$scavengeCompleted', data: { scavengeId: first, result: 'Stopped' } });
    expect((await request(t, `/admin/scavenge/${first}`, { method: 'DELETE' })).status).toBe(404);
    const points = pointsIn(await readAll(t));
    expect(points).toHaveLength(1);
    const removed = removableBy(before, points[0]);

    // 2: resumed slowly, stopped (as current) between chunks of its execution
    const second = await startScavenge(t, { throttlePercent: SLOW });
    const progress = await waitForPhase(t, second, 'ChunkExecution', 2, 30_000);
    expect(Object.keys(progress)).toEqual(expect.arrayContaining(['chunksDone', 'chunksTotal', 'eventsExamined', 'eventsRemoved', 'phase', 'scavengePoint', 'spaceSaved']));
    expect(progress.scavengePoint).toBe(0);
    const running = await current(t);
    expect(running.scavengeId).toBe(second);
    expect(running.scavengeLink).toBe(`/admin/scavenge/${second}`);
    expect(await last(t)).toEqual({ scavengeId: second, scavengeLink: `/admin/scavenge/${second}`, scavengeResult: 'InProgress' });
    const stop2 = await request(t, '/admin/scavenge/current', { method: 'DELETE' });
    expect(stop2.status).toBe(200);
    expect(await stop2.text()).toBe(second);
    expect(await last(t)).toEqual({ scavengeId: second, scavengeLink: `/admin/scavenge/${second}`, scavengeResult: 'Stopped' });
    expect(await current(t)).toEqual({ scavengeId: '', scavengeLink: '' });
    const stopped = (await historyOf(t, second)).at(-1)!;
    expect(stopped).toMatchObject({ eventType: '$scavengeCompleted', data: { scavengeId: second, result: 'Stopped', error: null } });
    expect(stopped.data.timeTaken).toMatch(/^\d{2}:\d{2}:\d{2}\.\d{7}$/);

    const mid = await readAll(t);
    expect(pointsIn(mid)).toEqual(points);
    const done = expectLogBetween(mid, before, removed);
    expect(done, 'removed before the stop').toBeGreaterThan(0);
    expect(done, 'removed before the stop').toBeLessThan(removed.length);

    // 3: the resuming request's threshold and syncOnly are ignored: the stopped run's point (threshold 0) rules
    const third = await startScavenge(t, { threshold: 1_000_000, syncOnly: true });
    expect(await waitForEnd(t, third)).toBe('Success');
    const after = await readAll(t);
    expect(pointsIn(after)).toEqual(points);
    expectLogIs(after, before, removed);
    expect((await historyOf(t, third)).at(-1)?.data).toMatchObject({ scavengeId: third, result: 'Success' });
  }, 90_000); // a loaded machine slows the slowed-down runs further

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

  it('writes while a scavenge runs: records after its point are untouched; "last event" and metadata are those below the point', async () => {
    const before = await readAll(t);
    // at 1% the run rests ~100 times its work (seconds here): the writes land while it runs, after its point
    const id = await startScavenge(t, { throttlePercent: 1 });
    const progress = await eventually(async () => {
      const c = await current(t);
      expect(c.scavengeId, 'running').toBe(id);
      expect(c.progress.scavengePoint).toBeGreaterThanOrEqual(0);
      return c.progress;
    }, 10_000);
    // written after the point: 4 more $maxCount events (reads now hide more of the older ones),
    // a first metadata for the plain stream ($maxCount 1: reads now hide all but its last), 2 more plain events
    await appendOk(t, d.maxCount, Array.from({ length: 4 }, (_, i) => newEvent('Counted', { late: i })));
    await setMetadata(t, d.plain, { $maxCount: 1 });
    await appendOk(t, d.plain, [newEvent('Plain', { late: 1 }), newEvent('Plain', { late: 2 })]);
    const during = await readAll(t);
    // then stopped (unless it is done already) and finished at full speed: syncOnly resumes the stopped run, or has nothing to do
    expect([200, 404]).toContain((await request(t, `/admin/scavenge/${id}`, { method: 'DELETE' })).status);
    expect(await waitForEnd(t, await startScavenge(t, { syncOnly: true }))).toBe('Success');
    const after = await readAll(t);
    const point = pointsIn(after).find((p) => p.eventNumber === progress.scavengePoint)!;
    expect(point).toBeDefined();
    const late = (records: LogRecord[]) => records.filter((r) => r.position > point.position && !SCAVENGE_STREAM.test(r.streamId));
    expect(late(during).length).toBe(7);
    expect(late(after)).toEqual(late(during));
    const removed = removableBy(before, point);
    // below the point the $maxCount stream ends at 24 (21 and below went in the syncOnly run): 22..24 stay, hidden by reads now;
    // the plain stream had no metadata below the point: nothing of it goes
    expect(removed.filter((r) => r.streamId === d.maxCount || r.streamId === d.plain)).toEqual([]);
    expectLogIs(after.filter((r) => r.position < point.position), before, removed);
    const kept = after.filter((r) => r.streamId === d.maxCount).map((r) => r.eventNumber);
    expect(kept).toEqual([22, 23, 24, 25, 26, 27, 28]);
    expect((await readStream(t, d.maxCount)).entries.map((e: any) => e.eventNumber)).toEqual([26, 27, 28]);
    expect(after.filter((r) => r.streamId === d.plain)).toHaveLength(24);
    expect((await readStream(t, d.plain)).entries.map((e: any) => e.eventNumber)).toEqual([23]);
  }, 60_000);
});
