import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startTestNode, uniq, type TestNode } from './support/node.js';
import {
  CHUNK_SIZE, buildDataset, expectLogIs, inDataset, pointsIn, readAll, removableBy, request, scavengeOk,
  type Dataset, type LogRecord,
} from './support/scavenge.js';

// A continuous fromAll projection counting the records of each dataset stream (fromAll reads
// every record of $all, deleted and expired ones too, but no links): before the scavenge it
// counts the whole dataset; reset after the scavenge, it counts only what remains.

let t: TestNode;
beforeAll(async () => { t = await startTestNode({ chunkSize: CHUNK_SIZE, memDb: false }); });
afterAll(async () => { await t?.dispose(); });

function countsOf(records: LogRecord[], d: Dataset): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const r of records) {
    if (!inDataset(d, r.streamId) || r.eventType === '$>') continue;
    counts[r.streamId] = (counts[r.streamId] ?? 0) + 1;
  }
  return counts;
}

async function stateOf(name: string): Promise<unknown> {
  const res = await request(t, `/projection/${encodeURIComponent(name)}/state`);
  expect(res.status).toBe(200);
  const text = await res.text();
  return text === '' ? undefined : JSON.parse(text);
}

describe('a projection over $all and a scavenge', () => {
  it('reset after a scavenge, it sees only what remains', async () => {
    const d = await buildDataset(t);
    const name = uniq('scavenge-counter');
    const query = `fromAll().when({
      $init: function () { return {}; },
      $any: function (s, e) { if (e.streamId.indexOf('${d.prefix}') >= 0) s[e.streamId] = (s[e.streamId] || 0) + 1; return s; }
    })`;
    const created = await request(t, `/projections/continuous?name=${encodeURIComponent(name)}&enabled=yes&emit=no`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: query,
    });
    expect(created.status, await created.clone().text()).toBe(201);
    const before = await readAll(t);
    const all = countsOf(before, d);
    await eventually(async () => expect(await stateOf(name)).toEqual(all), 10_000);

    await scavengeOk(t);
    const after = await readAll(t);
    const points = pointsIn(after);
    expect(points).toHaveLength(1);
    const removed = removableBy(before, points[0]);
    const mine = (s: string) => inDataset(d, s);
    expectLogIs(after, before, removed, mine);

    const reset = await request(t, `/projection/${encodeURIComponent(name)}/command/reset`, { method: 'POST' });
    expect(reset.status, await reset.clone().text()).toBe(200);
    const gone = new Set(removed.map((r) => r.position));
    const remaining = countsOf(before.filter((r) => !gone.has(r.position)), d);
    expect(remaining).not.toEqual(all);
    expect(remaining[d.soft]).toBe(1);
    expect(remaining[d.hard]).toBe(1); // the tombstone
    expect(remaining[d.maxCount]).toBe(3);
    await eventually(async () => expect(await stateOf(name)).toEqual(remaining), 10_000);
  });
});
