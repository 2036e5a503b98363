import { describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { append, eventually, http, newEvent, newUser, uniq } from '../support/node.js';
import {
  failOnErrors, seriousViolations, goTo, logIn, shows, showsText, useConsole, type ConsoleFixture,
} from '../support/browser.js';

// The projection debugger in a real browser, as admin (from a projection's page) and as a plain
// user (a new query from the creation form, and a projection's debug page): picking events,
// running, stepping with Previous/Next and the step list, the states before and after, the emits
// and links. Each test fails on a console error, a failed request (besides the one refusal the
// plain user asks for on purpose) and a serious or critical axe violation.

const c = useConsole();

async function noSeriousViolations(page: Page): Promise<void> {
  const found = await seriousViolations(page);
  expect(found, JSON.stringify(found, null, 2)).toEqual([]);
}

/** What the step's detail shows in a fact (`data-step`). */
const fact = (page: Page, name: string) => page.locator(`.step-detail [data-step="${name}"]`);

async function partitionedProjection(t: ConsoleFixture): Promise<{ name: string; stream: string }> {
  const x = uniq('web').replace(/-/g, '');
  const stream = `orders-${x}`;
  const placed = (customer: string, amount: number) => newEvent('OrderPlaced', `{"customer":"${customer}","amount":${amount},"ref":12345678901234567890}`);
  expect((await append(t.node, stream, [placed('ann', 5), placed('bob', 7), placed('ann', 11)])).status).toBe(201);
  const name = `debugged-${x}`;
  const query = `fromStream('${stream}')
  .partitionBy(function (e) { return e.body.customer; })
  .when({
    $init: function () { return { placed: 0, total: 0 }; },
    OrderPlaced: function (s, e) { s.placed++; s.total += e.body.amount; linkTo('placed-${x}', e); emit('totals-${x}', 'Total', { customer: e.body.customer, total: s.total }); }
  })`;
  const res = await http(t.node, `/projections/continuous?name=${name}&emit=yes`, { method: 'POST', body: query });
  expect(res.status).toBe(201);
  await eventually(async () => expect(JSON.parse(await (await http(t.node, `/projection/${name}/state?partition=ann`)).text() || 'null')).toEqual({ placed: 2, total: 16 }));
  return { name, stream };
}

describe('the projection debugger', () => {
  it('as admin: from a projection\'s page, runs its first events and steps through them', async () => {
    failOnErrors(c);
    const { name, stream } = await partitionedProjection(c);
    const page = await logIn(c);
    await goTo(c, `/projections/${name}`);
    await page.getByRole('link', { name: 'Debug', exact: true }).click();
    await shows(page.getByRole('heading', { level: 1, name: `Debug ${name}` }));
    expect(await page.getByLabel('Number of events').inputValue()).toBe('20');
    await page.getByRole('button', { name: 'Run' }).click();

    await showsText(page.getByRole('status'), /3 steps\. Nothing was written\./);
    const steps = page.getByRole('navigation', { name: 'Steps' }).getByRole('button');
    expect(await steps.count()).toBe(3);
    await showsText(page.getByText(/^Step 1 of 3$/), /Step 1 of 3/);
    await showsText(fact(page, 'event'), `0@${stream}`);
    await showsText(fact(page, 'partition'), /^ann$/);
    await showsText(fact(page, 'handler'), /^OrderPlaced$/);
    await showsText(fact(page, 'calls'), /^partitionBy → \$init → OrderPlaced$/);
    await showsText(page.getByLabel('State before', { exact: true }), /No state/);
    await showsText(page.getByLabel('State after', { exact: true }), /"placed": 1,\s*"total": 5/);
    // Every digit of the event's data, as it was stored.
    await showsText(page.getByLabel('Event data', { exact: true }), /"ref": 12345678901234567890\b/);
    const emits = page.getByRole('table', { name: 'Emitted events and links' });
    await showsText(emits.locator('tr[data-emit="link"]'), `0@${stream}`);
    await showsText(emits.locator('tr[data-emit="event"]'), /Total.*"total": 5/s);

    await page.getByRole('button', { name: 'Next' }).click();
    await showsText(page.getByText(/^Step 2 of 3$/), /Step 2/);
    await showsText(fact(page, 'partition'), /^bob$/);
    await page.getByRole('button', { name: 'Previous' }).click();
    await showsText(fact(page, 'partition'), /^ann$/);
    // Picked from the list: ann's second event starts from the state her first left.
    await steps.nth(2).click();
    await showsText(page.getByText(/^Step 3 of 3$/), /Step 3/);
    expect(await steps.nth(2).getAttribute('aria-current')).toBe('step');
    await showsText(page.getByLabel('State before', { exact: true }), /"placed": 1,\s*"total": 5/);
    await showsText(page.getByLabel('State after', { exact: true }), /"placed": 2,\s*"total": 16/);
    expect(await page.getByRole('button', { name: 'Next' }).isDisabled()).toBe(true);
    await noSeriousViolations(page);

    // A stream range from event 1: a new run, bob first.
    await page.getByLabel('A range of one stream').check();
    expect(await page.getByLabel('Stream', { exact: true }).inputValue()).toBe(stream);
    await page.getByLabel('From event number').fill('1');
    await page.getByRole('button', { name: 'Run' }).click();
    await showsText(page.getByRole('status'), /2 steps/);
    await showsText(fact(page, 'partition'), /^bob$/);
  });

  it('as a plain user: debugs a new query before creating it, and a projection over a stream the user may read', async () => {
    const user = await newUser(c.node);
    const x = uniq('mine').replace(/-/g, '');
    const open = `visits-${x}`;
    const closed = `secret-${x}`;
    expect((await append(c.node, open, [newEvent('Viewed', { page: 'home' }), newEvent('Viewed', { page: 'docs' })])).status).toBe(201);
    expect((await append(c.node, closed, [newEvent('Viewed', { page: 'hidden-page' })])).status).toBe(201);
    const acl = await http(c.node, `/streams/${closed}/metadata`, {
      method: 'POST', headers: { 'Content-Type': 'application/vnd.eventstore.events+json' },
      body: JSON.stringify([newEvent('$metadata', { $acl: { $r: '$admins' } })]),
    });
    expect(acl.status).toBe(201);
    // The one refusal asked for on purpose: the range over the closed stream.
    failOnErrors(c, c.page, [/^401 POST .*\/projections\/debug$/, /status of 401/]);

    const page = await logIn(c, user, 'pw');
    await goTo(c, '/projections/new');
    await page.getByLabel('Query', { exact: true }).fill(`fromStream('${open}').when({
  $init: function () { return { views: 0 }; },
  Viewed: function (s, e) { s.views++; s.last = e.body.page; }
})`);
    await page.getByRole('button', { name: 'Debug' }).click();
    await page.getByRole('button', { name: 'Run' }).click();
    await showsText(page.getByRole('status'), /2 steps/);
    await showsText(fact(page, 'partition'), /^\(root\)$/);
    await page.getByRole('button', { name: 'Next' }).click();
    await showsText(page.getByLabel('State after', { exact: true }), /"views": 2,\s*"last": "docs"/);
    await noSeriousViolations(page);

    // What the user may not read, the debugger does not read for them.
    await page.getByLabel('A range of one stream').check();
    await page.getByLabel('Stream', { exact: true }).fill(closed);
    await page.getByRole('button', { name: 'Run' }).click();
    await showsText(page.getByRole('alert'), /401/);
    expect(await page.getByText('hidden-page').count()).toBe(0);

    // An admin's projection over the stream the user may read: its debug page.
    const name = `views-${x}`;
    const created = await http(c.node, `/projections/continuous?name=${name}`, {
      method: 'POST', body: `fromStream('${open}').when({ $any: function (s, e) { s.n = (s.n || 0) + 1; } })`,
    });
    expect(created.status).toBe(201);
    await goTo(c, `/projections/${name}/debug`);
    await shows(page.getByRole('heading', { level: 1, name: `Debug ${name}` }));
    await page.getByRole('button', { name: 'Run' }).click();
    await showsText(page.getByRole('status'), /2 steps/);
    await showsText(fact(page, 'handler'), /^\$any$/);
    await noSeriousViolations(page);
  });
});
