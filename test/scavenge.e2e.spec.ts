import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OPS, newEvent, startTestNode, type TestNode } from './support/node.js';
import {
  ATOM_JSON, CHUNK_SIZE, ZERO_GUID, allEnd, allTitlesBackward, allTitlesForward, appendOk, buildDataset, chunksBelow, current,
  datasetStreams, deleteStream, enc, eventStatuses, expectLogIs, getJson, historyOf, inDataset, last, parseCreated, pointsIn,
  postScavenge, readAll, readStream, readStreams, removableBy, request, scavengeOk, setMetadata, startScavenge, streamEvents,
  waitForEnd, type Dataset, type LogRecord, type Point, type StreamView,
} from './support/scavenge.js';

// End to end: a database holding every removable kind (soft-deleted, hard-deleted with metadata
// history, $maxCount, $tb, $maxAge, a metastream written 5 times, links to removed and kept
// events) interleaved over ~10 chunks of 4 KiB; one scavenge; then $all against the model of
// what must remain (same positions, ids and bytes), stream and single-event reads, links, the
// event-id index (retrying a removed id writes a new event), the history streams and their
// payloads; then syncOnly (nothing to do), threshold -1 (every chunk executed), metadata changed
// after a run, a restart, a record removable in the point's own chunk, one 401 and one 400.
// (contract: /tmp/notes/contract.md; reference: subscriptions-and-maintenance.md §2)

const TIME_TAKEN = /^\d{2}:\d{2}:\d{2}\.\d{7}$/;
const HISTORY_METADATA = { $maxAge: 30 * 86400, $acl: { $r: ['$ops'], $w: [], $d: [], $mr: [], $mw: [] } };

let t: TestNode;
beforeAll(async () => { t = await startTestNode({ chunkSize: CHUNK_SIZE, memDb: false }); });
afterAll(async () => { await t?.dispose(); });

/**
 * Stream reads must not change, but $maxAge hides more as time passes: its stream may only lose
 * events that had aged out by `readEnd` (ms, taken after the reads).
 */
function expectStreamsAsBefore(after: Record<string, StreamView>, before: Record<string, StreamView>, d: Dataset, readEnd: number): void {
  for (const [s, view] of Object.entries(before)) {
    if (s !== d.maxAge) {
      expect(after[s], `read of ${s}`).toEqual(view);
      continue;
    }
    expect(after[s].status).toBe(view.status);
    const ids = new Set(view.entries.map((e) => e.eventId));
    for (const e of after[s].entries) expect(ids.has(e.eventId), `${e.title} was shown before`).toBe(true);
    const shown = new Set(after[s].entries.map((e) => e.eventId));
    for (const e of view.entries.filter((x) => !shown.has(x.eventId))) {
      expect(parseCreated(e.updated as string) / 1000, `${e.title} aged out`).toBeLessThan(readEnd - 1000);
    }
    expect(after[s].entries).toEqual(view.entries.filter((x) => shown.has(x.eventId)));
  }
}

async function metadataOf(stream: string): Promise<unknown> {
  const res = await request(t, `/streams/${enc(stream)}/metadata`, { headers: { Accept: 'application/json' } });
  expect(res.status).toBe(200);
  return res.json();
}

describe('a node without scavenges', () => {
  it('current is idle, last is Unknown with the zero id, stopping answers 404', async () => {
    expect(await current(t)).toEqual({ scavengeId: '', scavengeLink: '' });
    expect(await last(t)).toEqual({ scavengeId: ZERO_GUID, scavengeLink: '', scavengeResult: 'Unknown' });
    const res = await request(t, '/admin/scavenge/current', { method: 'DELETE' });
    expect(res.status).toBe(404);
    expect(await res.text()).toBe('Scavenge Id does not exist');
  });

  it('syncOnly with no scavenge point: Success, no point written', async () => {
    const id = await startScavenge(t, { syncOnly: true });
    expect(await waitForEnd(t, id)).toBe('Success');
    expect((await request(t, '/streams/%24scavengePoints', { headers: { Accept: ATOM_JSON } })).status).toBe(404);
    const history = await historyOf(t, id);
    expect(history.at(-1)).toMatchObject({ eventType: '$scavengeCompleted', data: { scavengeId: id, result: 'Success', error: null } });
  });
});

describe('a scavenge of every removable kind', () => {
  let d: Dataset;
  let before: LogRecord[];
  let beforeStreams: Record<string, StreamView>;
  let beforeStatuses: Record<string, number>;
  let id: string;
  let after: LogRecord[];
  let point: Point;
  let removed: LogRecord[];
  const idOf = (stream: string, n: number) => before.find((r) => r.streamId === stream && r.eventNumber === n)!.eventId;
  const removedOf = (stream: string) => removed.filter((r) => r.streamId === stream).map((r) => r.eventNumber);

  it('the dataset spans several chunks, each mixing kinds', async () => {
    d = await buildDataset(t);
    // control: before a scavenge, an id of a hidden event is still in the index (idempotent retry, nothing written)
    const maxCount0 = (await readStream(t, d.maxCount, { 'SVC-ResolveLinkTos': 'False' })).entries;
    expect(maxCount0.map((e) => e.eventNumber)).toEqual([17, 18, 19]);
    before = await readAll(t);
    beforeStreams = await readStreams(t, datasetStreams(d));
    beforeStatuses = await eventStatuses(t, before.filter((r) => inDataset(d, r.streamId)));
    const endBefore = await allEnd(t);
    const retry = await appendOk(t, d.maxCount, [{ eventId: idOf(d.maxCount, 0), eventType: 'Counted', data: { again: true } }]);
    expect(retry.headers.get('location')).toBe(`${t.url}/streams/${enc(d.maxCount)}/0`);
    expect(await allEnd(t), 'nothing written').toBe(endBefore);

    const chunks = new Map<number, Set<string>>();
    for (const r of before.filter((x) => inDataset(d, x.streamId))) {
      const c = Math.floor(r.position / CHUNK_SIZE);
      chunks.set(c, (chunks.get(c) ?? new Set()).add(r.streamId.replace(/^\$\$/, '')));
    }
    expect(chunks.size).toBeGreaterThanOrEqual(8);
    expect([...chunks.values()].filter((kinds) => kinds.size >= 3).length).toBeGreaterThanOrEqual(6);
  });

  it('removes exactly what the model says; every other record reads as before, at the same position', async () => {
    id = await scavengeOk(t);
    after = await readAll(t);
    const points = pointsIn(after);
    expect(points).toHaveLength(1);
    point = points[0];
    expect(point).toMatchObject({ eventNumber: 0, threshold: 0 });
    expect(point.position).toBeGreaterThan(before[before.length - 1].position);
    removed = removableBy(before, point);

    // the model holds every kind
    const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);
    expect(removedOf(d.soft)).toEqual(range(0, 8));
    expect(removedOf(d.hard)).toEqual(range(0, 7));
    expect(removedOf(`$$${d.hard}`)).toEqual([0, 1, 2]);
    expect(removedOf(d.maxCount)).toEqual(range(0, 16));
    expect(removedOf(d.tb)).toEqual(range(0, 9));
    expect(removedOf(d.maxAge!).slice(0, 12)).toEqual(range(0, 11));
    expect(removedOf(d.maxAge!)).not.toContain(14);
    expect(removedOf(`$$${d.meta}`)).toEqual([0, 1, 2, 3]);
    expect(removedOf(d.plain)).toEqual([]);
    expect(removedOf(d.meta)).toEqual([]);
    expect(removedOf(d.links)).toEqual([]);
    expect(after.find((r) => r.streamId === d.hard && r.eventType === '$streamDeleted'), 'the tombstone stays').toBeDefined();

    expectLogIs(after, before, removed);
  });

  it('$all pages forward and backward over the removed ranges show the same records', async () => {
    const titles = after.map((r) => `${r.eventNumber}@${r.streamId}`);
    expect(await allTitlesForward(t, 7)).toEqual(titles);
    expect(await allTitlesBackward(t, 7)).toEqual(titles);
  });

  it('stream reads answer as before (they already hid what was removed)', async () => {
    const reads = await readStreams(t, datasetStreams(d));
    expectStreamsAsBefore(reads, beforeStreams, d, Date.now());
  });

  it('single-event reads: a removed event answers 404 (410 in the hard-deleted stream); the others as before', async () => {
    const mine = before.filter((r) => inDataset(d, r.streamId));
    const statuses = await eventStatuses(t, mine);
    for (const r of removed.filter((x) => inDataset(d, x.streamId) && x.eventType !== '$streamDeleted')) {
      const hardDeleted = r.streamId === d.hard || r.streamId === `$$${d.hard}`;
      expect(statuses[`${r.eventNumber}@${r.streamId}`], `${r.eventNumber}@${r.streamId}`).toBe(hardDeleted ? 410 : 404);
    }
    const drift = Object.keys(statuses).filter((k) => statuses[k] !== beforeStatuses[k]);
    // only $maxAge events may have aged out since
    expect(drift.filter((k) => !(k.endsWith(`@${d.maxAge}`) && beforeStatuses[k] === 200 && statuses[k] === 404))).toEqual([]);
    for (const n of [17, 18, 19]) {
      const res = await request(t, `/streams/${enc(d.maxCount)}/${n}`, { headers: { Accept: 'application/vnd.eventstore.event+json' } });
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ eventNumber: n, eventId: idOf(d.maxCount, n) });
    }
  });

  it('links to removed events resolve to the link alone; links to kept events to their target', async () => {
    const view = await readStream(t, d.links);
    expect(view.status).toBe(200);
    expect(view.entries).toHaveLength(d.linkTargets.length);
    d.linkTargets.forEach(({ target, removed: gone }, i) => {
      const e = view.entries[i] as any;
      expect(e.title).toBe(target);
      expect(e.positionStreamId).toBe(d.links);
      expect(e.positionEventNumber).toBe(i);
      expect(e.summary).toBe('$>');
      const [n, stream] = [Number(target.split('@')[0]), target.slice(target.indexOf('@') + 1)];
      const hidden = gone || stream === d.soft; // the soft-deleted stream's last event stays, but hidden
      if (hidden) {
        expect(e.eventId, target).toBeUndefined();
        expect(e.data, target).toBeNull();
      } else {
        expect(e.eventId, target).toBe(idOf(stream, n));
        expect(e.streamId).toBe(stream);
      }
    });
    const raw = await readStream(t, d.links, { 'SVC-ResolveLinkTos': 'False' });
    expect(raw.entries.map((e: any) => e.data)).toEqual(d.linkTargets.map((l) => l.target));
    // one link singly: its target is gone, so the resolved read is 404; unresolved it is the link
    const i = d.linkTargets.findIndex((l) => l.target === `0@${d.maxCount}`);
    expect((await request(t, `/streams/${enc(d.links)}/${i}`, { headers: { Accept: ATOM_JSON } })).status).toBe(404);
    const link = await request(t, `/streams/${enc(d.links)}/${i}`, { headers: { Accept: ATOM_JSON, 'SVC-ResolveLinkTos': 'False' } });
    expect(link.status).toBe(200);
    expect((await link.json() as any).content.data).toBe(`0@${d.maxCount}`);
  });

  it('history: $scavenges-{id} holds started, chunk, merge and completed events with the contract\'s fields', async () => {
    const endpoint = new URL(t.url).host;
    const events = await historyOf(t, id);
    expect(events[0]).toEqual({ eventNumber: 0, eventType: '$scavengeStarted', data: { scavengeId: id, nodeEndpoint: endpoint } });
    const done = events[events.length - 1];
    expect(done.eventType).toBe('$scavengeCompleted');
    expect(Object.keys(done.data).sort()).toEqual(['error', 'eventsExamined', 'eventsRemoved', 'maxChunkScavenged', 'nodeEndpoint',
      'result', 'scavengeId', 'spaceSaved', 'timeTaken']);
    expect(done.data).toMatchObject({ scavengeId: id, nodeEndpoint: endpoint, result: 'Success', error: null });
    expect(done.data.timeTaken).toMatch(TIME_TAKEN);
    for (const k of ['spaceSaved', 'maxChunkScavenged', 'eventsExamined', 'eventsRemoved']) expect(Number.isInteger(done.data[k]), k).toBe(true);
    expect(done.data.eventsRemoved).toBe(removed.length);
    expect(done.data.spaceSaved).toBeGreaterThan(0);
    expect(done.data.eventsExamined).toBeGreaterThanOrEqual(removed.length);

    const middle = events.slice(1, -1);
    expect(middle.length).toBeGreaterThan(0);
    const chunkEvents = middle.filter((e) => e.eventType === '$scavengeChunksCompleted').map((e) => e.data);
    const mergeEvents = middle.filter((e) => e.eventType === '$scavengeMergeCompleted').map((e) => e.data);
    expect(middle.filter((e) => !['$scavengeChunksCompleted', '$scavengeMergeCompleted', '$scavengeIndexCompleted'].includes(e.eventType))).toEqual([]);
    for (const c of chunkEvents) {
      // the contract's fields (the engine adds chunkVersion, the version of the physical chunk written)
      expect(Object.keys(c)).toEqual(expect.arrayContaining(['chunkEndNumber', 'chunkStartNumber', 'errorMessage', 'eventsExamined',
        'eventsRemoved', 'nodeEndpoint', 'scavengeId', 'spaceSaved', 'timeTaken', 'wasScavenged']));
      expect(c).toMatchObject({ scavengeId: id, nodeEndpoint: endpoint, errorMessage: null });
      expect(c.timeTaken).toMatch(TIME_TAKEN);
      expect(typeof c.wasScavenged).toBe('boolean');
      for (const k of ['chunkStartNumber', 'chunkEndNumber', 'spaceSaved', 'eventsExamined', 'eventsRemoved']) expect(Number.isInteger(c[k]), k).toBe(true);
      expect(c.chunkEndNumber).toBeGreaterThanOrEqual(c.chunkStartNumber);
    }
    expect(mergeEvents.length, 'executed chunks small enough to merge were merged').toBeGreaterThan(0);
    for (const m of mergeEvents) {
      expect(Object.keys(m)).toEqual(expect.arrayContaining(['chunkEndNumber', 'chunkStartNumber', 'errorMessage', 'nodeEndpoint',
        'scavengeId', 'spaceSaved', 'timeTaken', 'wasMerged']));
      expect(m).toMatchObject({ scavengeId: id, nodeEndpoint: endpoint, errorMessage: null });
      expect(m.timeTaken).toMatch(TIME_TAKEN);
      expect(typeof m.wasMerged).toBe('boolean');
    }
    // every chunk that held a removed record was executed; the per-chunk totals add up
    for (const c of new Set(removed.map((r) => Math.floor(r.position / CHUNK_SIZE)))) {
      expect(chunkEvents.some((e) => e.wasScavenged && e.chunkStartNumber <= c && c <= e.chunkEndNumber), `chunk ${c} executed`).toBe(true);
    }
    expect(chunkEvents.reduce((n, e) => n + e.eventsRemoved, 0)).toBe(removed.length);
    expect(done.data.maxChunkScavenged).toBe(Math.max(...chunkEvents.filter((e) => e.wasScavenged).map((e) => e.chunkEndNumber)));

    expect(await metadataOf(`$scavenges-${id}`)).toEqual(HISTORY_METADATA);
    expect(await metadataOf('$scavenges')).toEqual(HISTORY_METADATA);
    const links = (await streamEvents(t, '$scavenges')).filter((e) => String(e.data).endsWith(`@$scavenges-${id}`));
    expect(links.map((e) => [e.eventType, e.data])).toEqual([
      ['$>', `0@$scavenges-${id}`], ['$>', `${done.eventNumber}@$scavenges-${id}`],
    ]);
    // read through the links, the index shows the started and the completed event
    const resolved = (await readStream(t, '$scavenges')).entries.filter((e: any) => e.streamId === `$scavenges-${id}`);
    expect(resolved.map((e: any) => e.eventType)).toEqual(['$scavengeStarted', '$scavengeCompleted']);

    expect(await streamEvents(t, '$scavengePoints')).toEqual([{ eventNumber: 0, eventType: '$scavengePoint', data: {} }]);
    // the history is readable by $ops, not by anonymous
    expect((await request(t, `/streams/${enc(`$scavenges-${id}`)}`, { headers: { Accept: ATOM_JSON }, authorization: OPS })).status).toBe(200);
    expect((await request(t, `/streams/${enc(`$scavenges-${id}`)}`, { headers: { Accept: ATOM_JSON }, authorization: '' })).status).toBe(401);
  });

  it('the event-id index: a removed id appended again is a new event; a kept id is still an idempotent retry', async () => {
    // soft-deleted stream, removed event 3, ExpectedVersion any: recreates the stream with a new event
    const soft = await appendOk(t, d.soft, [{ eventId: idOf(d.soft, 3), eventType: 'Soft', data: { again: true } }], { 'SVC-ExpectedVersion': '-2' });
    expect(soft.headers.get('location')).toBe(`${t.url}/streams/${enc(d.soft)}/10`);
    const softView = await readStream(t, d.soft);
    expect(softView.entries.map((e: any) => [e.eventNumber, e.eventId])).toEqual([[10, idOf(d.soft, 3)]]);
    // $maxCount stream, removed event 0 (idempotent before the scavenge, see the first test)
    const counted = await appendOk(t, d.maxCount, [{ eventId: idOf(d.maxCount, 0), eventType: 'Counted', data: { again: true } }]);
    expect(counted.headers.get('location')).toBe(`${t.url}/streams/${enc(d.maxCount)}/20`);
    // kept events: still idempotent, nothing written
    const plain = await appendOk(t, d.plain, [{ eventId: idOf(d.plain, 2), eventType: 'Plain', data: { again: true } }]);
    expect(plain.headers.get('location')).toBe(`${t.url}/streams/${enc(d.plain)}/2`);
    const kept = await appendOk(t, d.maxCount, [{ eventId: idOf(d.maxCount, 18), eventType: 'Counted', data: {} }]);
    expect(kept.headers.get('location')).toBe(`${t.url}/streams/${enc(d.maxCount)}/18`);
    expect((await readStream(t, d.plain)).entries).toHaveLength(22);
    expect((await readStream(t, d.maxCount)).entries.map((e: any) => e.eventNumber)).toEqual([18, 19, 20]);
  });

  it('syncOnly after a completed scavenge: Success, no new point, nothing removed', async () => {
    const now = await readAll(t);
    const sync = await startScavenge(t, { syncOnly: true });
    expect(await waitForEnd(t, sync)).toBe('Success');
    const then = await readAll(t);
    expect(pointsIn(then)).toEqual(pointsIn(now));
    expectLogIs(then, now, []);
  });

  it('threshold -1 executes every chunk, those with nothing to remove too; the new point removes what became removable', async () => {
    const now = await readAll(t);
    const again = await scavengeOk(t, { threshold: -1 });
    const then = await readAll(t);
    const points = pointsIn(then);
    expect(points).toHaveLength(2);
    const p2 = points[1];
    expect(p2).toMatchObject({ eventNumber: 1, threshold: -1 });
    const removedNow = removableBy(now, p2);
    // the soft-deleted stream was recreated ($tb 10): its event 9 is no longer its last; the $maxCount stream has a 20th event
    expect(removedNow.filter((r) => r.streamId === d.soft).map((r) => r.eventNumber)).toEqual([9]);
    expect(removedNow.filter((r) => r.streamId === d.maxCount).map((r) => r.eventNumber)).toEqual([17]);
    expectLogIs(then, now, removedNow);

    const events = await historyOf(t, again);
    const chunkEvents = events.filter((e) => e.eventType === '$scavengeChunksCompleted').map((e) => e.data);
    const withRemovals = new Set(removedNow.map((r) => Math.floor(r.position / CHUNK_SIZE)));
    const executed = (c: number) => chunkEvents.some((e) => e.wasScavenged && e.chunkStartNumber <= c && c <= e.chunkEndNumber);
    const notExecuted = chunksBelow(p2).filter((c) => !executed(c));
    expect(notExecuted, 'chunks not executed').toEqual([]);
    expect(chunksBelow(p2).filter((c) => !withRemovals.has(c)).length, 'chunks with nothing to remove').toBeGreaterThan(3);
    expect(events.at(-1)?.data).toMatchObject({ result: 'Success', eventsRemoved: removedNow.length });
  });

  it('metadata changed after a scavenge (a stream it had finished with) is applied by the next one', async () => {
    await setMetadata(t, d.tb, { $tb: 14 });
    await deleteStream(t, d.meta, true);
    const now = await readAll(t);
    await scavengeOk(t);
    const then = await readAll(t);
    const points = pointsIn(then);
    expect(points).toHaveLength(3);
    const removedNow = removableBy(now, points[2]);
    const numbers = (stream: string) => removedNow.filter((r) => r.streamId === stream).map((r) => r.eventNumber);
    expect(numbers(d.tb)).toEqual([10, 11, 12, 13]);
    expect(numbers(d.meta)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(numbers(`$$${d.meta}`)).toEqual([4]); // all of it: 0..3 went in the first run
    expect(numbers(`$$${d.tb}`)).toEqual([0]);
    expectLogIs(then, now, removedNow);
    expect((await readStream(t, d.tb)).entries.map((e: any) => e.eventNumber)).toEqual([14, 15]);
    expect((await readStream(t, d.meta)).status).toBe(410);
  });

  it('after a restart the log, the reads and the event-id index are as the scavenges left them', async () => {
    const now = await readAll(t);
    const reads = await readStreams(t, datasetStreams(d).filter((s) => s !== d.maxAge));
    await t.restart();
    expect(await readAll(t)).toEqual(now);
    expect(await readStreams(t, datasetStreams(d).filter((s) => s !== d.maxAge))).toEqual(reads);
    expect(await last(t)).toEqual({ scavengeId: ZERO_GUID, scavengeLink: '', scavengeResult: 'Unknown' });
    const retry = await appendOk(t, d.maxCount, [{ eventId: idOf(d.maxCount, 1), eventType: 'Counted', data: { again: true } }]);
    expect(retry.headers.get('location')).toBe(`${t.url}/streams/${enc(d.maxCount)}/21`);
  });

  it('records removable in the chunk the point ends are removed', async () => {
    const s = `${d.prefix}-late-soft`;
    await appendOk(t, s, [0, 1, 2].map((i) => newEvent('Late', { i })));
    await deleteStream(t, s, false);
    const now = await readAll(t);
    await scavengeOk(t);
    const then = await readAll(t);
    const point = pointsIn(then).at(-1)!;
    const removedNow = removableBy(now, point);
    const late = removedNow.filter((r) => r.streamId === s);
    expect(late.map((r) => r.eventNumber)).toEqual([0, 1]);
    for (const r of late) expect(Math.floor(r.position / CHUNK_SIZE)).toBe(Math.floor(point.position / CHUNK_SIZE));
    expectLogIs(then, now, removedNow);
  });

  it('401 without credentials, 400 for a bad parameter; neither starts anything', async () => {
    const lastBefore = await last(t);
    const anonymous = await postScavenge(t, {}, '');
    expect(anonymous.status).toBe(401);
    const bad = await postScavenge(t, { threads: 0 });
    expect(bad.status).toBe(400);
    expect(bad.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(await bad.text()).toBe('threads must be a 1 or above');
    expect(await getJson(t, '/admin/scavenge/last')).toEqual(lastBefore);
  });
});
