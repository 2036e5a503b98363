import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';

// Servers under load run in child processes: autocannon in the parent must not share their
// event loop, or the client's own work would be measured as server time.

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const NODE_MAIN = fileURLToPath(new URL('../src/main.js', import.meta.url));
export const CEILING_MAIN = fileURLToPath(new URL('./ceiling-server.js', import.meta.url));
/** `npm start`'s launcher: the node runs with the allocator a user's node gets (jemalloc if installed). */
const START_SH = fileURLToPath(new URL('../../bin/start.sh', import.meta.url));

export interface Server {
  url: string;
  /** The child's process id (to read its memory from /proc). */
  pid: number;
  /** Stops the process (SIGTERM, so the node closes RocksDB and a --cpu-prof profile is written). */
  stop(): Promise<void>;
}

/** A free loopback port: the child is told it up front, so no log parsing is needed to find it. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

/** Polls until the server answers any HTTP request, failing early if the child dies. */
async function waitReady(url: string, child: ChildProcess, name: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`${name} exited before it was ready (code ${child.exitCode}, signal ${child.signalCode})`);
    }
    try {
      await fetch(`${url}/`, { signal: AbortSignal.timeout(1000) });
      return;
    } catch {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  throw new Error(`${name} was not ready within ${timeoutMs} ms`);
}

const running = new Set<ChildProcess>();
// If the parent dies mid-run, don't leave servers behind holding ports and data directories.
process.once('exit', () => { for (const child of running) child.kill('SIGKILL'); });

/**
 * Spawns `script [args --http-port PORT]` through `npm start`'s launcher (so the node and the
 * ceiling both run under the allocator a user's node gets) with node flags `nodeArgs`, and waits
 * until it serves HTTP.
 */
export async function startServer(name: string, script: string, args: string[], nodeArgs: string[] = []): Promise<Server> {
  const port = await freePort();
  // BENCH_NODE_FLAGS: node flags for every server a bench starts (--trace-gc, --max-semi-space-size=…).
  const flags = [...nodeArgs, ...(process.env.BENCH_NODE_FLAGS ?? '').split(' ').filter(Boolean)];
  const env = { ...process.env, START_SCRIPT: script, START_NODE_FLAGS: flags.join(' ') };
  const child = spawn('sh', [START_SH, ...args, '--http-port', String(port)], {
    cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit'], env,
  });
  running.add(child);
  child.once('exit', () => running.delete(child));
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitReady(url, child, name);
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
  return {
    url,
    pid: child.pid!,
    async stop() {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited(child);
      clearTimeout(timer);
      if (child.exitCode !== 0) process.stderr.write(`warning: ${name} exited with code ${child.exitCode}, signal ${child.signalCode}\n`);
    },
  };
}
