import { describe, expect, it } from 'vitest';
import { append, http, newEvent, uniq } from '../support/node.js';
import { gone, goTo, logIn, shows, showsText, until, useConsole, type ConsoleFixture } from '../support/browser.js';

// The projections views in a real browser: the live list, creating in the editor (and the syntax
// error shown at its line), state as events arrive, editing the query, the commands, deletion
// behind a confirmation, state per partition, and the emitted streams.

const c = useConsole();

/** Creates a continuous projection through the API; resolves once it runs. */
async function createProjection(t: ConsoleFixture, name: string, query: string, flags = 'emit=no'): Promise<void> {
  const res = await http(t.node, `/projections/continuous?name=${encodeURIComponent(name)}&${flags}`, {
    method: 'POST', headers: { 'Content-Type': 'application/javascript' }, body: query,
  });
  expect(res.status).toBe(201);
  await until(() => statusOf(t, name), (s) => s.startsWith('Running'));
}

async function statusOf(t: ConsoleFixture, name: string): Promise<string> {
  const res = await http(t.node, `/projection/${encodeURIComponent(name)}/statistics`);
  return res.status === 200 ? (await res.json()).projections[0].status : `HTTP ${res.status}`;
}

const counter = (type: string) => `fromAll().when({
  $init: function () { return { count: 0 }; },
  ${type}: function (state, event) { state.count += 1; state.last = event.data.n; }
});`;

describe('creating a projection', () => {
  it('creates a continuous projection in the editor and shows its state change as events arrive', async () => {
    const page = await logIn(c);
    const name = uniq('counter');
    const type = uniq('Ticked').replace(/-/g, '_');
    await goTo(c, '/projections');
    await page.getByRole('link', { name: 'New projection' }).click();
    await shows(page.getByRole('heading', { name: 'New projection' }));
    await page.getByLabel('Name').fill(name);
    await page.getByLabel('Mode').selectOption('continuous');
    await page.getByLabel('Query', { exact: true }).fill(counter(type));
    await page.getByRole('button', { name: 'Create' }).click();
    await shows(page.getByRole('heading', { name }));
    await showsText(page.locator('[data-figure="status"]'), /^Running/);
    expect(await page.evaluate(() => location.hash)).toBe(`#/projections/${name}`);

    const stream = uniq('ticks');
    expect((await append(c.node, stream, [newEvent(type, { n: 1 }), newEvent(type, { n: 2 })])).status).toBe(201);
    await showsText(page.getByLabel('State', { exact: true }), /"count": 2/);
    expect((await append(c.node, stream, [newEvent(type, { n: 3 })])).status).toBe(201);
    await showsText(page.getByLabel('State', { exact: true }), /"count": 3,\s*"last": 3/);
    await showsText(page.locator('[data-figure="processed"]'), /^3$/);
    await showsText(page.locator('[data-figure="lag"]'), /^\d+(\.\d)? (B|KiB|MiB)$/);

    // The list shows it with its mode, status, progress and lag.
    await page.getByRole('link', { name: '← Projections' }).click();
    const row = page.locator(`tr[data-projection="${name}"]`);
    await shows(row);
    await showsText(row, /Continuous/);
    await showsText(row, /Running/);
    await showsText(row.locator('[data-cell="lag"]'), /^\d+(\.\d)? (B|KiB|MiB)$/);
  });

  it('shows a syntax error from the node at its line, with the caret there, and creates nothing', async () => {
    const page = await logIn(c);
    const name = uniq('broken');
    await goTo(c, '/projections/new');
    await page.getByLabel('Name').fill(name);
    const query = [
      'fromAll()',
      '  .when({',
      '    $init: function () { return { n: 0 }; },',
      '    Foo: function (s, e) { s.n++;; ) }',
      '  });',
    ].join('\n');
    const editor = page.getByLabel('Query', { exact: true });
    await editor.fill(query);
    await page.getByRole('button', { name: 'Create' }).click();
    const alert = page.getByRole('alert');
    await showsText(alert, /Syntax error at line 4, column \d+:.*Unexpected token at line 4/);
    // The gutter marks line 4 (and only it); the caret sits on line 4.
    await showsText(page.locator('.query-gutter .error-line'), /^4$/);
    expect(await page.locator('.query-gutter .error-line').count()).toBe(1);
    expect(await editor.getAttribute('aria-invalid')).toBe('true');
    const caretLine = await editor.evaluate((el: HTMLTextAreaElement) => el.value.slice(0, el.selectionStart).split('\n').length);
    expect(caretLine).toBe(4);
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('new-query');
    expect((await http(c.node, `/projection/${name}/statistics`)).status).toBe(404);

    // In a long query the editor scrolls to the error's line.
    const long = Array.from({ length: 60 }, (_, i) => `// line ${i + 1}`);
    long[44] = 'fromAll().when({ $any: function (s, e) { return s; ) });';
    await editor.fill(long.join('\n'));
    await page.getByRole('button', { name: 'Create' }).click();
    await showsText(alert, /Syntax error at line 45,/);
    const marked = page.locator('.query-gutter .error-line');
    await showsText(marked, /^45$/);
    const [box, mark] = [await editor.boundingBox(), await marked.boundingBox()];
    expect(mark!.y).toBeGreaterThanOrEqual(box!.y);
    expect(mark!.y + mark!.height).toBeLessThanOrEqual(box!.y + box!.height);
    await editor.fill(query);

    // Fixed, it is created.
    await editor.fill(query.replace(';; )', ';'));
    await page.getByRole('button', { name: 'Create' }).click();
    await shows(page.getByRole('heading', { name }));
    await gone(page.locator('.query-gutter .error-line'));
  });
});

describe('one projection', () => {
  it('edits the query (a syntax error at its line first) and the state follows the new code', async () => {
    const name = uniq('edit');
    const type = uniq('Edited').replace(/-/g, '_');
    await createProjection(c, name, counter(type));
    const page = await logIn(c);
    await goTo(c, `/projections/${name}`);
    const editor = page.getByLabel('Query source');
    await showsText(page.getByLabel('State', { exact: true }).or(page.getByText('No state yet.')), /./);
    await until(() => editor.inputValue(), (v) => v.includes(type));

    // A broken edit is refused at its line; the stored query stays as it was.
    await editor.fill(counter(type).replace('state.count += 1;', 'state.count += ;'));
    await page.getByRole('button', { name: 'Save query' }).click();
    await showsText(page.getByRole('alert'), /Syntax error at line 3, column \d+/);
    await showsText(page.locator('.query-gutter .error-line'), /^3$/);
    expect(await (await http(c.node, `/projection/${name}/query`)).text()).toBe(counter(type));

    // A good edit is saved and runs: each event now counts ten.
    await editor.fill(counter(type).replace('state.count += 1;', 'state.count += 10;'));
    await page.getByRole('button', { name: 'Save query' }).click();
    await shows(page.getByText('Query saved'));
    await gone(page.locator('.query-gutter .error-line'));
    expect(await (await http(c.node, `/projection/${name}/query`)).text()).toContain('state.count += 10;');
    await until(() => statusOf(c, name), (s) => s.startsWith('Running'));
    expect((await append(c.node, uniq('edit-s'), [newEvent(type, { n: 1 })])).status).toBe(201);
    await showsText(page.getByLabel('State', { exact: true }), /"count": 10/);
  });

  it('disables, enables and resets (behind a confirmation), the status shown following', async () => {
    const name = uniq('cmd');
    const type = uniq('Cmd').replace(/-/g, '_');
    // Each run from the beginning stamps its state, so a reset shows as a new stamp.
    await createProjection(c, name, counter(type).replace('return { count: 0 };', 'return { count: 0, run: Math.random() };'));
    expect((await append(c.node, uniq('cmd-s'), [newEvent(type, { n: 1 }), newEvent(type, { n: 2 })])).status).toBe(201);
    const page = await logIn(c);
    await goTo(c, `/projections/${name}`);
    const status = page.locator('[data-figure="status"]');
    await showsText(status, /^Running/);
    await showsText(page.getByLabel('State', { exact: true }), /"count": 2/);
    const firstRun = await page.getByLabel('State', { exact: true }).textContent();

    await page.getByRole('button', { name: 'Disable' }).click();
    await showsText(status, /^Stopped/);
    expect(await statusOf(c, name)).toMatch(/^Stopped/);
    expect(await page.getByRole('button', { name: 'Disable' }).isDisabled()).toBe(true);
    // Stopped, it falls behind the log as events arrive: the lag shown grows (its tooltip gives the bytes) ...
    const lag = page.locator('[data-figure="lag"]');
    const lagBytes = async () => Number(((await lag.getAttribute('title')) ?? '').replace(/[^\d]/g, '') || NaN);
    const stopped = await until(lagBytes, (n) => Number.isFinite(n));
    expect((await append(c.node, uniq('cmd-s'), [newEvent(type, { n: 3 })])).status).toBe(201);
    await until(lagBytes, (n) => n > stopped);
    await page.getByRole('button', { name: 'Enable' }).click();
    await showsText(status, /^Running/);
    // ... and catches up once enabled.
    await showsText(page.getByLabel('State', { exact: true }), /"count": 3/);
    await showsText(lag, /^0 B$/);

    // Reset asks first; cancelling changes nothing.
    const version = async () => (await (await http(c.node, `/projection/${name}/statistics`)).json()).projections[0].version as number;
    const before = await version();
    await page.getByRole('button', { name: 'Reset', exact: true }).click();
    const dialog = page.getByRole('dialog', { name: 'Reset' });
    await shows(dialog);
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await gone(page.getByRole('dialog'));
    expect(await version()).toBe(before);
    await page.getByRole('button', { name: 'Reset', exact: true }).click();
    await dialog.getByRole('button', { name: 'Reset projection' }).click();
    await shows(page.getByText('Reset.'));
    await until(version, (v) => v > before);
    // It starts again from the beginning: a new run counts the three events again.
    await showsText(status, /^Running/);
    const state = page.getByLabel('State', { exact: true });
    await until(() => state.textContent(), (t) => !!t && t !== firstRun && /"count": 3,/.test(t));
    expect(await page.evaluate(() => location.hash)).toBe(`#/projections/${name}`);

    await page.getByRole('button', { name: 'Abort' }).click();
    await showsText(status, /^(Aborted|Stopped)/);
  });

  it('deletes only after confirmation, shows the refusal of a running one, and the list loses it', async () => {
    const name = uniq('gone');
    await createProjection(c, name, counter(uniq('Del').replace(/-/g, '_')));
    const page = await logIn(c);
    await goTo(c, `/projections/${name}`);
    await showsText(page.locator('[data-figure="status"]'), /^Running/);

    // Running: the node refuses, and the dialog says why.
    await page.getByRole('button', { name: 'Delete', exact: true }).click();
    const dialog = page.getByRole('dialog', { name: 'Delete' });
    await dialog.getByRole('button', { name: 'Delete projection' }).click();
    await showsText(dialog.getByRole('alert'), /stopped or faulted/);
    await dialog.getByRole('button', { name: 'Cancel' }).click();

    await page.getByRole('button', { name: 'Disable' }).click();
    await showsText(page.locator('[data-figure="status"]'), /^Stopped/);
    await page.getByLabel('Also delete the checkpoint stream').check();
    await page.getByRole('button', { name: 'Delete', exact: true }).click();
    await showsText(dialog, /checkpoint stream is deleted too/);
    await dialog.getByRole('button', { name: 'Delete projection' }).click();
    await shows(page.getByRole('heading', { name: 'Projections' }));
    await gone(page.locator(`tr[data-projection="${name}"]`));
    expect((await http(c.node, `/projection/${name}/statistics`)).status).toBe(404);
  });

  it('shows the state of each partition through the picker, and the streams it emitted to', async () => {
    const name = uniq('parts');
    const type = uniq('Part').replace(/-/g, '_');
    const query = `fromAll().foreachStream().when({
  $init: function () { return { count: 0 }; },
  ${type}: function (state, event) { state.count += event.data.n; emit('copy-' + event.streamId, 'Copied', { n: event.data.n }); }
});`;
    await createProjection(c, name, query, 'emit=yes&trackemittedstreams=yes');
    const [a, b] = [uniq('pa'), uniq('pb')];
    expect((await append(c.node, a, [newEvent(type, { n: 1 })])).status).toBe(201);
    expect((await append(c.node, b, [newEvent(type, { n: 5 }), newEvent(type, { n: 7 })])).status).toBe(201);
    await until(async () => (await (await http(c.node, `/projection/${name}/state?partition=${b}`)).text()), (t) => t.includes('12'));

    const page = await logIn(c);
    await goTo(c, `/projections/${name}`);
    const picker = page.getByLabel('Partition', { exact: true });
    await until(() => picker.locator('option').allTextContents(), (o) => o.includes(a) && o.includes(b));
    await picker.selectOption(b);
    await showsText(page.getByRole('heading', { name: `State of ${b}` }), b);
    await showsText(page.getByLabel('State', { exact: true }), /"count": 12/);
    await picker.selectOption(a);
    await showsText(page.getByLabel('State', { exact: true }), /"count": 1\b/);
    // A partition typed by name, too.
    await page.getByLabel('Partition name').fill(b);
    await page.getByLabel('Partition name').press('Enter');
    await showsText(page.getByLabel('State', { exact: true }), /"count": 12/);

    // The emitted streams, each a link to the stream browser.
    const list = page.getByRole('list', { name: 'Emitted streams' });
    await shows(list.getByRole('link', { name: `copy-${a}` }));
    await shows(list.getByRole('link', { name: `copy-${b}` }));
    await list.getByRole('link', { name: `copy-${b}` }).click();
    expect(await page.evaluate(() => location.hash)).toBe(`#/streams/copy-${b}`);
  });
});

describe('a user who is not an operator', () => {
  it('sees the projections and their state, may not change them, and stays logged in', async () => {
    const name = uniq('ro');
    const type = uniq('Ro').replace(/-/g, '_');
    await createProjection(c, name, counter(type));
    expect((await append(c.node, uniq('ro-s'), [newEvent(type, { n: 4 })])).status).toBe(201);
    const login = uniq('viewer');
    const created = await http(c.node, '/users/', {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ loginName: login, fullName: 'Viewer', password: 'pw', groups: [] }),
    });
    expect(created.status).toBe(201);
    const page = await logIn(c, login, 'pw');
    await goTo(c, `/projections/${name}`);
    await showsText(page.getByLabel('State', { exact: true }), /"count": 1/);
    await shows(page.getByText('Only operators and admins may change this projection.'));
    await gone(page.getByRole('button', { name: 'Disable' }));
    await gone(page.getByRole('button', { name: 'Save query' }));
    // The creation form offers what such a user may create: transient queries. Without a name,
    // the node names it; the query runs to the end of its stream and shows its state.
    const stream = uniq('ro-q');
    expect((await append(c.node, stream, [newEvent('Seen'), newEvent('Seen'), newEvent('Other')])).status).toBe(201);
    await goTo(c, '/projections/new');
    expect(await page.getByLabel('Mode').locator('option').allTextContents()).toEqual(['Transient (query)']);
    await page.getByLabel('Query', { exact: true }).fill(`fromStream('${stream}').when({
  $init: function () { return { seen: 0 }; },
  Seen: function (s) { s.seen += 1; }
});`);
    await page.getByRole('button', { name: 'Create' }).click();
    await showsText(page.locator('[data-figure="mode"]'), 'Transient');
    await showsText(page.locator('[data-figure="status"]'), /^Completed/);
    await showsText(page.getByLabel('State', { exact: true }), /"seen": 2/);
    expect(await page.evaluate(() => location.hash)).toMatch(/^#\/projections\/[0-9a-f-]{36}$/);
    await shows(page.getByRole('navigation', { name: 'Main' }));
  });
});
