import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, openSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

// `npm run cluster`: a three-node cluster on this machine for a local try, with its own etcd
// (Debian's etcd-server: /usr/bin/etcd; or $ETCD). Data under ./data/cluster (etcd, n1, n2, n3),
// HTTP on 2113-2115, replication on 1112-1114, plain HTTP (--insecure). Ctrl-C stops everything.
// The benches start clusters through startLocalCluster too.

const MAIN = fileURLToPath(new URL('../main.js', import.meta.url));
export const ETCD = process.env.ETCD ?? '/usr/bin/etcd';

export interface LocalNode {
  name: string;
  url: string;
  child: ChildProcess | undefined;
  start(): Promise<void>;
  /** SIGKILL. */
  kill(): Promise<void>;
}

export interface LocalCluster {
  etcdEndpoint: string;
  nodes: LocalNode[];
  /** The node that leads now (waits for one, up to `timeoutMs`). */
  leader(timeoutMs?: number): Promise<LocalNode>;
  stop(): Promise<void>;
}

export interface LocalClusterOptions {
  dir: string;
  size?: number;
  httpPorts: number[];
  intPorts: number[];
  etcdPorts: [client: number, peer: number];
  /** Extra options for every node. */
  args?: string[];
  /** Where the children's output goes ('files': <dir>/<name>.log, appended). */
  stdio?: 'inherit' | 'ignore' | 'files';
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((r) => child.once('exit', () => r()));
}

async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await check()) return;
    } catch { /* not yet */ }
    if (Date.now() > deadline) throw new Error(`${what} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function startLocalCluster(options: LocalClusterOptions): Promise<LocalCluster> {
  const size = options.size ?? 3;
  const output = (name: string): 'inherit' | 'ignore' | number => {
    const mode = options.stdio ?? 'inherit';
    return mode === 'files' ? openSync(join(options.dir, `${name}.log`), 'a') : mode;
  };
  const [client, peer] = options.etcdPorts;
  const etcdEndpoint = `http://127.0.0.1:${client}`;
  const etcdDir = join(options.dir, 'etcd');
  mkdirSync(etcdDir, { recursive: true });
  const etcd = spawn(ETCD, [
    '--name', 'local', '--data-dir', etcdDir, '--listen-client-urls', etcdEndpoint, '--advertise-client-urls', etcdEndpoint,
    '--listen-peer-urls', `http://127.0.0.1:${peer}`, '--initial-advertise-peer-urls', `http://127.0.0.1:${peer}`,
    '--initial-cluster', `local=http://127.0.0.1:${peer}`, '--log-level', 'error',
  ], { stdio: ['ignore', output('etcd'), output('etcd')] });
  await waitFor('etcd answered no health check', async () => (await fetch(`${etcdEndpoint}/health`)).ok, 15_000);
  const nodes: LocalNode[] = [];
  for (let i = 0; i < size; i++) {
    const name = `n${i + 1}`;
    const url = `http://127.0.0.1:${options.httpPorts[i]}`;
    const node: LocalNode = {
      name, url, child: undefined,
      async start() {
        const child = spawn(process.execPath, [MAIN,
          '--db', join(options.dir, name), '--http-port', String(options.httpPorts[i]), '--int-port', String(options.intPorts[i]),
          '--cluster-size', String(size), '--etcd-endpoints', etcdEndpoint, '--node-name', name, ...(options.args ?? []),
        ], { stdio: ['ignore', output(name), output(name)] });
        node.child = child;
        const gone = new Promise<never>((_, reject) => child.once('exit', (code) => reject(new Error(`${name} exited with code ${code}`))));
        await Promise.race([gone, waitFor(`${name} did not answer`,
          async () => (await fetch(`${url}/ping`, { signal: AbortSignal.timeout(1000) })).ok, 30_000)]);
        gone.catch(() => undefined); // a later exit is the caller's business
      },
      async kill() {
        if (!node.child) return;
        node.child.kill('SIGKILL');
        await exited(node.child);
      },
    };
    nodes.push(node);
  }
  await Promise.all(nodes.map((n) => n.start()));
  const cluster: LocalCluster = {
    etcdEndpoint, nodes,
    async leader(timeoutMs = 30_000) {
      let found: LocalNode | undefined;
      await waitFor('no leader', async () => {
        for (const n of nodes) {
          if (!n.child || n.child.exitCode !== null || n.child.signalCode !== null) continue;
          const info = (await (await fetch(`${n.url}/info`, { signal: AbortSignal.timeout(1000) })).json()) as { state: string };
          if (info.state === 'leader') found = n;
        }
        return found !== undefined;
      }, timeoutMs);
      return found!;
    },
    async stop() {
      await Promise.all(nodes.map(async (n) => {
        if (!n.child) return;
        n.child.kill('SIGTERM');
        await exited(n.child);
      }));
      etcd.kill('SIGTERM');
      await exited(etcd);
    },
  };
  return cluster;
}

async function main(): Promise<void> {
  const cluster = await startLocalCluster({
    dir: resolve('data', 'cluster'), httpPorts: [2113, 2114, 2115], intPorts: [1112, 1113, 1114], etcdPorts: [2379, 2380],
    args: ['--log-level', 'warn'],
  });
  const leader = await cluster.leader();
  process.stdout.write(`cluster up: ${cluster.nodes.map((n) => n.url).join(', ')} (leader ${leader.name} at ${leader.url}); `
    + `etcd at ${cluster.etcdEndpoint}; data in ./data/cluster. Ctrl-C stops it.\n`);
  const stop = () => {
    cluster.stop().then(() => process.exit(0), () => process.exit(1));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === resolve(process.argv[1])) {
  main().catch((err) => {
    process.stderr.write(`${(err as Error).message}\n`);
    process.exit(1);
  });
}
