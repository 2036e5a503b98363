import { describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { basic, http, uniq } from '../support/node.js';
import { goTo, gone, logIn, shows, showsText, until, useConsole } from '../support/browser.js';

// The console's users: an admin creates an account, edits its groups, disables and enables it
// and resets its password, each checked by that user logging in (or not) in another tab; a
// plain user sees only their own account and changes their own password.

const c = useConsole();

/** Tries the console's login form in a fresh tab: true when it lets the user in. */
async function canLogIn(user: string, password: string): Promise<boolean> {
  const context = await c.context.browser()!.newContext();
  try {
    const page = await context.newPage();
    await page.goto(c.url);
    await page.getByLabel('User name').fill(user);
    await page.getByLabel('Password').fill(password);
    await page.getByRole('button', { name: 'Log in' }).click();
    // Whichever shows first; the other wait ends (and is ignored) when the tab closes.
    return await Promise.race([
      page.getByRole('navigation', { name: 'Main' }).waitFor().then(() => true, () => false),
      page.getByRole('alert').waitFor().then(() => false, () => false),
    ]);
  } finally {
    await context.close();
  }
}

async function account(login: string): Promise<any> {
  const res = await http(c.node, `/users/${encodeURIComponent(login)}`, { headers: { Accept: 'application/json' } });
  return res.status === 200 ? (await res.json()).data : { status: res.status };
}

const fact = (page: Page, name: string) => page.locator(`[data-fact="${name}"]`);

describe('users in the console', () => {
  it('an admin creates a user, edits its groups, disables, enables and resets its password', async () => {
    const login = uniq('clerk');
    const page = await logIn(c);
    await goTo(c, '/users');
    await shows(page.getByRole('table', { name: 'Users' }).getByRole('link', { name: 'ops' }));

    // Created through the form (a refused one first: the node's message shows at the form).
    const create = page.getByRole('form', { name: 'New user' });
    await create.getByLabel('Login name').fill('has space');
    await create.getByLabel('Password').fill('first-pw');
    await create.getByRole('button', { name: 'Create user' }).click();
    await showsText(create.getByRole('alert'), /LoginName must not contain spaces/);
    await create.getByLabel('Login name').fill(login);
    await create.getByLabel('Full name').fill('Counter Clerk');
    await create.getByLabel('Groups').fill('clerks');
    await create.getByRole('button', { name: 'Create user' }).click();
    await shows(page.getByRole('heading', { name: `User ${login}` }));
    await showsText(fact(page, 'groups'), 'clerks');
    expect(await account(login)).toMatchObject({ loginName: login, fullName: 'Counter Clerk', groups: ['clerks'], disabled: false });
    expect(await canLogIn(login, 'first-pw')).toBe(true);

    // Groups edited: the user becomes an operator.
    const edit = page.getByRole('form', { name: 'Edit user' });
    await edit.getByLabel('Groups').fill('clerks, $ops');
    await edit.getByRole('button', { name: 'Save' }).click();
    await showsText(fact(page, 'groups'), 'clerks, $ops');
    await shows(edit.getByText('Saved.'));
    expect((await account(login)).groups).toEqual(['clerks', '$ops']);

    // Disabled (after confirming): the user can no longer log in to the console.
    await page.getByRole('button', { name: 'Disable user' }).click();
    await page.getByRole('dialog', { name: 'Disable user' }).getByRole('button', { name: 'Disable' }).click();
    await showsText(fact(page, 'state'), 'Disabled');
    expect((await account(login)).disabled).toBe(true);
    expect(await canLogIn(login, 'first-pw')).toBe(false);

    // Enabled again: they can.
    await page.getByRole('button', { name: 'Enable user' }).click();
    await showsText(fact(page, 'state'), 'Enabled');
    expect(await canLogIn(login, 'first-pw')).toBe(true);

    // Password reset: the new one works, the old one no longer does.
    const reset = page.getByRole('form', { name: 'Reset password' });
    await reset.getByLabel('New password for the user').fill('second-pw');
    await reset.getByRole('button', { name: 'Reset password' }).click();
    await shows(reset.getByText('Password reset'));
    expect(await canLogIn(login, 'second-pw')).toBe(true);
    expect(await canLogIn(login, 'first-pw')).toBe(false);

    // Listed with its state; deleted after confirming.
    await goTo(c, '/users');
    const row = page.getByRole('row').filter({ has: page.getByRole('link', { name: login }) });
    await showsText(row, /Counter Clerk.*clerks, \$ops.*Enabled/);
    await row.getByRole('link', { name: login }).click();
    await page.getByRole('button', { name: 'Delete user' }).click();
    await page.getByRole('dialog', { name: 'Delete user' }).getByRole('button', { name: 'Delete' }).click();
    await shows(page.getByRole('heading', { name: 'Users', exact: true }));
    await gone(page.getByRole('link', { name: login }));
    await until(() => account(login), (a) => a.status === 404);
    // Six logins in fresh browser contexts: ~20 s with another test file beside it (two workers), 33 s once
    // when that file drove a second Chromium, over vitest's default 30 s.
  }, 90_000);

  it('a plain user sees only their own account and changes their own password', async () => {
    const login = uniq('plain');
    expect((await http(c.node, '/users/', {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ loginName: login, fullName: 'Plain User', password: 'old-pw', groups: ['readers'] }),
    })).status).toBe(201);
    const page = await logIn(c, login, 'old-pw');
    await goTo(c, '/users');
    await shows(page.getByRole('heading', { name: 'Your account' }));
    await showsText(fact(page, 'full-name'), 'Plain User');
    await showsText(fact(page, 'groups'), 'readers');
    await gone(page.getByRole('table', { name: 'Users' }));
    await gone(page.getByRole('form', { name: 'New user' }));
    await gone(page.getByRole('form', { name: 'Edit user' }));
    await gone(page.getByRole('button', { name: 'Disable user' }));

    const form = page.getByRole('form', { name: 'Change password' });
    // A wrong current password is refused at the form, and the session goes on.
    await form.getByLabel('Current password').fill('not-it');
    await form.getByLabel('New password', { exact: true }).fill('new-pw');
    await form.getByLabel('Repeat new password').fill('new-pw');
    await form.getByRole('button', { name: 'Change password' }).click();
    await showsText(form.getByRole('alert'), 'The current password is wrong.');
    await shows(page.getByRole('navigation', { name: 'Main' }));
    expect((await http(c.node, '/users/$current', { authorization: basic(login, 'old-pw') })).status).toBe(200);
    // Mistyped repeat: caught before asking the node.
    await form.getByLabel('Current password').fill('old-pw');
    await form.getByLabel('Repeat new password').fill('new-pv');
    await form.getByRole('button', { name: 'Change password' }).click();
    await showsText(form.getByRole('alert'), 'The new passwords differ.');
    expect((await http(c.node, '/users/$current', { authorization: basic(login, 'old-pw') })).status).toBe(200);

    await form.getByLabel('Repeat new password').fill('new-pw');
    await form.getByRole('button', { name: 'Change password' }).click();
    await shows(page.getByText('Password changed.'));
    expect((await http(c.node, '/users/$current', { authorization: basic(login, 'new-pw') })).status).toBe(200);
    expect((await http(c.node, '/users/$current', { authorization: basic(login, 'old-pw') })).status).toBe(401);
    // The session held the old password: the console asks to log in again, and the new one works.
    await page.getByRole('button', { name: 'Log in again' }).click();
    await shows(page.getByRole('button', { name: 'Log in' }));
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
    expect(await canLogIn(login, 'old-pw')).toBe(false);
    await logIn(c, login, 'new-pw');
    await shows(page.getByText(login));
  });
});
