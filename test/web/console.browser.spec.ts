import { describe, expect, it } from 'vitest';
import { append, http, newEvent, newUser, basic, uniq } from '../support/node.js';
import { gone, logIn, shows, showsText, until, useConsole } from '../support/browser.js';

// The console's shell in a real browser: served at /web from the node's port, the login form,
// the session (kept for the tab only), navigation by role, and the live dashboard.

const c = useConsole();

describe('the console is served by the node', () => {
  it('/ and /web lead to /web/, which is the page with a policy allowing only the node', async () => {
    for (const path of ['/', '/web']) {
      const res = await http(c.node, path, { authorization: '' });
      expect(res.status).toBe(302);
      expect(res.headers.get('location')).toBe('/web/');
    }
    const page = await http(c.node, '/web/', { authorization: '' });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(page.headers.get('content-security-policy')).toContain("default-src 'self'");
    const html = await page.text();
    const script = /src="(\/web\/assets\/[^"]+\.js)"/.exec(html)?.[1];
    expect(script).toBeTruthy();
    const asset = await http(c.node, script!, { authorization: '' });
    expect(asset.status).toBe(200);
    expect(asset.headers.get('cache-control')).toContain('immutable');
    expect((await http(c.node, '/web/no-such-file.js', { authorization: '' })).status).toBe(404);
  });
});

describe('logging in', () => {
  it('refuses a wrong password with a message and stays on the form', async () => {
    const { page } = c;
    await page.goto(c.url);
    await page.getByLabel('User name').fill('admin');
    await page.getByLabel('Password').fill('not-the-password');
    await page.getByRole('button', { name: 'Log in' }).click();
    await showsText(page.getByRole('alert'), /Wrong user name or password/);
    await gone(page.getByRole('navigation', { name: 'Main' }));
  });

  it('keeps the session for the tab only: not in local storage or cookies, gone after logging out', async () => {
    const page = await logIn(c);
    await shows(page.getByText('admin (admin)'));
    const stored = await page.evaluate(() => ({ local: JSON.stringify(localStorage), cookie: document.cookie, session: sessionStorage.length }));
    expect(stored.local).not.toContain('changeit');
    expect(stored.local).not.toContain(btoa('admin:changeit'));
    expect(stored.cookie).toBe('');
    expect(stored.session).toBe(1);
    // A reload keeps the session (same tab) ...
    await page.reload();
    await shows(page.getByRole('navigation', { name: 'Main' }));
    // ... logging out ends it.
    await page.getByRole('button', { name: 'Log out' }).click();
    await shows(page.getByRole('button', { name: 'Log in' }));
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
    // A new tab (a new context) starts logged out.
    const other = await c.context.browser()!.newContext();
    const fresh = await other.newPage();
    await fresh.goto(c.url);
    await shows(fresh.getByRole('button', { name: 'Log in' }));
    await other.close();
  });

  it('offers the admin views to operators and admins, not to other users', async () => {
    const login = await newUser(c.node, [], 'pw', 'viewer');
    expect((await http(c.node, '/users/$current', { authorization: basic(login, 'pw') })).status).toBe(200);
    const page = await logIn(c, login, 'pw');
    const nav = page.getByRole('navigation', { name: 'Main' });
    await shows(nav.getByRole('link', { name: 'Streams' }));
    await gone(nav.getByRole('link', { name: 'Admin' }));
    await page.getByRole('button', { name: 'Log out' }).click();
    await logIn(c, 'ops', 'changeit');
    await shows(nav.getByRole('link', { name: 'Admin' }));
  });
});

describe('the dashboard', () => {
  it('shows the node and counts the events written as they arrive', async () => {
    const page = await logIn(c);
    await shows(page.getByRole('heading', { name: 'Dashboard' }));
    await showsText(page.locator('[data-figure="state"]'), /leader/i);
    const figure = page.locator('[data-figure="written-total"]');
    const count = async () => Number(((await figure.textContent()) ?? '').replace(/,/g, ''));
    const before = await until(count, (n) => Number.isFinite(n));
    const stream = uniq('dash');
    for (let i = 0; i < 5; i++) expect((await append(c.node, stream, [newEvent('tick'), newEvent('tock')])).status).toBe(201);
    await until(count, (n) => n >= before + 10);
    await showsText(page.locator('[data-figure="written-rate"]'), /^[\d,.]+$/);
    await shows(page.getByRole('cell', { name: 'writer' }));
  });
});
