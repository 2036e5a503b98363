import { describe, expect, it } from 'vitest';
import { http, newUser } from '../support/node.js';
import { logIn, shows, showsText, until, useConsole } from '../support/browser.js';
import { seriousViolations, strictConsole } from '../support/strict-console.js';

// The cluster page on a lone node: one member, the leader, with its positions as GET /gossip
// gives them; in the navigation of every user, since the node lets anyone read gossip. Any
// console error, answer of 400 or more, or serious axe finding fails the test.

const c = useConsole();
strictConsole(c);

async function gossip(): Promise<{ members: Array<Record<string, any>> }> {
  return (await http(c.node, '/gossip', { headers: { Accept: 'application/json' } })).json();
}

async function showsLoneLeader(): Promise<void> {
  const page = c.page;
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Cluster' }).click();
  await shows(page.getByRole('heading', { level: 1, name: 'Cluster' }));
  const [member] = (await gossip()).members;
  const row = page.locator(`tr[data-member="${member.instanceId}"]`);
  await showsText(row.locator('[data-cell="role"]'), 'Leader');
  await showsText(row.locator('[data-cell="state"]'), 'Leader');
  await showsText(row, 'this node');
  await showsText(row, `${member.httpEndPointIp}:${member.httpEndPointPort}`);
  expect(await page.locator('tr[data-member]').count()).toBe(1);
  await showsText(page.locator('[data-figure="members"]'), '1');
  await showsText(page.locator('[data-figure="node-state"]'), 'leader');
  await showsText(row.locator('[data-cell="lag"]'), '(leader)');
  await showsText(row.locator('[data-cell="epoch"]'), String(member.epochNumber));
  // The positions follow the node's: the writer checkpoint shown is the one gossip reports (it moves only with writes).
  const writer = Number((await row.locator('[data-cell="writer"]').textContent())!.replace(/,/g, ''));
  await until(async () => (await gossip()).members[0].writerCheckpoint as number, (w) => w === writer);
  const found = await seriousViolations(page);
  expect(found, JSON.stringify(found, null, 2)).toEqual([]);
}

describe('the cluster page', () => {
  it('shows an admin the lone node as the one member, leading', async () => {
    await logIn(c);
    await showsLoneLeader();
  });

  it('shows a plain user the same (gossip is everyone\'s)', async () => {
    const login = await newUser(c.node);
    await logIn(c, login, 'pw');
    await showsLoneLeader();
  });
});
