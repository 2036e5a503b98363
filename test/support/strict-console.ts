import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Page } from 'playwright-core';
import { beforeEach } from 'vitest';
import type { ConsoleFixture } from './browser.js';

// Stricter watch over a console test than useConsole's: an error on the browser's console or an
// answer of 400 or more from the node is a problem of the test (useConsole's afterEach fails it),
// unless the test said it expects that one (`allow`). And axe-core's serious and critical
// findings on the page as it is now. Call once per spec file, after useConsole.

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

export interface StrictConsole {
  /** Expect failures matching `pattern` (tested against `<status> <method> <url>` and console texts) in this test. */
  allow(pattern: RegExp): void;
  /** Every request the page sent in this test, as `<method> <url>`. */
  readonly requests: string[];
}

export function strictConsole(c: ConsoleFixture): StrictConsole {
  let allowed: RegExp[] = [];
  let requests: string[] = [];
  // The browser asks for /favicon.ico by itself (the console does not): its 404 is not the console's failure.
  const expected = (text: string) => /\/favicon\.ico$/.test(text) || allowed.some((p) => p.test(text));
  beforeEach(() => {
    allowed = [];
    requests = [];
    const page = c.page;
    page.on('request', (req) => requests.push(`${req.method()} ${req.url()}`));
    page.on('response', (res) => {
      const line = `${res.status()} ${res.request().method()} ${res.url()}`;
      if (res.status() >= 400 && !expected(line)) c.problems.push(`answer: ${line}`);
    });
    page.on('console', (msg) => {
      if (msg.type() !== 'error') return;
      const line = `${msg.text()} ${msg.location().url ?? ''}`;
      if (!expected(line)) c.problems.push(`console error: ${line}`);
    });
  });
  return {
    allow: (pattern) => { allowed.push(pattern); },
    get requests() { return requests; },
  };
}

export interface Violation { id: string; impact: string | null; help: string; targets: string[] }

/**
 * axe-core's serious and critical WCAG 2.1 A/AA findings on the page now. The checker goes in
 * through the DevTools protocol (page.evaluate), which the console's script policy does not govern.
 */
export async function seriousViolations(page: Page): Promise<Violation[]> {
  if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(AXE_SOURCE);
  const all: Violation[] = await page.evaluate(async () => {
    const result = await (window as any).axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } });
    return result.violations.map((v: any) => ({ id: v.id, impact: v.impact, help: v.help, targets: v.nodes.map((n: any) => n.target.join(' ')).slice(0, 5) }));
  });
  return all.filter((v) => v.impact === 'serious' || v.impact === 'critical');
}
