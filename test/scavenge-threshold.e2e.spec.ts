import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestNode, type TestNode } from './support/node.js';
import {
  CHUNK_SIZE, buildDataset, datasetStreams, expectLogIs, historyOf, pointsIn, readAll, readStreams, removableBy, scavengeOk,
  weightsOf, type LogRecord,
} from './support/scavenge.js';

// The threshold of a scavenge (contract: a chunk is executed when its weight, 2 per removable
// record, is > the point's threshold): a huge one executes nothing and removes nothing; a
// positive one executes only the heavier chunks (a chunk weighing exactly the threshold is
// skipped) and a later threshold-0 run removes the rest. Datasets without $maxAge here, so every
// weight is exact (no "maybe" records).

const chunkOf = (r: LogRecord) => Math.floor(r.position / CHUNK_SIZE);

async function chunkEvents(t: TestNode, id: string): Promise<any[]> {
  return (await historyOf(t, id)).filter((e) => e.eventType === '$scavengeChunksCompleted').map((e) => e.data);
}

describe('a huge threshold', () => {
  let t: TestNode;
  beforeAll(async () => { t = await startTestNode({ chunkSize: CHUNK_SIZE, memDb: false }); });
  afterAll(async () => { await t?.dispose(); });

  it('executes no chunk and removes nothing; a threshold-0 run after it removes everything removable', async () => {
    const d = await buildDataset(t, { maxAge: false });
    const before = await readAll(t);
    const streamsBefore = await readStreams(t, datasetStreams(d));
    expect(removableBy(before, { position: Infinity, created: 0 }).length).toBeGreaterThan(50);

    const id = await scavengeOk(t, { threshold: 1_000_000 });
    const after = await readAll(t);
    const [point] = pointsIn(after);
    expect(point).toMatchObject({ eventNumber: 0, threshold: 1_000_000 });
    expectLogIs(after, before, []);
    expect(await readStreams(t, datasetStreams(d))).toEqual(streamsBefore);
    expect((await chunkEvents(t, id)).filter((c) => c.wasScavenged)).toEqual([]);
    expect((await historyOf(t, id)).at(-1)?.data).toMatchObject({ result: 'Success', eventsRemoved: 0 });

    const zero = await scavengeOk(t, { threshold: 0 });
    const end = await readAll(t);
    const points = pointsIn(end);
    expect(points.map((p) => p.threshold)).toEqual([1_000_000, 0]);
    const removed = removableBy(after, points[1]);
    expectLogIs(end, after, removed);
    // from the first snapshot: everything the model removes is gone
    expectLogIs(end, before, removableBy(before, points[1]));
    expect((await historyOf(t, zero)).at(-1)?.data).toMatchObject({ result: 'Success', eventsRemoved: removed.length });
    expect(await readStreams(t, datasetStreams(d))).toEqual(streamsBefore);
  });
});

describe('a positive threshold', () => {
  let t: TestNode;
  beforeAll(async () => { t = await startTestNode({ chunkSize: CHUNK_SIZE, memDb: false }); });
  afterAll(async () => { await t?.dispose(); });

  it('executes only the chunks heavier than it; a threshold-0 run then removes the rest', async () => {
    const d = await buildDataset(t, { maxAge: false });
    const before = await readAll(t);
    const streamsBefore = await readStreams(t, datasetStreams(d));
    const weights = weightsOf(removableBy(before, { position: Infinity, created: 0 }));
    const distinct = [...new Set(weights.values())].sort((a, b) => a - b);
    expect(distinct.length, `chunk weights ${JSON.stringify([...weights])}`).toBeGreaterThanOrEqual(2);
    const threshold = distinct[Math.floor((distinct.length - 1) / 2)]; // a chunk weighs exactly this: skipped (strict >)
    const heavy = new Set([...weights].filter(([, w]) => w > threshold).map(([c]) => c));
    expect(heavy.size).toBeGreaterThan(0);

    const id = await scavengeOk(t, { threshold });
    const after = await readAll(t);
    const [point] = pointsIn(after);
    expect(point).toMatchObject({ eventNumber: 0, threshold });
    const removable = removableBy(before, point);
    expect(weightsOf(removable)).toEqual(weights);
    const removed = removable.filter((r) => heavy.has(chunkOf(r)));
    const left = removable.filter((r) => !heavy.has(chunkOf(r)));
    expect(left.length).toBeGreaterThan(0);
    expectLogIs(after, before, removed);
    for (const c of await chunkEvents(t, id)) {
      if (!c.wasScavenged) continue;
      for (let n = c.chunkStartNumber; n <= c.chunkEndNumber; n++) {
        expect(weights.get(n) ?? 0, `executed chunk ${n} weighs more than ${threshold}`).toBeGreaterThan(threshold);
      }
    }
    expect(await readStreams(t, datasetStreams(d))).toEqual(streamsBefore);

    await scavengeOk(t, { threshold: 0 });
    const end = await readAll(t);
    const points = pointsIn(end);
    expect(points.map((p) => p.threshold)).toEqual([threshold, 0]);
    expectLogIs(end, after, removableBy(after, points[1]));
    expectLogIs(end, before, removableBy(before, points[1]));
    expect(await readStreams(t, datasetStreams(d))).toEqual(streamsBefore);
  });
});

describe('a start chunk', () => {
  let t: TestNode;
  beforeAll(async () => { t = await startTestNode({ chunkSize: CHUNK_SIZE, memDb: false }); });
  afterAll(async () => { await t?.dispose(); });

  it('executes only the chunks from it on; a run from chunk 0 then removes the rest', async () => {
    const d = await buildDataset(t, { maxAge: false });
    const before = await readAll(t);
    const streamsBefore = await readStreams(t, datasetStreams(d));
    const weighed = [...weightsOf(removableBy(before, { position: Infinity, created: 0 })).keys()].sort((a, b) => a - b);
    expect(weighed.length, 'chunks with something to remove').toBeGreaterThanOrEqual(3);
    const start = weighed[Math.floor(weighed.length / 2)];

    const id = await scavengeOk(t, { startFromChunk: start });
    const after = await readAll(t);
    const [point] = pointsIn(after);
    const removable = removableBy(before, point);
    const removed = removable.filter((r) => chunkOf(r) >= start);
    const left = removable.filter((r) => chunkOf(r) < start);
    expect(left.length).toBeGreaterThan(0);
    expectLogIs(after, before, removed);
    const executed = (await chunkEvents(t, id)).filter((c) => c.wasScavenged);
    expect(executed.length).toBeGreaterThan(0);
    for (const c of executed) expect(c.chunkStartNumber, 'an executed chunk').toBeGreaterThanOrEqual(start);
    expect((await historyOf(t, id)).at(-1)?.data).toMatchObject({ result: 'Success', eventsRemoved: removed.length });
    expect(await readStreams(t, datasetStreams(d))).toEqual(streamsBefore);

    await scavengeOk(t, {});
    const end = await readAll(t);
    const points = pointsIn(end);
    expectLogIs(end, before, removableBy(before, points[1]));
    expect(await readStreams(t, datasetStreams(d))).toEqual(streamsBefore);
  });
});
