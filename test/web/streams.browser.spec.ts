import { describe, expect, it } from 'vitest';
import { append, basic, http, newEvent, uniq } from '../support/node.js';
import { goTo, gone, logIn, shows, showsText, until, useConsole } from '../support/browser.js';

// The stream browser in a real browser: appending through the form, paging through a stream,
// metadata round trips, deleting behind a confirmation, and $all for admins only.

const c = useConsole();
const ATOM = 'application/vnd.eventstore.atom+json';

/** The event names (`n@stream`) of the events table's rows, top to bottom. */
async function rows(): Promise<string[]> {
  return c.page.locator('table.events tbody tr[data-event]').evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-event') ?? ''));
}

/** Opens an event's row (one line until then) to show its data and metadata. */
async function expand(name: string): Promise<void> {
  await c.page.getByRole('button', { name: `Details of ${name}`, exact: true }).click();
}

const names = (stream: string, from: number, to: number) => {
  const out: string[] = [];
  for (let n = from; n >= to; n--) out.push(`${n}@${stream}`);
  return out;
};

async function plainUser(): Promise<string> {
  const login = uniq('reader');
  const created = await http(c.node, '/users/', {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ loginName: login, fullName: 'Reader', password: 'pw', groups: [] }),
  });
  expect(created.status).toBe(201);
  return login;
}

describe('a stream', () => {
  it('appends an event through the form and lists it with its data pretty-printed; a wrong expected version shows the node\'s 400', async () => {
    const page = await logIn(c);
    const stream = uniq('orders');
    await goTo(c, `/streams/${stream}`);
    await showsText(page.getByRole('status'), /No stream named .* \(404 Not Found\)/);

    await page.getByLabel('Event type').fill('OrderPlaced');
    await page.getByLabel('Data', { exact: true }).fill('{"total":42,"items":["book","pen"]}');
    await page.getByLabel('Event metadata (optional JSON)').fill('{"by":"ui"}');
    await page.getByRole('button', { name: 'Append' }).click();
    await showsText(page.getByRole('status'), 'Appended event 0 (OrderPlaced).');

    await expand(`0@${stream}`);
    const data = page.getByLabel(`Data of 0@${stream}`, { exact: true });
    await shows(data);
    expect(await data.textContent()).toBe(JSON.stringify({ total: 42, items: ['book', 'pen'] }, null, 2));
    expect(await page.getByLabel(`Metadata of 0@${stream}`, { exact: true }).textContent()).toBe('{\n  "by": "ui"\n}');
    const row = page.locator(`tr[data-event="0@${stream}"]`);
    expect(await row.locator('[data-cell="type"]').textContent()).toBe('OrderPlaced');
    await gone(page.getByText(/No stream named/));

    // The node has it, with the form's data.
    const stored = await http(c.node, `/streams/${stream}/0`, { headers: { Accept: 'application/json' } });
    expect(await stored.json()).toEqual({ total: 42, items: ['book', 'pen'] });

    // Expected version 5 on a stream at 0: the node refuses, the form says so next to the button.
    await page.getByLabel('Event type').fill('OrderShipped');
    await page.getByLabel('Data', { exact: true }).fill('{}');
    await page.getByLabel('Expected version (optional)').fill('5');
    await page.getByRole('button', { name: 'Append' }).click();
    await showsText(page.getByRole('alert'), /400 Wrong expected EventNumber: The stream's current version is 0/);
    expect(await rows()).toEqual([`0@${stream}`]);

    // Invalid JSON is caught before it is sent.
    await page.getByLabel('Expected version (optional)').fill('0');
    await page.getByLabel('Data', { exact: true }).fill('{"oops":');
    await page.getByRole('button', { name: 'Append' }).click();
    await showsText(page.getByRole('alert'), /Data is not valid JSON/);
    await page.getByLabel('Data', { exact: true }).fill('{"carrier":"post"}');
    await page.getByRole('button', { name: 'Append' }).click();
    await until(rows, (r) => r.join() === [`1@${stream}`, `0@${stream}`].join());
  });

  it('pages backward and forward over more events than one page, and opens one event', async () => {
    const page = await logIn(c);
    const stream = uniq('paged');
    const events = Array.from({ length: 25 }, (_, i) => newEvent('Tick', { n: i }));
    expect((await append(c.node, stream, events)).status).toBe(201);
    await goTo(c, `/streams/${stream}`);
    const pages = page.getByRole('navigation', { name: 'Pages' });

    await until(rows, (r) => r.join() === names(stream, 24, 5).join());
    expect(await pages.getByRole('link', { name: 'Newer' }).count()).toBe(0); // the head: nothing newer
    await pages.getByRole('link', { name: 'Older' }).click();
    await until(rows, (r) => r.join() === names(stream, 4, 0).join());
    await expand(`3@${stream}`);
    expect(await page.getByLabel(`Data of 3@${stream}`, { exact: true }).textContent()).toBe('{\n  "n": 3\n}');
    expect(await pages.getByRole('link', { name: 'Older' }).count()).toBe(0); // the oldest page
    await pages.getByRole('link', { name: 'Newer' }).click();
    await until(rows, (r) => r.join() === names(stream, 24, 5).join());
    await pages.getByRole('link', { name: 'Oldest' }).click();
    await until(rows, (r) => r.join() === names(stream, 19, 0).join());
    await pages.getByRole('link', { name: 'Newer' }).click();
    await until(rows, (r) => r.join() === names(stream, 24, 20).join());
    await pages.getByRole('link', { name: 'Newest' }).click();
    await until(rows, (r) => r.join() === names(stream, 24, 5).join());

    // One event's own page, and the way to the next one.
    await page.getByRole('link', { name: `Event 7@${stream}` }).click();
    await shows(page.getByRole('heading', { name: `Event 7@${stream}` }));
    await showsText(page.getByLabel('Data', { exact: true }), '{\n  "n": 7\n}');
    await page.getByRole('link', { name: 'Next event' }).click();
    await shows(page.getByRole('heading', { name: `Event 8@${stream}` }));
    await showsText(page.getByLabel('Data', { exact: true }), '{\n  "n": 8\n}');
  });

  it('edits the metadata as JSON: a later API read has it, and a bad document shows the node\'s 400', async () => {
    const page = await logIn(c);
    const stream = uniq('meta');
    expect((await append(c.node, stream, [newEvent('A'), newEvent('B'), newEvent('C')])).status).toBe(201);
    await goTo(c, `/streams/${stream}`);
    await showsText(page.getByLabel('Current metadata'), '{}');

    await page.getByRole('button', { name: 'Edit metadata' }).click();
    await page.getByLabel('Metadata (JSON)').fill('{"$maxCount": 2, "owner": "billing"}');
    await page.getByRole('button', { name: 'Save metadata' }).click();
    await showsText(page.getByRole('status'), `Metadata saved (event 0 of $$${stream}).`);
    await showsText(page.getByLabel('Current metadata'), '"$maxCount": 2');
    const read = await http(c.node, `/streams/${stream}/metadata`, { headers: { Accept: 'application/json' } });
    expect(await read.json()).toEqual({ $maxCount: 2, owner: 'billing' });
    // $maxCount 2 now hides the oldest event from the list.
    await until(rows, (r) => r.join() === [`2@${stream}`, `1@${stream}`].join());

    await page.getByRole('button', { name: 'Edit metadata' }).click();
    expect(await page.getByLabel('Metadata (JSON)').inputValue()).toBe('{\n  "$maxCount": 2,\n  "owner": "billing"\n}');
    await page.getByLabel('Metadata (JSON)').fill('{"$maxCount": "two"}');
    await page.getByRole('button', { name: 'Save metadata' }).click();
    // The store's write door answers with its rule and the stream (one message for every door).
    await showsText(page.getByRole('alert'), /400 Bad Request: Invalid write to stream .*: Stream metadata \$maxCount must be an integer/);
    const after = await http(c.node, `/streams/${stream}/metadata`, { headers: { Accept: 'application/json' } });
    expect(await after.json()).toEqual({ $maxCount: 2, owner: 'billing' });
  });

  it('soft-deletes after a confirmation and then shows the stream as deleted; a hard delete shows it gone for good', async () => {
    const page = await logIn(c);
    const stream = uniq('doomed');
    expect((await append(c.node, stream, [newEvent('Born')])).status).toBe(201);
    await goTo(c, `/streams/${stream}`);
    await until(rows, (r) => r.join() === `0@${stream}`);

    // Cancelling leaves it alone.
    await page.getByRole('button', { name: 'Delete stream', exact: true }).click();
    const dialog = page.getByRole('dialog', { name: 'Delete stream', exact: true });
    await showsText(dialog, `Soft-delete stream “${stream}”?`);
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await gone(page.getByRole('dialog'));
    expect((await http(c.node, `/streams/${stream}`, { headers: { Accept: ATOM } })).status).toBe(200);

    await page.getByRole('button', { name: 'Delete stream', exact: true }).click();
    await dialog.getByRole('button', { name: 'Delete', exact: true }).click();
    await showsText(page.locator('p.gone'), /has been deleted \(soft delete/);
    await gone(page.locator('table.events'));
    expect((await http(c.node, `/streams/${stream}`, { headers: { Accept: ATOM } })).status).toBe(404);

    const other = uniq('erased');
    expect((await append(c.node, other, [newEvent('Born')])).status).toBe(201);
    await goTo(c, `/streams/${other}`);
    await until(rows, (r) => r.join() === `0@${other}`);
    await page.getByRole('button', { name: 'Hard delete stream' }).click();
    await page.getByRole('dialog', { name: 'Hard delete stream' }).getByRole('button', { name: 'Hard delete', exact: true }).click();
    await showsText(page.locator('p.gone'), /hard-deleted \(410 Deleted\)/);
    await gone(page.getByRole('button', { name: 'Append' }));
    expect((await http(c.node, `/streams/${other}`, { headers: { Accept: ATOM } })).status).toBe(410);
  });

  it('shows a link event at its place in its stream, pointing at the event it links to', async () => {
    const page = await logIn(c);
    const target = uniq('target');
    const links = uniq('links');
    expect((await append(c.node, target, [newEvent('Real', { real: true })])).status).toBe(201);
    expect((await append(c.node, links, [{ eventId: crypto.randomUUID(), eventType: '$>', data: `0@${target}` }])).status).toBe(201);
    await goTo(c, `/streams/${links}`);
    await until(rows, (r) => r.join() === `0@${links}`);
    // The link resolves: the row shows the target's type and data, and leads to it.
    await expand(`0@${links}`);
    await showsText(page.getByLabel(`Data of 0@${links}`, { exact: true }), '"real": true');
    await page.getByRole('link', { name: `→ 0@${target}` }).click();
    await shows(page.getByRole('heading', { name: `Event 0@${target}` }));
    await showsText(page.getByLabel('Data', { exact: true }), '"real": true');
  });
});

describe('finding streams and $all', () => {
  it('shows an admin the recently written streams, filters and opens them by name, and pages through $all', async () => {
    const page = await logIn(c);
    const tag = uniq('recent');
    const first = `${tag}-alpha`;
    const second = `${tag}-beta`;
    // Enough events for $all to have three pages of 20 whatever ran before.
    expect((await append(c.node, `${tag}-filler`, Array.from({ length: 45 }, () => newEvent('Filler')))).status).toBe(201);
    expect((await append(c.node, first, [newEvent('One', { who: 'alpha' })])).status).toBe(201);
    expect((await append(c.node, second, [newEvent('Two', { who: 'beta' })])).status).toBe(201);
    await goTo(c, '/streams');
    const recent = page.getByRole('table', { name: 'Recently written streams' });
    await shows(recent.getByRole('link', { name: second }));
    await shows(recent.getByRole('link', { name: first }));
    // Newest first.
    const listed = await recent.getByRole('link').allTextContents();
    expect(listed.indexOf(second)).toBeLessThan(listed.indexOf(first));

    // System streams ($...) only when asked for.
    const system = `$ui-${tag}`;
    expect((await append(c.node, system, [newEvent('Internal')])).status).toBe(201);
    await page.getByRole('button', { name: 'Refresh' }).click();
    await page.getByLabel('Include system streams').check();
    await shows(recent.getByRole('link', { name: system }));
    await page.getByLabel('Include system streams').uncheck();
    await gone(recent.getByRole('link', { name: system }));
    await shows(recent.getByRole('link', { name: second }));

    await page.getByLabel('Stream name').fill(`${tag}-al`);
    await gone(recent.getByRole('link', { name: second }));
    await shows(recent.getByRole('link', { name: first }));
    await page.getByLabel('Stream name').fill(second);
    await page.getByRole('button', { name: 'Open' }).click();
    await shows(page.getByRole('heading', { name: `Stream ${second}` }));
    await expand(`0@${second}`);
    await showsText(page.getByLabel(`Data of 0@${second}`, { exact: true }), '"who": "beta"');

    // $all, newest first, and a page older.
    await goTo(c, '/streams');
    await page.getByRole('link', { name: 'Browse all events ($all)' }).click();
    await shows(page.getByRole('heading', { name: 'All events ($all)' }));
    const all = page.getByRole('table', { name: 'Events in $all, newest first' });
    await shows(all.getByRole('link', { name: second }));
    // The head page follows the log live; paused, it stays the page it was (the node writes
    // events of its own meanwhile, which would come in on top).
    await page.getByRole('button', { name: 'Pause' }).click();
    await expand(`0@${second}`);
    await showsText(page.getByLabel(`Data of 0@${second}`, { exact: true }), '"who": "beta"');
    const headRows = await rows();
    expect(headRows.length).toBe(20);
    await page.getByRole('navigation', { name: 'Pages' }).getByRole('link', { name: 'Older' }).click();
    const older = await until(rows, (r) => r.length > 0 && r[0] !== headRows[0]);
    expect(older.some((r) => headRows.includes(r))).toBe(false);
    // Forward from the start of the log: the oldest page ends with the log's first event, and has nothing older.
    const pages = page.getByRole('navigation', { name: 'Pages' });
    await pages.getByRole('link', { name: 'Oldest' }).click();
    const oldest = await until(rows, (r) => r.length === 20 && r.join() !== older.join());
    expect(await pages.getByRole('link', { name: 'Older' }).count()).toBe(0);
    await pages.getByRole('link', { name: 'Newer' }).click();
    const newer = await until(rows, (r) => r.length > 0 && r.join() !== oldest.join());
    expect(newer.some((r) => oldest.includes(r))).toBe(false);
    await pages.getByRole('link', { name: 'Newest' }).click();
    // The head page again (no Newer link below): the log may have grown since by the node's own
    // system events, so not necessarily the same twenty, but none of the older page's.
    await until(rows, (r) => r.length > 0 && !r.some((row) => older.includes(row)) && r.join() !== newer.join());
    expect(await pages.getByRole('link', { name: 'Newer' }).count()).toBe(0);
  });

  it('while the next page of $all loads, shows that it loads, not the page it came from', async () => {
    const page = await logIn(c);
    expect((await append(c.node, uniq('between'), Array.from({ length: 45 }, () => newEvent('Filler')))).status).toBe(201);
    await goTo(c, '/streams/$all');
    const pages = page.getByRole('navigation', { name: 'Pages' });
    await shows(page.getByRole('table', { name: 'Events in $all, newest first' }));
    const head = await until(rows, (r) => r.length === 20);
    await pages.getByRole('link', { name: 'Older' }).click();
    const older = await until(rows, (r) => r.length > 0 && !r.includes(head[head.length - 1]));
    // The head page's answer is held back: meanwhile the view says it is loading, and shows no rows
    // (the older page's rows under the head page's live tail were what it showed before).
    let release = () => {};
    const held = new Promise<void>((resolve) => { release = resolve; });
    await page.route(/\/head\/backward\/20\?/, async (route) => { await held; await route.continue(); });
    try {
      await pages.getByRole('link', { name: 'Newest' }).click();
      await shows(page.getByText('Loading…'));
      expect(await rows()).toEqual([]);
    } finally {
      release();
    }
    await until(rows, (r) => r.length >= 20 && !r.some((row) => older.includes(row)));
    await page.unrouteAll({ behavior: 'ignoreErrors' });
  });

  it('does not offer $all to a plain user, explains the recent list, and shows a refused stream without ending the session', async () => {
    const login = await plainUser();
    expect((await http(c.node, '/streams/$all', { authorization: basic(login, 'pw') })).status).toBe(401);
    const page = await logIn(c, login, 'pw');
    await goTo(c, '/streams');
    await shows(page.getByRole('heading', { name: 'Streams' }));
    await showsText(page.getByRole('status'), /your user may not read \(admins only by default\)/);
    expect(await page.getByRole('link', { name: /\$all/ }).count()).toBe(0);

    await goTo(c, '/streams/$all');
    await showsText(page.getByRole('status'), 'Only admins can read $all.');
    expect(await page.locator('table.events').count()).toBe(0);

    // A system stream the user may not read: the node's refusal, and still logged in.
    await goTo(c, '/streams/$users');
    await showsText(page.getByRole('alert'), /401 Unauthorized: Access denied/);
    await shows(page.getByRole('navigation', { name: 'Main' }));
    await shows(page.getByText(login));
  });
});
