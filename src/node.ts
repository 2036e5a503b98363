import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { ConfigError, OPTIONS, type Config, type ConfigSource, type LoadedConfig, type OptionName } from './config/index.js';
import { SCAVENGE_STATE_DIR, Store } from './store/index.js';
import { UserStore } from './auth/users.js';
import { AccessControl } from './auth/access.js';
import { buildApp, markDraining, routesOf, type Route } from './api/app.js';
import { createGrpcDoor, createListener, type GrpcServer } from './api/grpc/index.js';
import type { Listener } from './api/listener.js';
import { SendQueue } from './api/send-queue.js';
import { createVerbs } from './verbs/index.js';
import type { NodeControl, ReloadOutcome } from './api/context.js';
import { childLogger, createLogger, setLogLevel } from './logger.js';
import { StatsCollector } from './stats/collector.js';
import { loadCertificates, type CertificateSet } from './tls/certificates.js';
import { VERSION } from './version.js';
import { ProjectionManager, type RunProjections } from './projections/manager.js';
import { SubscriptionService } from './subscriptions/service.js';
import { Scavenger } from './scavenge/scavenger.js';
import { BackupService } from './backup/service.js';
import {
  AutoScavengeCoordinator, memberScavengeRequest, ReplicatedCluster, SingleNodeCluster, type Clock, type Ticker,
} from './autoscavenge/index.js';
import { join } from 'node:path';
import { autoScavengeEnablement, type AutoScavengeEnablement } from './license/index.js';
import { startCluster, type Cluster } from './cluster/index.js';

export { VERSION };

// Wires the subsystems together: the store, users and access control, then the HTTP API.
// Shutdown runs in the opposite order: stop accepting, finish the writes in flight, close RocksDB.

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


function defaultSources(): Record<OptionName, ConfigSource> {
  return Object.fromEntries(Object.keys(OPTIONS).map((n) => [n, 'default'])) as Record<OptionName, ConfigSource>;
}

export async function startNode(config: Config, options: NodeOptions = {}): Promise<RunningNode> {
  const log = options.log ?? createLogger(config.logLevel);
  const autoScavenge = autoScavengeEnablement(config, new Date());
  if (autoScavenge.fatal) throw new ConfigError(autoScavenge.fatal);
  if (config.dev) log.warn('dev mode (--dev): plain HTTP whatever --insecure says, auto-scavenge off; not for production');
  let current: LoadedConfig = { config, sources: options.sources ?? defaultSources() };
  let certificates: CertificateSet | undefined = servesPlainHttp(config) ? undefined : loadCertificates(config);
  const store = await Store.open({
    dir: config.db, inMemory: config.memDb, chunkSize: config.chunkSize, logCacheBytes: config.logCacheSize,
    maxEventBytes: config.maxAppendSize, streamInfoCacheSize: config.streamInfoCacheSize, dbCacheBytes: config.dbCacheSize,
    sharedReadBytes: config.sharedReadCacheSize, eventIdFilterBytes: config.eventIdFilterSize,
    boundedReads: config.clusterSize > 1,
  });
  const t = store.truncation;
  if (t && t.records === 0) log.info({ truncation: t }, `truncate checkpoint at ${t.position}: nothing past it to remove; cleared`);
  else if (t) {
    log.warn({ truncation: t }, `truncated the log to the truncate checkpoint: ${t.records} records from position ${t.position} to ${t.from} removed, `
      + `${t.streamsChanged} streams changed (${t.streamsRemoved} of them removed)`);
  }
  store.bus.onListenerFailure = (subscriber, err) => log.error({ err, subscriber }, `${subscriber} failed on a commit; the writer and the other followers go on`);
  const clustered = config.clusterSize > 1;
  if (!clustered) {
    const set = (Object.keys(OPTIONS) as OptionName[]).filter((n) => OPTIONS[n].group === 'Cluster' && n !== 'clusterSize' && current.sources[n] !== 'default');
    if (set.length > 0) log.warn({ options: set }, `${set.join(', ')} have no effect with --cluster-size 1 (a single node)`);
  }
  let cluster: Cluster | undefined;
  const users = new UserStore(store, childLogger(log, 'users'));
  const projections = new ProjectionManager(store, childLogger(log, 'projections'), {
    memoryLimitMb: config.projectionMemoryLimit, executionTimeoutMs: config.projectionExecutionTimeout,
    maxStateBytes: config.maxProjectionStateSize, partitionCache: config.projectionPartitionCache,
    runProjections: config.runProjections as RunProjections, startStandardProjections: config.startStandardProjections,
  });
  const subscriptions = new SubscriptionService(store, childLogger(log, 'subscriptions'));
  let port = 0;
  const scavenger: Scavenger = new Scavenger(store, {
    stateDir: join(store.location, SCAVENGE_STATE_DIR), chunkSize: config.chunkSize, disableMerging: config.disableScavengeMerging,
    historyMaxAgeDays: config.scavengeHistoryMaxAge, backendPageSize: config.scavengeBackendPageSize,
    backendCacheSize: config.scavengeBackendCacheSize, streamCacheCapacity: config.scavengeHashUsersCacheCapacity,
    // In a cluster the scavenge point and history go through the leader, whatever this node's role.
    ...(clustered ? { append: (stream, expected, events) => cluster!.append(stream, expected, events) } : {}),
    // The address the node is known by (a cluster's members each their own, even all on 0.0.0.0).
    nodeEndpoint: () => `${config.advertiseHttpIp ?? config.httpIp}:${config.advertiseHttpPort || port}`,
    backupRunning: (): boolean => backups.running, clustered,
  }, childLogger(log, 'scavenge'));
  const backups: BackupService = new BackupService(store, (): string | undefined => scavenger.current()?.scavengeId, VERSION, childLogger(log, 'backup'));
  if (config.alwaysKeepScavenged) log.warn('AlwaysKeepScavenged is deprecated and has no effect: a scavenge removes records in place and keeps every chunk');
  const instanceId = randomUUID();
  // The license check decides whether the coordinator runs (tests may decide instead, with their clock).
  const setting = options.autoScavenge ?? {};
  const disabledReason = setting.reason ?? autoScavenge.reason;
  // In a cluster: the members from gossip, and their node scavenges called over the replication links.
  const membership = clustered
    ? new ReplicatedCluster(store, {
      clusterSize: config.clusterSize,
      selfName: () => (cluster ? cluster.routing().name : ''),
      gossip: () => (cluster ? cluster.gossip() : { members: [] }),
      isLeader: () => cluster?.state === 'Leader',
      resign: async () => (cluster ? cluster.resign() : false),
      memberRequest: (name, request, timeoutMs) => (cluster
        ? cluster.memberRequest(name, request, timeoutMs) : Promise.reject(new Error('not in a cluster yet'))),
    })
    : new SingleNodeCluster(store, scavenger, () => ({ address: config.httpIp, port }), instanceId);
  const coordinator = new AutoScavengeCoordinator(store, membership, {
      enabled: setting.enabled ?? autoScavenge.enabled, disabledReason, clock: setting.clock,
      ticker: setting.ticker, roundIntervalMs: setting.roundIntervalMs,
    }, childLogger(log, 'auto-scavenge'));
  const sends = new SendQueue(config.httpSendBufferSize, config.httpSendTimeout * 1000, childLogger(log, 'http'));
  const stats = new StatsCollector({ store, dataPath: store.location, startTime: new Date(), sends });
  let app: FastifyInstance | undefined;
  let grpc: GrpcServer | undefined;
  let listener: Listener | undefined;
  let closing: Promise<void> | undefined;
  /** A cluster follower's own interrupted scavenges (Scavenger.recordInterrupted). */
  let interruptedRecorded: 'no' | 'recording' | 'yes' = 'no';
  let reloading = false;

  const close = (): Promise<void> => {
    closing ??= (async () => {
      log.info('shutting down: no new requests; finishing the writes in flight');
      if (app) {
        markDraining(app);
        // Answers in flight close their connections; a client that keeps an idle keep-alive
        // connection open past the grace period is cut off rather than holding the shutdown.
        const server = app.server;
        const force = setTimeout(() => server.closeAllConnections(), 5000).unref();
        grpc?.close();
        const stopped = listener?.close();
        server.closeIdleConnections();
        await app.close();
        await stopped;
        clearTimeout(force);
      }
      stats.stop();
      await cluster?.stop();
      await coordinator.stop();
      await backups.close();
      await scavenger.close();
      await subscriptions.stop();
      await projections.stop();
      users.stop();
      await store.close();
      log.info('shut down cleanly');
    })();
    return closing;
  };

  const reload = async (): Promise<ReloadOutcome> => {
    if (reloading) {
      log.warn('a configuration reload is already in progress; this trigger is dropped');
      return { result: 'AlreadyInProgress', message: 'A reload is already in progress.' };
    }
    reloading = true;
    try {
      const next = options.reloadConfig ? options.reloadConfig() : current;
      let loaded: CertificateSet | undefined;
      if (!servesPlainHttp(next.config)) {
        if (!certificates) throw new Error('the node was started insecure; switching to TLS needs a restart');
        loaded = loadCertificates(next.config);
      }
      // Everything validated: apply.
      setLogLevel(log, next.config.logLevel);
      if (loaded && certificates) {
        listener!.setSecureContext({ cert: loaded.cert, key: loaded.key, ...(loaded.ca.length ? { ca: loaded.ca } : {}) });
        log.info({ subject: loaded.subject, oldThumbprint: certificates.thumbprint, newThumbprint: loaded.thumbprint, validTo: loaded.validTo },
          'certificate reloaded');
        certificates = loaded;
        cluster?.reloadCertificates(loaded, next.config.certificateReservedNodeCommonName);
      }
      current = applyReloadable(current, next);
      log.info({ logLevel: next.config.logLevel }, 'configuration reloaded');
      return { result: 'Reloaded', message: 'The configuration was reloaded.' };
    } catch (err) {
      log.error({ err: (err as Error).message }, 'configuration reload failed; the previous configuration stays in force');
      return { result: 'Failed', message: (err as Error).message };
    } finally {
      reloading = false;
    }
  };

  const node: NodeControl = {
    version: VERSION,
    stats,
    currentConfig: () => current,
    gossip: () => (cluster ? cluster.gossip() : gossipOf(instanceId, current.config, port, store)),
    state: () => (cluster ? cluster.state : 'Leader'),
    resign: async () => (cluster ? cluster.resign() : false),
    requestShutdown: () => {
      void close().then(() => options.onShutdown?.());
    },
    reload,
  };

  const defaultUsers = { adminPassword: config.defaultAdminPassword, opsPassword: config.defaultOpsPassword };
  // What runs on the leader only: on a single node at the start, in a cluster once this node leads.
  const lead = async (): Promise<void> => {
    if (clustered) await users.createDefaults(defaultUsers);
    await projections.start();
    await subscriptions.start();
    if (clustered) {
      // In the background: its history writes wait for the quorum, and leading does not wait for them.
      scavenger.open().catch((err: Error) => log.warn({ err: err.message }, 'SCAVENGING: could not record the interrupted scavenges'));
      // The coordinator runs on the leader: followers first, then this node resigns and the next leader's coordinator scavenges it.
      coordinator.start();
    }
  };
  try {
    if (clustered) cluster = startCluster(store, config, instanceId, log, certificates);
    await users.start(clustered ? undefined : defaultUsers);
    if (!clustered) await lead();
    const access = new AccessControl(store, config.allowAnonymousStreamAccess);
    const verbs = createVerbs(store, access);
    const tls = certificates ? { cert: certificates.cert, key: certificates.key, ...(certificates.ca.length ? { ca: certificates.ca } : {}) } : undefined;
    app = buildApp({ store, users, access, verbs, config, log: childLogger(log, 'http'), node, projections, subscriptions, scavenger, backups, autoScavenge: coordinator, sends },
      { cluster: cluster?.routing() });
    grpc = createGrpcDoor({ verbs, users, config, log: childLogger(log, 'grpc'), cluster: cluster?.routing() });
    await app.ready();
    // One port: HTTP/1.1 for the HTTP API, HTTP/2 for gRPC (api/listener.ts).
    listener = createListener(app.server, grpc.http2, tls);
    stats.watch(listener.server);
    port = await listener.listen(config.httpIp, config.httpPort);
  } catch (err) {
    stats.stop();
    await cluster?.stop();
    await backups.close();
    await scavenger.close();
    await subscriptions.stop();
    await projections.stop();
    grpc?.close();
    await listener?.close();
    await app?.close();
    await store.close();
    throw err;
  }
  const host = config.httpIp.includes(':') ? `[${config.httpIp}]` : config.httpIp;
  const url = `${certificates ? 'https' : 'http'}://${host}:${port}`;
  if (cluster) {
    try {
      await cluster.join(port, certificates ? 'https' : 'http', {
        lead,
        // The leader's coordinator calls this node's scavenger over the replication link.
        led: () => coordinator.roleChanged(),
        serve: (request) => memberScavengeRequest(scavenger, request),
        // A follower records its own scavenges that a kill interrupted, through the leader, once.
        follow: () => {
          if (interruptedRecorded !== 'no') return;
          interruptedRecorded = 'recording';
          scavenger.recordInterrupted().then(() => { interruptedRecorded = 'yes'; }, (err: Error) => {
            interruptedRecorded = 'no'; // again when it next follows
            log.warn({ err: err.message }, 'SCAVENGING: could not record the interrupted scavenges');
          });
        },
        restart: (reason) => {
          if (closing) return; // closing already (a shutdown, or a restart under way)
          void close().then(() => options.onRestart?.(reason));
        },
      });
    } catch (err) {
      await close();
      throw err;
    }
  } else {
    await scavenger.open();
    coordinator.start();
  }
  log.info({ url, db: config.memDb ? '(in memory)' : store.location, events: store.recordCount, streams: store.streamCount,
    ...(certificates ? { certificate: certificates.subject, thumbprint: certificates.thumbprint } : {}) },
  `node listening on ${url}, data in ${config.memDb ? 'memory' : store.location}, ${store.recordCount} events loaded`);
  if (coordinator.enabled) log.info({ plugin: 'auto-scavenge', version: VERSION }, `"AutoScavenge" "${VERSION}" plugin enabled`);
  else log.info({ plugin: 'auto-scavenge', reason: disabledReason }, `auto-scavenge disabled: ${disabledReason}`);
  return { url, port, store, log, routes: routesOf(app), autoScavenge, close, reload };
}

function servesPlainHttp(config: Config): boolean {
  return config.insecure || config.dev;
}

/** Options a reload applies; the others (paths, ports...) take effect at the next start. */
const RELOADABLE: readonly OptionName[] = [
  'logLevel', 'certificateFile', 'certificatePrivateKeyFile', 'trustedRootCertificatesPath', 'certificateReservedNodeCommonName',
];

function applyReloadable(current: LoadedConfig, next: LoadedConfig): LoadedConfig {
  const config = { ...current.config } as Record<OptionName, unknown>;
  const sources = { ...current.sources };
  for (const name of RELOADABLE) {
    config[name] = next.config[name];
    sources[name] = next.sources[name];
  }
  return { config: config as Config, sources };
}

function gossipOf(instanceId: string, config: Config, port: number, store: Store) {
  const self = {
    instanceId, timeStamp: new Date().toISOString(), state: 'Leader', isAlive: true,
    internalTcpIp: config.httpIp, internalTcpPort: 0, internalSecureTcpPort: 0,
    externalTcpIp: config.httpIp, externalTcpPort: 0, externalSecureTcpPort: 0,
    internalHttpEndPointIp: config.httpIp, internalHttpEndPointPort: port,
    httpEndPointIp: config.httpIp, httpEndPointPort: port,
    lastCommitPosition: store.headPosition, writerCheckpoint: store.logEnd, chaserCheckpoint: store.logEnd,
    epochPosition: 0, epochNumber: 0, epochId: '00000000-0000-0000-0000-000000000000',
    nodePriority: 0, isReadOnlyReplica: false, esVersion: VERSION,
  };
  return { members: [self], serverIp: config.httpIp, serverPort: port };
}
