// Every projection fixture (fixtures/projections/) run over HTTP against one real node, each under
// a prefix of its own: its events appended one by one, the projection created in the fixture's
// mode once $by_category has linked them (a query reads to the end of the log as it is when it
// starts), then, once it has settled, GET state and result of each partition and every expected
// result and emitted stream read back event by event. The same fixtures run in memory in
// projection-fixtures.unit.spec.ts.

import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { append, eventually, http, newEvent, startTestNode, type TestNode } from './support/node.js';
import {
  categoryOf, comparable, expectedStreams, instantiate, loadFixtures, type Fixture, type ReadEvent,
} from './support/projection-fixtures.js';

let t: TestNode;
beforeAll(async () => { t = await startTestNode({ startStandardProjections: true }); }); // fromCategory reads $ce- streams
afterAll(async () => { await t?.dispose(); });

const path = (name: string) => `/projection/${encodeURIComponent(name)}`;

/** A stream's events oldest first, links not resolved ([] when it does not exist). */
async function readStream(stream: string): Promise<ReadEvent[]> {
  const out: ReadEvent[] = [];
  for (let from = 0; ;) {
    const res = await http(t, `/streams/${encodeURIComponent(stream)}/${from}/forward/4096?embed=tryharder`, {
      headers: { Accept: 'application/json', 'ES-ResolveLinkTos': 'false' },
    });
    if (res.status === 404) return out;
    expect(res.status, stream).toBe(200);
    const entries = [...(await res.json()).entries].reverse();
    for (const e of entries) {
      out.push({ eventType: e.eventType, isJson: e.isJson, data: e.data ?? '', metadata: e.metaData ?? '' });
    }
    if (entries.length < 4096) return out;
    from += 4096;
  }
}

async function appendEvents(f: Fixture): Promise<void> {
  for (const e of f.events) {
    const res = await append(t, e.stream, [newEvent(e.type, e.data, e.metadata)]);
    expect(res.status, await res.clone().text()).toBe(201);
  }
}

/** Waits until $by_category has linked every event of the fixture into its category stream. */
async function linkedByCategory(f: Fixture): Promise<void> {
  const counts = new Map<string, number>();
  for (const e of f.events) {
    const category = categoryOf(e.stream);
    if (category !== undefined) counts.set(category, (counts.get(category) ?? 0) + 1);
  }
  for (const [category, count] of counts) {
    await eventually(async () => expect(await readStream(`$ce-${category}`)).toHaveLength(count), 10_000);
  }
}

async function create(f: Fixture, name: string): Promise<void> {
  const res = await http(t, `/projections/${f.mode}?name=${encodeURIComponent(name)}&enabled=yes${f.emit ? '&emit=yes' : ''}`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: f.query,
  });
  expect(res.status, await res.clone().text()).toBe(201);
}

/** A query has completed; a continuous projection has read the whole log and written what it owes. */
async function settled(f: Fixture, name: string): Promise<void> {
  await eventually(async () => {
    const s = await (await http(t, path(name))).json();
    expect(s.status, s.stateReason).not.toMatch(/^Faulted/);
    if (f.mode === 'continuous') {
      expect(s.progress).toBe(100);
      expect(s.writePendingEventsAfterCheckpoint + s.writesInProgress).toBe(0);
    } else expect(s.status).toMatch(/^Completed/);
  }, 10_000);
}

/** GET state or result of each partition the fixture names (parsed; null when the answer is empty). */
async function answers(name: string, what: 'state' | 'result', partitions: string[]): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  for (const p of partitions) {
    const res = await http(t, `${path(name)}/${what}${p === '' ? '' : `?partition=${encodeURIComponent(p)}`}`);
    expect(res.status).toBe(200);
    const text = await res.text();
    out[p] = text === '' ? null : JSON.parse(text);
  }
  return out;
}

const fixtures = await loadFixtures();

describe('projection fixtures, over HTTP (fixtures/projections/)', () => {
  for (const fixture of fixtures) {
    it(`${fixture.name} (${fixture.mode})`, async () => {
      const prefix = `fx${randomUUID().slice(0, 8)}`;
      const name = `${prefix}-${fixture.name}`;
      const f = instantiate(fixture, { prefix, name });
      await appendEvents(f);
      await linkedByCategory(f);
      await create(f, name);
      await settled(f, name);
      // Links and results may still be on their way to readers: retry until everything matches (or time out on the last mismatch).
      await eventually(async () => {
        expect(await answers(name, 'state', Object.keys(f.expect.states)), 'states').toEqual(f.expect.states);
        expect(await answers(name, 'result', Object.keys(f.expect.results)), 'results').toEqual(f.expect.results);
        for (const [stream, events] of Object.entries(expectedStreams(f))) {
          expect(comparable(await readStream(stream), events), stream).toEqual(events);
        }
      }, 5_000);
    }, 30_000);
  }
});
