import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic, EVENTS_JSON, eventually, http, newEvent, startTestNode, type TestNode } from './support/node.js';
import { spawnNode, type NodeProcess } from './support/process.js';

// Nothing a user, a client or a projection sends stops the node (issue 20). Each case runs against
// `node dist/src/main.js` with its system projections, as `npm start` does: the input is refused
// with a clear answer, or the projection that produced it faults with the store's reason, and after
// a kill -9 and a restart on the same data the node answers, the faulted projections are still
// faulted (not replayed into the same wall) and nothing the door refused was stored.
// Build first: `npm test` runs tsc before vitest.

const LONG = 70_000;
const ALICE = basic('alice', 'alice-pw');
const JSON_TYPE = 'application/json';

let dir: string;
let proc: NodeProcess;
const t = { url: '' } as TestNode;

async function start(): Promise<void> {
  proc = await spawnNode(['--db', dir, '--start-standard-projections', 'true']);
  t.url = proc.url;
}

/** kill -9, then a new process on the same data. */
async function crashAndRestart(): Promise<void> {
  expect(proc.child.exitCode, `the node exited on its own:\n${proc.output().slice(-3000)}`).toBeNull();
  proc.child.kill('SIGKILL');
  await proc.exited;
  await start();
}

async function appendAs(auth: string, stream: string, events: unknown[]): Promise<Response> {
  return http(t, `/streams/${encodeURIComponent(stream)}`, {
    method: 'POST', authorization: auth, headers: { 'Content-Type': EVENTS_JSON }, body: JSON.stringify(events),
  });
}

async function appendOk(stream: string, events: unknown[], auth?: string): Promise<void> {
  const res = await http(t, `/streams/${encodeURIComponent(stream)}`, {
    method: 'POST', ...(auth ? { authorization: auth } : {}), headers: { 'Content-Type': EVENTS_JSON }, body: JSON.stringify(events),
  });
  expect(res.status, await res.clone().text()).toBe(201);
}

async function createProjection(name: string, query: string, emit = true): Promise<void> {
  const res = await http(t, `/projections/continuous?name=${name}&emit=${emit ? 'yes' : 'no'}&enabled=yes`, {
    method: 'POST', headers: { 'Content-Type': JSON_TYPE }, body: query,
  });
  expect(res.status, await res.clone().text()).toBe(201);
}

async function projection(name: string): Promise<any> {
  const res = await http(t, `/projection/${encodeURIComponent(name)}`);
  expect(res.status).toBe(200);
  return res.json();
}

async function waitStatus(name: string, status: RegExp, timeoutMs = 10_000): Promise<any> {
  return eventually(async () => {
    const p = await projection(name);
    expect(p.status).toMatch(status);
    return p;
  }, timeoutMs);
}

async function state(name: string): Promise<unknown> {
  const res = await http(t, `/projection/${encodeURIComponent(name)}/state`);
  expect(res.status).toBe(200);
  const text = await res.text();
  return text === '' ? undefined : JSON.parse(text);
}

/** The events of a stream, oldest first (404 → undefined). */
async function events(stream: string): Promise<any[] | undefined> {
  const res = await http(t, `/streams/${encodeURIComponent(stream)}/0/forward/4096?embed=body`, {
    headers: { Accept: 'application/vnd.eventstore.atom+json' },
  });
  if (res.status === 404) return undefined;
  expect(res.status).toBe(200);
  return (await res.json()).entries;
}

async function status(stream: string): Promise<number> {
  return (await http(t, `/streams/${encodeURIComponent(stream)}`, { headers: { Accept: 'application/vnd.eventstore.atom+json' } })).status;
}

/** Projections that a poison write faults, with what their stateReason must say; checked again after each restart. */
const faulted = new Map<string, { reason: RegExp; stateReason?: string }>();

async function expectFaulted(name: string, reason: RegExp): Promise<void> {
  const p = await waitStatus(name, /^Faulted/);
  expect(p.stateReason).toMatch(reason);
  faulted.set(name, { reason, stateReason: p.stateReason });
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'svc-door-'));
  await start();
  const res = await http(t, '/users/', {
    method: 'POST', headers: { 'Content-Type': JSON_TYPE },
    body: JSON.stringify({ loginName: 'alice', fullName: 'Alice', password: 'alice-pw', groups: [] }),
  });
  expect(res.status).toBe(201);
  // An operator's projection that must keep counting through everything below.
  await createProjection('counter', `fromCategory('tick').when({ $init: () => ({ n: 0 }), Tick: (s) => { s.n++; } })`, false);
}, 60_000);

afterAll(async () => {
  proc?.child.kill('SIGKILL');
  await proc?.exited;
  rmSync(dir, { recursive: true, force: true });
});

let ticks = 0;
async function tick(): Promise<void> {
  await appendOk('tick-1', [newEvent('Tick')]);
  ticks++;
  await eventually(async () => expect(await state('counter')).toEqual({ n: ticks }), 30_000);
}

describe('case 1: a plain user event that a projection would turn into a stream over the limit', () => {
  it("a 70,000-char $correlationId: $by_correlation_id skips and counts it, indexes the next one, and the node survives a restart", async () => {
    const long = 'c'.repeat(LONG);
    await appendOk('orders-1', [newEvent('OrderPlaced', { n: 1 }, { $correlationId: long })], ALICE);
    await appendOk('orders-1', [newEvent('OrderPlaced', { n: 2 }, { $correlationId: 'corr-ok' })], ALICE);
    const links = await eventually(async () => {
      const list = await events('$bc-corr-ok');
      expect(list).toHaveLength(1);
      return list!;
    }, 10_000);
    expect(links[0].title).toBe('1@orders-1');
    const p = await projection('$by_correlation_id');
    expect(p.status).toBe('Running');
    expect(p.eventsSkipped).toBe(1);
    await tick();

    await crashAndRestart();
    expect((await waitStatus('$by_correlation_id', /^Running/)).status).toBe('Running');
    expect(await events('orders-1')).toHaveLength(2);
    const first = await http(t, '/streams/orders-1/0', { headers: { Accept: 'application/vnd.eventstore.event+json' } });
    expect(first.status).toBe(200);
    expect((await first.json()).metadata.$correlationId).toHaveLength(LONG);
    await eventually(async () => expect(await events('$bc-corr-ok')).toHaveLength(1), 5000);
    await tick();
  }, 60_000);

  it('partitionBy a 70,000-char body field: that projection faults naming the stream rule, the others go on, and it stays faulted', async () => {
    await createProjection('bycustomer', `fromCategory('order').partitionBy(e => e.body.customer).when({
      $init: () => ({ n: 0 }), OrderPlaced: (s) => { s.n++; } })`, false);
    await appendOk('order-1', [newEvent('OrderPlaced', { customer: 'x'.repeat(LONG) })], ALICE);
    await expectFaulted('bycustomer', /stream name is [\d,]+ bytes; stream names are limited to 65,533 bytes/);
    expect(await events('$projections-bycustomer-partitions')).toBeUndefined(); // the refused checkpoint wrote nothing
    await tick();
  }, 30_000);
});

describe('case 2: names and types over the limit, from every door', () => {
  it('an append whose eventType is over 64 KiB answers 400 naming the rule; nothing is stored', async () => {
    const res = await appendAs(ALICE, 'door-type', [newEvent('T'.repeat(LONG), { a: 1 })]);
    expect(res.status).toBe(400);
    expect(await res.text()).toMatch(/event type is [\d,]+ bytes; event types are limited to 65,535 bytes/);
    expect(await status('door-type')).toBe(404);
  });

  it('a 70,000-char loginName answers 400; the user list is unchanged', async () => {
    const before = await (await http(t, '/users/', { headers: { Accept: JSON_TYPE } })).json();
    const res = await http(t, '/users/', {
      method: 'POST', headers: { 'Content-Type': JSON_TYPE },
      body: JSON.stringify({ loginName: 'u'.repeat(LONG), fullName: 'Long', password: 'pw', groups: [] }),
    });
    expect(res.status).toBe(400);
    expect(await res.text()).toMatch(/stream names are limited/);
    const after = await (await http(t, '/users/', { headers: { Accept: JSON_TYPE } })).json();
    expect(after).toEqual(before);
  });

  const poison: Array<[string, string, RegExp]> = [
    ['emit-type', `emit('out-type', 'T'.repeat(${LONG}), { a: 1 })`, /event type is [\d,]+ bytes/],
    ['link-name', `linkTo('L'.repeat(${LONG}), e)`, /stream name is [\d,]+ bytes/],
    ['copy-name', `copyTo('C'.repeat(${LONG}), e)`, /stream name is [\d,]+ bytes/],
    ['linkstream-name', `linkStreamTo('S'.repeat(${LONG}), 'door-x')`, /stream name is [\d,]+ bytes/],
  ];
  for (const [name, call, reason] of poison) {
    it(`a projection that does ${call.replace(/\(.*/, '')} over the limit faults with the store's reason`, async () => {
      await createProjection(name, `fromStream('door-${name}').when({ Go: (s, e) => { ${call}; } })`);
      await appendOk(`door-${name}`, [newEvent('Go', { a: 1 })]);
      await expectFaulted(name, reason);
    }, 30_000);
  }

  it('a resultStreamName over the limit faults the projection', async () => {
    await createProjection('result-name', `options({ resultStreamName: 'R'.repeat(${LONG}) });
      fromStream('door-result').when({ $init: () => ({ n: 0 }), Go: (s) => { s.n++; } }).outputState()`);
    await appendOk('door-result', [newEvent('Go', { a: 1 })]);
    await expectFaulted('result-name', /stream name is [\d,]+ bytes/);
  }, 30_000);

  it('an emitted $correlationId over the limit is stored with its event; $by_correlation_id skips it and keeps running', async () => {
    const skippedBefore = (await projection('$by_correlation_id')).eventsSkipped;
    await createProjection('emit-corr', `fromStream('door-corr').when({
      Go: (s, e) => { emit('out-corr', 'Ok', { a: 1 }, { $correlationId: 'k'.repeat(${LONG}) }); } })`);
    await appendOk('door-corr', [newEvent('Go')]);
    await eventually(async () => expect(await events('out-corr')).toHaveLength(1), 10_000);
    await eventually(async () => expect((await projection('$by_correlation_id')).eventsSkipped).toBe(skippedBefore + 1), 10_000);
    expect((await projection('emit-corr')).status).toBe('Running');
    expect((await projection('$by_correlation_id')).status).toBe('Running');
  }, 30_000);
});

describe('case 3: projection writes obey the rules of the HTTP door', () => {
  it("an emit to '$all', a 20 MB emitted event and a link to nothing each fault their projection; nothing is stored", async () => {
    await createProjection('emit-all', `fromStream('door-all').when({ Go: () => { emit('$all', 'X', { a: 1 }); } })`);
    await createProjection('emit-big', `fromStream('door-big').when({ Go: () => { emit('big-out', 'Big', { s: 'x'.repeat(20 * 1024 * 1024) }); } })`);
    await createProjection('link-nothing', `fromStream('door-link').when({ Go: () => { linkTo('x2', { streamId: '', sequenceNumber: -5 }); } })`);
    await createProjection('meta-bad', `fromStream('door-meta').when({ Go: () => { emit('$$door-meta-target', '$metadata', { $maxCount: 'many' }); } })`);
    // The log's epoch records (how cluster nodes compare logs) are the node's own.
    await createProjection('emit-epoch', `fromStream('door-epoch').when({ Go: () => { emit('$epochs', '$epoch', { term: 99 }); } })`);
    await appendOk('door-epoch', [newEvent('Go')]);
    await appendOk('door-all', [newEvent('Go')]);
    await appendOk('door-big', [newEvent('Go')]);
    await appendOk('door-link', [newEvent('Go')]);
    await appendOk('door-meta', [newEvent('Go')]);
    await expectFaulted('emit-all', /'\$all' is the log itself/);
    await expectFaulted('emit-big', /an event is limited to 4,194,304 bytes \(maxAppendSize\)/);
    await expectFaulted('link-nothing', /a link's body must be '\{eventNumber\}@\{stream\}'/);
    await expectFaulted('meta-bad', /Stream metadata \$maxCount must be an integer/);
    await expectFaulted('emit-epoch', /The \$epochs stream is written by cluster leaders only/);
    for (const stream of ['$epochs', '$$$epochs']) {
      const refused = await appendAs(basic('admin', 'changeit'), stream, [newEvent('$epoch', { term: 99 })]);
      expect(refused.status, stream).toBe(403);
      expect(await refused.text()).toMatch(/written by cluster leaders only/);
    }
    expect(await status('$epochs')).toBe(404);
    expect(await status('big-out')).toBe(404);
    expect(await status('x2')).toBe(404);
    expect(await status('$$door-meta-target')).toBe(404);
    await tick();
  }, 60_000);
});

describe('long names over HTTP', () => {
  it('a 2,000-character stream name is written and read back (not 414), a 70,000-character one gets a clear 4xx', async () => {
    const name = `long-${'n'.repeat(2000)}`;
    await appendOk(name, [newEvent('Long', { a: 1 })]);
    expect(await events(name)).toHaveLength(1);
    const res = await appendAs(ALICE, 'm'.repeat(LONG), [newEvent('Long')]);
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(res.status).toBeLessThan(500);
  });
});

describe('case 4: any number of emits from one handler', () => {
  it('a handler that emits 200,000 events stays Running and all 200,000 are stored in order', async () => {
    await createProjection('many', `fromStream('door-many').when({ Go: () => { for (let i = 0; i < 200000; i++) emit('many-out', 'N', { i }); } })`);
    await appendOk('door-many', [newEvent('Go')]);
    await eventually(async () => {
      const last = await http(t, '/streams/many-out/199999', { headers: { Accept: 'application/vnd.eventstore.event+json' } });
      expect(last.status).toBe(200);
      expect((await last.json()).data).toEqual({ i: 199999 });
    }, 60_000);
    expect((await http(t, '/streams/many-out/200000', { headers: { Accept: 'application/vnd.eventstore.event+json' } })).status).toBe(404);
    expect((await projection('many')).status).toBe('Running');
  }, 90_000);
});

const deep = (n: number) => '['.repeat(n) + ']'.repeat(n);
const deepObject = (n: number) => '{"a":'.repeat(n) + '1' + '}'.repeat(n);

describe('case 5: JSON nested 100,000 deep', () => {
  it('in data, metadata (array and single forms) and $acl answers 400 with a message; a stream written before reads back unchanged', async () => {
    await appendOk('door-before', [newEvent('Kept', { v: 1 })]);
    const before = await events('door-before');
    const id = () => crypto.randomUUID();
    const requests: Array<[string, string, Record<string, string>, string]> = [
      ['data, array form', '/streams/door-deep', { 'Content-Type': EVENTS_JSON },
        `[{"eventId":"${id()}","eventType":"Deep","data":${deep(100_000)}}]`],
      ['metadata, array form', '/streams/door-deep', { 'Content-Type': EVENTS_JSON },
        `[{"eventId":"${id()}","eventType":"Deep","data":{},"metadata":${deepObject(100_000)}}]`],
      ['data as a JSON string', '/streams/door-deep', { 'Content-Type': EVENTS_JSON },
        JSON.stringify([{ eventId: id(), eventType: 'Deep', data: deep(100_000) }])],
      ['data, single form', '/streams/door-deep', { 'Content-Type': JSON_TYPE, 'SVC-EventType': 'Deep', 'SVC-EventId': id() }, deep(100_000)],
      ['$acl', '/streams/door-before/metadata', { 'Content-Type': JSON_TYPE, 'SVC-EventId': id() },
        `{"$acl":{"$r":${deep(100_000)}}}`],
    ];
    for (const [what, path, headers, body] of requests) {
      const res = await http(t, path, { method: 'POST', headers, body });
      expect(res.status, what).toBe(400);
      expect(await res.text(), what).toMatch(/nested deeper than 1000 levels/);
    }
    expect(await status('door-deep')).toBe(404);
    expect(await events('door-before')).toEqual(before);
    const meta = await http(t, '/streams/door-before/metadata', { headers: { Accept: JSON_TYPE } });
    expect(await meta.text()).not.toContain('$acl');
  }, 30_000);
});

describe('case 6: gossip from strangers', () => {
  it('POST /gossip answers 401 to a stranger, 403 to an admin, and the node still advertises itself alone', async () => {
    const member = {
      instanceId: crypto.randomUUID(), state: 'Leader', isAlive: true, httpEndPointIp: '203.0.113.9', httpEndPointPort: 2113,
    };
    for (const [authorization, status] of [['', 401], [undefined, 403]] as const) {
      const res = await http(t, '/gossip', {
        method: 'POST', ...(authorization === '' ? { authorization } : {}), headers: { 'Content-Type': JSON_TYPE },
        body: JSON.stringify({ members: Array.from({ length: 500 }, () => ({ ...member, instanceId: crypto.randomUUID() })) }),
      });
      expect(res.status).toBe(status);
      if (status === 403) expect(await res.text()).toMatch(/takes gossip from no node/);
      else await res.arrayBuffer();
    }
    const g = await (await http(t, '/gossip', { authorization: '', headers: { Accept: JSON_TYPE } })).json();
    expect(g.members).toHaveLength(1);
    expect(g.members[0].httpEndPointIp).not.toBe('203.0.113.9');
  });
});

describe('hostile bodies at every JSON route', () => {
  const CLASSES: Record<string, string> = {
    'not JSON': '{"a": [1, 2',
    'deep array': deep(100_000),
    'deep object': deepObject(100_000),
    'an array': '[1, 2, 3]',
    'a string': '"text"',
    'null': 'null',
  };
  /** Route, method, extra headers, and which classes are malformed there (an array is a fine single event). */
  const ROUTES: Array<[string, string, Record<string, string>, string[]]> = [
    ['/streams/hostile', 'POST', { 'Content-Type': EVENTS_JSON }, Object.keys(CLASSES)],
    ['/streams/hostile', 'POST', { 'Content-Type': JSON_TYPE, 'SVC-EventType': 'H' }, ['not JSON', 'deep array', 'deep object']],
    ['/streams/hostile/metadata', 'POST', { 'Content-Type': JSON_TYPE }, Object.keys(CLASSES)],
    ['/users/', 'POST', { 'Content-Type': JSON_TYPE }, Object.keys(CLASSES)],
    ['/users/hostile-user', 'PUT', { 'Content-Type': JSON_TYPE }, Object.keys(CLASSES)],
    ['/users/hostile-user/command/reset-password', 'POST', { 'Content-Type': JSON_TYPE }, Object.keys(CLASSES)],
    ['/users/hostile-user/command/change-password', 'POST', { 'Content-Type': JSON_TYPE }, Object.keys(CLASSES)],
    // A null (like an empty) settings body means the default settings.
    ['/subscriptions/hostile/g1', 'PUT', { 'Content-Type': JSON_TYPE }, Object.keys(CLASSES).filter((c) => c !== 'null')],
    ['/subscriptions/hostile/g1', 'POST', { 'Content-Type': JSON_TYPE }, Object.keys(CLASSES).filter((c) => c !== 'null')],
    ['/projection/counter/config', 'PUT', { 'Content-Type': JSON_TYPE }, Object.keys(CLASSES)],
    ['/projections/read-events', 'POST', { 'Content-Type': JSON_TYPE }, Object.keys(CLASSES)],
    ['/gossip', 'POST', { 'Content-Type': JSON_TYPE }, Object.keys(CLASSES)],
  ];

  it('each answers a 4xx with a message, the node keeps answering, and a stream written before reads back unchanged', async () => {
    const created = await http(t, '/users/', {
      method: 'POST', headers: { 'Content-Type': JSON_TYPE },
      body: JSON.stringify({ loginName: 'hostile-user', fullName: 'H', password: 'pw', groups: [] }),
    });
    expect(created.status).toBe(201);
    await appendOk('hostile-kept', [newEvent('Kept', { v: 1 })]);
    const kept = await events('hostile-kept');
    const user = await (await http(t, '/users/hostile-user', { headers: { Accept: JSON_TYPE } })).json();
    for (const [path, method, headers, classes] of ROUTES) {
      for (const cls of classes) {
        const what = `${method} ${path} with ${cls}`;
        // A user changes their own password (for anyone else the answer is 401 before the body is read).
        const authorization = path.endsWith('change-password') ? basic('hostile-user', 'pw') : undefined;
        const res = await http(t, path, {
          method, ...(authorization ? { authorization } : {}), headers: { ...headers, 'SVC-EventId': crypto.randomUUID() }, body: CLASSES[cls],
        });
        expect(res.status, what).toBeGreaterThanOrEqual(400);
        expect(res.status, what).toBeLessThan(500);
        expect((await res.text()).trim().length, `${what}: message`).toBeGreaterThan(0);
      }
      expect((await http(t, '/ping', { authorization: '' })).status).toBe(200);
    }
    expect(await events('hostile-kept')).toEqual(kept);
    expect(await status('hostile')).toBe(404);
    expect(await (await http(t, '/users/hostile-user', { headers: { Accept: JSON_TYPE } })).json()).toEqual(user);
    expect((await http(t, '/subscriptions/hostile/g1/info', { headers: { Accept: JSON_TYPE } })).status).toBe(404);
  }, 60_000);
});

describe('after everything: kill -9 and restart on the same data', () => {
  it('the node answers, every poisoned projection is still faulted with its reason, the others run, and nothing refused was stored', async () => {
    expect(faulted.size).toBeGreaterThanOrEqual(8);
    await crashAndRestart();
    for (const [name, { reason, stateReason }] of faulted) {
      const p = await projection(name);
      expect(p.status, name).toMatch(/^Faulted/);
      expect(p.stateReason, name).toMatch(reason);
      expect(p.stateReason, name).toBe(stateReason);
    }
    for (const name of ['$by_correlation_id', '$by_category', '$by_event_type', '$streams', '$stream_by_category', 'counter', 'many']) {
      await waitStatus(name, /^Running$/);
    }
    for (const stream of ['door-type', 'big-out', 'x2', 'door-deep', 'hostile', '$epochs']) expect(await status(stream), stream).toBe(404);
    await tick();
    // Enabling a faulted projection is the operator's way out: it runs again (and here faults again on the same event).
    const enabled = await http(t, '/projection/link-nothing/command/enable', { method: 'POST' });
    expect(enabled.status).toBe(200);
    await waitStatus('link-nothing', /^Faulted/);
    expect(proc.child.exitCode).toBeNull();
  }, 90_000);
});

describe('MaxProjectionStateSize', () => {
  let node: TestNode;
  beforeAll(async () => { node = await startTestNode({ maxProjectionStateSize: 1000 }); });
  afterAll(async () => { await node?.dispose(); });

  it('a partition whose state outgrows it faults the projection with the reference message; the limit holds after a restart', async () => {
    const create = await http(node, '/projections/continuous?name=grower&enabled=yes', {
      method: 'POST', headers: { 'Content-Type': JSON_TYPE },
      body: `fromStream('grow-1').partitionBy((e) => e.streamId).when({ $init: () => ({ s: '' }), Add: (s, e) => { s.s += e.body.add; } })`,
    });
    expect(create.status).toBe(201);
    const small = await http(node, '/projections/continuous?name=small&enabled=yes', {
      method: 'POST', headers: { 'Content-Type': JSON_TYPE },
      body: `fromStream('grow-1').when({ $init: () => ({ n: 0 }), Add: (s) => { s.n++; } })`,
    });
    expect(small.status).toBe(201);
    for (let i = 0; i < 3; i++) {
      const res = await http(node, '/streams/grow-1', {
        method: 'POST', headers: { 'Content-Type': EVENTS_JSON }, body: JSON.stringify([newEvent('Add', { add: 'x'.repeat(400) })]),
      });
      expect(res.status).toBe(201);
    }
    const stats = async (name: string) => (await http(node, `/projection/${name}`)).json() as Promise<any>;
    const faultedStats = await eventually(async () => {
      const p = await stats('grower');
      expect(p.status).toMatch(/^Faulted/);
      return p;
    }, 10_000);
    expect(faultedStats.stateReason).toMatch(
      /The state size of projection 'grower' in partition 'grow-1' is \d+ bytes which exceeds the configured MaxProjectionStateSize of 1000 bytes\./);
    await eventually(async () => expect(await (await http(node, '/projection/small/state')).json()).toEqual({ n: 3 }), 10_000);
    await node.restart();
    const after = await stats('grower');
    expect(after.status).toMatch(/^Faulted/);
    expect(after.stateReason).toBe(faultedStats.stateReason);
  }, 30_000);
});
