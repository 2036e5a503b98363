import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll } from 'vitest';
import { freePort } from '../../bench/processes.js';
import { spawnNode, type NodeProcess } from './process.js';

// A cluster for tests: etcd (/usr/bin/etcd, Debian's etcd-server) on loopback ports with a temp
// data directory, and three nodes as child processes (dist/src/main.js) with their own temp
// directories and fixed ports (a node that restarts in place keeps its addresses). dispose()
// kills everything and removes the directories.

export const ETCD_BINARY = process.env.SVC_TEST_ETCD ?? '/usr/bin/etcd';

export interface Etcd {
  endpoint: string;
  dir: string;
  /** SIGKILLs etcd (its data stays). */
  kill(): Promise<void>;
  /** Starts it again on the same data and ports. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

export async function startEtcd(): Promise<Etcd> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-etcd-'));
  const [client, peer] = [await freePort(), await freePort()];
  const endpoint = `http://127.0.0.1:${client}`;
  let child: ChildProcess | undefined;
  const launch = async () => {
    const started = spawn(ETCD_BINARY, [
      '--name', 'test', '--data-dir', dir, '--listen-client-urls', endpoint, '--advertise-client-urls', endpoint,
      '--listen-peer-urls', `http://127.0.0.1:${peer}`, '--initial-advertise-peer-urls', `http://127.0.0.1:${peer}`,
      '--initial-cluster', `test=http://127.0.0.1:${peer}`, '--log-level', 'error',
    ], { stdio: ['ignore', 'pipe', 'pipe'] });
    child = started;
    let out = '';
    started.stdout!.on('data', (d) => { out += d; });
    started.stderr!.on('data', (d) => { out += d; });
    const deadline = Date.now() + 15_000;
    for (;;) {
      if (started.exitCode !== null) throw new Error(`etcd exited:\n${out}`);
      try {
        const res = await fetch(`${endpoint}/health`);
        if (res.ok) return;
      } catch { /* not yet */ }
      if (Date.now() > deadline) throw new Error(`etcd did not start:\n${out}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const kill = async () => {
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
  };
  await launch();
  return {
    endpoint, dir, kill, restart: launch,
    async stop() {
      await kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface ClusterMember {
  name: string;
  dir: string;
  httpPort: number;
  intPort: number;
  url: string;
  proc: NodeProcess | undefined;
  /** SIGSTOPped by the test: ready() does not wait for it. */
  frozen: boolean;
  /** Starts the member's process (again) on its directory and ports. */
  start(): Promise<void>;
  /** SIGKILL, waits for the exit. */
  kill(): Promise<void>;
}

export interface TestCluster {
  etcd: Etcd;
  members: ClusterMember[];
  /** Waits until one member leads and every running member follows it, caught up; returns the leader. */
  ready(timeoutMs?: number): Promise<ClusterMember>;
  dispose(): Promise<void>;
}

/**
 * A cluster of `size` nodes for a test file: started (and caught up) before its tests, disposed
 * after them. `set` receives it, its leader and followers as they started (a test that fails
 * over keeps its own variables up to date).
 */
export function clusterForFile(size: number, set: (started: { cluster: TestCluster; leader: ClusterMember; followers: ClusterMember[] }) => void): void {
  let cluster: TestCluster | undefined;
  beforeAll(async () => {
    cluster = await startCluster(size);
    const leader = await cluster.ready();
    set({ cluster, leader, followers: cluster.members.filter((m) => m !== leader) });
  }, 60_000);
  afterAll(async () => {
    await cluster?.dispose();
  });
}

export interface GossipMember {
  nodeName: string;
  state: string;
  isAlive: boolean;
  httpEndPointPort: number;
  writerCheckpoint: number;
  nodePriority: number;
}

export async function gossip(url: string): Promise<GossipMember[]> {
  const res = await fetch(`${url}/gossip`, { signal: AbortSignal.timeout(2000) });
  return ((await res.json()) as { members: GossipMember[] }).members;
}

export interface ClusterOptions {
  /** Options of one node (certificates...), after `extraArgs`. */
  nodeArgs?: (name: string) => string[];
  /** https: the nodes serve TLS (the test's client must trust their CA). */
  scheme?: 'http' | 'https';
}

export async function startCluster(size = 3, extraArgs: string[] = [], options: ClusterOptions = {}): Promise<TestCluster> {
  const etcd = await startEtcd();
  const clusterName = `test-${randomUUID()}`;
  const members: ClusterMember[] = [];
  for (let i = 1; i <= size; i++) {
    const [httpPort, intPort] = [await freePort(), await freePort()];
    const dir = mkdtempSync(join(tmpdir(), `svc-cluster-n${i}-`));
    const m: ClusterMember = {
      name: `n${i}`, dir, httpPort, intPort, url: `${options.scheme ?? 'http'}://127.0.0.1:${httpPort}`, proc: undefined, frozen: false,
      async start() {
        m.proc = await spawnNode([
          '--db', dir, '--http-port', String(m.httpPort), '--int-port', String(m.intPort), '--cluster-size', String(size),
          '--etcd-endpoints', etcd.endpoint, '--cluster-name', clusterName, '--node-name', m.name, ...extraArgs,
          ...(options.nodeArgs?.(m.name) ?? []),
        ]);
      },
      async kill() {
        const proc = m.proc;
        if (!proc || proc.child.exitCode !== null || proc.child.signalCode !== null) return;
        proc.child.kill('SIGKILL');
        await proc.exited;
      },
    };
    members.push(m);
  }
  await Promise.all(members.map(async (m) => {
    for (let attempt = 1; ; attempt++) {
      try {
        await m.start();
        return;
      } catch (err) {
        // Another test's process took a port between freePort() and this node's listen. Before its
        // first start no one knows a member's ports, so it starts again on new ones.
        if (attempt >= 3 || !/EADDRINUSE/.test((err as Error).message)) throw err;
        m.httpPort = await freePort();
        m.intPort = await freePort();
        m.url = `${options.scheme ?? 'http'}://127.0.0.1:${m.httpPort}`;
      }
    }
  }));
  const cluster: TestCluster = {
    etcd, members,
    async ready(timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      let last = '';
      for (;;) {
        const running = members.filter((m) => !m.frozen && m.proc && m.proc.child.exitCode === null && m.proc.child.signalCode === null);
        try {
          const views = await Promise.all(running.map(async (m) => {
            const members = await gossip(m.url);
            return { m, members, self: members.find((g) => g.nodeName === m.name) };
          }));
          const leaders = views.filter((v) => v.self?.state === 'Leader');
          last = views.map((v) => `${v.m.name}:${v.self?.state}`).join(' ');
          // Settled, and every node's gossip shows every running node as it is.
          const agreed = views.every((v) => views.every((o) => v.members.some((g) => g.nodeName === o.m.name && g.isAlive && g.state === o.self?.state)));
          if (leaders.length === 1 && agreed && views.every((v) => v.self?.state === 'Leader' || v.self?.state === 'Follower')) return leaders[0].m;
        } catch (err) {
          last = (err as Error).message;
        }
        if (Date.now() > deadline) throw new Error(`the cluster did not settle (${last})\n${running.map((m) => `--- ${m.name}\n${m.proc!.output().slice(-3000)}`).join('\n')}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    async dispose() {
      await Promise.all(members.map((m) => m.kill()));
      await etcd.stop();
      for (const m of members) rmSync(m.dir, { recursive: true, force: true });
    },
  };
  return cluster;
}
