import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { http, uniq, EVENTS_JSON } from '../support/node.js';
import { goTo, logIn, shows, showsText, useConsole } from '../support/browser.js';

// JSON as the node holds it, digit for digit, wherever the console shows it: an integer beyond
// 2^53 in an event's data and metadata, and the $tb (Int64.MaxValue) of a soft-deleted stream.
// JSON.parse would show 9007199254740992 and 9223372036854776000; the console re-indents the
// text instead (src/api/json-indent.ts), and so does the node for its pretty feeds.

const c = useConsole();
const BIG = '9007199254740993';
const TB = '9223372036854775807';
const TRACE = '12345678901234567890';

/** An event whose data and metadata are JSON text with big integers, stored as sent (text members of the array form). */
async function bigEvent(stream: string): Promise<void> {
  const res = await http(c.node, `/streams/${stream}`, {
    method: 'POST', headers: { 'Content-Type': EVENTS_JSON },
    body: JSON.stringify([{ eventId: randomUUID(), eventType: 'Big', data: `{"id": ${BIG}}`, metadata: `{"trace": ${TRACE}}` }]),
  });
  expect(res.status).toBe(201);
}

describe('JSON shown exactly', () => {
  it('an integer beyond 2^53 on the stream, event and $all pages', async () => {
    const stream = uniq('big');
    await bigEvent(stream);
    // What the node stores and sends in its feed (embed=tryharder re-indents, digits kept).
    expect(await (await http(c.node, `/streams/${stream}/0`, { headers: { Accept: 'application/json' } })).text()).toBe(`{"id": ${BIG}}`);
    expect(await (await http(c.node, `/streams/${stream}/0?embed=tryharder`, { headers: { Accept: 'application/vnd.eventstore.atom+json' } })).text())
      .toContain(`"data":"{\\n  \\"id\\": ${BIG}\\n}"`);

    const page = await logIn(c);
    await goTo(c, `/streams/${stream}`);
    await page.getByRole('button', { name: `Details of 0@${stream}` }).click();
    await showsText(page.getByLabel(`Data of 0@${stream}`), `"id": ${BIG}`);
    await showsText(page.getByLabel(`Metadata of 0@${stream}`), `"trace": ${TRACE}`);

    await goTo(c, `/streams/${stream}/0`);
    await shows(page.getByRole('heading', { name: `Event 0@${stream}` }));
    expect(await page.getByLabel('Data', { exact: true }).textContent()).toBe(`{\n  "id": ${BIG}\n}`);
    expect(await page.getByLabel('Metadata', { exact: true }).textContent()).toBe(`{\n  "trace": ${TRACE}\n}`);

    await goTo(c, '/streams/$all');
    await page.getByRole('button', { name: `Details of 0@${stream}` }).click();
    await showsText(page.getByLabel(`Data of 0@${stream}`), `"id": ${BIG}`);
  });

  it("a soft-deleted stream's $tb in its metadata, shown and edited", async () => {
    const stream = uniq('deleted');
    await bigEvent(stream);
    expect((await http(c.node, `/streams/${stream}`, { method: 'DELETE' })).status).toBe(204);
    expect(await (await http(c.node, `/streams/${stream}/metadata`, { headers: { Accept: 'application/json' } })).text()).toBe(`{"$tb":${TB}}`);

    const page = await logIn(c);
    await goTo(c, `/streams/${stream}`);
    await showsText(page.getByRole('status'), /has been deleted \(soft delete/);
    expect(await page.getByLabel('Current metadata').textContent()).toBe(`{\n  "$tb": ${TB}\n}`);
    // The editor starts from the same text: saving it unchanged keeps the stream deleted.
    await page.getByRole('button', { name: 'Edit metadata' }).click();
    expect(await page.getByLabel('Metadata (JSON)').inputValue()).toBe(`{\n  "$tb": ${TB}\n}`);
    await page.getByRole('button', { name: 'Save metadata' }).click();
    await showsText(page.getByRole('status').filter({ hasText: 'Metadata saved' }), 'Metadata saved');
    const meta = await (await http(c.node, `/streams/${stream}/metadata`, { headers: { Accept: 'application/json' } })).text();
    expect(meta.replace(/\s/g, '')).toBe(`{"$tb":${TB}}`);
  });

  it('an event appended from the console is stored as typed', async () => {
    const stream = uniq('typed');
    const page = await logIn(c);
    await goTo(c, `/streams/${stream}`);
    await page.getByLabel('Event type').fill('Typed');
    await page.getByLabel('Data', { exact: true }).fill(`{"id": ${BIG}}`);
    await page.getByLabel('Event metadata (optional JSON)').fill(`{"trace": ${TRACE}}`);
    await page.getByRole('button', { name: 'Append' }).click();
    await showsText(page.getByRole('status').filter({ hasText: 'Appended' }), 'Appended event 0 (Typed).');
    expect(await (await http(c.node, `/streams/${stream}/0`, { headers: { Accept: 'application/json' } })).text()).toBe(`{"id": ${BIG}}`);
    await page.getByRole('button', { name: `Details of 0@${stream}` }).click();
    await showsText(page.getByLabel(`Data of 0@${stream}`), `"id": ${BIG}`);
    await showsText(page.getByLabel(`Metadata of 0@${stream}`), `"trace": ${TRACE}`);
  });
});
