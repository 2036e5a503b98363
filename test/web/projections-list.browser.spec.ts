import { describe, expect, it } from 'vitest';
import { append, http, newEvent, newUser, sleep, uniq } from '../support/node.js';
import { gone, goTo, logIn, shows, showsText, until, useConsole } from '../support/browser.js';
import { seriousViolations, strictConsole } from '../support/strict-console.js';

// The projections list's figures and bulk commands in a real browser: events per second while
// events arrive, a faulted projection's reason, and Enable all / Disable all (behind a
// confirmation, for operators only), checked against what the node then reports. Any console
// error, answer of 400 or more, or serious axe finding fails the test.

const c = useConsole();
strictConsole(c);

interface Stats { name: string; status: string; stateReason: string }

async function listed(): Promise<Stats[]> {
  return (await (await http(c.node, '/projections/any')).json()).projections;
}

async function statusOf(name: string): Promise<string> {
  return (await listed()).find((p) => p.name === name)?.status ?? 'missing';
}

async function createProjection(name: string, query: string): Promise<void> {
  const res = await http(c.node, `/projections/continuous?name=${encodeURIComponent(name)}&emit=no`, {
    method: 'POST', headers: { 'Content-Type': 'application/javascript' }, body: query,
  });
  expect(res.status).toBe(201);
}

/** A counting projection and one that faults on its first `Boom` event; resolves their names and the fault's message. */
async function counterAndFaulty(): Promise<{ counter: string; faulty: string; type: string; message: string }> {
  const type = uniq('Counted').replace(/-/g, '_');
  const counter = uniq('rate');
  await createProjection(counter, `fromAll().when({ $init: function () { return { n: 0 }; }, ${type}: function (s) { s.n += 1; return s; } })`);
  const faulty = uniq('faulty');
  const message = uniq('the-handler-gave-up');
  const stream = uniq('boom');
  await createProjection(faulty, `fromStream('${stream}').when({ Boom: function () { throw new Error('${message}'); } })`);
  await until(() => statusOf(faulty), (s) => /^Running/.test(s));
  expect((await append(c.node, stream, [newEvent('Boom')])).status).toBe(201);
  await until(() => statusOf(faulty), (s) => /^Faulted/.test(s));
  return { counter, faulty, type, message };
}

/** Appends `type` events every 250 ms until `done` resolves true (at most the poll's time). */
async function whileAppending<T>(type: string, read: () => Promise<T>, check: (v: T) => boolean): Promise<T> {
  const stream = uniq('rate-s');
  let appending = true;
  const writer = (async () => {
    while (appending) {
      await append(c.node, stream, Array.from({ length: 5 }, () => newEvent(type)));
      await sleep(250);
    }
  })();
  try {
    return await until(read, check, 15_000);
  } finally {
    appending = false;
    await writer;
  }
}

describe('the projections list', () => {
  it('shows an admin each projection\'s events per second and a faulted projection\'s reason', async () => {
    const { counter, faulty, type, message } = await counterAndFaulty();
    const page = await logIn(c);
    await goTo(c, '/projections');
    const faultyRow = page.locator(`tr[data-projection="${faulty}"]`);
    await showsText(faultyRow, /Faulted/);
    await showsText(faultyRow.locator('[data-cell="reason"]'), message);
    expect(await page.locator(`tr[data-projection="${counter}"] [data-cell="reason"]`).count()).toBe(0);

    const rate = page.locator(`tr[data-projection="${counter}"] [data-cell="rate"]`);
    const shown = await whileAppending(type, async () => Number((await rate.textContent())?.replace(/,/g, '')), (n) => n > 0);
    expect(shown).toBeGreaterThan(0);
    expect(await page.getByRole('columnheader', { name: 'Events/s' }).count()).toBe(1);
    const found = await seriousViolations(page);
    expect(found, JSON.stringify(found, null, 2)).toEqual([]);
  });

  it('disables and enables every projection shown after a confirmation, as the node then reports', async () => {
    await counterAndFaulty();
    const page = await logIn(c);
    await goTo(c, '/projections');
    await shows(page.locator('tr[data-projection]'));
    const before = await listed();
    expect(before.some((p) => /^Running/.test(p.status))).toBe(true);

    // Cancelled, nothing changes.
    await page.getByRole('button', { name: 'Disable all' }).click();
    const disable = page.getByRole('dialog', { name: 'Disable all' });
    await showsText(disable, /Disable the \d+ enabled projections shown/);
    await disable.getByRole('button', { name: 'Cancel' }).click();
    await gone(page.getByRole('dialog'));
    expect((await listed()).map((p) => p.status)).toEqual(before.map((p) => p.status));

    await page.getByRole('button', { name: 'Disable all' }).click();
    await disable.getByRole('button', { name: 'Disable all' }).click();
    await gone(page.getByRole('dialog'));
    await showsText(page.getByRole('status'), /^Disabled \d+ projections\.$/);
    const disabled = await until(listed, (all) => all.every((p) => !/^Running/.test(p.status) && !/\(Enabled\)$/.test(p.status)));
    expect(disabled.length).toBe(before.length);
    await until(() => page.getByRole('button', { name: 'Disable all' }).isDisabled(), (d) => d);

    await page.getByRole('button', { name: 'Enable all' }).click();
    const enable = page.getByRole('dialog', { name: 'Enable all' });
    await showsText(enable, `Enable the ${before.length} projections shown that are not running`);
    await enable.getByRole('button', { name: 'Enable all' }).click();
    await gone(page.getByRole('dialog'));
    await showsText(page.getByRole('status'), `Enabled ${before.length} projections.`);
    // Every one runs again (a faulted one faults again on its event, enabled).
    await until(listed, (all) => all.every((p) => /^Running/.test(p.status) || /^Faulted \(Enabled\)$/.test(p.status)));
    await until(async () => page.locator('tr[data-projection] .status-running').count(), (n) => n >= before.length - 2);
  });

  it('shows a plain user the figures and reasons, without the bulk commands', async () => {
    const { faulty, message } = await counterAndFaulty();
    const login = await newUser(c.node);
    const page = await logIn(c, login, 'pw');
    await goTo(c, '/projections');
    await showsText(page.locator(`tr[data-projection="${faulty}"] [data-cell="reason"]`), message);
    await shows(page.getByRole('columnheader', { name: 'Events/s' }));
    expect(await page.getByRole('button', { name: 'Enable all' }).count()).toBe(0);
    expect(await page.getByRole('button', { name: 'Disable all' }).count()).toBe(0);
    const found = await seriousViolations(page);
    expect(found, JSON.stringify(found, null, 2)).toEqual([]);
  });
});
