import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { append, eventually, http, newEvent, sleep, startTestNode, type TestNode } from './support/node.js';

// The standard system projections end to end (issue 5; projections.md §18, §9, §14-16;
// http-wire.md §8): what $streams, $stream_by_category, $by_category, $by_event_type and
// $by_correlation_id write after a mixed workload (streams without a separator, $-streams,
// metadata streams, hard- and soft-deleted streams, link events), --run-projections
// None|System|All, --start-standard-projections, how quickly a new stream shows up in
// $ce-{category} and $streams, enable / disable / reset / query (category config) / delete on
// them, their checkpoints and statistics, and user fromCategory() projections reading $ce-{c}.
//
// Every test uses names no other test uses; tests that change a system projection's state get
// a node of their own.

const ATOM = 'application/vnd.eventstore.atom+json';
const SYSTEM = ['$streams', '$stream_by_category', '$by_category', '$by_event_type', '$by_correlation_id'];
const enc = encodeURIComponent;

/** A name part without the '-' separator (category names must not contain it). */
const word = (prefix: string) => `${prefix}${randomUUID().replace(/-/g, '').slice(0, 10)}`;

interface Stored { eventNumber: number; eventType: string; data: string | null; meta: Record<string, any> | null }

function tryJson(text: unknown): any {
  if (typeof text !== 'string' || text === '') return null;
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/** Every visible event of a stream, oldest first, links NOT resolved; null when the stream answers 404. */
async function stored(t: TestNode, stream: string): Promise<Stored[] | null> {
  const out: Stored[] = [];
  for (let from = 0; ;) {
    const res = await http(t, `/streams/${enc(stream)}/${from}/forward/4096?embed=tryharder`, {
      headers: { Accept: ATOM, 'SVC-ResolveLinkTos': 'False' },
    });
    if (res.status === 404) return null;
    expect(res.status, `GET ${stream}`).toBe(200);
    const doc = await res.json();
    const page: Stored[] = doc.entries.map((e: any) => ({
      eventNumber: e.eventNumber, eventType: e.eventType, data: e.data ?? null, meta: tryJson(e.metaData),
    }));
    page.sort((a, b) => a.eventNumber - b.eventNumber);
    out.push(...page);
    if (page.length < 4096) return out;
    from = page[page.length - 1].eventNumber + 1;
  }
}

/** The data (link targets / stream names) of a stream's events, oldest first; [] when the stream does not exist. */
async function datas(t: TestNode, stream: string): Promise<(string | null)[]> {
  return ((await stored(t, stream)) ?? []).map((e) => e.data);
}

async function appendOk(t: TestNode, stream: string, events: unknown[]): Promise<void> {
  const res = await append(t, stream, events);
  expect(res.status, `append to ${stream}: ${await res.clone().text()}`).toBe(201);
}

async function deleteOk(t: TestNode, stream: string, hard: boolean): Promise<void> {
  const res = await http(t, `/streams/${enc(stream)}`, { method: 'DELETE', headers: hard ? { 'SVC-HardDelete': 'true' } : {} });
  expect(res.status, `delete ${stream}`).toBe(204);
}

async function setMetadataOk(t: TestNode, stream: string, doc: unknown): Promise<void> {
  const res = await http(t, `/streams/${enc(stream)}/metadata`, {
    method: 'POST', headers: { 'Content-Type': 'application/json', 'SVC-EventId': randomUUID() }, body: JSON.stringify(doc),
  });
  expect(res.status).toBe(201);
}

const pp = (name: string) => `/projection/${enc(name)}`;

async function stats(t: TestNode, name: string): Promise<any> {
  const res = await http(t, pp(name));
  expect(res.status, `GET ${pp(name)}`).toBe(200);
  return res.json();
}

async function command(t: TestNode, name: string, cmd: 'enable' | 'disable' | 'reset' | 'abort'): Promise<void> {
  const res = await http(t, `${pp(name)}/command/${cmd}`, { method: 'POST' });
  expect(res.status, `${cmd} ${name}: ${await res.clone().text()}`).toBe(200);
  expect(await res.json()).toEqual({ name });
}

async function waitStatus(t: TestNode, name: string, status: string | RegExp, timeoutMs = 5000): Promise<any> {
  return eventually(async () => {
    const s = await stats(t, name);
    if (typeof status === 'string') expect(s.status).toBe(status);
    else expect(s.status).toMatch(status);
    return s;
  }, timeoutMs);
}

async function createContinuous(t: TestNode, name: string, query: string): Promise<void> {
  const res = await http(t, `/projections/continuous?name=${enc(name)}&enabled=yes`, {
    method: 'POST', headers: { 'Content-Type': 'application/javascript' }, body: query,
  });
  expect(res.status, await res.clone().text()).toBe(201);
}

async function stateOf(t: TestNode, name: string, partition?: string): Promise<unknown> {
  const q = partition === undefined ? '' : `?partition=${enc(partition)}`;
  const res = await http(t, `${pp(name)}/state${q}`);
  expect(res.status).toBe(200);
  const text = await res.text();
  return text === '' ? undefined : JSON.parse(text);
}

/** `C:n/P:n` -> n */
function commitOf(position: string): number {
  const m = /^C:(-?\d+)\/P:(-?\d+)$/.exec(position);
  expect(m, `position text ${position}`).not.toBeNull();
  return Number(m![1]);
}

/** The link to the first event of `stream` in $streams, looked for among the newest entries. */
async function inStreamsHead(t: TestNode, stream: string): Promise<boolean> {
  const res = await http(t, '/streams/%24streams/head/backward/50?embed=tryharder', { headers: { Accept: ATOM, 'SVC-ResolveLinkTos': 'False' } });
  if (res.status === 404) return false;
  const doc = await res.json();
  return doc.entries.some((e: any) => e.data === `0@${stream}`);
}

// =============================================================================================
describe('system projections on a node started with them (run-projections All)', () => {
  let t: TestNode;
  beforeAll(async () => { t = await startTestNode({ startStandardProjections: true, runProjections: 'All' }); });
  afterAll(async () => { await t?.dispose(); });

  it('the five are created on a new database: listed, Continuous, running, with their configuration', async () => {
    for (const listing of ['any', 'all-non-transient', 'continuous']) {
      const res = await http(t, `/projections/${listing}`);
      expect(res.status).toBe(200);
      const names = (await res.json()).projections.map((p: any) => p.name);
      for (const name of SYSTEM) expect(names, listing).toContain(name);
    }
    for (const name of SYSTEM) {
      const s = await waitStatus(t, name, 'Running');
      expect(s).toMatchObject({ name, effectiveName: name, mode: 'Continuous', stateReason: '' });
    }
    const expectedQuery: Record<string, string> = {
      $streams: '', $stream_by_category: 'first\r\n-', $by_category: 'first\r\n-', $by_event_type: '',
      $by_correlation_id: '{"correlationIdProperty":"$correlationId"}',
    };
    for (const name of SYSTEM) {
      const q = await http(t, `${pp(name)}/query`);
      expect(q.status).toBe(200);
      expect(await q.text(), name).toBe(expectedQuery[name]);
      const qc = await http(t, `${pp(name)}/query?config=yes`);
      expect(qc.status).toBe(200);
      const doc = await qc.json();
      expect(doc, name).toMatchObject({ name, emitEnabled: true, checkpointsEnabled: true });
      expect(doc.trackEmittedStreams ?? false, name).toBe(false);
      const cfg = await http(t, `${pp(name)}/config`);
      expect(cfg.status).toBe(200);
      const c = await cfg.json();
      expect(c.emitEnabled, name).toBe(true);
      // Links are written with checkpoints at most every 50 ms (well within the 100 ms promise).
      expect(c.checkpointAfterMs, name).toBe(50);
    }
    // Registered like any projection (§14): a $ProjectionCreated with the name as data.
    const registry = await stored(t, '$projections-$all');
    const created = registry!.filter((e) => e.eventType === '$ProjectionCreated').map((e) => e.data);
    for (const name of SYSTEM) expect(created).toContain(name);
  });

  it('DELETE of a system projection answers 400 and leaves it running', async () => {
    for (const name of SYSTEM) {
      const res = await http(t, `${pp(name)}?deleteCheckpointStream=yes&deleteEmittedStreams=yes`, { method: 'DELETE' });
      expect(res.status, name).toBe(400);
      expect(await res.text(), name).toBe("We currently don't allow for the deletion of System Projections.");
      expect((await stats(t, name)).status, name).toBe('Running');
    }
    const res = await http(t, '/projections/any');
    const names = (await res.json()).projections.map((p: any) => p.name);
    for (const name of SYSTEM) expect(names).toContain(name);
  });

  // -------------------------------------------------------------------------------------------
  describe('after a mixed workload', () => {
    const id = randomUUID().replace(/-/g, '').slice(0, 10);
    const acct = `acct${id}`;
    const lnk = `lnk${id}`;
    const typeA = `TypeA${id}`;
    const typeB = `TypeB${id}`;
    const corr = `corr-${randomUUID()}`;
    const s = {
      acct1: `${acct}-1`,
      acct2: `${acct}-2-x`, // category by the FIRST separator: acct
      nosep: `nosep${id}`, // no separator: no category
      lead: `-lead${id}`, // separator at index 0: no category
      tail: `tail${id}-`, // separator at the end: category tail
      sys: `$sys${id}-1`, // a system stream
      acct5: `${acct}-5`,
      lnk1: `${lnk}-1`, // link events
      acct3: `${acct}-3`, // hard-deleted
    };

    beforeAll(async () => {
      await appendOk(t, s.acct1, [newEvent(typeA, { n: 0 }), newEvent(typeB, { n: 1 }, { $correlationId: corr })]);
      await appendOk(t, s.acct2, [newEvent(typeA, { n: 0 })]);
      await appendOk(t, s.nosep, [newEvent(typeA, { n: 0 }, { $correlationId: corr })]);
      await appendOk(t, s.lead, [newEvent(typeA, { n: 0 })]);
      await appendOk(t, s.tail, [newEvent(typeA, { n: 0 })]);
      await appendOk(t, s.sys, [newEvent(typeA, { n: 0 }, { $correlationId: corr })]);
      await setMetadataOk(t, s.acct1, { custom: 1 }); // $$acct-1 #0
      await appendOk(t, s.acct5, [newEvent(typeA, { n: 0 }, { $correlationId: 42 }), newEvent(typeB, { n: 1 }, { other: corr })]);
      await appendOk(t, s.lnk1, [newEvent('$>', `0@${s.acct1}`), newEvent('$>', `1@${s.acct1}`)]);
      await appendOk(t, s.acct3, [newEvent(typeA, { n: 0 })]);
      await deleteOk(t, s.acct3, true);
    });

    it('$by_category: every event and link of a categorised stream, in log order, with $o; tombstones with $deleted -1', async () => {
      await eventually(async () => {
        const ce = await stored(t, `$ce-${acct}`);
        expect(ce).not.toBeNull();
        expect(ce!.map((e) => e.data)).toEqual([
          `0@${s.acct1}`, `1@${s.acct1}`, `0@${s.acct2}`, `0@${s.acct5}`, `1@${s.acct5}`, `0@${s.acct3}`,
          expect.stringMatching(new RegExp(`^\\d+@${s.acct3}$`)),
        ]);
      });
      const ce = (await stored(t, `$ce-${acct}`))!;
      expect(ce.map((e) => e.eventType)).toEqual(Array(7).fill('$>'));
      expect(ce.map((e) => e.meta?.$o)).toEqual([s.acct1, s.acct1, s.acct2, s.acct5, s.acct5, s.acct3, s.acct3]);
      expect(ce.slice(0, 6).every((e) => e.meta?.$deleted === undefined)).toBe(true);
      expect(ce[6].meta?.$deleted).toBe(-1);
      // The $$acct-1 metadata event is not categorised (not a deletion); neither is the $-stream.
      expect(ce.some((e) => e.data?.includes('$$'))).toBe(false);

      // A link event is re-categorised with the link's own target as data, $o = the link's stream.
      await eventually(async () => {
        const ceLnk = await stored(t, `$ce-${lnk}`);
        expect(ceLnk?.map((e) => [e.eventType, e.data, e.meta?.$o])).toEqual([
          ['$>', `0@${s.acct1}`, s.lnk1], ['$>', `1@${s.acct1}`, s.lnk1],
        ]);
      });
      // Separator at the end still gives a category; at index 0 or absent none.
      await eventually(async () => expect(await datas(t, `$ce-tail${id}`)).toEqual([`0@${s.tail}`]));
      for (const c of ['', `-lead${id}`, `nosep${id}`, `$sys${id}`]) {
        expect((await datas(t, `$ce-${c}`)).filter((d) => d?.includes(id)), `$ce-${c}`).toEqual([]);
      }
    });

    it('$ce-{category} reads resolve to the original events (stream reads resolve links by default)', async () => {
      await eventually(async () => expect((await datas(t, `$ce-${acct}`)).length).toBe(7));
      const res = await http(t, `/streams/${enc(`$ce-${acct}`)}/0/forward/3?embed=body`, { headers: { Accept: ATOM } });
      expect(res.status).toBe(200);
      const entries = [...(await res.json()).entries].sort((a: any, b: any) => a.positionEventNumber - b.positionEventNumber);
      expect(entries.map((e: any) => [e.streamId, e.eventNumber, e.eventType, e.positionStreamId, e.positionEventNumber])).toEqual([
        [s.acct1, 0, typeA, `$ce-${acct}`, 0], [s.acct1, 1, typeB, `$ce-${acct}`, 1], [s.acct2, 0, typeA, `$ce-${acct}`, 2],
      ]);
      expect(JSON.parse(entries[1].data)).toEqual({ n: 1 });
      expect(JSON.parse(entries[0].linkMetaData).$o).toBe(s.acct1);
    });

    it('$stream_by_category: one $@ per categorised stream (first event), data = stream name', async () => {
      await eventually(async () => {
        const cat = await stored(t, `$category-${acct}`);
        expect(cat?.map((e) => [e.eventType, e.data])).toEqual([
          ['$@', s.acct1], ['$@', s.acct2], ['$@', s.acct5], ['$@', s.acct3],
        ]);
      });
      await eventually(async () => expect(await datas(t, `$category-${lnk}`)).toEqual([s.lnk1]));
      await eventually(async () => expect(await datas(t, `$category-tail${id}`)).toEqual([s.tail]));
      for (const c of ['', `-lead${id}`, `nosep${id}`, `$sys${id}`, `$$${acct}`]) {
        expect((await datas(t, `$category-${c}`)).filter((d) => d?.includes(id)), `$category-${c}`).toEqual([]);
      }
    });

    it('$streams: 0@stream once for every stream, system and metadata streams included, never $streams itself', async () => {
      const expected = [
        s.acct1, s.acct2, s.nosep, s.lead, s.tail, s.sys, `$$${s.acct1}`, s.acct5, s.lnk1, s.acct3,
        `$ce-${acct}`, `$category-${acct}`, `$et-${typeA}`, `$et-${typeB}`, `$bc-${corr}`, `$ce-${lnk}`,
      ];
      await eventually(async () => {
        const all = (await stored(t, '$streams'))!;
        expect(all).not.toBeNull();
        const data = all.map((e) => e.data);
        for (const x of expected) expect(data.filter((d) => d === `0@${x}`), x).toHaveLength(1);
      });
      const all = (await stored(t, '$streams'))!;
      expect(all.every((e) => e.eventType === '$>')).toBe(true);
      expect(all.every((e) => /^0@/.test(e.data ?? ''))).toBe(true);
      expect(all.some((e) => e.data === '0@$streams')).toBe(false);
      const data = all.map((e) => e.data);
      expect(new Set(data).size).toBe(data.length); // never twice
      // Log order: acct-1 was created before acct-2-x, which was before the link stream.
      expect(data.indexOf(`0@${s.acct1}`)).toBeLessThan(data.indexOf(`0@${s.acct2}`));
      expect(data.indexOf(`0@${s.acct2}`)).toBeLessThan(data.indexOf(`0@${s.lnk1}`));
    });

    it('$by_event_type: non-link events of non-$ streams into $et-{type}; tombstones into $et-$deleted with $deleted -1', async () => {
      await eventually(async () => {
        expect(await datas(t, `$et-${typeA}`)).toEqual([
          `0@${s.acct1}`, `0@${s.acct2}`, `0@${s.nosep}`, `0@${s.lead}`, `0@${s.tail}`, `0@${s.acct5}`, `0@${s.acct3}`,
        ]);
        expect(await datas(t, `$et-${typeB}`)).toEqual([`1@${s.acct1}`, `1@${s.acct5}`]);
      });
      const et = (await stored(t, `$et-${typeA}`))!;
      expect(et.every((e) => e.eventType === '$>' && e.meta?.$deleted === undefined)).toBe(true);
      await eventually(async () => {
        const deleted = ((await stored(t, '$et-$deleted')) ?? []).filter((e) => e.data?.endsWith(`@${s.acct3}`));
        expect(deleted.map((e) => [e.eventType, e.meta?.$deleted])).toEqual([['$>', -1]]);
        expect(deleted[0].data).toMatch(new RegExp(`^\\d+@${s.acct3}$`));
      });
      // Link events are not indexed, and the tombstone is not indexed under its own type.
      expect((await datas(t, '$et-$>')).filter((d) => d?.includes(id))).toEqual([]);
      expect((await datas(t, '$et-$streamDeleted')).filter((d) => d?.includes(id))).toEqual([]);
    });

    it('$by_correlation_id: events with a string $correlationId into $bc-{id} with $eventTimestamp', async () => {
      await eventually(async () => expect(await datas(t, `$bc-${corr}`)).toEqual([`1@${s.acct1}`, `0@${s.nosep}`]));
      const bc = (await stored(t, `$bc-${corr}`))!;
      expect(bc.every((e) => e.eventType === '$>')).toBe(true);
      // $eventTimestamp is the indexed event's time.
      for (const [i, [stream, n]] of ([[s.acct1, 1], [s.nosep, 0]] as const).entries()) {
        const res = await http(t, `/streams/${enc(stream)}/${n}?embed=body`, { headers: { Accept: ATOM } });
        const original = await res.json();
        const ts = bc[i].meta?.$eventTimestamp;
        expect(typeof ts, JSON.stringify(bc[i].meta)).toBe('string');
        expect(Math.abs(Date.parse(ts) - Date.parse(original.updated))).toBeLessThan(1);
      }
      // A numeric correlation id is not indexed.
      expect(await datas(t, '$bc-42')).toEqual([]);
    });

    // Reference §18: "deletions of a stream produce a link with $deleted: -1" and the category
    // rule applies to "deletions of metadata streams": a soft delete ($tb = max in $$stream) is a deletion.
    it('$by_category: a soft-deleted stream gives a link with $deleted -1 and $o = the stream', async () => {
      const cat = word('soft');
      const stream = `${cat}-1`;
      const marker = `${cat}-2`;
      await appendOk(t, stream, [newEvent('Soft', { n: 0 })]);
      await deleteOk(t, stream, false);
      await appendOk(t, marker, [newEvent('Soft', { n: 0 })]); // processed after the deletion
      await eventually(async () => expect(await datas(t, `$ce-${cat}`)).toContain(`0@${marker}`));
      const ce = (await stored(t, `$ce-${cat}`))!;
      expect(ce.map((e) => e.data)).toEqual([
        `0@${stream}`, expect.stringMatching(new RegExp(`^\\d+@(\\$\\$)?${stream}$`)), `0@${marker}`,
      ]);
      expect(ce[1].meta).toMatchObject({ $o: stream, $deleted: -1 });
    });

    it('$by_event_type: a soft-deleted stream is indexed into $et-$deleted with $deleted -1', async () => {
      const cat = word('softet');
      const stream = `${cat}-1`;
      const marker = `${cat}-2`;
      const type = word('SoftType');
      await appendOk(t, stream, [newEvent(type, { n: 0 })]);
      await deleteOk(t, stream, false);
      await appendOk(t, marker, [newEvent(type, { n: 0 })]);
      await eventually(async () => expect(await datas(t, `$et-${type}`)).toEqual([`0@${stream}`, `0@${marker}`]));
      const deleted = ((await stored(t, '$et-$deleted')) ?? []).filter((e) => new RegExp(`^\\d+@(\\$\\$)?${stream}$`).test(e.data ?? ''));
      expect(deleted.map((e) => e.meta?.$deleted)).toEqual([-1]);
    });
  });

  // -------------------------------------------------------------------------------------------
  it('a new stream appears in $ce-{category} and $streams within 100 ms under light load', async () => {
    const trials: { ce: number; streams: number }[] = [];
    for (let i = 0; i < 7; i++) {
      const cat = word('fast');
      const stream = `${cat}-1`;
      const started = performance.now();
      await appendOk(t, stream, [newEvent('Fast', { i })]);
      const [ce, streams] = await Promise.all([
        (async () => {
          for (;;) {
            const res = await http(t, `/streams/${enc(`$ce-${cat}`)}/0/forward/1`, { headers: { Accept: ATOM, 'SVC-ResolveLinkTos': 'False' } });
            if (res.status === 200 && (await res.json()).entries.length === 1) return performance.now() - started;
            if (performance.now() - started > 5000) return Infinity;
            await sleep(2);
          }
        })(),
        (async () => {
          for (;;) {
            if (await inStreamsHead(t, stream)) return performance.now() - started;
            if (performance.now() - started > 5000) return Infinity;
            await sleep(2);
          }
        })(),
      ]);
      trials.push({ ce, streams });
      await sleep(20); // light load: one write at a time
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    const summary = JSON.stringify(trials.map((x) => [Math.round(x.ce), Math.round(x.streams)]));
    // Every trial gets there; the typical one (the median of 7, measured from before the append
    // request, HTTP polling included) within 100 ms.
    expect(trials.every((x) => Number.isFinite(x.ce) && Number.isFinite(x.streams)), summary).toBe(true);
    expect(median(trials.map((x) => x.ce)), summary).toBeLessThan(100);
    expect(median(trials.map((x) => x.streams)), summary).toBeLessThan(100);
  });

  it('a record a system projection cannot index still counts as processed ($streams indexes first events only)', async () => {
    const stream = `${word('later')}-1`;
    await appendOk(t, stream, [newEvent('First', {})]);
    await eventually(async () => expect((await datas(t, '$streams')).filter((d) => d === `0@${stream}`)).toHaveLength(1));
    const before = await stats(t, '$streams');
    await appendOk(t, stream, Array.from({ length: 5 }, () => newEvent('Later', {})));
    // Five events that are not first ones: read over undecoded, and counted.
    await eventually(async () => expect((await stats(t, '$streams')).eventsProcessedAfterRestart).toBeGreaterThanOrEqual(before.eventsProcessedAfterRestart + 5));
  });

  it('they report statistics like any projection: processed events, position, checkpoint, progress', async () => {
    const cat = word('stat');
    const before = await stats(t, '$by_category');
    await appendOk(t, `${cat}-1`, [newEvent('Stat', {}), newEvent('Stat', {})]);
    await eventually(async () => expect(await datas(t, `$ce-${cat}`)).toHaveLength(2));
    const after = await eventually(async () => {
      const s = await stats(t, '$by_category');
      expect(commitOf(s.lastCheckpoint)).toBeGreaterThan(commitOf(before.lastCheckpoint));
      return s;
    });
    expect(after).toMatchObject({ name: '$by_category', status: 'Running', mode: 'Continuous', checkpointStatus: '', stateReason: '' });
    expect(after.eventsProcessedAfterRestart).toBeGreaterThanOrEqual(before.eventsProcessedAfterRestart + 2);
    expect(commitOf(after.position)).toBeGreaterThanOrEqual(commitOf(after.lastCheckpoint));
    expect(typeof after.progress).toBe('number');
    expect(after.progress).toBeGreaterThan(0);
    expect(after.progress).toBeLessThanOrEqual(100);
    for (const k of ['coreProcessingTime', 'version', 'epoch', 'bufferedEvents', 'partitionsCached', 'writesInProgress', 'readsInProgress']) {
      expect(typeof after[k], k).toBe('number');
    }
    expect(after.statusUrl).toBe(`${t.url}/projection/%24by_category`);
    expect(after.disableCommandUrl).toBe(`${t.url}/projection/%24by_category/command/disable`);
    const wrapped = await http(t, `${pp('$by_category')}/statistics`);
    expect(wrapped.status).toBe(200);
    const w = await wrapped.json();
    expect(w.projections).toHaveLength(1);
    expect(w.projections[0].name).toBe('$by_category');
    // The native projections keep no state.
    const state = await http(t, `${pp('$by_category')}/state`);
    expect(state.status).toBe(200);
  });

  // -------------------------------------------------------------------------------------------
  it('fromCategory user projections read $ce-{c}: state per category and foreachStream partitions by the original stream', async () => {
    const cat = word('shop');
    const whole = word('wholecat');
    const per = word('perstream');
    await createContinuous(t, whole, `fromCategory('${cat}').when({
      $init: function () { return { n: 0, seen: [] }; },
      $any: function (s, e) { s.n += 1; s.seen.push(e.streamId + '#' + e.sequenceNumber + ':' + e.eventType + ':' + e.category); return s; }
    })`);
    await createContinuous(t, per, `fromCategory('${cat}').foreachStream().when({
      $init: function () { return { n: 0, types: [] }; },
      $any: function (s, e) { s.n += 1; s.types.push(e.eventType); s.stream = e.streamId; s.category = e.category; return s; }
    })`);
    await appendOk(t, `${cat}-1`, [newEvent('Ordered', { a: 1 }), newEvent('Paid', { a: 2 })]);
    await appendOk(t, `${cat}x-1`, [newEvent('Ordered', { other: true })]); // another category
    await appendOk(t, `${cat}-2`, [newEvent('Ordered', { a: 3 })]);
    await appendOk(t, `$${cat}-3`, [newEvent('Ordered', { sys: true })]); // a $-stream: no category

    await eventually(async () => expect(await stateOf(t, whole)).toEqual({
      n: 3, seen: [`${cat}-1#0:Ordered:${cat}`, `${cat}-1#1:Paid:${cat}`, `${cat}-2#0:Ordered:${cat}`],
    }));
    await eventually(async () => {
      expect(await stateOf(t, per, `${cat}-1`)).toEqual({ n: 2, types: ['Ordered', 'Paid'], stream: `${cat}-1`, category: cat });
      expect(await stateOf(t, per, `${cat}-2`)).toEqual({ n: 1, types: ['Ordered'], stream: `${cat}-2`, category: cat });
    });
    expect(await stateOf(t, per, `${cat}x-1`)).toBeUndefined();
    expect(await stateOf(t, per, `$${cat}-3`)).toBeUndefined();

    // They keep up with new events of the category.
    await appendOk(t, `${cat}-2`, [newEvent('Shipped', {})]);
    await eventually(async () => expect(await stateOf(t, per, `${cat}-2`)).toEqual({ n: 2, types: ['Ordered', 'Shipped'], stream: `${cat}-2`, category: cat }));
    await eventually(async () => expect((await stateOf(t, whole) as any).n).toBe(4));
    for (const name of [whole, per]) expect((await stats(t, name)).status).toBe('Running');
  });
});

// =============================================================================================
describe('checkpoints of the system projections', () => {
  let t: TestNode;
  beforeAll(async () => { t = await startTestNode({ startStandardProjections: true }); });
  afterAll(async () => { await t?.dispose(); });

  it('links are written with a checkpoint ($projections-{name}-checkpoint, $maxCount 2) and reported in lastCheckpoint', async () => {
    const cat = word('ckp');
    await appendOk(t, `${cat}-1`, [newEvent('Ck', {})]);
    await eventually(async () => expect(await datas(t, `$ce-${cat}`)).toEqual([`0@${cat}-1`]));
    const link = (await stored(t, `$ce-${cat}`))![0];
    expect(link.meta?.$v).toMatch(/^\d+:-?\d+:\d+:4$/);
    expect(typeof link.meta?.$c).toBe('number');

    const cps = (await stored(t, '$projections-$by_category-checkpoint'))!;
    expect(cps).not.toBeNull();
    expect(cps.length).toBeGreaterThanOrEqual(1);
    expect(cps.length).toBeLessThanOrEqual(2);
    const last = cps[cps.length - 1];
    expect(last.eventType).toBe('$ProjectionCheckpoint');
    expect(JSON.parse(last.data!)).toEqual([]);
    // The link and the checkpoint covering it were written together.
    expect(last.meta).toMatchObject({ $v: link.meta!.$v, $c: link.meta!.$c, $p: link.meta!.$p });
    const s = await stats(t, '$by_category');
    expect(commitOf(s.lastCheckpoint)).toBe(link.meta!.$c);

    const md = await http(t, `/streams/${enc('$projections-$by_category-checkpoint')}/metadata`, { headers: { Accept: 'application/json' } });
    expect(md.status).toBe(200);
    expect((await md.json()).$maxCount).toBe(2);
  });

  // Reference §18: $by_event_type writes "at each checkpoint a $Checkpoint into $et".
  it('$by_event_type writes a $Checkpoint into $et at its checkpoints', async () => {
    const type = word('EtCk');
    await appendOk(t, word('etck'), [newEvent(type, {})]);
    await eventually(async () => expect(await datas(t, `$et-${type}`)).toHaveLength(1));
    await eventually(async () => {
      const et = await stored(t, '$et');
      expect(et, '$et stream').not.toBeNull();
      const last = et![et!.length - 1];
      expect(last.eventType).toBe('$Checkpoint');
      expect(typeof tryJson(last.data)).toBe('object');
    }, 2000);
  });

  it('after a restart they resume from their checkpoint: nothing indexed twice, new events indexed', async () => {
    const cat = word('rst');
    const type = word('RstType');
    await appendOk(t, `${cat}-1`, [newEvent(type, {})]);
    await eventually(async () => {
      expect(await datas(t, `$ce-${cat}`)).toEqual([`0@${cat}-1`]);
      expect(await datas(t, `$et-${type}`)).toEqual([`0@${cat}-1`]);
      expect(await datas(t, `$category-${cat}`)).toEqual([`${cat}-1`]);
    });
    await t.restart();
    for (const name of SYSTEM) await waitStatus(t, name, 'Running');
    await appendOk(t, `${cat}-1`, [newEvent(type, {})]);
    await appendOk(t, `${cat}-2`, [newEvent(type, {})]);
    await eventually(async () => expect(await datas(t, `$ce-${cat}`)).toEqual([`0@${cat}-1`, `1@${cat}-1`, `0@${cat}-2`]));
    await eventually(async () => expect(await datas(t, `$category-${cat}`)).toEqual([`${cat}-1`, `${cat}-2`]));
    await eventually(async () => expect(await datas(t, `$et-${type}`)).toEqual([`0@${cat}-1`, `1@${cat}-1`, `0@${cat}-2`]));
    await eventually(async () => {
      const streams = await datas(t, '$streams');
      expect(streams.filter((d) => d === `0@${cat}-1`)).toHaveLength(1);
      expect(streams.filter((d) => d === `0@${cat}-2`)).toHaveLength(1);
      expect(new Set(streams).size).toBe(streams.length);
    });
    const s = await stats(t, '$by_category');
    expect(s.eventsProcessedAfterRestart).toBeGreaterThan(0);
  });
});

// =============================================================================================
describe('disable and enable a system projection', () => {
  let t: TestNode;
  beforeAll(async () => { t = await startTestNode({ startStandardProjections: true }); });
  afterAll(async () => { await t?.dispose(); });

  it('a disabled $by_category indexes nothing while the others go on; enabled again it catches up without duplicates', async () => {
    const cat = word('dis');
    await appendOk(t, `${cat}-1`, [newEvent('D', { n: 0 })]);
    await eventually(async () => expect(await datas(t, `$ce-${cat}`)).toEqual([`0@${cat}-1`]));

    await command(t, '$by_category', 'disable');
    const stopped = await waitStatus(t, '$by_category', 'Stopped');
    expect(stopped.status).toBe('Stopped'); // not "(Enabled)"
    await appendOk(t, `${cat}-1`, [newEvent('D', { n: 1 })]);
    await appendOk(t, `${cat}-2`, [newEvent('D', { n: 0 })]);
    // The other system projections keep running ...
    await eventually(async () => expect(await datas(t, `$category-${cat}`)).toEqual([`${cat}-1`, `${cat}-2`]));
    await eventually(async () => expect(await inStreamsHead(t, `${cat}-2`)).toBe(true));
    await sleep(200);
    // ... but $by_category does not.
    expect(await datas(t, `$ce-${cat}`)).toEqual([`0@${cat}-1`]);
    expect((await stats(t, '$by_category')).status).toBe('Stopped');

    await command(t, '$by_category', 'enable');
    await waitStatus(t, '$by_category', 'Running');
    await eventually(async () => expect(await datas(t, `$ce-${cat}`)).toEqual([`0@${cat}-1`, `1@${cat}-1`, `0@${cat}-2`]));
    await sleep(200);
    expect(await datas(t, `$ce-${cat}`)).toEqual([`0@${cat}-1`, `1@${cat}-1`, `0@${cat}-2`]);
  });

  it('abort stops it too, and enable resumes it from its last checkpoint', async () => {
    const cat = word('abt');
    await appendOk(t, `${cat}-1`, [newEvent('A', {})]);
    await eventually(async () => expect(await datas(t, `$ce-${cat}`)).toEqual([`0@${cat}-1`]));
    await command(t, '$by_category', 'abort');
    await waitStatus(t, '$by_category', /^(Aborted|Stopped)$/);
    await appendOk(t, `${cat}-2`, [newEvent('A', {})]);
    await eventually(async () => expect(await inStreamsHead(t, `${cat}-2`)).toBe(true));
    await sleep(150);
    expect(await datas(t, `$ce-${cat}`)).toEqual([`0@${cat}-1`]);
    await command(t, '$by_category', 'enable');
    await waitStatus(t, '$by_category', 'Running');
    await eventually(async () => expect(await datas(t, `$ce-${cat}`)).toEqual([`0@${cat}-1`, `0@${cat}-2`]));
  });
});

// =============================================================================================
describe('reset of a system projection', () => {
  let t: TestNode;
  beforeAll(async () => { t = await startTestNode({ startStandardProjections: true }); });
  afterAll(async () => { await t?.dispose(); });

  it('reset rebuilds $ce-* from the start of the log in a new epoch: old links hidden, each target once', async () => {
    const cat = word('rs');
    await appendOk(t, `${cat}-1`, [newEvent('R', { n: 0 }), newEvent('R', { n: 1 })]);
    await appendOk(t, `${cat}-2`, [newEvent('R', { n: 0 })]);
    const expected = [`0@${cat}-1`, `1@${cat}-1`, `0@${cat}-2`];
    await eventually(async () => expect(await datas(t, `$ce-${cat}`)).toEqual(expected));
    const before = await stats(t, '$by_category');

    await command(t, '$by_category', 'reset');
    const after = await waitStatus(t, '$by_category', 'Running');
    expect(after.version).toBe(before.version + 1);
    expect(after.epoch).toBe(after.version);

    // The rebuilt links are new events (numbers after the old ones); the old ones are hidden.
    await eventually(async () => {
      const ce = (await stored(t, `$ce-${cat}`))!;
      expect(ce.map((e) => e.data)).toEqual(expected);
      expect(ce.every((e) => e.eventNumber >= 3)).toBe(true);
      for (const e of ce) expect(e.meta?.$v).toMatch(new RegExp(`^\\d+:${after.epoch}:${after.version}:4$`));
    });
    // And it goes on indexing afterwards, once.
    await appendOk(t, `${cat}-3`, [newEvent('R', {})]);
    await eventually(async () => expect(await datas(t, `$ce-${cat}`)).toEqual([...expected, `0@${cat}-3`]));
    const cps = (await stored(t, '$projections-$by_category-checkpoint'))!;
    expect(cps[cps.length - 1].meta?.$v).toMatch(new RegExp(`^\\d+:${after.epoch}:${after.version}:4$`));
  });
});

// =============================================================================================
describe('changing the category rule of $by_category / $stream_by_category', () => {
  let t: TestNode;
  beforeAll(async () => { t = await startTestNode({ startStandardProjections: true }); });
  afterAll(async () => { await t?.dispose(); });

  it('PUT query while stopped: one character = last occurrence, first|last + separator; affects only new processing', async () => {
    const id = randomUUID().replace(/-/g, '').slice(0, 10);
    const old = `old${id}`;
    await appendOk(t, `${old}-1`, [newEvent('C', { n: 0 })]);
    await eventually(async () => {
      expect(await datas(t, `$ce-${old}`)).toEqual([`0@${old}-1`]);
      expect(await datas(t, `$category-${old}`)).toEqual([`${old}-1`]);
    });

    for (const name of ['$by_category', '$stream_by_category']) {
      await command(t, name, 'disable');
      await waitStatus(t, name, 'Stopped');
    }
    for (const [name, config] of [['$by_category', '_'], ['$stream_by_category', 'first\r\n_']]) {
      const res = await http(t, `${pp(name)}/query`, { method: 'PUT', headers: { 'Content-Type': 'application/javascript' }, body: config });
      expect(res.status, await res.clone().text()).toBe(200);
      expect(await res.json()).toEqual({ name });
      const q = await http(t, `${pp(name)}/query`);
      expect(await q.text()).toBe(config);
    }
    for (const name of ['$by_category', '$stream_by_category']) {
      await command(t, name, 'enable');
      await waitStatus(t, name, 'Running');
    }

    const neu = `new${id}`;
    await appendOk(t, `${old}-1`, [newEvent('C', { n: 1 })]); // no '_': no longer categorised
    await appendOk(t, `${neu}_x_y`, [newEvent('C', {})]);
    await appendOk(t, `${neu}-a_b`, [newEvent('C', {})]);
    // $by_category: last '_'
    await eventually(async () => expect(await datas(t, `$ce-${neu}_x`)).toEqual([`0@${neu}_x_y`]));
    await eventually(async () => expect(await datas(t, `$ce-${neu}-a`)).toEqual([`0@${neu}-a_b`]));
    // $stream_by_category: first '_'
    await eventually(async () => expect(await datas(t, `$category-${neu}`)).toEqual([`${neu}_x_y`]));
    await eventually(async () => expect(await datas(t, `$category-${neu}-a`)).toEqual([`${neu}-a_b`]));
    // What was indexed before stays; the old rule is not applied any more.
    expect(await datas(t, `$ce-${old}`)).toEqual([`0@${old}-1`]);
    expect(await datas(t, `$ce-${neu}`)).toEqual([]);
    expect(await datas(t, `$category-${neu}_x`)).toEqual([]);
    expect(await datas(t, `$category-${old}`)).toEqual([`${old}-1`]);
  });
});

// =============================================================================================
describe('--run-projections None', () => {
  let t: TestNode;
  beforeAll(async () => { t = await startTestNode({ startStandardProjections: true, runProjections: 'None' }); });
  afterAll(async () => { await t?.dispose(); });

  it('no projection runs: nothing is indexed and user projections do not process', async () => {
    const cat = word('none');
    const type = word('NoneType');
    const corr = randomUUID();
    const user = word('noneuser');
    await createContinuous(t, user, `fromAll().when({ $init: function () { return { n: 0 }; }, $any: function (s) { s.n += 1; return s; } })`);
    await appendOk(t, `${cat}-1`, [newEvent(type, {}, { $correlationId: corr })]);
    await sleep(500);
    expect(await stored(t, `$ce-${cat}`)).toBeNull();
    expect(await stored(t, `$category-${cat}`)).toBeNull();
    expect(await stored(t, `$et-${type}`)).toBeNull();
    expect(await stored(t, `$bc-${corr}`)).toBeNull();
    expect(await stored(t, '$streams')).toBeNull();
    for (const name of SYSTEM) expect(await stored(t, `$projections-${name}-checkpoint`), name).toBeNull();
    const res = await http(t, '/projections/any');
    expect(res.status).toBe(200);
    const list = (await res.json()).projections;
    for (const name of SYSTEM) expect(list.map((p: any) => p.name)).toContain(name);
    for (const p of list) expect(p.status, p.name).not.toMatch(/^Running/);
    expect(await stateOf(t, user)).toBeUndefined();
    expect((await stats(t, user)).eventsProcessedAfterRestart).toBe(0);
  });
});

describe('--run-projections System', () => {
  let t: TestNode;
  beforeAll(async () => { t = await startTestNode({ startStandardProjections: true, runProjections: 'System' }); });
  afterAll(async () => { await t?.dispose(); });

  it('only the system projections run', async () => {
    const cat = word('sysonly');
    const user = word('sysuser');
    await createContinuous(t, user, `fromCategory('${cat}').when({ $init: function () { return { n: 0 }; }, $any: function (s) { s.n += 1; return s; } })`);
    await appendOk(t, `${cat}-1`, [newEvent('S', {})]);
    await eventually(async () => expect(await datas(t, `$ce-${cat}`)).toEqual([`0@${cat}-1`]));
    await eventually(async () => expect(await inStreamsHead(t, `${cat}-1`)).toBe(true));
    for (const name of SYSTEM) expect((await stats(t, name)).status, name).toBe('Running');
    await sleep(300);
    expect(await stateOf(t, user)).toBeUndefined();
    const u = await stats(t, user);
    expect(u.status).not.toMatch(/^Running/);
    expect(u.eventsProcessedAfterRestart).toBe(0);
  });
});

describe('--start-standard-projections false (run-projections All)', () => {
  let t: TestNode;
  beforeAll(async () => { t = await startTestNode({ startStandardProjections: false, runProjections: 'All' }); });
  afterAll(async () => { await t?.dispose(); });

  it('the system projections exist but are stopped; user projections run; enabling one indexes the log from its start', async () => {
    for (const name of SYSTEM) expect((await stats(t, name)).status, name).toBe('Stopped');
    const cat = word('late');
    const user = word('lateuser');
    await createContinuous(t, user, `fromStream('${cat}-1').when({ $init: function () { return { n: 0 }; }, $any: function (s) { s.n += 1; return s; } })`);
    await appendOk(t, `${cat}-1`, [newEvent('L', {}), newEvent('L', {})]);
    await eventually(async () => expect(await stateOf(t, user)).toEqual({ n: 2 }));
    expect(await stored(t, `$ce-${cat}`)).toBeNull();
    expect(await stored(t, '$streams')).toBeNull();

    await command(t, '$by_category', 'enable');
    await waitStatus(t, '$by_category', 'Running');
    await eventually(async () => expect(await datas(t, `$ce-${cat}`)).toEqual([`0@${cat}-1`, `1@${cat}-1`]));
    // Only the one enabled.
    expect(await stored(t, '$streams')).toBeNull();
    expect((await stats(t, '$streams')).status).toBe('Stopped');
  });
});
