import { mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Locator, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, beforeEach, expect, type TestContext } from 'vitest';
import type { Config } from '../../src/config/index.js';
import type { NodeOptions } from '../../src/node.js';
import { startTestNode, type TestNode } from './node.js';

// The Admin UI's tests drive Debian's Chromium (apt-get install chromium; .ci/run installs it)
// through playwright-core: no browser is downloaded. Each spec file gets one node and one
// browser; each test a fresh browser context (no session carried over) and page. A failed test
// leaves a screenshot in test-results/. A test fails when the page throws, or when it asks
// anything of another origin (the console must work with no network beyond its node).

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** The flags that keep Chromium off the network (it phones home otherwise) and runnable as root. */
const CHROMIUM_ARGS = [
  '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage', '--disable-default-apps',
  '--disable-domain-reliability', '--disable-client-side-phishing-detection', '--metrics-recording-only',
];

export const RESULTS_DIR = join(process.cwd(), 'test-results');

export interface ConsoleFixture {
  readonly node: TestNode;
  readonly page: Page;
  readonly context: BrowserContext;
  /** The console's address on the node. */
  readonly url: string;
  /** Uncaught page errors and requests to other origins seen in this test. */
  readonly problems: string[];
}

/** One node and one browser for the file, a fresh context and page per test. */
export function useConsole(overrides: Partial<Config> = {}, nodeOptions: Omit<NodeOptions, 'log'> = {}): ConsoleFixture {
  let node: TestNode;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let problems: string[] = [];

  beforeAll(async () => {
    [node, browser] = await Promise.all([
      startTestNode(overrides, nodeOptions),
      chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS }),
    ]);
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await node?.dispose();
  });

  beforeEach(async (ctx: TestContext) => {
    problems = [];
    context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    page = await context.newPage();
    page.setDefaultTimeout(10_000);
    const origin = new URL(node.url).origin;
    page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
    page.on('request', (req) => {
      const url = req.url();
      if (!url.startsWith(origin) && !url.startsWith('data:') && !url.startsWith('about:')) problems.push(`request to another origin: ${url}`);
    });
    ctx.onTestFinished(async ({ task }) => {
      if (task.result?.state === 'fail') {
        mkdirSync(RESULTS_DIR, { recursive: true });
        const name = `${task.file?.name ?? 'web'}-${task.name}`.replace(/[^A-Za-z0-9._-]+/g, '_').slice(0, 180);
        await page.screenshot({ path: join(RESULTS_DIR, `${name}.png`), fullPage: true }).catch(() => undefined);
      }
      await context.close();
    });
  });

  afterEach(() => {
    expect(problems, 'the page threw or reached beyond its node').toEqual([]);
  });

  return {
    get node() { return node; },
    get page() { return page; },
    get context() { return context; },
    get url() { return `${node.url}/web/`; },
    get problems() { return problems; },
  };
}

/** Opens the console and logs in through its form; resolves once the navigation shows. */
export async function logIn(c: ConsoleFixture, user = 'admin', password = 'changeit'): Promise<Page> {
  const { page } = c;
  await page.goto(c.url);
  await page.getByLabel('User name').fill(user);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.getByRole('navigation', { name: 'Main' }).waitFor();
  return page;
}

/** Goes to a console route (`#/streams/x`) and waits for the page to settle. */
export async function goTo(c: ConsoleFixture, route: string): Promise<void> {
  await c.page.goto(`${c.url}#${route.startsWith('/') ? route : `/${route}`}`);
}

// Waiting for the page: each retries until the page shows what is expected (or the poll times out).
const POLL = { timeout: 10_000, interval: 100 };

/** Waits until the locator's (first) element is visible. */
export async function shows(locator: Locator): Promise<void> {
  await locator.first().waitFor({ state: 'visible', timeout: POLL.timeout });
}

/** Waits until the locator's (first) element's text matches. */
export async function showsText(locator: Locator, text: string | RegExp): Promise<void> {
  await expect.poll(async () => (await locator.count()) > 0 ? (await locator.first().textContent()) ?? '' : '', POLL)
    .toMatch(typeof text === 'string' ? new RegExp(escapeRegExp(text)) : text);
}

/** Waits until nothing matches the locator. */
export async function gone(locator: Locator): Promise<void> {
  await expect.poll(() => locator.count(), POLL).toBe(0);
}

/** Waits until `read` resolves a value `check` accepts; returns it. */
export async function until<T>(read: () => Promise<T>, check: (value: T) => boolean, timeout = POLL.timeout): Promise<T> {
  let last: T | undefined;
  try {
    await expect.poll(async () => { last = await read(); return check(last); }, { ...POLL, timeout }).toBe(true);
  } catch (err) {
    // Say what was last seen: a timed-out wait is otherwise only "expected false to be true".
    (err as Error).message += `\nlast seen: ${JSON.stringify(last)?.slice(0, 2000)}`;
    throw err;
  }
  return last as T;
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/**
 * Records, for `page`, what a console that errs only when something is wrong never shows: messages
 * it logs as errors (Chromium logs every answer of 400 or above as one), answers of 400 or above,
 * and requests that got no answer, besides those whose text (`status method url` or the console
 * message) matches one of `expected`. A request the console cancels itself (a view left before
 * its answer came: net::ERR_ABORTED) is not trouble. Into `into` when given, else a new list.
 */
export function recordTrouble(page: Page, expected: RegExp[] = [], into: string[] = []): string[] {
  const unexpected = (text: string) => !expected.some((e) => e.test(text));
  page.on('console', (message) => {
    const text = `${message.text()} (${message.location().url})`;
    if (message.type() === 'error' && unexpected(text)) into.push(`console error: ${text}`);
  });
  page.on('response', (res) => {
    const text = `${res.status()} ${res.request().method()} ${res.url()}`;
    if (res.status() >= 400 && unexpected(text)) into.push(`failed request: ${text}`);
  });
  page.on('requestfailed', (req) => {
    const reason = req.failure()?.errorText ?? 'failed';
    if (reason !== 'net::ERR_ABORTED') into.push(`request failed: ${req.method()} ${req.url()} (${reason})`);
  });
  return into;
}

/**
 * Makes the test fail (through the fixture's `problems`) on what recordTrouble records. Opt-in:
 * some views ask for what a user may not read, on purpose (`expected`).
 */
export function failOnErrors(c: ConsoleFixture, page: Page = c.page, expected: RegExp[] = []): void {
  recordTrouble(page, expected, c.problems);
}

export interface AxeViolation { id: string; impact: string | null; help: string; targets: string[] }

const AXE_SOURCE = createRequire(import.meta.url).resolve('axe-core/axe.min.js');

/** axe-core's WCAG 2.1 A and AA violations on the page as it is now (axe is evaluated through the debugger protocol: the page's CSP stays on). */
export async function axeViolations(page: Page): Promise<AxeViolation[]> {
  if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(readFileSync(AXE_SOURCE, 'utf8'));
  return page.evaluate(async () => {
    const result = await (window as any).axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } });
    return result.violations.map((v: any) => ({ id: v.id, impact: v.impact, help: v.help, targets: v.nodes.map((n: any) => n.target.join(' ')).slice(0, 5) }));
  });
}

/** axe-core's serious and critical findings on the page now: what the console's tests fail on. */
export async function seriousViolations(page: Page): Promise<AxeViolation[]> {
  return (await axeViolations(page)).filter((v) => v.impact === 'serious' || v.impact === 'critical');
}
