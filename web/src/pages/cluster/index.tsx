import { useState } from 'preact/hooks';
import { getJson } from '../../api';
import { ErrorBox, formatBytes, formatNumber, usePoll } from '../../components';
import { formatTime } from '../streams/client';
import type { ViewProps } from '../../view';
import './cluster.css';

// The cluster as this node sees it: every member with its role and state, whether it is alive,
// its log positions (writer and chaser checkpoints, the epoch it is in) and how far its log is
// behind the leader's. From GET /gossip (the member records the node publishes; a lone node
// reports itself as the one leader) and GET /info (this node's state), every two seconds.
// GET /gossip is open to everyone on the node (clients discover a cluster before they log in),
// so every user sees this page.

const REFRESH_MS = 2000;

/** One member as GET /gossip gives it (src/cluster/index.ts, src/node-control.ts). */
export interface GossipMember {
  instanceId: string;
  nodeName?: string;
  timeStamp: string;
  state: string;
  isAlive: boolean;
  httpEndPointIp: string;
  httpEndPointPort: number;
  writerCheckpoint: number;
  chaserCheckpoint: number;
  lastCommitPosition: number;
  epochNumber: number;
  epochPosition: number;
  epochId: string;
  nodePriority: number;
  isReadOnlyReplica: boolean;
  esVersion?: string;
}

interface Gossip {
  members: GossipMember[];
  serverIp: string;
  serverPort: number;
}

interface Info {
  state: string;
  esVersion: string;
}

const addressOf = (m: GossipMember) => `${m.httpEndPointIp}:${m.httpEndPointPort}`;
const roleOf = (m: GossipMember) => (!m.isAlive ? 'Unreachable' : m.state === 'Leader' ? 'Leader' : m.isReadOnlyReplica ? 'Read-only replica' : 'Follower');

export default function Cluster(_props: ViewProps) {
  const [gossip, setGossip] = useState<Gossip>();
  const [info, setInfo] = useState<Info>();
  const { error } = usePoll(async () => {
    const [g, i] = await Promise.all([getJson<Gossip>('/gossip'), getJson<Info>('/info')]);
    setGossip(g);
    setInfo(i);
  }, REFRESH_MS);

  const members = gossip?.members ?? [];
  const leader = members.find((m) => m.isAlive && m.state === 'Leader');
  const alive = members.filter((m) => m.isAlive).length;
  const self = gossip ? members.find((m) => m.httpEndPointIp === gossip.serverIp && m.httpEndPointPort === gossip.serverPort) : undefined;
  return (
    <section aria-labelledby="cluster-title">
      <h1 id="cluster-title">Cluster</h1>
      <ErrorBox error={error} />
      <dl class="cards" aria-label="Cluster figures">
        <div><dt>This node</dt><dd data-figure="node-state">{info?.state ?? '–'}</dd></div>
        <div><dt>Members</dt><dd data-figure="members">{gossip ? members.length : '–'}</dd></div>
        <div><dt>Alive</dt><dd data-figure="alive">{gossip ? alive : '–'}</dd></div>
        <div><dt>Leader</dt><dd data-figure="leader" class="address">{leader ? (leader.nodeName ?? addressOf(leader)) : gossip ? 'none' : '–'}</dd></div>
        <div><dt>Leader's log end</dt><dd>{leader ? formatNumber(leader.writerCheckpoint) : '–'}</dd></div>
      </dl>
      {gossip && members.length === 1 ? <p class="muted">A single node: it leads, and it is the whole cluster.</p> : null}
      {gossip === undefined && !error ? <p class="muted">Loading…</p> : null}
      {gossip ? (
        <table class="members" aria-label="Members">
          <thead>
            <tr>
              <th scope="col">Member</th><th scope="col">Role</th><th scope="col">State</th><th scope="col">Alive</th>
              <th scope="col">Writer checkpoint</th><th scope="col">Chaser checkpoint</th><th scope="col">Epoch</th>
              <th scope="col">Lag behind leader</th><th scope="col">Priority</th><th scope="col">Last update</th>
            </tr>
          </thead>
          <tbody>
            {members.map((m) => {
              const lag = leader && m !== leader ? Math.max(0, leader.writerCheckpoint - m.writerCheckpoint) : undefined;
              return (
                <tr key={m.instanceId} data-member={m.instanceId} class={m.isAlive ? undefined : 'dead'}>
                  <th scope="row">
                    <span class="address">{m.nodeName ?? addressOf(m)}</span>
                    {m.nodeName ? <div class="muted address">{addressOf(m)}</div> : null}
                    {m === self ? <div class="self">this node</div> : null}
                  </th>
                  <td data-cell="role">{roleOf(m)}</td>
                  <td data-cell="state">{m.state}</td>
                  <td>{m.isAlive ? 'yes' : 'no'}</td>
                  <td class="num" data-cell="writer">{formatNumber(m.writerCheckpoint)}</td>
                  <td class="num" data-cell="chaser">{formatNumber(m.chaserCheckpoint)}</td>
                  <td class="num" data-cell="epoch">{m.epochNumber} <span class="muted">at {formatNumber(m.epochPosition)}</span></td>
                  <td class="num" data-cell="lag" title={lag === undefined ? undefined : `${formatNumber(lag)} bytes of log`}>
                    {m === leader ? <span class="muted">(leader)</span> : lag === undefined ? '–' : formatBytes(lag)}
                  </td>
                  <td class="num">{m.nodePriority}</td>
                  <td class="time">{formatTime(m.timeStamp)}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      ) : null}
    </section>
  );
}
