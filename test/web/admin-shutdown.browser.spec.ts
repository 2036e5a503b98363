import { describe, expect, it } from 'vitest';
import { http } from '../support/node.js';
import { goTo, gone, logIn, shows, showsText, until, useConsole } from '../support/browser.js';

// Shutting the node down from the console (its own file: the node does not come back).

const c = useConsole();

async function answers(): Promise<boolean> {
  try {
    const res = await http(c.node, '/ping');
    await res.arrayBuffer();
    return res.ok;
  } catch {
    return false;
  }
}

describe('shutting the node down', () => {
  it('asks first, then stops the node and says so', async () => {
    const page = await logIn(c, 'ops', 'changeit');
    await goTo(c, '/admin');
    const node = page.getByRole('region', { name: 'Node' });
    await node.getByRole('button', { name: 'Shut down node' }).click();
    const dialog = page.getByRole('dialog', { name: 'Shut down node' });
    await shows(dialog.getByText(/Shut the node down\?/));
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await gone(page.getByRole('dialog'));
    expect(await answers()).toBe(true);

    await node.getByRole('button', { name: 'Shut down node' }).click();
    await dialog.getByRole('button', { name: 'Shut down node' }).click();
    await showsText(node.getByRole('status'), 'The node is stopping. It will not answer until it is started again.');
    await until(answers, (up) => !up);
    // The console asks nothing more of it: the scavenge and auto-scavenge views are gone.
    await gone(page.getByRole('heading', { name: 'Scavenge', exact: true }));
  });
});
