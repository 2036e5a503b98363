import type { Logger } from 'pino';
import type { Config } from '../config/index.js';
import type { AppendResult, ExpectedVersion, ProposedEvent, Store } from '../store/index.js';
import { VERSION } from '../version.js';
import { ClusterNode, type ClusterHooks } from './cluster-node.js';
import type { LeaderRouting } from '../api/index.js';
import { plainTransport } from './transport.js';
import { TlsTransport } from './tls-transport.js';
import type { CertificateSet } from '../tls/index.js';
import { childLogger } from '../logger.js';

// The cluster's public face for node.ts: a ClusterNode made from the configuration (it takes the
// store's writer at once), joined once the HTTP server listens; its routing for the API, and
// its gossip. Nothing here is loaded with --cluster-size 1.

export type { ClusterHooks } from './cluster-node.js';

export interface Cluster {
  readonly state: string;
  /** Bytes of the leader's log this follower does not hold yet (as last heard); undefined unless it follows a leader. */
  readonly replicationLagBytes: number | undefined;
  join(httpPort: number, scheme: 'http' | 'https', hooks: ClusterHooks): Promise<void>;
  routing(): LeaderRouting;
  gossip(): Record<string, unknown>;
  /** Certificates reloaded (SIGHUP, POST /admin/reloadconfig): the links between nodes take them up. */
  reloadCertificates(certificates: CertificateSet, reservedName: string | undefined): void;
  /** Appends through the leader whatever this node's role (see ClusterNode.append). */
  append(stream: string, expected: ExpectedVersion, events: ProposedEvent[]): Promise<Pick<AppendResult, 'firstEventNumber' | 'position'>>;
  /** A request to a member's ClusterHooks.serve by its name (see ClusterNode.memberRequest). */
  memberRequest(name: string, request: unknown, timeoutMs: number): Promise<unknown>;
  /** The configured number of voting members. */
  readonly clusterSize: number;
  /** A leader gives up its term (another node leads); false on a follower. */
  resign(): Promise<boolean>;
  /** This node's priority in the next election (republished at once). */
  setPriority(priority: number): Promise<void>;
  stop(): Promise<void>;
}

export interface StartClusterOptions {
  store: Store;
  config: Config;
  /** This run of the node (a restart is a new instance): how the members tell a node's runs apart. */
  instanceId: string;
  log: Logger;
  /** The node's (mutual TLS between nodes), or undefined for plain TCP (--insecure, --dev). */
  certificates: CertificateSet | undefined;
}

export function startCluster({ store, config, instanceId, log, certificates }: StartClusterOptions): Cluster {
  const connectionLifetimeMs = config.clusterConnectionLifetime * 1000;
  const tls = certificates ? new TlsTransport(certificates, config.certificateReservedNodeCommonName, childLogger(log, 'cluster')) : undefined;
  const settings = {
    clusterSize: config.clusterSize, endpoints: config.etcdEndpoints.split(',').map((e) => e.trim()).filter(Boolean),
    clusterName: config.clusterName, leaseTtlSeconds: config.leaseTtl, intIp: config.intIp, connectionLifetimeMs,
    priority: config.nodePriority,
  };
  const node = new ClusterNode({ store, settings, instanceId, transport: tls ?? plainTransport, log });
  const httpHost = config.advertiseHttpIp ?? config.httpIp;
  return {
    get state() { return node.state; },
    get replicationLagBytes() { return node.replicationLagBytes; },
    async join(httpPort, scheme, hooks) {
      const port = config.advertiseHttpPort || httpPort;
      const host = httpHost.includes(':') ? `[${httpHost}]` : httpHost;
      await node.join({
        name: config.nodeName ?? `${httpHost}:${port}`, httpUrl: `${scheme}://${host}:${port}`,
        intHost: config.intIp, intPort: config.intPort,
      }, hooks);
    },
    routing: () => ({
      get name() { return node.self?.name ?? ''; },
      get isLeader() { return node.isLeader; },
      leaderHttpUrl: () => node.leaderHttpUrl(),
      onLeaderChange: (listener) => node.onLeaderChange(listener),
      trustedRoots: () => tls?.trustedRoots,
      get reservedName() { return tls?.reservedNodeName; },
      connectionLifetimeMs,
    }),
    reloadCertificates: (loaded, reservedName) => tls?.reload(loaded, reservedName),
    resign: () => node.resign(),
    setPriority: (priority) => node.setPriority(priority),
    append: (stream, expected, events) => node.append(stream, expected, events),
    memberRequest: (name, request, timeoutMs) => node.memberRequest(name, request, timeoutMs),
    clusterSize: config.clusterSize,
    gossip: () => gossipOf(node, httpHost, config),
    stop: () => node.stop(),
  };
}

function gossipOf(node: ClusterNode, serverIp: string, config: Config): Record<string, unknown> {
  const members = node.members().map(({ record, alive, leader }) => {
    const http = new URL(record.httpUrl);
    const httpIp = http.hostname.replace(/^\[|\]$/g, '');
    const httpPort = Number(http.port);
    return {
      instanceId: record.instanceId, nodeName: record.name, timeStamp: record.timeStamp,
      state: alive ? (leader ? 'Leader' : record.state) : 'Unknown', isAlive: alive,
      internalTcpIp: record.intHost, internalTcpPort: record.intPort, internalSecureTcpPort: 0,
      externalTcpIp: httpIp, externalTcpPort: 0, externalSecureTcpPort: 0,
      internalHttpEndPointIp: httpIp, internalHttpEndPointPort: httpPort, httpEndPointIp: httpIp, httpEndPointPort: httpPort,
      lastCommitPosition: record.logEnd, writerCheckpoint: record.logEnd, chaserCheckpoint: record.logEnd,
      epochPosition: record.epochPosition, epochNumber: record.epochTerm, epochId: `term-${record.epochTerm}`,
      nodePriority: record.priority, isReadOnlyReplica: false, esVersion: VERSION,
    };
  });
  const self = members[0];
  return { members, serverIp, serverPort: self ? self.httpEndPointPort : config.httpPort };
}
