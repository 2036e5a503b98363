import { describe, expect, it } from 'vitest';
import { append, http, newEvent, uniq } from '../support/node.js';
import { axeViolations, logIn, shows, useConsole, type AxeViolation } from '../support/browser.js';

// Every view of the console checked by axe-core (WCAG 2 A and AA rules: names, labels, roles,
// contrast, headings, landmarks) with the data a user would have: a stream with events, a
// projection with state, a subscription group, a user.

const c = useConsole();

describe('accessibility', () => {
  it('every view passes the WCAG 2.1 A and AA checks', async () => {
    const stream = uniq('a11y');
    expect((await append(c.node, stream, [newEvent('Placed', { n: 1 }, { by: 'test' }), newEvent('Shipped', { n: 1 })])).status).toBe(201);
    const projection = uniq('a11yproj');
    const created = await http(c.node, `/projections/continuous?name=${projection}&enabled=yes`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: `fromStream('${stream}').when({ $init: function () { return { n: 0 }; }, $any: function (s) { s.n++; return s; } })`,
    });
    expect(created.status).toBe(201);
    const group = uniq('g');
    expect((await http(c.node, `/subscriptions/${stream}/${group}`, { method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: '{}' })).status).toBe(200);

    const context = await c.context.browser()!.newContext({ viewport: { width: 1280, height: 900 } });
    try {
      const page = await context.newPage();
      const checked: Record<string, AxeViolation[]> = {};
      await page.goto(c.url);
      checked.login = await axeViolations(page);
      await logIn({ ...c, page } as typeof c);
      const routes: Array<[string, string]> = [
        ['/', 'Dashboard'], ['/streams', 'Streams'], [`/streams/${encodeURIComponent(stream)}`, stream],
        ['/projections', 'Projections'], [`/projections/${encodeURIComponent(projection)}`, projection],
        [`/projections/${encodeURIComponent(projection)}/debug`, `Debug ${projection}`],
        ['/projections/new', 'New projection'],
        ['/subscriptions', 'Persistent subscriptions'], [`/subscriptions/${encodeURIComponent(stream)}/${group}`, group],
        ['/admin', 'Admin'], ['/users', 'Users'], ['/users/ops', 'ops'], ['/streams/$all', 'All events'], ['/cluster', 'Cluster'],
      ];
      for (const [route, heading] of routes) {
        await page.goto(`${c.url}#${route}`);
        await shows(page.getByRole('heading', { level: 1 }).filter({ hasText: heading }));
        await page.waitForLoadState('networkidle');
        checked[route] = await axeViolations(page);
      }
      const found = Object.entries(checked).filter(([, v]) => v.length > 0);
      expect(found, JSON.stringify(found, null, 2)).toEqual([]);
    } finally {
      await context.close();
    }
  }, 90_000);
});
