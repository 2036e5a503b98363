import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVENTS_JSON, eventually, http, newEvent, startTestNode, uniq, type TestNode } from './support/node.js';
import { spawnNode, type NodeProcess } from './support/process.js';

// Result streams are a change log that clients read and subscribe to (issue 11; projections.md
// §11 and §15): one Result (or ResultRemoved) per change of a partition's result, in event order,
// each partition's also linked from the main result stream; queries end theirs with $Eof.

let t: TestNode;
beforeAll(async () => { t = await startTestNode({ startStandardProjections: true }); }); // fromCategory reads $ce- streams
afterAll(async () => { await t?.dispose(); });

const p = (name: string) => `/projection/${encodeURIComponent(name)}`;

async function appendOk(node: { url: string }, stream: string, events: unknown[]): Promise<void> {
  const res = await http(node as TestNode, `/streams/${encodeURIComponent(stream)}`, {
    method: 'POST', headers: { 'Content-Type': EVENTS_JSON }, body: JSON.stringify(events),
  });
  expect(res.status, await res.clone().text()).toBe(201);
}

async function create(node: { url: string }, mode: string, name: string, query: string): Promise<void> {
  const res = await http(node as TestNode, `/projections/${mode}?name=${name}&enabled=yes`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: query,
  });
  expect(res.status, await res.clone().text()).toBe(201);
}

async function stats(node: { url: string }, name: string): Promise<any> {
  return (await http(node as TestNode, p(name))).json();
}

interface Read { eventNumber: number; eventType: string; data: string; body: any; metadata: any }

/** A stream's events oldest first, links not resolved (404: undefined). */
async function read(node: { url: string }, stream: string): Promise<Read[] | undefined> {
  const out: Read[] = [];
  for (let from = 0; ;) {
    const res = await http(node as TestNode, `/streams/${encodeURIComponent(stream)}/${from}/forward/4096?embed=tryharder`, {
      headers: { Accept: 'application/json', 'ES-ResolveLinkTos': 'false' },
    });
    if (res.status === 404) return undefined;
    expect(res.status).toBe(200);
    const entries = [...(await res.json()).entries].reverse();
    for (const e of entries) {
      out.push({ eventNumber: e.eventNumber, eventType: e.eventType, data: e.data ?? '', body: tryJson(e.data), metadata: tryJson(e.metaData) });
    }
    if (entries.length < 4096) return out;
    from += 4096;
  }
}

function tryJson(text: unknown): any {
  if (typeof text !== 'string' || text === '') return typeof text === 'object' ? text : undefined;
  try { return JSON.parse(text); } catch { return text; }
}

const changes = (events: Read[] | undefined) => (events ?? []).map((e) => [e.eventType, e.eventType === 'Result' ? e.body : null]);

describe('results per event (continuous)', () => {
  it('every change of a partition result is one Result or ResultRemoved, in event order, linked from the main result stream', async () => {
    const name = uniq('perevent');
    const a = uniq('acct');
    const b = uniq('acct');
    // The result is the balance while positive; filterBy removes it at 0 and below.
    await create(t, 'continuous', name, `fromCategory('${a.split('-')[0]}').foreachStream().when({
        $init: () => ({ balance: 0 }),
        Deposit: (s, e) => { s.balance += e.body.amount; },
        Touch: (s) => s,
      }).transformBy((s) => ({ balance: s.balance })).filterBy((r) => r.balance > 0)`);
    await appendOk(t, a, [newEvent('Deposit', { amount: 5 }), newEvent('Deposit', { amount: 3 })]);
    await appendOk(t, b, [newEvent('Deposit', { amount: 7 })]);
    await appendOk(t, a, [newEvent('Touch'), newEvent('Deposit', { amount: -8 }), newEvent('Deposit', { amount: 2 })]);
    const aStream = `$projections-${name}-${a}-result`;
    await eventually(async () => expect(changes(await read(t, aStream))).toEqual([
      ['Result', { balance: 5 }], ['Result', { balance: 8 }], ['ResultRemoved', null], ['Result', { balance: 2 }],
    ]), 10_000);
    const removed = (await read(t, aStream))![2];
    expect(removed.data).toBe(''); // ResultRemoved has no data
    expect(changes(await read(t, `$projections-${name}-${b}-result`))).toEqual([['Result', { balance: 7 }]]);
    // Each of them is linked, in order, from the main result stream.
    const main = await eventually(async () => {
      const list = await read(t, `$projections-${name}-result`);
      expect(list).toHaveLength(5);
      return list!;
    });
    expect(main.every((e) => e.eventType === '$>')).toBe(true);
    expect(main.filter((e) => e.data.endsWith(`@${aStream}`)).map((e) => e.data)).toEqual([0, 1, 2, 3].map((n) => `${n}@${aStream}`));
    // The Result data is the result JSON as an object.
    const resolved = await http(t, `/streams/${encodeURIComponent(aStream)}/1`, { headers: { Accept: 'application/vnd.eventstore.event+json' } });
    expect((await resolved.json()).data).toEqual({ balance: 8 });
  }, 30_000);

  it('outputTo(stream, pattern) writes the partition results and the links where it names', async () => {
    const name = uniq('outto');
    const cat = uniq('ot').replace('-', '');
    const main = uniq('totals');
    await create(t, 'continuous', name, `fromCategory('${cat}').foreachStream().when({
        $init: () => ({ n: 0 }), Hit: (s) => { s.n++; } }).outputState().outputTo('${main}', '${main}-{0}')`);
    await appendOk(t, `${cat}-x`, [newEvent('Hit'), newEvent('Hit')]);
    await eventually(async () => expect(changes(await read(t, `${main}-${cat}-x`))).toEqual([['Result', { n: 1 }], ['Result', { n: 2 }]]), 10_000);
    expect((await read(t, main))!.map((e) => e.data)).toEqual([`0@${main}-${cat}-x`, `1@${main}-${cat}-x`]);
  }, 30_000);

  it('outputState() with no when: each partition state is its result, written as a JSON object', async () => {
    const name = uniq('nowhen');
    const src = uniq('nw-src');
    await create(t, 'continuous', name, `fromStream('${src}').outputState()`);
    await appendOk(t, src, [newEvent('Any', { a: 1 }), newEvent('Any', { a: 2, nested: { b: true } })]);
    const results = await eventually(async () => {
      const list = await read(t, `$projections-${name}-result`);
      expect(list).toHaveLength(2);
      return list!;
    }, 10_000);
    expect(changes(results)).toEqual([['Result', { a: 1 }], ['Result', { a: 2, nested: { b: true } }]]);
    expect(typeof results[1].body).toBe('object');
  }, 30_000);

  it('GET state is the state as the handler left it; GET result the transformed value, even when the transform mutates its argument', async () => {
    const name = uniq('mutating');
    const src = uniq('mut-src');
    await create(t, 'continuous', name, `fromStream('${src}').when({
        $init: () => ({ n: 0 }), Hit: (s) => { s.n++; } }).transformBy((s) => { s.seen = true; return { n: s.n * 10 }; })`);
    await appendOk(t, src, [newEvent('Hit')]);
    await eventually(async () => expect(await (await http(t, `${p(name)}/result`)).json()).toEqual({ n: 10 }), 10_000);
    expect(await (await http(t, `${p(name)}/state`)).json()).toEqual({ n: 1 });
    // The reference's quirk stays: the mutation reaches the state the next event sees.
    await appendOk(t, src, [newEvent('Hit')]);
    await eventually(async () => expect(await (await http(t, `${p(name)}/result`)).json()).toEqual({ n: 20 }), 10_000);
    expect(await (await http(t, `${p(name)}/state`)).json()).toEqual({ n: 2, seen: true });
    // Reading does not change anything.
    for (let i = 0; i < 3; i++) expect(await (await http(t, `${p(name)}/result`)).json()).toEqual({ n: 20 });
  }, 30_000);

  it("biState: what $created does to the [state, shared] pair counts (st[0] = null leaves the partition's state null)", async () => {
    const name = uniq('bistate');
    const cat = uniq('bs').replace('-', '');
    await create(t, 'continuous', name, `options({ biState: true });
      fromCategory('${cat}').foreachStream().when({
        $init: () => ({ n: 0 }), $initShared: () => ({ total: 0 }),
        $created: (st, e) => { if (e.streamId.endsWith('-skip')) st[0] = null; },
        Hit: (st) => { if (st[0] !== null) st[0].n++; st[1].total++; },
      })`);
    await appendOk(t, `${cat}-keep`, [newEvent('Hit')]);
    await appendOk(t, `${cat}-skip`, [newEvent('Hit')]);
    await eventually(async () => expect(await (await http(t, `${p(name)}/state`)).json()).toEqual({ total: 2 }), 10_000);
    expect(await (await http(t, `${p(name)}/state?partition=${cat}-keep`)).json()).toEqual({ n: 1 });
    expect(await (await http(t, `${p(name)}/state?partition=${cat}-skip`)).text()).toBe('');
  }, 30_000);
});

describe('queries (one-time and transient): two phases, ending in $Eof', () => {
  for (const mode of ['onetime', 'transient']) {
    it(`${mode} with when: no running results; one Result per partition at the end (root first), then $Eof`, async () => {
      const name = uniq(`q-${mode}`);
      const cat = uniq('qc').replace('-', '');
      await appendOk(t, `${cat}-b`, [newEvent('Hit'), newEvent('Hit')]);
      await appendOk(t, `${cat}-a`, [newEvent('Hit')]);
      // A query reads to the end of the log as it is at its start: let $by_category link them first.
      await eventually(async () => expect(await read(t, `$ce-${cat}`)).toHaveLength(3), 10_000);
      await create(t, mode, name, `options({ biState: true });
        fromCategory('${cat}').foreachStream().when({
          $init: () => ({ n: 0 }), $initShared: () => ({ total: 0 }), Hit: (st) => { st[0].n++; st[1].total++; } })
        .transformBy((st) => ({ mine: st[0] === null ? null : st[0].n, total: st[1].total }))`);
      const list = await eventually(async () => {
        const events = await read(t, `$projections-${name}-result`);
        expect(events?.at(-1)?.eventType).toBe('$Eof');
        return events!;
      }, 10_000);
      expect(list.map((e) => [e.eventType, e.metadata?.partition ?? null])).toEqual([
        ['Result', null], ['Result', `${cat}-b`], ['Result', `${cat}-a`], ['$Eof', null],
      ]);
      expect(list[1].body).toEqual({ mine: 2, total: 3 });
      expect(list[3].data).toBe('');
      expect((await stats(t, name)).status).toMatch(/^Completed/);
    }, 30_000);

    it(`${mode} without when: results while running, and the end writes only $Eof`, async () => {
      const name = uniq(`qn-${mode}`);
      const src = uniq('qn-src');
      await appendOk(t, src, [newEvent('Any', { v: 1 }), newEvent('Any', { v: 2 })]);
      await create(t, mode, name, `fromStream('${src}').outputState()`);
      const list = await eventually(async () => {
        const events = await read(t, `$projections-${name}-result`);
        expect(events?.at(-1)?.eventType).toBe('$Eof');
        return events!;
      }, 10_000);
      expect(changes(list)).toEqual([['Result', { v: 1 }], ['Result', { v: 2 }], ['$Eof', null]]);
    }, 30_000);
  }
});

describe('results survive kill -9', () => {
  let dir: string;
  let proc: NodeProcess;
  const node = { url: '' };
  afterAll(async () => {
    proc?.child.kill('SIGKILL');
    await proc?.exited;
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('a results catch-up killed halfway and restarted leaves the same result streams as a clean run: no duplicate, no gap', async () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-results-'));
    proc = await spawnNode(['--db', dir]);
    node.url = proc.url;
    const partitions = 20;
    for (let i = 0; i < 40; i++) {
      await appendOk(node, `kr-${i % partitions}`, Array.from({ length: 500 }, (_, j) => newEvent(j % 7 === 0 ? 'Reset' : 'Add', { v: j })));
    }
    const query = `fromAll().partitionBy((e) => e.streamId.startsWith('kr-') ? e.streamId : null).when({
        $init: () => ({ sum: 0 }), Add: (s, e) => { s.sum += e.body.v; }, Reset: (s) => { s.sum = 0; } })
      .transformBy((s) => ({ sum: s.sum })).filterBy((r) => r.sum % 3 !== 0)`;
    await create(node, 'continuous', 'killed', query);
    await eventually(async () => expect((await stats(node, 'killed')).eventsProcessedAfterRestart).toBeGreaterThan(2000), 20_000);
    expect((await stats(node, 'killed')).progress).toBeLessThan(100);
    proc.child.kill('SIGKILL');
    await proc.exited;
    proc = await spawnNode(['--db', dir]);
    node.url = proc.url;
    await create(node, 'continuous', 'clean', query);
    for (const name of ['killed', 'clean']) {
      await eventually(async () => {
        const s = await stats(node, name);
        expect(s.progress).toBe(100);
        expect(s.writePendingEventsAfterCheckpoint + s.writesInProgress).toBe(0);
      }, 60_000);
    }
    let total = 0;
    for (let i = 0; i < partitions; i++) {
      const killed = await read(node, `$projections-killed-kr-${i}-result`);
      const clean = await read(node, `$projections-clean-kr-${i}-result`);
      expect(changes(killed), `kr-${i}`).toEqual(changes(clean));
      expect(killed!.map((e) => e.eventNumber)).toEqual(killed!.map((_, n) => n));
      total += killed!.length;
    }
    expect(total).toBeGreaterThan(1000);
    const mainKilled = (await read(node, '$projections-killed-result'))!.map((e) => e.data.replace('-killed-', '-'));
    const mainClean = (await read(node, '$projections-clean-result'))!.map((e) => e.data.replace('-clean-', '-'));
    expect(mainKilled).toEqual(mainClean);
  }, 120_000);
});
