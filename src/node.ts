import { randomUUID } from 'node:crypto';
import { statfsSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { ConfigError, OPTIONS, type Config, type ConfigSource, type LoadedConfig, type OptionName } from './config/index.js';
import { freeBytes, SCAVENGE_STATE_DIR, Store, type SpaceEvent } from './store/index.js';
import { AccessControl, UserStore } from './auth/index.js';
import { openDoors, SendQueue, type Doors, type NodeControl, type ReloadOutcome, type Route } from './api/index.js';
import { createVerbs } from './verbs/index.js';
import { childLogger, createLogger } from './logger.js';
import { StatsCollector } from './stats/index.js';
import { NodeMetrics } from './metrics/index.js';
import type { CertificateSet } from './tls/index.js';
import { VERSION } from './version.js';
import { ProjectionManager, type ManagerOptions, type RunProjections } from './projections/index.js';
import { SubscriptionService } from './subscriptions/index.js';
import { Scavenger, type ScavengerOptions } from './scavenge/index.js';
import { BackupService } from './backup/index.js';
import {
  AutoScavengeCoordinator, memberScavengeRequest, ReplicatedCluster, SingleNodeCluster, type Clock, type Ticker,
} from './autoscavenge/index.js';
import { autoScavengeEnablement, type AutoScavengeEnablement } from './license/index.js';
import type { Cluster, ClusterHooks } from './cluster/index.js';
import { certificatesFor, createNodeControl, secureContextOf } from './node-control.js';
import { ServiceList } from './service-list.js';

export { VERSION };

// Wires the subsystems together. startNode is one list of services, started in order and stopped
// by the same list in reverse (service-list.ts), single node and cluster alike: the entries only a
// cluster has are left out of a single node's list. A shutdown first stops taking requests and
// finishes those in flight, a cluster node then leaves the cluster, and RocksDB closes last; a
// start that fails half way stops what it started the same way and rejects with its error.

export interface RunningNode {
  readonly url: string;
  readonly port: number;
  readonly store: Store;
  readonly log: Logger;
  /** Every method and URL template the HTTP API answers. */
  readonly routes: readonly Route[];
  /** Whether auto-scavenge runs on this node, and why (decided at start; see src/license/enablement.ts). */
  readonly autoScavenge: Readonly<AutoScavengeEnablement>;
  close(): Promise<void>;
  /** Re-reads the configuration sources; applies the log level and certificates, or keeps the old ones. */
  reload(): Promise<ReloadOutcome>;
}

export interface NodeOptions {
  log?: Logger;
  /** Where each option's value came from (for /info/options). */
  sources?: Record<OptionName, ConfigSource>;
  /** Reads the configuration sources again (for reloads); without it a reload re-applies `config`. */
  reloadConfig?: () => LoadedConfig;
  /** Called after POST /admin/shutdown has answered and the node has closed. */
  onShutdown?: () => void;
  /**
   * A cluster node must start again (it stopped leading, or must truncate its log first: see
   * src/cluster/cluster-node.ts); called once it has closed. Without it the node stays closed.
   */
  onRestart?: (reason: string) => void;
  /**
   * The auto-scavenge coordinator's clock and rounds (tests drive them); `enabled` overrides what
   * the license check decided (src/license: a node without a valid license has the feature off).
   */
  autoScavenge?: { enabled?: boolean; reason?: string; clock?: Clock; ticker?: Ticker; roundIntervalMs?: number };
}

export async function startNode(config: Config, options: NodeOptions = {}): Promise<RunningNode> {
  const log = options.log ?? createLogger(config.logLevel);
  // What refuses the configuration does so before anything starts (no database is opened).
  const autoScavenge = autoScavengeEnablement(config, new Date());
  if (autoScavenge.fatal) throw new ConfigError(autoScavenge.fatal);
  const loaded: LoadedConfig = { config, sources: options.sources ?? defaultSources() };
  warnAboutOptions(loaded, log);
  const certificates = certificatesFor(config);
  const clustered = config.clusterSize > 1;
  const instanceId = randomUUID();
  // The license check decides whether the coordinator runs (tests may decide instead, with their clock).
  const setting = options.autoScavenge ?? {};
  const disabledReason = setting.reason ?? autoScavenge.reason;
  const coordinatorOptions = {
    enabled: setting.enabled ?? autoScavenge.enabled, disabledReason, clock: setting.clock, ticker: setting.ticker, roundIntervalMs: setting.roundIntervalMs,
  };
  const defaultUsers = { adminPassword: config.defaultAdminPassword, opsPassword: config.defaultOpsPassword };

  // Each is set by its entry in the list below, which starts it before every entry that uses it.
  let store!: Store;
  let stats!: StatsCollector;
  let cluster: Cluster | undefined;
  let users!: UserStore;
  let projections!: ProjectionManager;
  let subscriptions!: SubscriptionService;
  let scavenger!: Scavenger;
  let backups!: BackupService;
  let coordinator!: AutoScavengeCoordinator;
  let access!: AccessControl;
  let control!: NodeControl;
  let doors!: Doors;
  let port = 0; // known once the node listens
  // The node serves (its last step started): the projections prepared at the start follow the log from then on.
  let nowServing!: () => void;
  const serving = new Promise<void>((resolve) => { nowServing = resolve; });

  const services = new ServiceList(log);
  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      log.info('shutting down: no new requests; finishing the writes in flight');
      await services.stop();
      log.info('shut down cleanly');
    })();
    return closing;
  };
  const restart = (reason: string): void => {
    if (closing) return; // closing already (a shutdown, or a restart under way)
    void close().then(() => options.onRestart?.(reason));
  };

  // What big feed pages hold for their clients, all together (send-queue.ts).
  const sends = new SendQueue(config.httpSendBufferSize, config.httpSendTimeout * 1000, childLogger(log, 'http'));
  await services.start([
    { name: 'store', start: async () => {
      store = await openStore(config, log);
      return () => store.close();
    } },
    { name: 'stats', start: () => {
      stats = new StatsCollector({ store, dataPath: store.location, startTime: new Date(), sends });
      return () => stats.stop();
    } },
    // Takes hold of the store's writer at once: nothing is written here until this node leads.
    clustered && { name: 'cluster', start: async () => {
      // Loaded here, by a node of a cluster only: etcd's client and what it brings took ~250 ms of every start.
      const { startCluster } = await import('./cluster/index.js');
      cluster = startCluster({ store, config, instanceId, log, certificates });
      return () => cluster!.stop();
    } },
    // In a cluster the leader's services start once this node leads (clusterHooks), and stop here.
    { name: 'users', start: async () => {
      users = new UserStore(store, childLogger(log, 'users'));
      await users.start(clustered ? undefined : defaultUsers);
      return () => users.stop();
    } },
    { name: 'projections', start: async () => {
      projections = new ProjectionManager(store, childLogger(log, 'projections'), projectionOptions(config));
      if (!clustered) await projections.start(serving);
      return () => projections.stop();
    } },
    { name: 'persistent subscriptions', start: async () => {
      subscriptions = new SubscriptionService(store, childLogger(log, 'subscriptions'));
      if (!clustered) await subscriptions.start();
      return () => subscriptions.stop();
    } },
    { name: 'scavenger', start: () => {
      const scavengerOptions = scavengerOptionsOf({ config, store, cluster, port: () => port, backupRunning: () => backups.running });
      scavenger = new Scavenger(store, scavengerOptions, childLogger(log, 'scavenge'));
      return () => scavenger.close();
    } },
    { name: 'backups', start: () => {
      backups = new BackupService(store, () => scavenger.current()?.scavengeId, VERSION, childLogger(log, 'backup'));
      return () => backups.close();
    } },
    { name: 'auto-scavenge coordinator', start: () => {
      const membership = cluster
        ? replicatedMembership(store, cluster)
        : new SingleNodeCluster(store, scavenger, () => ({ address: config.httpIp, port }), instanceId);
      coordinator = new AutoScavengeCoordinator(store, membership, coordinatorOptions, childLogger(log, 'auto-scavenge'));
      return () => coordinator.stop();
    } },
    { name: 'access control', start: () => {
      access = new AccessControl(store, config.allowAnonymousStreamAccess);
      return () => access.stop();
    } },
    { name: 'HTTP and gRPC listener', start: async () => {
      control = createNodeControl({
        log, loaded, reloadConfig: options.reloadConfig, certificates, stats, store, cluster, instanceId, port: () => port,
        useCertificates: (next, nextConfig) => {
          doors.setSecureContext(secureContextOf(next));
          cluster?.reloadCertificates(next, nextConfig.certificateReservedNodeCommonName);
        },
        requestShutdown: () => { void close().then(() => options.onShutdown?.()); },
      });
      const metrics = new NodeMetrics({
        store, stats, projections, subscriptions, scavenger,
        role: () => control.state(), replicationLagBytes: () => cluster?.replicationLagBytes,
      });
      const verbs = createVerbs({ store, access, groups: subscriptions, projections, users, scavenger, node: control, counters: metrics.clients });
      doors = await openDoors({
        api: {
          store, users, access, verbs, config, log: childLogger(log, 'http'), node: control,
          projections, subscriptions, scavenger, backups, autoScavenge: coordinator, sends, metrics,
        },
        grpcLog: childLogger(log, 'grpc'), cluster: cluster?.routing(), tls: certificates && secureContextOf(certificates),
        watch: (server) => stats.watch(server),
      });
      port = doors.port;
      return () => doors.close(); // frees the port when a later entry fails to start
    } },
    // Both need the port: the scavenge history and the coordinator's view name this node by its address.
    // Their stops are the scavenger's and the coordinator's entries.
    !clustered && { name: 'scavenge history', start: () => scavenger.open() },
    !clustered && { name: 'auto-scavenge rounds', start: () => coordinator.start() },
    clustered && { name: 'cluster membership', start: async () => {
      await cluster!.join(port, certificates ? 'https' : 'http', clusterHooks({
        users, defaultUsers, projections, subscriptions, scavenger, coordinator, log, restart,
      }));
      // Leaves the cluster before the leader's services stop: their last writes are refused at once
      // rather than waiting for a quorum.
      return () => cluster!.stop();
    } },
    // Last, so that a shutdown first stops taking requests and lets those in flight finish.
    { name: 'requests', start: () => {
      store.loadIdFilter(); // (until it has read the stored ids, an append's id check reads RocksDB)
      nowServing();
      logStarted({ log, url: urlOf(config, port, certificates), config, store, certificates, autoScavenge: coordinator.enabled, disabledReason });
      return () => doors.close();
    } },
  ]);
  return {
    url: urlOf(config, port, certificates), port, store, log, routes: doors.routes, autoScavenge, close, reload: () => control.reload(),
  };
}

function defaultSources(): Record<OptionName, ConfigSource> {
  return Object.fromEntries(Object.keys(OPTIONS).map((n) => [n, 'default'])) as Record<OptionName, ConfigSource>;
}

/** Options set to no effect, said once at the start. */
function warnAboutOptions({ config, sources }: LoadedConfig, log: Logger): void {
  if (config.dev) log.warn('dev mode (--dev): plain HTTP whatever --insecure says, auto-scavenge off; not for production');
  if (config.clusterSize <= 1) {
    const set = (Object.keys(OPTIONS) as OptionName[]).filter((n) => OPTIONS[n].group === 'Cluster' && n !== 'clusterSize' && sources[n] !== 'default');
    if (set.length > 0) log.warn({ options: set }, `${set.join(', ')} have no effect with --cluster-size 1 (a single node)`);
  }
  if (config.alwaysKeepScavenged) log.warn('AlwaysKeepScavenged is deprecated and has no effect: a scavenge removes records in place and keeps every chunk');
}

/** Opens the store; says what a truncate checkpoint (left by a cluster node that had to drop its tail) removed. */
async function openStore(config: Config, log: Logger): Promise<Store> {
  const store = await Store.open({
    dir: config.db, inMemory: config.memDb, chunkSize: config.chunkSize, logCacheBytes: config.logCacheSize,
    maxEventBytes: config.maxAppendSize, streamInfoCacheSize: config.streamInfoCacheSize, dbCacheBytes: config.dbCacheSize,
    sharedReadBytes: config.sharedReadCacheSize, eventIdFilterBytes: config.eventIdFilterSize, deferIdFilterLoad: true,
    boundedReads: config.clusterSize > 1,
  });
  const t = store.truncation;
  if (t && t.records === 0) log.info({ truncation: t }, `truncate checkpoint at ${t.position}: nothing past it to remove; cleared`);
  else if (t) {
    log.warn({ truncation: t }, `truncated the log to the truncate checkpoint: ${t.records} records from position ${t.position} to ${t.from} removed, `
      + `${t.streamsChanged} streams changed (${t.streamsRemoved} of them removed)`);
  }
  store.bus.onListenerFailure = (subscriber, err) => log.error({ err, subscriber }, `${subscriber} failed on a commit; the writer and the other followers go on`);
  store.space.onListenerFailure = (subscriber, err) => log.error({ err, subscriber }, `${subscriber} failed on a change of the disk's state; the writer goes on`);
  store.space.subscribe((e) => logSpaceEpisode(log, store.location, e), 'the node log');
  return store;
}

/** One line when writes start failing for space and one when they succeed again, however many requests meet it between. */
function logSpaceEpisode(log: Logger, dir: string, e: SpaceEvent): void {
  if (e.kind === 'full') {
    const free = freeBytes(dir);
    log.error({ dir, freeBytes: free, reason: e.error.reason, since: e.since.toISOString() },
      `writes refused: no space left on device (${e.error.reason}); ${mib(free)} free on the data directory's file system; `
      + `writes resume by themselves once ${mib(e.error.resumeFreeBytes)} is free there (refused writes answer 507 meanwhile)`);
  } else {
    const ms = e.until.getTime() - e.since.getTime();
    log.info({ outOfSpaceMs: ms, refusedWrites: e.refusedWrites, since: e.since.toISOString() },
      `writes succeed again after ${(ms / 1000).toFixed(1)} s without space; ${e.refusedWrites} writes were refused meanwhile`);
  }
}

function mib(bytes: number | undefined): string {
  return bytes === undefined ? 'unknown' : `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

function projectionOptions(config: Config): ManagerOptions {
  return {
    memoryLimitMb: config.projectionMemoryLimit, executionTimeoutMs: config.projectionExecutionTimeout,
    maxStateBytes: config.maxProjectionStateSize, partitionCache: config.projectionPartitionCache,
    maxEmitsPerEvent: config.maxProjectionEmitsPerEvent,
    runProjections: config.runProjections as RunProjections, startStandardProjections: config.startStandardProjections,
  };
}

function scavengerOptionsOf({ config, store, cluster, port, backupRunning }: {
  config: Config; store: Store; cluster: Cluster | undefined; port: () => number; backupRunning: () => boolean;
}): ScavengerOptions {
  return {
    stateDir: join(store.location, SCAVENGE_STATE_DIR), chunkSize: config.chunkSize, disableMerging: config.disableScavengeMerging,
    historyMaxAgeDays: config.scavengeHistoryMaxAge, backendPageSize: config.scavengeBackendPageSize,
    backendCacheSize: config.scavengeBackendCacheSize, streamCacheCapacity: config.scavengeHashUsersCacheCapacity,
    // In a cluster the scavenge point and history go through the leader, whatever this node's role.
    ...(cluster ? { append: cluster.append } : {}),
    // The address the node is known by (a cluster's members each their own, even all on 0.0.0.0).
    nodeEndpoint: () => `${config.advertiseHttpIp ?? config.httpIp}:${config.advertiseHttpPort || port()}`,
    backupRunning, clustered: cluster !== undefined,
  };
}

/** In a cluster: the members from gossip, and their node scavenges called over the replication links. */
function replicatedMembership(store: Store, cluster: Cluster): ReplicatedCluster {
  return new ReplicatedCluster(store, {
    clusterSize: cluster.clusterSize,
    selfName: () => cluster.routing().name,
    gossip: () => cluster.gossip(),
    isLeader: () => cluster.state === 'Leader',
    resign: () => cluster.resign(),
    memberRequest: (name, request, timeoutMs) => cluster.memberRequest(name, request, timeoutMs),
  });
}

interface LeaderServices {
  users: UserStore;
  defaultUsers: { adminPassword: string; opsPassword: string };
  projections: ProjectionManager;
  subscriptions: SubscriptionService;
  scavenger: Scavenger;
  coordinator: AutoScavengeCoordinator;
  log: Logger;
  /** The node closes and starts again (NodeOptions.onRestart). */
  restart(reason: string): void;
}

/** What a cluster node runs as its role changes (src/cluster/cluster-node.ts calls these). */
function clusterHooks(s: LeaderServices): ClusterHooks {
  /** This node's own interrupted scavenges, recorded once it follows (Scavenger.recordInterrupted). */
  let interruptedRecorded: 'no' | 'recording' | 'yes' = 'no';
  return {
    // What runs on the leader only; a single node starts it with the node.
    lead: async () => {
      await s.users.createDefaults(s.defaultUsers);
      await s.projections.start();
      await s.subscriptions.start();
      // In the background: its history writes wait for the quorum, and leading does not wait for them.
      s.scavenger.open().catch((err: Error) => s.log.warn({ err: err.message }, 'SCAVENGING: could not record the interrupted scavenges'));
      // The coordinator runs on the leader: followers first, then this node resigns and the next leader's coordinator scavenges it.
      s.coordinator.start();
    },
    // The leader's coordinator calls this node's scavenger over the replication link.
    led: () => s.coordinator.roleChanged(),
    serve: (request) => memberScavengeRequest(s.scavenger, request),
    // A follower records its own scavenges that a kill interrupted, through the leader, once.
    follow: () => {
      if (interruptedRecorded !== 'no') return;
      interruptedRecorded = 'recording';
      s.scavenger.recordInterrupted().then(() => { interruptedRecorded = 'yes'; }, (err: Error) => {
        interruptedRecorded = 'no'; // again when it next follows
        s.log.warn({ err: err.message }, 'SCAVENGING: could not record the interrupted scavenges');
      });
    },
    restart: s.restart,
  };
}

function urlOf(config: Config, port: number, certificates: CertificateSet | undefined): string {
  const host = config.httpIp.includes(':') ? `[${config.httpIp}]` : config.httpIp;
  return `${certificates ? 'https' : 'http'}://${host}:${port}`;
}

/** The node's start line (tests and supervisors wait for it: it carries the url), and whether auto-scavenge runs. */
function logStarted({ log, url, config, store, certificates, autoScavenge, disabledReason }: {
  log: Logger; url: string; config: Config; store: Store; certificates: CertificateSet | undefined;
  autoScavenge: boolean; disabledReason: string | undefined;
}): void {
  const db = config.memDb ? '(in memory)' : store.location;
  log.info({ url, db, events: store.recordCount, streams: store.streamCount,
    ...(certificates ? { certificate: certificates.subject, thumbprint: certificates.thumbprint } : {}) },
  `node listening on ${url}, data in ${config.memDb ? 'memory' : store.location}, ${store.recordCount} events loaded`);
  if (autoScavenge) log.info({ plugin: 'auto-scavenge', version: VERSION }, `"AutoScavenge" "${VERSION}" plugin enabled`);
  else log.info({ plugin: 'auto-scavenge', reason: disabledReason }, `auto-scavenge disabled: ${disabledReason}`);
}
