import type { Logger } from 'pino';
import type { SecureContextOptions } from 'node:tls';
import type { Config, LoadedConfig, OptionName } from './config/index.js';
import type { Store } from './store/index.js';
import type { Cluster } from './cluster/index.js';
import type { NodeControl, ReloadOutcome } from './api/index.js';
import type { StatsCollector } from './stats/index.js';
import { loadCertificates, type CertificateSet } from './tls/index.js';
import { setLogLevel } from './logger.js';
import { VERSION } from './version.js';

// The node's own controls, as the node and admin endpoints use them (NodeControl in
// api/context.ts): its gossip and state, a resign, its priority, a shutdown request, and a configuration
// reload, which applies the log level and the certificates at once, or keeps the old ones if
// anything in the new configuration does not load. Every other option waits for the next start.

export interface NodeControlOptions {
  log: Logger;
  /** The configuration the node started with. */
  loaded: LoadedConfig;
  /** Reads the configuration sources again; without it a reload re-applies the one in force. */
  reloadConfig?: () => LoadedConfig;
  /** What the node serves with, or undefined for plain HTTP (switching to TLS needs a restart). */
  certificates: CertificateSet | undefined;
  /** Puts reloaded certificates in force for new connections (the listener, the links between cluster nodes). */
  useCertificates(certificates: CertificateSet, config: Config): void;
  stats: StatsCollector;
  store: Store;
  /** The cluster this node is a member of; undefined on a single node (always Leader). */
  cluster: Cluster | undefined;
  instanceId: string;
  /** The port the node listens on. */
  port(): number;
  requestShutdown(): void;
}

export function createNodeControl(options: NodeControlOptions): NodeControl {
  const { cluster } = options;
  let current = options.loaded;
  let certificates = options.certificates;
  let reloading = false;
  // Not an option a reload applies: a runtime change would be lost to the file's value on every SIGHUP.
  let priority = options.loaded.config.nodePriority;

  const reload = async (): Promise<ReloadOutcome> => {
    const { log } = options;
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
        options.useCertificates(loaded, next.config);
        log.info({ subject: loaded.subject, oldThumbprint: certificates.thumbprint, newThumbprint: loaded.thumbprint, validTo: loaded.validTo },
          'certificate reloaded');
        certificates = loaded;
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

  return {
    version: VERSION,
    stats: options.stats,
    currentConfig: () => current,
    gossip: () => (cluster ? cluster.gossip() : singleNodeGossip(options.instanceId, current.config, options.port(), options.store, priority)),
    state: () => (cluster ? cluster.state : 'Leader'),
    resign: async () => (cluster ? cluster.resign() : false),
    setPriority: async (next) => {
      priority = next;
      await cluster?.setPriority(next);
    },
    requestShutdown: options.requestShutdown,
    reload,
  };
}

/** The node's certificates, or undefined when it serves plain HTTP. Throws what does not load. */
export function certificatesFor(config: Config): CertificateSet | undefined {
  return servesPlainHttp(config) ? undefined : loadCertificates(config);
}

/** --insecure, or --dev whatever --insecure says. */
function servesPlainHttp(config: Config): boolean {
  return config.insecure || config.dev;
}

/** What the listener takes of a certificate set. */
export function secureContextOf(certificates: CertificateSet): SecureContextOptions {
  return { cert: certificates.cert, key: certificates.key, ...(certificates.ca.length ? { ca: certificates.ca } : {}) };
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

function singleNodeGossip(instanceId: string, config: Config, port: number, store: Store, priority: number) {
  const self = {
    instanceId, timeStamp: new Date().toISOString(), state: 'Leader', isAlive: true,
    internalTcpIp: config.httpIp, internalTcpPort: 0, internalSecureTcpPort: 0,
    externalTcpIp: config.httpIp, externalTcpPort: 0, externalSecureTcpPort: 0,
    internalHttpEndPointIp: config.httpIp, internalHttpEndPointPort: port,
    httpEndPointIp: config.httpIp, httpEndPointPort: port,
    lastCommitPosition: store.headPosition, writerCheckpoint: store.logEnd, chaserCheckpoint: store.logEnd,
    epochPosition: 0, epochNumber: 0, epochId: '00000000-0000-0000-0000-000000000000',
    nodePriority: priority, isReadOnlyReplica: false, esVersion: VERSION,
  };
  return { members: [self], serverIp: config.httpIp, serverPort: port };
}
