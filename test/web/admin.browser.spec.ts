import { describe, expect, it } from 'vitest';
import { basic, http, newUser, softDeletedStream } from '../support/node.js';
import { goTo, gone, logIn, shows, showsText, useConsole } from '../support/browser.js';

// The admin area in a real browser: a scavenge started from the form (its parameters checked by
// the node), followed live and stopped, its history from $scavenges and $scavenges-{id};
// auto-scavenge on a node without a license; reloading the configuration. (Auto-scavenge with a
// license: admin-auto-scavenge.browser.spec.ts; shutdown: admin-shutdown.browser.spec.ts.)

// Small chunks: a few thousand events make a scavenge of many chunks.
const c = useConsole({ chunkSize: 4096 });


async function apiJson(path: string): Promise<any> {
  const res = await http(c.node, path, { headers: { Accept: 'application/json' } });
  expect(res.status, path).toBe(200);
  return res.json();
}

/** The id in the form's "Scavenge <id> started." notice. */
async function startedId(): Promise<string> {
  const notice = c.page.getByRole('form', { name: 'Start a scavenge' }).getByRole('status');
  await showsText(notice, /^Scavenge [0-9a-f-]{36} started\.$/);
  return /Scavenge ([0-9a-f-]{36})/.exec((await notice.textContent())!)![1];
}

const historyRow = (id: string) => c.page.getByRole('table', { name: 'Scavenge history' }).getByRole('row').filter({ hasText: id });

describe('scavenging from the console', () => {
  it('starts a scavenge from the form and sees it complete in the history with its result', async () => {
    await softDeletedStream(c.node, 300);
    const page = await logIn(c);
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Admin' }).click();
    await shows(page.getByRole('heading', { name: 'Scavenge', exact: true }));
    // The defaults are in the form.
    expect(await page.getByLabel('Threads').inputValue()).toBe('1');
    expect(await page.getByLabel('Threshold').inputValue()).toBe('0');
    expect(await page.getByLabel('Throttle percent').inputValue()).toBe('100');
    await page.getByRole('button', { name: 'Start scavenge' }).click();
    const id = await startedId();

    const row = historyRow(id);
    await showsText(row.getByRole('cell').nth(2), 'Success');
    // Time taken and space saved come from its $scavengeCompleted event.
    const cells = await row.getByRole('cell').allTextContents();
    expect(cells[3]).toMatch(/^\d+(\.\d)? (ms|s)$/);
    expect(cells[4]).toMatch(/^\d+(\.\d)? (B|KiB|MiB)$/);
    expect(cells[4]).not.toBe('0 B');
    await showsText(page.getByText(/No scavenge is running/), /The last one since the node started: Success/);
    expect(await apiJson('/admin/scavenge/last')).toMatchObject({ scavengeId: id, scavengeResult: 'Success' });

    // Its own history stream, event by event.
    await row.getByRole('link', { name: id }).click();
    await shows(page.getByRole('heading', { name: `Scavenge ${id}` }));
    await showsText(page.locator('[data-figure="result"]'), 'Success');
    const events = page.getByRole('table', { name: 'Scavenge events' });
    await shows(events.getByRole('cell', { name: 'Started', exact: true }));
    await shows(events.getByRole('cell', { name: 'Chunks done', exact: true }));
    await shows(events.getByRole('cell', { name: 'Completed', exact: true }));
  });

  it('start and stop a scavenge and see the history', async () => {
    await softDeletedStream(c.node, 3000);
    const page = await logIn(c, 'ops', 'changeit');
    await goTo(c, '/admin');
    // At 1 % a run rests about 99 ms for each ms of work: it is still running when stopped.
    await page.getByLabel('Throttle percent').fill('1');
    await page.getByRole('button', { name: 'Start scavenge' }).click();
    const id = await startedId();

    // Its progress, live: the running scavenge and the events of $scavenges-{id}.
    const running = page.getByRole('region', { name: 'Running scavenge' });
    await shows(running.getByRole('link', { name: id }));
    await showsText(running.locator('[data-figure="phase"]'), /^(Beginning|Accumulation|Calculation|Chunk execution)$/);
    await shows(running.getByRole('table', { name: 'Latest progress events' }).getByRole('cell', { name: 'Started', exact: true }));
    await showsText(historyRow(id).getByRole('cell').nth(2), 'Running');
    expect((await apiJson('/admin/scavenge/current')).scavengeId).toBe(id);

    await running.getByRole('button', { name: 'Stop scavenge' }).click();
    await showsText(page.getByText(/^Scavenge [0-9a-f-]{36} stopped\.$/), `Scavenge ${id} stopped.`);
    await gone(page.getByRole('region', { name: 'Running scavenge' }));
    await showsText(historyRow(id).getByRole('cell').nth(2), 'Stopped');
    expect(await apiJson('/admin/scavenge/current')).toEqual({ scavengeId: '', scavengeLink: '' });
    expect(await apiJson('/admin/scavenge/last')).toMatchObject({ scavengeId: id, scavengeResult: 'Stopped' });
  });

  it('shows the node\'s 400 message next to the form for a bad parameter, and starts nothing', async () => {
    const page = await logIn(c);
    await goTo(c, '/admin');
    const form = page.getByRole('form', { name: 'Start a scavenge' });
    await page.getByLabel('Threads').fill('5');
    await form.getByRole('button', { name: 'Start scavenge' }).click();
    await showsText(form.getByRole('alert'), '400 Bad Request: threads must be 4 or below');
    await page.getByLabel('Threads').fill('2');
    await page.getByLabel('Throttle percent').fill('50');
    await form.getByRole('button', { name: 'Start scavenge' }).click();
    await showsText(form.getByRole('alert'), 'throttlePercent must be 100 for a multi-threaded scavenge');
    await page.getByLabel('Threads').fill('1');
    await page.getByLabel('Throttle percent').fill('0');
    await form.getByRole('button', { name: 'Start scavenge' }).click();
    await showsText(form.getByRole('alert'), 'throttlePercent must be between 1 and 100 inclusive');
    expect(await form.getByRole('status').count()).toBe(0);
    expect((await apiJson('/admin/scavenge/current')).scavengeId).toBe('');
  });
});

describe('auto-scavenge and the node', () => {
  it('says honestly that auto-scavenge is off on a node without a license, offers no controls, and asks no more', async () => {
    const page = await logIn(c);
    const section = page.getByRole('region', { name: 'Auto-scavenge' });
    const asked: string[] = [];
    page.on('request', (r) => { if (new URL(r.url()).pathname.startsWith('/auto-scavenge/')) asked.push(new URL(r.url()).pathname); });
    await goTo(c, '/admin');
    await showsText(section.getByRole('status'), 'Auto-scavenge is not enabled on this node: it takes a license key entitled to AUTO_SCAVENGE');
    expect(await section.getByRole('button').count()).toBe(0);
    expect((await http(c.node, '/auto-scavenge/status')).status).toBe(503);
    // Asked once whether it is on; not asked again (its other routes answer 503 every time).
    await page.waitForTimeout(2_500);
    expect(asked).toEqual(['/auto-scavenge/enabled']);
  });

  it('reloads the configuration after a confirmation, and not without one', async () => {
    const page = await logIn(c);
    await goTo(c, '/admin');
    await page.getByRole('button', { name: 'Reload configuration' }).click();
    const dialog = page.getByRole('dialog', { name: 'Reload configuration' });
    await shows(dialog.getByText(/Read the configuration files and environment again/));
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await gone(page.getByRole('dialog'));
    expect(await page.getByText('Configuration reloaded').count()).toBe(0);

    await page.getByRole('button', { name: 'Reload configuration' }).click();
    await dialog.getByRole('button', { name: 'Reload configuration' }).click();
    await gone(page.getByRole('dialog'));
    await showsText(page.getByRole('region', { name: 'Node' }).getByRole('status'), 'Configuration reloaded: The configuration was reloaded.');
  });

  it('asks nothing of the node for a user outside $ops and $admins who opens the admin route', async () => {
    const login = await newUser(c.node, [], 'pw', 'viewer');
    expect((await http(c.node, '/users/$current', { authorization: basic(login, 'pw') })).status).toBe(200);
    const page = await logIn(c, login, 'pw');
    const asked: string[] = [];
    page.on('request', (r) => { if (/\/(admin|auto-scavenge|streams)\b/.test(new URL(r.url()).pathname)) asked.push(r.url()); });
    await goTo(c, '/admin');
    await shows(page.getByText('The admin views are for operators and administrators'));
    // Still logged in: no refusal ended the session.
    await shows(page.getByRole('navigation', { name: 'Main' }));
    expect(asked).toEqual([]);
    expect(await page.getByRole('button', { name: 'Start scavenge' }).count()).toBe(0);
  });
});
