import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVENTS_JSON, eventually, http, newEvent, startTestNode, uniq, type TestNode } from './support/node.js';

// A partition's result is not always its state: transformBy makes another value, filterBy (or a
// transform that returns null) makes none. Both come back from the checkpoint after a restart,
// for continuous and one-time projections, unpartitioned and partitioned alike: GET result
// answers what it answered before, GET state likewise, and the result streams gain nothing that
// no event caused (projections.md §11, §14, §15).

let t: TestNode;
beforeAll(async () => { t = await startTestNode(); });
afterAll(async () => { await t?.dispose(); });

const p = (name: string) => `/projection/${encodeURIComponent(name)}`;

async function appendOk(stream: string, events: unknown[]): Promise<void> {
  const res = await http(t, `/streams/${encodeURIComponent(stream)}`, {
    method: 'POST', headers: { 'Content-Type': EVENTS_JSON }, body: JSON.stringify(events),
  });
  expect(res.status, await res.clone().text()).toBe(201);
}

async function createOk(mode: 'continuous' | 'onetime', name: string, query: string, params: Record<string, string> = {}): Promise<void> {
  const qs = new URLSearchParams({ name, enabled: 'yes', ...params }).toString();
  const res = await http(t, `/projections/${mode}?${qs}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: query });
  expect(res.status, await res.clone().text()).toBe(201);
}

async function commandOk(name: string, command: 'enable' | 'disable'): Promise<void> {
  const res = await http(t, `${p(name)}/command/${command}`, { method: 'POST' });
  expect(res.status, await res.clone().text()).toBe(200);
}

async function status(name: string): Promise<string> {
  return (await (await http(t, p(name))).json()).status;
}

/** GET state or result (of a partition): the JSON value, or undefined for an empty body. */
async function read(name: string, which: 'state' | 'result', partition?: string): Promise<unknown> {
  const res = await http(t, `${p(name)}/${which}${partition === undefined ? '' : `?partition=${encodeURIComponent(partition)}`}`);
  expect(res.status).toBe(200);
  const body = await res.text();
  return body === '' ? undefined : JSON.parse(body);
}

/** State and result of each partition ('' for the root), as GET state and GET result answer them. */
async function values(name: string, partitions: string[]): Promise<Record<string, [unknown, unknown]>> {
  const out: Record<string, [unknown, unknown]> = {};
  for (const partition of partitions) {
    out[partition] = [await read(name, 'state', partition || undefined), await read(name, 'result', partition || undefined)];
  }
  return out;
}

interface Stored { eventType: string; data: string; body: unknown }

/** A stream's events oldest first, links not resolved; [] when it does not exist. */
async function events(stream: string): Promise<Stored[]> {
  const res = await http(t, `/streams/${encodeURIComponent(stream)}/0/forward/4096?embed=tryharder`, {
    headers: { Accept: 'application/json', 'ES-ResolveLinkTos': 'false' },
  });
  if (res.status === 404) return [];
  expect(res.status).toBe(200);
  return [...(await res.json()).entries].reverse().map((e: any) => ({
    eventType: e.eventType, data: e.data ?? '', body: e.data ? JSON.parse(e.data) : undefined,
  }));
}

const changes = async (stream: string) => (await events(stream)).map((e) => [e.eventType, e.body ?? null]);

/** The data of the last checkpoint in a checkpoint stream, parsed. */
async function lastCheckpoint(stream: string): Promise<unknown> {
  const list = await events(stream);
  expect(list.length, stream).toBeGreaterThan(0);
  return list.at(-1)!.body;
}

describe('results after a restart from a checkpoint', () => {
  it('continuous, unpartitioned: a transformed result and a null result come back, served running or stopped; no result is written again', async () => {
    const src = uniq('cr-src');
    const transformed = uniq('cr-transformed');
    const filtered = uniq('cr-filtered');
    const handlers = `fromStream('${src}').when({ $init: () => ({ n: 0 }), Hit: (s) => { s.n++; } })`;
    await createOk('continuous', transformed, `${handlers}.transformBy((s) => ({ doubled: s.n * 2 }))`);
    await createOk('continuous', filtered, `${handlers}.filterBy((s) => s.n > 5)`);
    await appendOk(src, [newEvent('Hit'), newEvent('Hit')]);
    await eventually(async () => {
      expect(await values(transformed, [''])).toEqual({ '': [{ n: 2 }, { doubled: 4 }] });
      expect(await values(filtered, [''])).toEqual({ '': [{ n: 2 }, undefined] });
    }, 10_000);

    await t.restart();
    // Running, from the checkpoint the stop wrote: its body says what the result is.
    expect(await lastCheckpoint(`$projections-${transformed}-checkpoint`)).toEqual([{ n: 2 }, { doubled: 4 }]);
    expect(await lastCheckpoint(`$projections-${filtered}-checkpoint`)).toEqual([{ n: 2 }, null]);
    expect(await values(transformed, [''])).toEqual({ '': [{ n: 2 }, { doubled: 4 }] });
    expect(await values(filtered, [''])).toEqual({ '': [{ n: 2 }, undefined] });
    // Stopped: answered from what the projection restored, not from a sandbox.
    for (const name of [transformed, filtered]) await commandOk(name, 'disable');
    expect(await values(transformed, [''])).toEqual({ '': [{ n: 2 }, { doubled: 4 }] });
    expect(await values(filtered, [''])).toEqual({ '': [{ n: 2 }, undefined] });

    // Going on: each change of the result is written once; a result that stays null writes nothing.
    for (const name of [transformed, filtered]) await commandOk(name, 'enable');
    await appendOk(src, [newEvent('Hit')]);
    await eventually(async () => {
      expect(await values(transformed, [''])).toEqual({ '': [{ n: 3 }, { doubled: 6 }] });
      expect(await values(filtered, [''])).toEqual({ '': [{ n: 3 }, undefined] });
      expect(await changes(`$projections-${transformed}-result`)).toEqual([
        ['Result', { doubled: 2 }], ['Result', { doubled: 4 }], ['Result', { doubled: 6 }],
      ]);
    }, 10_000);
    await commandOk(filtered, 'disable'); // its last checkpoint written: whatever it wrote is visible
    expect(await changes(`$projections-${filtered}-result`)).toEqual([]);
  }, 60_000);

  it('continuous, foreachStream: each partition keeps its transformed or null result; the root stays empty', async () => {
    const type = uniq('Add');
    const a = uniq('pa');
    const b = uniq('pb');
    const name = uniq('cr-parts');
    await createOk('continuous', name, `fromAll().foreachStream().when({
        $init: () => ({ n: 0 }), '${type}': (s, e) => { s.n += e.body.v; } })
      .transformBy((s) => ({ total: s.n * 10 })).filterBy((r) => r.total > 0)`);
    await appendOk(a, [newEvent(type, { v: 1 }), newEvent(type, { v: 2 })]);
    await appendOk(b, [newEvent(type, { v: -1 })]);
    const before = { '': [undefined, undefined], [a]: [{ n: 3 }, { total: 30 }], [b]: [{ n: -1 }, undefined] };
    await eventually(async () => expect(await values(name, ['', a, b])).toEqual(before), 10_000);

    await t.restart();
    expect(await lastCheckpoint(`$projections-${name}-checkpoint`)).toEqual([]);
    expect(await lastCheckpoint(`$projections-${name}-${a}-checkpoint`)).toEqual([{ n: 3 }, { total: 30 }]);
    expect(await lastCheckpoint(`$projections-${name}-${b}-checkpoint`)).toEqual([{ n: -1 }, null]);
    expect(await values(name, ['', a, b])).toEqual(before);
    await commandOk(name, 'disable');
    expect(await values(name, ['', a, b])).toEqual(before);

    await commandOk(name, 'enable');
    await appendOk(b, [newEvent(type, { v: 2 })]);
    await appendOk(a, [newEvent(type, { v: 1 })]);
    await eventually(async () => expect(await values(name, ['', a, b])).toEqual({
      '': [undefined, undefined], [a]: [{ n: 4 }, { total: 40 }], [b]: [{ n: 1 }, { total: 10 }],
    }), 10_000);
    await commandOk(name, 'disable');
    expect(await changes(`$projections-${name}-${a}-result`)).toEqual([
      ['Result', { total: 10 }], ['Result', { total: 30 }], ['Result', { total: 40 }],
    ]);
    expect(await changes(`$projections-${name}-${b}-result`)).toEqual([['Result', { total: 10 }]]);
  }, 60_000);

  it('one-time with checkpoints: Completed again after the restart, with the results of its run; its result stream is not written again', async () => {
    const type = uniq('Add');
    const a = uniq('qa');
    const b = uniq('qb');
    const src = uniq('q-src');
    const root = uniq('q-root');
    const parts = uniq('q-parts');
    await appendOk(src, [newEvent('Hit'), newEvent('Hit'), newEvent('Hit')]);
    await appendOk(a, [newEvent(type, { v: 1 }), newEvent(type, { v: 2 })]);
    await appendOk(b, [newEvent(type, { v: -1 })]);
    await createOk('onetime', root, `fromStream('${src}').when({ $init: () => ({ n: 0 }), Hit: (s) => { s.n++; } })
      .transformBy((s) => ({ doubled: s.n * 2 }))`, { checkpoints: 'yes' });
    await createOk('onetime', parts, `fromAll().foreachStream().when({
        $init: () => ({ n: 0 }), '${type}': (s, e) => { s.n += e.body.v; } })
      .transformBy((s) => ({ total: s.n * 10 })).filterBy((r) => r.total > 0)`, { checkpoints: 'yes' });
    for (const name of [root, parts]) await eventually(async () => expect(await status(name)).toBe('Completed'), 10_000);
    const expected = {
      root: { '': [{ n: 3 }, { doubled: 6 }] },
      parts: { '': [undefined, undefined], [a]: [{ n: 3 }, { total: 30 }], [b]: [{ n: -1 }, undefined] },
    };
    expect(await values(root, [''])).toEqual(expected.root);
    expect(await values(parts, ['', a, b])).toEqual(expected.parts);
    const results = { root: await changes(`$projections-${root}-result`), parts: await changes(`$projections-${parts}-result`) };
    expect(results.root).toEqual([['Result', { doubled: 6 }], ['$Eof', null]]);
    expect(results.parts.map(([type]) => type)).toEqual(['Result', 'Result', '$Eof']);

    await t.restart();
    for (const name of [root, parts]) await eventually(async () => expect(await status(name)).toBe('Completed'), 10_000);
    expect(await values(root, [''])).toEqual(expected.root);
    expect(await values(parts, ['', a, b])).toEqual(expected.parts);
    expect(await changes(`$projections-${root}-result`)).toEqual(results.root);
    expect(await changes(`$projections-${parts}-result`)).toEqual(results.parts);
  }, 60_000);
});
