import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig, type Config } from '../../src/config/index.js';
import { startNode, type NodeOptions, type RunningNode } from '../../src/node.js';
import { createLogger } from '../../src/logger.js';
import { randomUUID } from 'node:crypto';

export const ADMIN = 'Basic ' + Buffer.from('admin:changeit').toString('base64');
export const OPS = 'Basic ' + Buffer.from('ops:changeit').toString('base64');

export function basic(user: string, password: string): string {
  return 'Basic ' + Buffer.from(`${user}:${password}`).toString('base64');
}

export interface TestNode {
  url: string;
  dir: string;
  node: RunningNode;
  /** Stops the node and starts it again on the same data directory (a new port). */
  restart(): Promise<void>;
  /** Stops the node and removes its data directory. */
  dispose(): Promise<void>;
}

/** A real node on an ephemeral port with a temp data dir (`options`: what startNode takes besides the config and log). */
export async function startTestNode(overrides: Partial<Config> = {}, options: Omit<NodeOptions, 'log'> = {}): Promise<TestNode> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-test-'));
  const config: Config = {
    // The system projections write to the log in the background; tests that want them ask for them.
    ...loadConfig([]).config, db: dir, httpPort: 0, logLevel: 'silent', startStandardProjections: false, ...overrides,
  };
  const log = createLogger(config.logLevel);
  const t: TestNode = {
    url: '', dir, node: undefined as unknown as RunningNode,
    async restart() {
      await t.node.close();
      t.node = await startNode(config, { ...options, log });
      t.url = t.node.url;
    },
    async dispose() {
      await t.node.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  t.node = await startNode(config, { ...options, log });
  t.url = t.node.url;
  return t;
}

/** fetch with admin credentials unless `authorization` is given ('' for none). */
export function http(t: TestNode, path: string, init: RequestInit & { authorization?: string } = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  const auth = init.authorization ?? ADMIN;
  if (auth) headers.set('Authorization', auth);
  return fetch(t.url + path, { ...init, headers, redirect: 'manual' });
}

export const EVENTS_JSON = 'application/vnd.eventstore.events+json';

export function newEvent(eventType: string, data: unknown = {}, metadata?: unknown) {
  return { eventId: crypto.randomUUID(), eventType, data, ...(metadata === undefined ? {} : { metadata }) };
}

/** Appends events (array form); returns the response. */
export function append(t: TestNode, stream: string, events: unknown[], headers: Record<string, string> = {}): Promise<Response> {
  return http(t, `/streams/${encodeURIComponent(stream)}`, {
    method: 'POST', headers: { 'Content-Type': EVENTS_JSON, ...headers }, body: JSON.stringify(events),
  });
}

export async function readFeed(t: TestNode, path: string, headers: Record<string, string> = {}): Promise<any> {
  const res = await http(t, path, { headers: { Accept: 'application/vnd.eventstore.atom+json', ...headers } });
  if (res.status !== 200) throw new Error(`GET ${path} answered ${res.status}`);
  return res.json();
}

/** A name no other test uses. */
export function uniq(prefix: string): string {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Retries an assertion until it passes (or rethrows its last failure after `timeoutMs`). */
export async function eventually<T>(check: () => Promise<T>, timeoutMs = 5000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (err) {
      if (Date.now() >= deadline) throw err;
    }
    await sleep(25);
  }
}

/** Appends `count` events to a new stream, then soft-deletes it: every event but the last is removable by a scavenge. */
export async function softDeletedStream(t: TestNode, count: number): Promise<string> {
  const stream = uniq('doomed');
  for (let done = 0; done < count; done += 500) {
    const events = Array.from({ length: Math.min(500, count - done) }, (_, i) => newEvent('Filler', { n: done + i, pad: 'x'.repeat(64) }));
    const res = await append(t, stream, events);
    if (res.status !== 201) throw new Error(`append to ${stream}: ${res.status} ${await res.text()}`);
    await res.arrayBuffer();
  }
  const res = await http(t, `/streams/${stream}`, { method: 'DELETE' });
  if (res.status !== 204) throw new Error(`delete ${stream}: ${res.status} ${await res.text()}`);
  await res.arrayBuffer();
  return stream;
}

/** Creates a user (as admin) with these groups; resolves its login name. */
export async function newUser(t: TestNode, groups: string[] = [], password = 'pw', prefix = 'user'): Promise<string> {
  const login = uniq(prefix);
  const res = await http(t, '/users/', {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ loginName: login, fullName: login, password, groups }),
  });
  if (res.status !== 201) throw new Error(`create user ${login}: ${res.status} ${await res.text()}`);
  return login;
}
