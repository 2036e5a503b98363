import { beforeEach } from 'vitest';
import { recordTrouble, type ConsoleFixture } from './browser.js';

export { seriousViolations } from './browser.js';

// Stricter watch over a console test than useConsole's: an error on the browser's console, an
// answer of 400 or more from the node or a failed request is a problem of the test (useConsole's
// afterEach fails it), unless the test said it expects that one (`allow`); recordTrouble
// (browser.ts) records them. Call once per spec file, after useConsole.

export interface StrictConsole {
  /** Expect failures matching `pattern` (tested against `<status> <method> <url>` and console texts) in this test. */
  allow(pattern: RegExp): void;
  /** Every request the page sent in this test, as `<method> <url>`. */
  readonly requests: string[];
}

export function strictConsole(c: ConsoleFixture): StrictConsole {
  // One array for the spec, emptied before each test: recordTrouble reads it when something happens.
  const allowed: RegExp[] = [];
  let requests: string[] = [];
  beforeEach(() => {
    allowed.length = 0;
    requests = [];
    c.page.on('request', (req) => requests.push(`${req.method()} ${req.url()}`));
    recordTrouble(c.page, allowed, c.problems);
  });
  return {
    allow: (pattern) => { allowed.push(pattern); },
    get requests() { return requests; },
  };
}
