import { useState } from 'preact/hooks';
import { getJson } from '../api';
import { ErrorBox, formatBytes, formatNumber, usePoll } from '../components';
import type { ViewProps } from '../view';

// Node info and the figures an operator watches, from GET /info, /stats and /gossip every two
// seconds. Rates are differences between two samples of the node's counters.

interface Sample {
  at: number;
  written: number;
  read: number;
  stats: any;
}

const REFRESH_MS = 2000;

function readCount(stats: any): number {
  const r = stats?.svc?.readIndex ?? {};
  return (r.cachedRecord ?? 0) + (r.notCachedRecord ?? 0);
}

export default function Dashboard(_props: ViewProps) {
  const [info, setInfo] = useState<any>();
  const [members, setMembers] = useState<any[]>([]);
  const [samples, setSamples] = useState<Sample[]>([]);
  const { error } = usePoll(async () => {
    const [i, stats, gossip] = await Promise.all([getJson('/info'), getJson('/stats'), getJson('/gossip').catch(() => undefined)]);
    setInfo(i);
    setMembers(gossip?.members ?? []);
    const sample = { at: performance.now(), written: stats?.svc?.writer?.recordsWritten ?? 0, read: readCount(stats), stats };
    setSamples((s) => [...s.slice(-1), sample]);
  }, REFRESH_MS);

  const last = samples[samples.length - 1];
  const prev = samples.length > 1 ? samples[0] : undefined;
  const seconds = prev && last ? (last.at - prev.at) / 1000 : 0;
  const rate = (k: 'written' | 'read') => (prev && last && seconds > 0 ? Math.max(0, last[k] - prev[k]) / seconds : NaN);
  const stats = last?.stats;
  const queues = Object.values(stats?.svc?.queue ?? {}) as any[];
  const drives = Object.entries(stats?.sys?.drive ?? {}) as Array<[string, any]>;

  return (
    <section aria-labelledby="dashboard-title">
      <h1 id="dashboard-title">Dashboard</h1>
      <ErrorBox error={error} />
      <dl class="cards" aria-label="Node figures">
        <div><dt>State</dt><dd data-figure="state">{info?.state ?? '–'}</dd></div>
        <div><dt>Version</dt><dd>{info?.esVersion ?? '–'}</dd></div>
        <div><dt>Events written/s</dt><dd data-figure="written-rate">{formatNumber(rate('written'), 1)}</dd></div>
        <div><dt>Events read/s</dt><dd data-figure="read-rate">{formatNumber(rate('read'), 1)}</dd></div>
        <div><dt>Events written</dt><dd data-figure="written-total">{last ? formatNumber(last.written) : '–'}</dd></div>
        <div><dt>Log position</dt><dd>{formatNumber(stats?.svc?.checksum ?? NaN)}</dd></div>
        <div><dt>Memory (RSS)</dt><dd>{formatBytes(stats?.proc?.mem ?? NaN)}</dd></div>
        <div><dt>CPU</dt><dd>{stats ? `${formatNumber(stats.proc.cpu, 1)} %` : '–'}</dd></div>
        <div><dt>Connections</dt><dd>{formatNumber(stats?.proc?.tcp?.connections ?? NaN)}</dd></div>
      </dl>
      <h2>Queues</h2>
      <table>
        <thead><tr><th>Queue</th><th>Length</th><th>Peak</th><th>Items/s</th><th>Idle %</th><th>Processed</th></tr></thead>
        <tbody>
          {queues.map((q) => (
            <tr key={q.queueName}>
              <td>{q.queueName}</td><td>{q.length}</td><td>{q.lengthLifetimePeak}</td><td>{q.avgItemsPerSecond}</td>
              <td>{formatNumber(q.idleTimePercent, 1)}</td><td>{formatNumber(q.totalItemsProcessed)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <h2>Disk</h2>
      <table>
        <thead><tr><th>Drive</th><th>Used</th><th>Available</th><th>Usage</th></tr></thead>
        <tbody>
          {drives.map(([path, d]) => (
            <tr key={path}><td>{path}</td><td>{formatBytes(d.usedBytes)}</td><td>{formatBytes(d.availableBytes)}</td><td>{formatNumber(d.usage, 1)} %</td></tr>
          ))}
        </tbody>
      </table>
      <h2>Members</h2>
      <table>
        <thead><tr><th>Address</th><th>State</th><th>Alive</th><th>Writer checkpoint</th></tr></thead>
        <tbody>
          {members.map((m) => (
            <tr key={m.instanceId}>
              <td>{m.httpEndPointIp}:{m.httpEndPointPort}</td><td>{m.state}</td><td>{m.isAlive ? 'yes' : 'no'}</td>
              <td>{formatNumber(m.writerCheckpoint)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}
