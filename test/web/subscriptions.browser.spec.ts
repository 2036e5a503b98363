import { describe, expect, it } from 'vitest';
import { append, http, newEvent, uniq, type TestNode } from '../support/node.js';
import { goTo, gone, logIn, shows, showsText, until, useConsole } from '../support/browser.js';

// The console's persistent subscriptions: created and changed through its forms, messages parked
// through the competing-consumer API (pull, then nack with action=park), seen in the parked view,
// and replayed from the console back to the group.

const c = useConsole();
const COMPETING = 'application/vnd.eventstore.competingatom+json';

const groupPath = (stream: string, group: string) => `/subscriptions/${encodeURIComponent(stream)}/${encodeURIComponent(group)}`;

async function info(node: TestNode, stream: string, group: string): Promise<any> {
  const res = await http(node, `${groupPath(stream, group)}/info`, { headers: { Accept: 'application/json' } });
  return res.status === 200 ? res.json() : { status: res.status };
}

/** Pulls up to `count` messages: their titles (`n@stream`) and nack links. */
async function pull(node: TestNode, stream: string, group: string, count: number): Promise<Array<{ title: string; ack: string; nack: string }>> {
  const res = await http(node, `${groupPath(stream, group)}/${count}`, { headers: { Accept: COMPETING } });
  expect(res.status).toBe(200);
  const feed = await res.json();
  const path = (e: any, rel: string) => new URL(e.links.find((l: any) => l.relation === rel).uri).pathname;
  return feed.entries.map((e: any) => ({ title: e.title, ack: path(e, 'ack'), nack: path(e, 'nack') }));
}

describe('persistent subscriptions in the console', () => {
  it('create a subscription and replay parked messages', async () => {
    const stream = uniq('orders');
    const group = uniq('billing');
    expect((await append(c.node, stream, [newEvent('placed', { n: 0 }), newEvent('placed', { n: 1 }), newEvent('shipped', { n: 2 })])).status).toBe(201);
    const page = await logIn(c);
    await goTo(c, '/subscriptions');
    const form = page.getByRole('form', { name: 'New subscription' });
    await form.getByLabel('Stream').fill(stream);
    await form.getByLabel('Group').fill(group);
    // The defaults are the node's; one changed.
    expect(await form.getByLabel('Message timeout (ms)').inputValue()).toBe('10000');
    await form.getByLabel('Max retry count').fill('3');
    await form.getByRole('button', { name: 'Create subscription' }).click();
    await shows(page.getByRole('heading', { name: `${group} on ${stream}` }));
    expect((await info(c.node, stream, group)).config.maxRetryCount).toBe(3);
    await showsText(page.locator('[data-figure="parked"]'), /^0$/);
    await shows(page.getByText('No parked messages.'));

    // A consumer parks the first two events.
    const taken = await pull(c.node, stream, group, 2);
    expect(taken.map((m) => m.title).sort()).toEqual([`0@${stream}`, `1@${stream}`]);
    for (const m of taken) expect((await http(c.node, `${m.nack}?action=park`, { method: 'POST' })).status).toBe(200);

    await showsText(page.locator('[data-figure="parked"]'), /^2$/);
    const parked = page.getByRole('table', { name: 'Parked messages' });
    await shows(parked.getByRole('cell', { name: `0@${stream}` }));
    await shows(parked.getByRole('cell', { name: `1@${stream}` }));
    await shows(parked.getByText(/Client explicitly NAK'ed message/).first());
    await parked.getByText('Show').first().click();
    await showsText(parked.getByLabel(`Data of 1@${stream}`), /"n": 1/);

    // Replayed from the console (a bad stop position is the node's 400, shown at the form): the
    // parked count drops, the retry buffer holds them ...
    const replay = page.getByRole('form', { name: 'Replay parked messages' });
    await replay.getByLabel('Stop before parked event number').fill('-1');
    await replay.getByRole('button', { name: 'Replay parked messages' }).click();
    await showsText(replay.getByRole('alert'), /400 .*stopAt should be a properly formed positive long/);
    await showsText(page.locator('[data-figure="parked"]'), /^2$/);
    await replay.getByLabel('Stop before parked event number').fill('');
    await replay.getByRole('button', { name: 'Replay parked messages' }).click();
    await shows(page.getByText('Replay started'));
    await showsText(page.locator('[data-figure="parked"]'), /^0$/);
    await showsText(page.locator('[data-figure="retry-buffer"]'), /^2$/);
    // ... and a later pull gets them again (ahead of the event not yet delivered).
    const again = await pull(c.node, stream, group, 5);
    expect(again.map((m) => m.title).sort()).toEqual([`0@${stream}`, `1@${stream}`, `2@${stream}`]);
    for (const m of again) expect((await http(c.node, m.ack, { method: 'POST' })).status).toBe(200);
    // Handled, the replayed messages leave the parked view.
    await gone(parked);
    await shows(page.getByText('No parked messages.'));
    await showsText(page.locator('[data-figure="retry-buffer"]'), /^0$/);
  });

  it('update a subscription, with the node\'s refusals shown at the form, and delete it', async () => {
    const stream = uniq('ledger');
    const group = uniq('audit');
    expect((await http(c.node, groupPath(stream, group), { method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: '{}' })).status).toBe(200);
    const page = await logIn(c);
    // Listed, with a link to its page.
    await goTo(c, '/subscriptions');
    await page.getByRole('table', { name: 'Subscriptions' }).getByRole('link', { name: group }).click();
    await shows(page.getByRole('heading', { name: `${group} on ${stream}` }));
    const form = page.getByRole('form', { name: 'Update subscription' });
    expect(await form.getByLabel('Buffer size', { exact: true }).inputValue()).toBe('500');

    // The node refuses what breaks its rules, and says why next to the form.
    await form.getByLabel('Min checkpoint count').fill('900');
    await form.getByRole('button', { name: 'Save settings' }).click();
    await showsText(form.getByRole('alert'), /Min Checkpoint Count \(900\) must not exceed Max Checkpoint Count \(500\)/);
    await form.getByLabel('Min checkpoint count').fill('many');
    await form.getByRole('button', { name: 'Save settings' }).click();
    await showsText(form.getByRole('alert'), /minCheckPointCount must be an integer/);

    await form.getByLabel('Min checkpoint count').fill('5');
    await form.getByLabel('Read batch size', { exact: true }).fill('50');
    await form.getByLabel('Consumer strategy').selectOption('Pinned');
    await form.getByRole('button', { name: 'Save settings' }).click();
    await shows(form.getByText('Settings saved.'));
    await gone(form.getByRole('alert'));
    const config = (await info(c.node, stream, group)).config;
    expect(config).toMatchObject({ minCheckPointCount: 5, readBatchSize: 50, namedConsumerStrategy: 'Pinned', bufferSize: 500 });

    // Creating it again is refused with the node's reason.
    await goTo(c, `/subscriptions/${encodeURIComponent(stream)}`);
    const create = page.getByRole('form', { name: 'New subscription' });
    expect(await create.getByLabel('Stream').inputValue()).toBe(stream);
    await create.getByLabel('Group').fill(group);
    await create.getByRole('button', { name: 'Create subscription' }).click();
    await showsText(create.getByRole('alert'), /409 .*already exists/);

    // Delete asks first; cancelled, nothing happens.
    await page.getByRole('table', { name: 'Subscriptions' }).getByRole('link', { name: group }).click();
    await page.getByRole('button', { name: 'Delete subscription' }).click();
    const dialog = page.getByRole('dialog', { name: 'Delete subscription' });
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    expect((await info(c.node, stream, group)).groupName).toBe(group);
    await page.getByRole('button', { name: 'Delete subscription' }).click();
    await dialog.getByRole('button', { name: 'Delete' }).click();
    await shows(page.getByRole('heading', { name: 'Persistent subscriptions' }));
    await until(() => info(c.node, stream, group), (i) => i.status === 404);
    await gone(page.getByRole('link', { name: group }));
  });

  it('shows the figures to a plain user without the forms that need an operator', async () => {
    const stream = uniq('plain');
    const group = uniq('readers');
    expect((await http(c.node, groupPath(stream, group), { method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: '{}' })).status).toBe(200);
    const login = uniq('viewer');
    expect((await http(c.node, '/users/', {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ loginName: login, fullName: 'Viewer', password: 'pw', groups: [] }),
    })).status).toBe(201);
    const page = await logIn(c, login, 'pw');
    await goTo(c, `/subscriptions/${encodeURIComponent(stream)}/${encodeURIComponent(group)}`);
    await shows(page.getByRole('heading', { name: `${group} on ${stream}` }));
    await showsText(page.locator('[data-figure="status"]'), /\w/);
    await gone(page.getByRole('form', { name: 'Update subscription' }));
    await gone(page.getByRole('button', { name: 'Delete subscription' }));
    await gone(page.getByRole('button', { name: 'Replay parked messages' }));
    // The parked stream (admins only by default) is read only when asked; asked, the node refuses it.
    await shows(page.getByText('a system stream only admins may read by default'));
    await page.getByRole('button', { name: 'Read it' }).click();
    await shows(page.getByText('may not read the parked messages'));
    // Still logged in: the refusal to read a system stream does not end the session.
    await shows(page.getByRole('navigation', { name: 'Main' }));
  });
});
