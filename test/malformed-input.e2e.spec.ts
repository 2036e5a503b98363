import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runSoak } from '../bench/malformed.js';
import { append, basic, EVENTS_JSON, http, newEvent, startTestNode, uniq, type TestNode } from './support/node.js';

// Malformed input (issue 14): a short run of the soak in bench/malformed.ts (the full one sends
// 10,000 requests: `node dist/bench/malformed.js`), and the defects it found, each pinned.

const ATOM_JSON = 'application/vnd.eventstore.atom+json';

let t: TestNode;
beforeAll(async () => { t = await startTestNode(); });
afterAll(async () => { await t?.dispose(); });

describe('the malformed-input soak, short', () => {
  it('500 malformed requests over every route: each a 4xx with a message, nothing written, the node alive', async () => {
    const summary = await runSoak({ url: t.url, routes: t.node.routes, requests: 500, seed: 14 });
    expect(summary.failures).toEqual([]);
    expect(summary.requests).toBe(500);
    expect(summary.headAfter).toBe(summary.headBefore);
    expect(Object.keys(summary.byStatus).every((s) => Number(s) >= 400 && Number(s) < 500)).toBe(true);
    expect((await http(t, '/ping')).status).toBe(200);
  });
});

describe('defects the soak found', () => {
  it('a query parameter given twice is 400 with a message, where handlers read it as one value (it was 500)', async () => {
    const s = uniq('twice');
    expect((await append(t, s, [newEvent('A')])).status).toBe(201);
    for (const path of ['/info?format=json&format=xml', `/streams/${s}?embed=body&embed=rich`, `/streams/${s}/0?embed=body&embed=rich`]) {
      const res = await http(t, path, { headers: { Accept: ATOM_JSON } });
      expect(res.status, path).toBe(400);
      expect(await res.text(), path).toMatch(/is given more than once/);
    }
  });

  it('a projection created with its name given twice is refused, not named by an array', async () => {
    const [a, b] = [uniq('a'), uniq('b')];
    const res = await http(t, `/projections/continuous?name=${a}&name=${b}&enabled=no`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: "fromStream('x').when({})",
    });
    expect(res.status).toBe(400);
    const listed = (await (await http(t, '/projections/continuous')).json()).projections.map((p: { name: unknown }) => p.name);
    expect(listed.filter((name: unknown) => typeof name !== 'string' || name.includes(a))).toEqual([]);
  });

  it('a Content-Type with a bare `charset` is 415, as any non-utf-8 charset (it was 500)', async () => {
    const s = uniq('bare-charset');
    const write = await http(t, `/streams/${s}`, {
      method: 'POST', headers: { 'Content-Type': `${EVENTS_JSON}; charset` }, body: JSON.stringify([newEvent('A')]),
    });
    expect(write.status).toBe(415);
    expect((await http(t, `/streams/${s}`, { headers: { Accept: ATOM_JSON } })).status).toBe(404);
    const user = await http(t, '/users/', { method: 'POST', headers: { 'Content-Type': 'application/json; charset' }, body: '{}' });
    expect(user.status).toBe(415);
  });

  it('a password with a NUL appended does not authenticate (scrypt could not tell them apart), and none can be set', async () => {
    expect((await http(t, '/users', { authorization: basic('admin', 'changeit\u0000') })).status).toBe(401);
    expect((await http(t, '/users', { authorization: basic('admin', 'changeit') })).status).toBe(200);
    const login = uniq('nul');
    const create = await http(t, '/users/', {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ loginName: login, password: 'pw\u0000' }),
    });
    expect(create.status).toBe(400);
    expect(await create.text()).toMatch(/NUL/);
    expect((await http(t, `/users/${login}`)).status).toBe(404);
  });

  it('/stats paths name statistics only, not members of every object (constructor was 200)', async () => {
    for (const path of ['/stats/constructor', '/stats/__proto__', '/stats/proc/toString']) {
      expect((await http(t, path)).status, path).toBe(404);
    }
    expect((await http(t, '/stats/proc')).status).toBe(200);
  });
});
