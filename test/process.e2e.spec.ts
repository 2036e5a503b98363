import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { runMain, spawnNode } from './support/process.js';
import { ADMIN, EVENTS_JSON } from './support/node.js';

const dirs: string[] = [];
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'svc-proc-'));
  dirs.push(dir);
  return dir;
}
afterEach(() => { for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true }); });

async function appendOne(url: string, stream: string, i: number): Promise<number> {
  const res = await fetch(`${url}/streams/${stream}`, {
    method: 'POST',
    headers: { Authorization: ADMIN, 'Content-Type': EVENTS_JSON },
    body: JSON.stringify([{ eventId: crypto.randomUUID(), eventType: 'Tick', data: { i } }]),
  });
  await res.arrayBuffer(); // an unread body would hold its connection
  return res.status;
}

describe('the server process', () => {
  it('--help prints every option with its default, --version the version', async () => {
    const help = await runMain(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('--http-port');
    expect(help.stdout).toContain('default: 2113');
    const version = await runMain(['--version']);
    expect(version.code).toBe(0);
    expect(version.stdout.trim()).toMatch(/^\d+\.\d+\.\d+$/);
  });

  it('an unknown option or invalid value stops the start with one clear line', async () => {
    const unknown = await runMain(['--frobnicate', '1']);
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr.trim().split('\n')).toHaveLength(1);
    expect(unknown.stderr).toContain('--frobnicate');
    const invalid = await runMain(['--http-port', 'lots']);
    expect(invalid.code).not.toBe(0);
    expect(invalid.stderr.trim().split('\n')).toHaveLength(1);
    expect(invalid.stderr).toContain('--http-port');
    const env = await runMain([], { SVC_HTTP_PORT: 'x' });
    expect(env.stderr).toContain('SVC_HTTP_PORT');
  });

  it('logs a start line with the address, the data path and the events loaded', async () => {
    const dir = tempDir();
    const node = await spawnNode(['--db', dir]);
    const line = node.output().split('\n').find((l) => l.includes('"url"'))!;
    const parsed = JSON.parse(line);
    expect(parsed.url).toBe(node.url);
    expect(parsed.db).toBe(dir);
    expect(typeof parsed.events).toBe('number');
    node.child.kill('SIGTERM');
    expect(await node.exited).toBe(0);
  });

  it('npm start (bin/start.sh) runs the node under jemalloc when the machine has it, glibc when asked, and passes signals', async () => {
    const installed = existsSync('/usr/lib/x86_64-linux-gnu/libjemalloc.so.2') || existsSync('/usr/lib/aarch64-linux-gnu/libjemalloc.so.2');
    for (const [env, expected] of [[{}, installed ? 'jemalloc' : 'glibc malloc'], [{ ALLOCATOR: 'glibc' }, 'glibc malloc']] as const) {
      const node = await spawnNode(['--db', tempDir(), '--run-projections', 'None'], env, { launcher: true });
      expect(await appendOne(node.url, 'launched', 1)).toBe(201);
      await vi.waitFor(() => expect(node.output()).toContain('"msg":"memory allocator"'));
      const line = JSON.parse(node.output().split('\n').find((l) => l.includes('"memory allocator"'))!);
      expect(line.allocator).toBe(expected);
      node.child.kill('SIGTERM'); // the shell exec'd node: the signal reaches it, and it stops cleanly
      expect(await node.exited).toBe(0);
      expect(node.output()).toContain('shut down cleanly');
    }
  });

  /** 16 writers append until the node stops answering; the signal is sent after 200 acknowledgements. */
  async function appendUntilStopped(signal: NodeJS.Signals) {
    const dir = tempDir();
    const node = await spawnNode(['--db', dir]);
    const acknowledged: number[] = [];
    const failures: string[] = [];
    let i = 0;
    let stop = false;
    const writers = Array.from({ length: 16 }, async () => {
      while (!stop) {
        const n = i++;
        const status = await appendOne(node.url, 'stop-test', n).catch((e: Error) => String(e.cause ?? e));
        if (status === 201) acknowledged.push(n);
        else { failures.push(String(status)); break; } // refused connections or shutdown answers end the writer
      }
    });
    while (acknowledged.length < 200 && failures.length === 0) await new Promise((r) => setTimeout(r, 20));
    expect(failures).toEqual([]);
    node.child.kill(signal);
    const code = await node.exited;
    stop = true;
    await Promise.all(writers);
    return { dir, code, acknowledged };
  }

  /** Restarts on `dir` and returns the `i` of every stored event, in event-number order. */
  async function storedAfterRestart(dir: string): Promise<{ numbers: number[]; values: number[] }> {
    const again = await spawnNode(['--db', dir]);
    try {
      const res = await fetch(`${again.url}/streams/stop-test/0/forward/4096?embed=body`, {
        headers: { Authorization: ADMIN, Accept: 'application/json' },
      });
      expect(res.status).toBe(200);
      const entries = [...(await res.json()).entries].reverse() as { eventNumber: number; data: string }[];
      return { numbers: entries.map((e) => e.eventNumber), values: entries.map((e) => JSON.parse(e.data).i) };
    } finally {
      again.child.kill('SIGTERM');
      await again.exited;
    }
  }

  it('SIGTERM under concurrent appends loses nothing that was acknowledged', async () => {
    const { dir, code, acknowledged } = await appendUntilStopped('SIGTERM');
    expect(code).toBe(0);
    expect(acknowledged.length).toBeGreaterThanOrEqual(200);
    const stored = new Set((await storedAfterRestart(dir)).values);
    for (const n of acknowledged) expect(stored.has(n)).toBe(true);
  }, 60_000);

  it('a kill -9 mid-write keeps every acknowledged event, with no gap and no half-written append', async () => {
    const { dir, acknowledged } = await appendUntilStopped('SIGKILL');
    const { numbers, values } = await storedAfterRestart(dir);
    expect(numbers).toEqual(numbers.map((_, k) => k));
    expect(new Set(values).size).toBe(values.length);
    const stored = new Set(values);
    for (const n of acknowledged) expect(stored.has(n)).toBe(true);
  }, 60_000);
});
