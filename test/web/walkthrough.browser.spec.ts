import { beforeAll, describe, expect, it } from 'vitest';
import { append, eventually, http, newEvent, newUser, uniq } from '../support/node.js';
import { seriousViolations, logIn, recordTrouble, shows, useConsole, type ConsoleFixture } from '../support/browser.js';

// A console that errs only when something is wrong: every view, walked as admin, as an operator
// and as a plain user, over a node with the data each view shows (streams, a soft-deleted stream,
// a partitioned projection, a subscription group with parked messages, a completed scavenge, and
// first none). A walk fails on any error the page logs, any request without an answer, any answer
// of 400 or above, any serious or critical axe finding, and a tab title that does not name the
// view. Each view is watched for one poll round (the console refreshes every one or two seconds).

const c = useConsole();
const COMPETING = 'application/vnd.eventstore.competingatom+json';
/** One refresh of the polling views and a little over. */
const POLL_ROUND_MS = 2_300;

const stream = uniq('orders');
const deleted = uniq('gone');
const projection = uniq('byregion');
const group = uniq('billing');
let user = '';
let scavengeId = '';

beforeAll(async () => {
  const events = [newEvent('Placed', { region: 'north', n: 1 }, { by: 'test' }), newEvent('Placed', { region: 'south', n: 2 }), newEvent('Shipped', { region: 'north', n: 3 })];
  expect((await append(c.node, stream, events)).status).toBe(201);
  expect((await append(c.node, deleted, [newEvent('Doomed', { n: 1 })])).status).toBe(201);
  expect((await http(c.node, `/streams/${deleted}`, { method: 'DELETE' })).status).toBe(204);

  const query = `fromStream('${stream}').partitionBy(function (e) { return e.body.region; }).when({
  $init: function () { return { n: 0 }; },
  $any: function (s, e) { s.n += e.body.n; return s; }
})`;
  expect((await http(c.node, `/projections/continuous?name=${projection}&enabled=yes&emit=no`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: query,
  })).status).toBe(201);
  await eventually(async () => expect(await (await http(c.node, `/projection/${projection}/state?partition=north`)).text()).toContain('4'));

  // A group from the start of the stream, its first two messages parked by a consumer.
  const groupPath = `/subscriptions/${stream}/${group}`;
  expect((await http(c.node, groupPath, { method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: '{"startFrom":0}' })).status).toBe(200);
  const feed = await (await http(c.node, `${groupPath}/2`, { headers: { Accept: COMPETING } })).json();
  expect(feed.entries).toHaveLength(2);
  for (const e of feed.entries) {
    const nack = new URL(e.links.find((l: any) => l.relation === 'nack').uri).pathname;
    expect((await http(c.node, `${nack}?action=park`, { method: 'POST' })).status).toBe(200);
  }
  await eventually(async () => expect((await (await http(c.node, `${groupPath}/info`, { headers: { Accept: 'application/json' } })).json()).parkedMessageCount).toBe(2));

  user = await newUser(c.node, [], 'pw', 'plain');
}, 60_000);

interface View {
  route: string;
  /** The view's main heading. */
  heading: string;
  /** The tab title before ` — <node>`. */
  title: string;
}

function views(who: 'admin' | 'ops' | 'user'): View[] {
  const enc = encodeURIComponent;
  const list: View[] = [
    { route: '/', heading: 'Dashboard', title: 'Dashboard' },
    { route: '/streams', heading: 'Streams', title: 'Streams' },
    { route: `/streams/${enc(stream)}`, heading: `Stream ${stream}`, title: `${stream} — Streams` },
    { route: `/streams/${enc(stream)}/0/forward/2`, heading: `Stream ${stream}`, title: `${stream} — Streams` },
    { route: `/streams/${enc(stream)}/1`, heading: `Event 1@${stream}`, title: `Event 1@${stream} — Streams` },
    { route: `/streams/${enc(deleted)}`, heading: `Stream ${deleted}`, title: `${deleted} — Streams` },
    { route: '/streams/%24all', heading: 'All events ($all)', title: '$all — Streams' },
    { route: '/projections', heading: 'Projections', title: 'Projections' },
    { route: '/projections/new', heading: 'New projection', title: 'New projection — Projections' },
    { route: `/projections/${enc(projection)}`, heading: projection, title: `${projection} — Projections` },
    { route: `/projections/${enc(projection)}/debug`, heading: `Debug ${projection}`, title: `Debug ${projection} — Projections` },
    { route: '/subscriptions', heading: 'Persistent subscriptions', title: 'Subscriptions' },
    { route: `/subscriptions/${enc(stream)}`, heading: `Persistent subscriptions on ${stream}`, title: `${stream} — Subscriptions` },
    { route: `/subscriptions/${enc(stream)}/${enc(group)}`, heading: `${group} on ${stream}`, title: `${group} on ${stream} — Subscriptions` },
    { route: '/cluster', heading: 'Cluster', title: 'Cluster' },
    { route: '/admin', heading: 'Admin', title: 'Admin' },
    { route: '/users', heading: who === 'admin' ? 'Users' : 'Your account', title: 'Users' },
  ];
  if (who === 'admin') list.push({ route: `/users/${enc(user)}`, heading: `User ${user}`, title: `${user} — Users` });
  if (who !== 'user' && scavengeId) list.push({ route: `/admin/scavenges/${scavengeId}`, heading: `Scavenge ${scavengeId}`, title: `Scavenge ${scavengeId} — Admin` });
  return list;
}

/** Walks every view as `login` (or those `only` keeps); resolves what went wrong, view by view. */
async function walk(c: ConsoleFixture, who: 'admin' | 'ops' | 'user', login: string, password: string,
  only: (view: View) => boolean = () => true): Promise<string[]> {
  const host = new URL(c.node.url).host;
  const context = await c.context.browser()!.newContext({ viewport: { width: 1280, height: 900 } });
  const found: string[] = [];
  try {
    const page = await context.newPage();
    page.setDefaultTimeout(10_000);
    const trouble = recordTrouble(page);
    page.on('pageerror', (err) => trouble.push(`page error: ${err.message}`));
    await page.goto(c.url);
    await shows(page.getByRole('button', { name: 'Log in' }));
    if (await page.title() !== `Log in — ${host}`) found.push(`login: title "${await page.title()}", not "Log in — ${host}"`);
    await logIn({ ...c, page } as ConsoleFixture, login, password);
    for (const view of views(who).filter(only)) {
      trouble.length = 0;
      await page.goto(`${c.url}#${view.route}`);
      const heading = page.getByRole('heading', { level: 1, name: view.heading, exact: true });
      if (!await shows(heading).then(() => true, () => false)) {
        found.push(`${view.route}: no heading "${view.heading}" (${await page.locator('h1').allTextContents()})`);
        continue;
      }
      await page.waitForTimeout(POLL_ROUND_MS);
      const title = await page.title();
      if (title !== `${view.title} — ${host}`) found.push(`${view.route}: title "${title}", not "${view.title} — ${host}"`);
      const serious = await seriousViolations(page);
      for (const v of serious) found.push(`${view.route}: axe ${v.impact} ${v.id} (${v.help}) at ${v.targets.join(', ')}`);
      for (const t of trouble) found.push(`${view.route}: ${t}`);
    }
  } finally {
    await context.close();
  }
  return found;
}

async function scavengeToTheEnd(): Promise<string> {
  const res = await http(c.node, '/admin/scavenge', { method: 'POST' });
  expect(res.status).toBe(200);
  const { scavengeId: id } = await res.json();
  await eventually(async () => expect((await (await http(c.node, '/admin/scavenge/last', { headers: { Accept: 'application/json' } })).json()).scavengeResult).toBe('Success'), 20_000);
  return id;
}

const WALK_MS = 150_000;

// The three walks run at once, each in a browser context of its own: most of a walk is waiting
// for a poll round on each view.
describe('every view of the console, quietly, before any scavenge', () => {
  it('as admin, as an operator and as a plain user', async () => {
    const [admin, ops, plain] = await Promise.all([
      walk(c, 'admin', 'admin', 'changeit'), walk(c, 'ops', 'ops', 'changeit'), walk(c, 'user', user, 'pw'),
    ]);
    expect({ admin, ops, plain }).toEqual({ admin: [], ops: [], plain: [] });
  }, WALK_MS);
});

/** What a completed scavenge changes: the dashboard, the Admin page's history and the run's own page. */
const scavengeViews = (view: View) => view.route === '/' || view.route.startsWith('/admin');

describe('the views a scavenge changes, quietly, after a scavenge', () => {
  beforeAll(async () => { scavengeId = await scavengeToTheEnd(); }, 30_000);
  it('as admin and as an operator', async () => {
    const [admin, ops] = await Promise.all([walk(c, 'admin', 'admin', 'changeit', scavengeViews), walk(c, 'ops', 'ops', 'changeit', scavengeViews)]);
    expect({ admin, ops }).toEqual({ admin: [], ops: [] });
  }, WALK_MS);
});
