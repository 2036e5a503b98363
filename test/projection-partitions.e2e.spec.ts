import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVENTS_JSON, eventually, http, newEvent, startTestNode, uniq, type TestNode } from './support/node.js';

// Partition states beyond --projection-partition-cache live in their checkpoint streams only: a
// running projection keeps that many in its sandbox and reads the others back when an event needs
// them. What a user sees must not change: every partition's state is right while it runs, after a
// restart (which reads no partition at start), and after a reset (an older epoch's checkpoints are
// not read back).

let t: TestNode;
beforeAll(async () => { t = await startTestNode({ projectionPartitionCache: 3 }); });
afterAll(async () => { await t?.dispose(); });

const KEYS = 12;
const query = (stream: string) => `fromStream('${stream}').partitionBy(e => e.body.k).when({
  $init: () => ({ n: 0, sum: 0 }),
  Counted: (s, e) => { s.n++; s.sum += e.body.v; },
})`;

async function appendRound(stream: string, round: number): Promise<void> {
  // One request per key, so that the projection sees many batches and partitions come and go.
  for (let k = 0; k < KEYS; k++) {
    const res = await http(t, `/streams/${stream}`, {
      method: 'POST', headers: { 'Content-Type': EVENTS_JSON }, body: JSON.stringify([newEvent('Counted', { k: `key-${k}`, v: round * 100 + k })]),
    });
    expect(res.status).toBe(201);
  }
}

/** What every partition's state must be after `rounds` rounds. */
function expected(rounds: number, k: number): { n: number; sum: number } {
  let sum = 0;
  for (let r = 0; r < rounds; r++) sum += r * 100 + k;
  return { n: rounds, sum };
}

async function stateOf(name: string, key: string): Promise<unknown> {
  const res = await http(t, `/projection/${name}/state?partition=${key}`);
  expect(res.status).toBe(200);
  const text = await res.text();
  return text === '' ? undefined : JSON.parse(text);
}

async function expectStates(name: string, rounds: number): Promise<void> {
  await eventually(async () => {
    for (let k = 0; k < KEYS; k++) expect(await stateOf(name, `key-${k}`)).toEqual(expected(rounds, k));
  }, 15_000);
}

describe('partition states beyond the partition cache', () => {
  it('are read back from their checkpoints while the projection runs, after a restart and after a reset', async () => {
    const name = uniq('parts');
    const stream = uniq('counted');
    const created = await http(t, `/projections/continuous?name=${name}&emit=no`, { method: 'POST', body: query(stream) });
    expect(created.status).toBe(201);

    for (let round = 0; round < 3; round++) await appendRound(stream, round);
    await expectStates(name, 3);
    // More partitions than the cache holds were used: the sandbox keeps a few, the rest are in checkpoints.
    // (Once the log went quiet, the states are checkpointed, and the sandbox lets the oldest go.)
    await eventually(async () => {
      const stats = (await (await http(t, `/projection/${name}/statistics`)).json()).projections[0];
      expect(stats.partitionsCached).toBeLessThanOrEqual(3);
      expect(stats.partitionsCached).toBeGreaterThan(0);
    }, 5000);

    await t.restart();
    await expectStates(name, 3);
    // Every partition goes on from its stored state, whether or not it is resident.
    await appendRound(stream, 3);
    await expectStates(name, 4);

    // A reset starts a new epoch: the checkpoints of the old one are not read back, so nothing counts twice.
    expect((await http(t, `/projection/${name}/command/reset`, { method: 'POST' })).status).toBe(200);
    await expectStates(name, 4);
    await appendRound(stream, 4);
    await expectStates(name, 5);
  });

  it('a partition the cache no longer holds answers its stored state', async () => {
    const name = uniq('parts-read');
    const stream = uniq('counted');
    expect((await http(t, `/projections/continuous?name=${name}&emit=no`, { method: 'POST', body: query(stream) })).status).toBe(201);
    await appendRound(stream, 0);
    await expectStates(name, 1);
    // key-0 was used first; eleven partitions since then pushed it out of a cache of three.
    expect(await stateOf(name, 'key-0')).toEqual(expected(1, 0));
    expect(await stateOf(name, 'no-such-key')).toBeUndefined();
  });
});
