import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { killAndRemove, runMain, spawnNode, type NodeProcess } from './support/process.js';
import { foreignLicense, TEST_PRIVATE_KEY_FILE, TEST_PUBLIC_KEY_FILE, testLicense } from './support/license.js';
import { VERSION } from '../src/version.js';

// Real nodes deciding auto-scavenge at start (issue 15): one log line says it is on, with the
// plugin's version, or off and why; a contradictory configuration stops the start (exit 2) with
// one line. The license command mints keys such nodes accept.

const LICENSE_CLI = fileURLToPath(new URL('../dist/src/cli/license.js', import.meta.url));
const dirs: string[] = [];
afterAll(() => { for (const d of dirs) rmSync(d, { recursive: true, force: true }); });

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'svc-license-'));
  dirs.push(dir);
  return dir;
}

async function waitForOutput(proc: NodeProcess, pattern: RegExp, timeoutMs = 10_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const line = proc.output().split('\n').find((l) => pattern.test(l));
    if (line) return line;
    if (Date.now() > deadline) throw new Error(`no line matching ${pattern}:\n${proc.output()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Starts a node with `args` (and `env`), returns its auto-scavenge line as parsed JSON and all output. */
async function autoScavengeLine(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ line: Record<string, unknown>; output: string }> {
  const db = tempDir();
  let proc: NodeProcess | undefined;
  try {
    proc = await spawnNode(['--db', db, '--license-public-key', TEST_PUBLIC_KEY_FILE, ...args], env);
    const line = JSON.parse(await waitForOutput(proc, /"plugin":"auto-scavenge"/)) as Record<string, unknown>;
    return { line, output: proc.output() };
  } finally {
    await killAndRemove(proc, [db]);
  }
}

describe('auto-scavenge enablement at start', () => {
  it.each([
    ['missing', [], {}, 'auto-scavenge disabled: no license key (--license-key)'],
    ['malformed (from SVC_LICENSE_KEY)', [], { SVC_LICENSE_KEY: 'not-a-license' },
      'auto-scavenge disabled: the license key is malformed: expected <payload>.<signature> in base64url'],
    ['expired', ['--license-key', testLicense({ licensee: 'Old Co', expires: '2020-01-01' })], {},
      'auto-scavenge disabled: the license key of Old Co expired on 2020-01-01'],
    ['wrongly signed', ['--license-key', foreignLicense()], {},
      'auto-scavenge disabled: the license key is wrongly signed: its signature does not match the license public key'],
    ['unentitled', ['--license-key', testLicense({ licensee: 'Test Co', entitlements: ['SOMETHING_ELSE'] })], {},
      'auto-scavenge disabled: the license key of Test Co is not entitled to AUTO_SCAVENGE (it grants: SOMETHING_ELSE)'],
    ['valid, in dev mode', ['--license-key', testLicense(), '--dev'], {}, 'auto-scavenge disabled: the node runs with dev mode (--dev)'],
    ['valid, disabled', ['--license-key', testLicense(), '--auto-scavenge-enabled', 'false'], {},
      'auto-scavenge disabled: disabled by configuration (--auto-scavenge-enabled false)'],
  ] as const)('license key %s: off, with one line saying which', async (_case, args, env, msg) => {
    const { line } = await autoScavengeLine([...args], env);
    expect(line.msg).toBe(msg);
    expect(line.level).toBe(30);
  });

  it('a valid entitled key turns it on: the plugin-enabled line with the version; the key itself is never logged', async () => {
    const key = testLicense();
    const { line, output } = await autoScavengeLine(['--license-key', key]);
    expect(line).toMatchObject({ plugin: 'auto-scavenge', version: VERSION, msg: `"AutoScavenge" "${VERSION}" plugin enabled` });
    expect(output).not.toContain(key);
    expect(output).not.toContain('auto-scavenge disabled');
  });

  it.each([
    ['--dev', 'dev mode (--dev)'],
    ['--mem-db', 'an in-memory database (--mem-db)'],
  ])('--auto-scavenge-enabled true with %s stops the start: exit 2, one line, no database opened', async (flag, what) => {
    const db = join(tempDir(), 'db');
    const { code, stdout, stderr } = await runMain(['--db', db, '--http-port', '0', '--auto-scavenge-enabled', 'true', flag,
      '--license-key', testLicense(), '--license-public-key', TEST_PUBLIC_KEY_FILE]);
    expect(code).toBe(2);
    expect(stderr).toBe(`AutoScavenge is not compatible with ${what}: --auto-scavenge-enabled true cannot be combined with it.\n`);
    expect(stdout).not.toContain('node listening');
    expect(existsSync(db)).toBe(false);
  });
});

describe('--dev', () => {
  it('serves plain HTTP even with --insecure false and no certificate, and warns that it is dev mode', async () => {
    const db = tempDir();
    let proc: NodeProcess | undefined;
    try {
      proc = await spawnNode(['--db', db, '--dev', '--insecure', 'false']);
      expect(proc.url).toMatch(/^http:\/\//);
      expect((await fetch(`${proc.url}/ping`)).status).toBe(200);
      const warning = JSON.parse(await waitForOutput(proc, /dev mode \(--dev\)/)) as { level: number; msg: string };
      expect(warning).toMatchObject({ level: 40, msg: 'dev mode (--dev): plain HTTP whatever --insecure says, auto-scavenge off; not for production' });
    } finally {
      await killAndRemove(proc, [db]);
    }
  });
});

describe('npm run license', () => {
  const run = promisify(execFile);

  it('keypair writes a pair; mint signs a key with it that a node trusting the public key accepts', async () => {
    const out = tempDir();
    await run(process.execPath, [LICENSE_CLI, 'keypair', '--out', out]);
    expect(readFileSync(join(out, 'license-private-key.pem'), 'utf8')).toMatch(/^-----BEGIN PRIVATE KEY-----/);
    const { stdout: key } = await run(process.execPath, [LICENSE_CLI, 'mint', '--private-key', join(out, 'license-private-key.pem'),
      '--licensee', 'Operator Ltd', '--expires', '2099-12-31', '--entitlement', 'AUTO_SCAVENGE']);
    expect(key.trim()).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    const payload = JSON.parse(Buffer.from(key.split('.')[0], 'base64url').toString()) as Record<string, unknown>;
    expect(payload).toMatchObject({ licensee: 'Operator Ltd', expires: '2099-12-31', entitlements: ['AUTO_SCAVENGE'] });
    const { line } = await autoScavengeLine(['--license-key', key.trim(), '--license-public-key', join(out, 'license-public-key.pem')]);
    expect(line.msg).toBe(`"AutoScavenge" "${VERSION}" plugin enabled`);
    // the same key against the test public key: wrongly signed
    const { line: other } = await autoScavengeLine(['--license-key', key.trim()]);
    expect(other.msg).toMatch(/wrongly signed/);
  });

  it('mint refuses missing arguments and a date it cannot read (exit 2)', async () => {
    const err = await run(process.execPath, [LICENSE_CLI, 'mint', '--private-key', TEST_PRIVATE_KEY_FILE, '--licensee', 'X', '--expires', 'someday',
      '--entitlement', 'AUTO_SCAVENGE']).catch((e: { code: number; stderr: string }) => e);
    expect(err).toMatchObject({ code: 2, stderr: expect.stringMatching(/--expires someday is not an ISO date/) });
    const missing = await run(process.execPath, [LICENSE_CLI, 'mint', '--licensee', 'X']).catch((e: { code: number; stderr: string }) => e);
    expect(missing).toMatchObject({ code: 2, stderr: expect.stringMatching(/--private-key and --expires and --entitlement are required/) });
  });
});

describe('the license switches the auto-scavenge endpoints', () => {
  const ADMIN = 'Basic ' + Buffer.from('admin:changeit').toString('base64');
  const call = async (url: string, path: string, method = 'GET', body?: unknown) => {
    const res = await fetch(`${url}${path}`, {
      method, headers: { Authorization: ADMIN, ...(body ? { 'Content-Type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    return { status: res.status, json: text ? JSON.parse(text) as Record<string, unknown> : undefined };
  };

  it('a valid license turns the coordinator on (configure, then Waiting); none leaves it off (503, enabled false)', async () => {
    const licensedDb = tempDir();
    const plainDb = tempDir();
    let licensed: NodeProcess | undefined;
    let plain: NodeProcess | undefined;
    try {
      licensed = await spawnNode(['--db', licensedDb, '--license-public-key', TEST_PUBLIC_KEY_FILE, '--license-key', testLicense()]);
      expect(await call(licensed.url, '/auto-scavenge/enabled')).toEqual({ status: 200, json: { enabled: true } });
      expect((await call(licensed.url, '/auto-scavenge/configure', 'POST', { schedule: '0 3 * * *' })).status).toBe(200);
      const status = await call(licensed.url, '/auto-scavenge/status');
      expect(status.status).toBe(200);
      expect(status.json).toMatchObject({ state: 'Waiting', schedule: '0 3 * * *' });
      plain = await spawnNode(['--db', plainDb]);
      expect(await call(plain.url, '/auto-scavenge/enabled')).toEqual({ status: 200, json: { enabled: false } });
      expect((await call(plain.url, '/auto-scavenge/pause', 'POST')).status).toBe(503);
    } finally {
      await killAndRemove(licensed, [licensedDb]);
      await killAndRemove(plain, [plainDb]);
    }
  });
});
