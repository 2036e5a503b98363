import { describe, expect, it } from 'vitest';
import { http, OPS } from '../support/node.js';
import { goTo, logIn, shows, showsText, useConsole } from '../support/browser.js';
import { TEST_PUBLIC_KEY_FILE, testLicense } from '../support/license.js';

// Auto-scavenge in the console on a node whose license (the committed test key pair) entitles it
// to AUTO_SCAVENGE: the status, a schedule refused with the node's reason and then set, pause and
// resume, each change shown by the status the node reports.

const c = useConsole({ licenseKey: testLicense(), licensePublicKey: TEST_PUBLIC_KEY_FILE });

async function status(): Promise<{ state: string; schedule: string | null; timeUntilNextCycle: string | null }> {
  const res = await http(c.node, '/auto-scavenge/status', { authorization: OPS });
  expect(res.status).toBe(200);
  return res.json();
}

describe('auto-scavenge with a license', () => {
  it('shows the status, configures a schedule, pauses and resumes', async () => {
    expect(await status()).toEqual({ state: 'NotConfigured', schedule: null, timeUntilNextCycle: null });
    const page = await logIn(c, 'ops', 'changeit');
    await goTo(c, '/admin');
    const section = page.getByRole('region', { name: 'Auto-scavenge' });
    const state = section.locator('[data-figure="auto-state"]');
    await showsText(state, 'Not configured');
    await showsText(section.locator('[data-figure="auto-schedule"]'), 'none');

    // A schedule the node refuses: its reason, next to the form; nothing changes.
    await section.getByRole('textbox', { name: /^Schedule/ }).fill('61 * * * *');
    await section.getByRole('button', { name: 'Save schedule' }).click();
    await showsText(section.getByRole('alert'), '400 Bad Request: Invalid CRON expression: Constraint error, got value 61 expected range 0-59');
    expect((await status()).state).toBe('NotConfigured');

    // New Year's Day at 03:00: it does not come round during the test.
    await section.getByRole('textbox', { name: /^Schedule/ }).fill('0 3 1 1 *');
    await section.getByRole('button', { name: 'Save schedule' }).click();
    await showsText(section.getByRole('status'), 'Schedule set to 0 3 1 1 *.');
    await showsText(state, 'Waiting for the next cycle');
    await showsText(section.locator('[data-figure="auto-schedule"]'), '0 3 1 1 *');
    await showsText(section.locator('[data-figure="auto-next"]'), /^\d+ (d|h|min)/);
    expect(await status()).toMatchObject({ state: 'Waiting', schedule: '0 3 1 1 *' });

    await section.getByRole('button', { name: 'Pause' }).click();
    await showsText(section.getByRole('status'), 'Auto-scavenge paused.');
    await showsText(state, 'Paused');
    expect((await status()).state).toBe('Paused');
    expect(await section.getByRole('button', { name: 'Pause' }).isDisabled()).toBe(true);

    await section.getByRole('button', { name: 'Resume' }).click();
    await showsText(section.getByRole('status'), 'Auto-scavenge resumed.');
    await showsText(state, 'Waiting for the next cycle');
    expect(await status()).toMatchObject({ state: 'Waiting', schedule: '0 3 1 1 *' });
    await shows(section.getByRole('button', { name: 'Pause' }));
    expect(await section.getByRole('button', { name: 'Resume' }).isDisabled()).toBe(true);
  });
});
