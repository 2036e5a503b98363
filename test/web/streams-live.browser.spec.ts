import { describe, expect, it } from 'vitest';
import { append, basic, EVENTS_JSON, http, newEvent, newUser, sleep, uniq } from '../support/node.js';
import { gone, goTo, logIn, shows, showsText, until, useConsole } from '../support/browser.js';
import { seriousViolations, strictConsole } from '../support/strict-console.js';

// The stream views' live tail (a stream page and $all follow new events with long polls, Pause
// holds them back, Resume brings them), the compact rows that open on a click, the access
// control form, and the recently created streams; as an admin and as a plain user. Any console
// error, any answer of 400 or more the test did not expect, or a serious axe finding fails.

const c = useConsole();
const strict = strictConsole(c);
/** How long a live tail takes at most to show an appended event (the long poll answers at once). */
const QUIET_MS = 1500;

/** The event names (`n@stream`) of the rows, top to bottom. */
async function rows(): Promise<string[]> {
  return c.page.locator('table.events tbody tr[data-event]').evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-event') ?? ''));
}

const tailState = () => c.page.locator('[data-tail]').getAttribute('data-tail');

async function appended(stream: string, events: unknown[]): Promise<void> {
  const res = await append(c.node, stream, events);
  expect(res.status).toBe(201);
}

/** An append as `login` (password pw): its status. */
async function appendAs(login: string, stream: string, type: string): Promise<number> {
  const res = await http(c.node, `/streams/${encodeURIComponent(stream)}`, {
    method: 'POST', authorization: basic(login, 'pw'), headers: { 'Content-Type': EVENTS_JSON }, body: JSON.stringify([newEvent(type)]),
  });
  return res.status;
}

async function noSeriousViolations(): Promise<void> {
  const found = await seriousViolations(c.page);
  expect(found, JSON.stringify(found, null, 2)).toEqual([]);
}

describe('the live tail of a stream', () => {
  it('shows an admin events appended after the page opened; Pause holds new ones back and Resume brings them', async () => {
    const page = await logIn(c);
    const stream = uniq('live');
    await appended(stream, [newEvent('Opened', { n: 0 }), newEvent('Added', { n: 1 })]);
    await goTo(c, `/streams/${stream}`);
    await until(rows, (r) => r.join() === `1@${stream},0@${stream}`);
    await until(tailState, (s) => s === 'live');

    await appended(stream, [newEvent('Added', { n: 2 })]);
    await until(rows, (r) => r[0] === `2@${stream}`);
    await appended(stream, [newEvent('Added', { n: 3 }), newEvent('Added', { n: 4 })]);
    await until(rows, (r) => r.join() === [4, 3, 2, 1, 0].map((n) => `${n}@${stream}`).join());

    await page.getByRole('button', { name: 'Pause' }).click();
    await until(tailState, (s) => s === 'paused');
    await appended(stream, [newEvent('WhilePaused', { n: 5 })]);
    await sleep(QUIET_MS);
    expect((await rows())[0]).toBe(`4@${stream}`);

    await page.getByRole('button', { name: 'Resume' }).click();
    await until(rows, (r) => r.slice(0, 2).join() === `5@${stream},4@${stream}`);
    expect(await rows()).toHaveLength(6);
    // And it goes on following after the resume.
    await appended(stream, [newEvent('AfterResume', { n: 6 })]);
    await until(rows, (r) => r[0] === `6@${stream}`);
    await noSeriousViolations();
  });

  it('keeps at most 200 rows, and after a pause longer than that shows the newest 200 and says so', async () => {
    const page = await logIn(c);
    const stream = uniq('burst');
    await appended(stream, [newEvent('First')]);
    await goTo(c, `/streams/${stream}`);
    await until(rows, (r) => r.join() === `0@${stream}`);
    await until(tailState, (s) => s === 'live');

    await appended(stream, Array.from({ length: 250 }, (_, i) => newEvent('Burst', { i })));
    const live = await until(rows, (r) => r[0] === `250@${stream}`);
    expect(live).toHaveLength(200);
    expect(live[199]).toBe(`51@${stream}`);

    await page.getByRole('button', { name: 'Pause' }).click();
    await appended(stream, Array.from({ length: 230 }, (_, i) => newEvent('Burst', { i })));
    await page.getByRole('button', { name: 'Resume' }).click();
    const resumed = await until(rows, (r) => r[0] === `480@${stream}`);
    expect(resumed).toHaveLength(200);
    expect(resumed[199]).toBe(`281@${stream}`);
    await showsText(page.locator('.notice-plain'), 'More than 200 events arrived while paused: the newest 200 are shown.');
  });

  it('follows a stream for a plain user too, who is not asked about $all', async () => {
    const login = await newUser(c.node);
    const stream = uniq('userlive');
    await appended(stream, [newEvent('Opened')]);
    const page = await logIn(c, login, 'pw');
    await goTo(c, `/streams/${stream}`);
    await until(rows, (r) => r.join() === `0@${stream}`);
    await until(tailState, (s) => s === 'live');

    await appended(stream, [newEvent('Next', { n: 1 })]);
    await until(rows, (r) => r[0] === `1@${stream}`);
    await page.getByRole('button', { name: 'Pause' }).click();
    await appended(stream, [newEvent('Held', { n: 2 })]);
    await sleep(QUIET_MS);
    expect((await rows())[0]).toBe(`1@${stream}`);
    await page.getByRole('button', { name: 'Resume' }).click();
    await until(rows, (r) => r[0] === `2@${stream}`);
    await noSeriousViolations();

    await goTo(c, '/streams/$all');
    await showsText(page.getByRole('status'), 'Only admins can read $all.');
    await sleep(300);
    expect(strict.requests.filter((r) => r.includes('/streams/%24all'))).toEqual([]);
  });
});

describe('the live tail of $all', () => {
  it('shows an admin new events of every stream with their stream; Pause and Resume', async () => {
    const page = await logIn(c);
    await goTo(c, '/streams/$all');
    await shows(page.getByRole('heading', { name: 'All events ($all)' }));
    await until(tailState, (s) => s === 'live');
    const first = uniq('allive');
    await appended(first, [newEvent('Arrived', { who: 'first' })]);
    await until(rows, (r) => r[0] === `0@${first}`);
    const table = page.getByRole('table', { name: 'Events in $all, newest first' });
    await shows(table.locator(`tr[data-event="0@${first}"]`).getByRole('link', { name: first }));

    await page.getByRole('button', { name: 'Pause' }).click();
    const second = uniq('allpaused');
    await appended(second, [newEvent('Arrived', { who: 'second' })]);
    await sleep(QUIET_MS);
    expect((await rows())[0]).toBe(`0@${first}`);
    await page.getByRole('button', { name: 'Resume' }).click();
    await until(rows, (r) => r[0] === `0@${second}` && r[1] === `0@${first}`);

    await page.getByRole('button', { name: `Details of 0@${second}` }).click();
    await showsText(page.getByLabel(`Data of 0@${second}`, { exact: true }), '"who": "second"');
    await noSeriousViolations();
  });
});

describe('compact event rows', () => {
  it('are one line each and open on a click, or with the keyboard, to data and metadata', async () => {
    const page = await logIn(c);
    const stream = uniq('rows');
    await appended(stream, [newEvent('Placed', { total: 42 }, { by: 'test' }), newEvent('Shipped', { carrier: 'post' })]);
    await goTo(c, `/streams/${stream}`);
    await until(rows, (r) => r.join() === `1@${stream},0@${stream}`);
    const line = page.locator(`tr[data-event="0@${stream}"]`);
    expect(await line.locator('[data-cell="type"]').textContent()).toBe('Placed');
    // One line per event: nothing of the data shows yet.
    expect(await page.getByLabel(`Data of 0@${stream}`, { exact: true }).count()).toBe(0);
    const height = (await line.boundingBox())!.height;
    expect(height).toBeLessThan(40);

    const toggle = page.getByRole('button', { name: `Details of 0@${stream}` });
    expect(await toggle.getAttribute('aria-expanded')).toBe('false');
    await line.locator('[data-cell="type"]').click();
    await showsText(page.getByLabel(`Data of 0@${stream}`, { exact: true }), '"total": 42');
    await showsText(page.getByLabel(`Metadata of 0@${stream}`, { exact: true }), '"by": "test"');
    expect(await toggle.getAttribute('aria-expanded')).toBe('true');
    const controls = await toggle.getAttribute('aria-controls');
    expect(await page.locator(`[id="${controls}"]`).getAttribute('data-details')).toBe(`0@${stream}`);
    await noSeriousViolations();

    await toggle.click();
    await gone(page.getByLabel(`Data of 0@${stream}`, { exact: true }));
    expect(await toggle.getAttribute('aria-expanded')).toBe('false');

    await page.getByRole('button', { name: `Details of 1@${stream}` }).focus();
    await page.keyboard.press('Enter');
    await showsText(page.getByLabel(`Data of 1@${stream}`, { exact: true }), '"carrier": "post"');
    await showsText(page.locator(`tr[data-details="1@${stream}"]`), 'Metadata(none)');

    // The event's own page is still a link away.
    await page.getByRole('link', { name: `Event 1@${stream}` }).click();
    await shows(page.getByRole('heading', { name: `Event 1@${stream}` }));
  });
});

describe('the access control form', () => {
  it('lets an admin write $acl into the metadata, keeping the other members as written; the ACL then refuses a plain user', async () => {
    const login = await newUser(c.node);
    const stream = uniq('guarded');
    await appended(stream, [newEvent('Secret', { n: 1 })]);
    // Members the form must keep: one whose number a double cannot hold, and a custom one.
    const original = '{"owner":"billing","$maxCount":100,"big":9223372036854775807}';
    const meta = await http(c.node, `/streams/${stream}/metadata`, {
      method: 'POST', headers: { 'Content-Type': 'application/json', 'ES-EventId': crypto.randomUUID() }, body: original,
    });
    expect(meta.status).toBe(201);
    expect((await http(c.node, `/streams/${stream}`, { authorization: basic(login, 'pw'), headers: { Accept: 'application/json' } })).status).toBe(200);

    const page = await logIn(c);
    await goTo(c, `/streams/${stream}`);
    const acl = page.getByRole('table', { name: 'Access control' });
    await showsText(acl.locator('tr[data-acl="$r"]'), 'default');
    await page.getByRole('button', { name: 'Edit access control' }).click();
    await page.getByLabel('Readers', { exact: true }).fill('$admins, auditors');
    await page.getByLabel('Writers', { exact: true }).fill('$admins');
    await page.getByLabel('Metadata writers').fill('$admins');
    await noSeriousViolations();
    await page.getByRole('button', { name: 'Save access control' }).click();
    await showsText(page.getByRole('status'), `Access control saved (event 1 of $$${stream}).`);
    await showsText(acl.locator('tr[data-acl="$r"]'), '$admins, auditors');
    await showsText(acl.locator('tr[data-acl="$d"]'), 'default');

    const read = await http(c.node, `/streams/${stream}/metadata`, { headers: { Accept: 'application/json' } });
    const text = await read.text();
    expect(text).toContain('"big":9223372036854775807');
    expect(JSON.parse(text)).toEqual({
      owner: 'billing', $maxCount: 100, big: 9223372036854775807,
      $acl: { $r: ['$admins', 'auditors'], $w: ['$admins'], $mw: ['$admins'] },
    });
    // It takes effect: the plain user may no longer read or write the stream.
    expect((await http(c.node, `/streams/${stream}`, { authorization: basic(login, 'pw'), headers: { Accept: 'application/json' } })).status).toBe(401);
    expect(await appendAs(login, stream, 'Nope')).toBe(401);

    // Emptied, the lists go and the defaults apply again.
    await page.getByRole('button', { name: 'Edit access control' }).click();
    expect(await page.getByLabel('Readers', { exact: true }).inputValue()).toBe('$admins, auditors');
    for (const field of ['Readers', 'Writers', 'Metadata writers']) await page.getByLabel(field, { exact: true }).fill('');
    await page.getByRole('button', { name: 'Save access control' }).click();
    await showsText(page.getByRole('status'), `Access control saved (event 2 of $$${stream}).`);
    const cleared = await (await http(c.node, `/streams/${stream}/metadata`, { headers: { Accept: 'application/json' } })).text();
    expect(cleared).toBe(original);
    expect((await http(c.node, `/streams/${stream}`, { authorization: basic(login, 'pw'), headers: { Accept: 'application/json' } })).status).toBe(200);
  });

  it('lets a plain user restrict writing to a stream, which then refuses their own appends', async () => {
    const login = await newUser(c.node);
    const other = await newUser(c.node);
    const stream = uniq('mine');
    await appended(stream, [newEvent('Created')]);
    const page = await logIn(c, login, 'pw');
    await goTo(c, `/streams/${stream}`);
    await until(rows, (r) => r.join() === `0@${stream}`);
    await page.getByRole('button', { name: 'Edit access control' }).click();
    await page.getByLabel('Writers', { exact: true }).fill(other);
    await page.getByRole('button', { name: 'Save access control' }).click();
    await showsText(page.getByRole('status'), `Access control saved (event 0 of $$${stream}).`);
    await showsText(page.getByRole('table', { name: 'Access control' }).locator('tr[data-acl="$w"]'), other);

    const metadata = await (await http(c.node, `/streams/${stream}/metadata`, { headers: { Accept: 'application/json' } })).json();
    expect(metadata).toEqual({ $acl: { $w: [other] } });
    expect(await appendAs(login, stream, 'Mine')).toBe(401);
    expect(await appendAs(other, stream, 'Theirs')).toBe(201);

    // The form's own append is refused now, and says so; the session goes on. The tail shows the other user's event.
    strict.allow(/^401 POST .*\/streams\//);
    strict.allow(/status of 401/);
    await until(rows, (r) => r[0] === `1@${stream}`);
    await page.getByLabel('Event type').fill('Mine');
    await page.getByRole('button', { name: 'Append' }).click();
    await showsText(page.getByRole('alert'), /401/);
    await shows(page.getByRole('navigation', { name: 'Main' }));
  });
});

describe('recently created streams', () => {
  it('are not asked for a plain user, who is told why', async () => {
    const login = await newUser(c.node);
    const page = await logIn(c, login, 'pw');
    await goTo(c, '/streams');
    await showsText(page.getByRole('status'), /which your user may not read \(admins only by default\)/);
    await sleep(300);
    expect(strict.requests.filter((r) => /\/streams\/(%24|\$)(streams|all)\b/.test(r) || r.includes('/projection/%24streams'))).toEqual([]);
    expect(await page.getByRole('table', { name: 'Recently created streams' }).count()).toBe(0);
    await noSeriousViolations();
  });

  it('come from $streams for an admin: first why there are none, then the new streams newest first', async () => {
    const page = await logIn(c);
    await goTo(c, '/streams');
    await showsText(page.getByRole('status'), /the \$streams system projection writes: it has not run on this node/);

    const enabled = await http(c.node, '/projection/%24streams/command/enable', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '' });
    expect(enabled.status).toBe(200);
    const older = uniq('created-a');
    const newer = uniq('created-b');
    await appended(older, [newEvent('Born')]);
    await appended(newer, [newEvent('Born')]);
    const created = page.getByRole('table', { name: 'Recently created streams' });
    await until(async () => {
      await page.getByRole('button', { name: 'Refresh' }).click();
      return created.getByRole('link').allTextContents();
    }, (names) => names.includes(newer) && names.includes(older));
    const names = await created.getByRole('link').allTextContents();
    expect(names.indexOf(newer)).toBeLessThan(names.indexOf(older));
    expect(names.some((n) => n.startsWith('$'))).toBe(false);
    await page.getByLabel('Include system streams').check();
    await shows(created.getByRole('link', { name: '$user-admin' }));
    await noSeriousViolations();
    await created.getByRole('link', { name: newer }).click();
    await shows(page.getByRole('heading', { name: `Stream ${newer}` }));
  });
});
