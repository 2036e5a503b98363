// The ONE option table. Every option is named once here (camelCase); its command-line flag
// (--kebab-case), YAML key (PascalCase) and environment variable (SVC_UPPER_SNAKE) are derived
// from that name, so the four sources can never disagree about what an option is called.

export type OptionKind = 'string' | 'int' | 'bool' | 'enum' | 'size';

export interface OptionSpec {
  readonly kind: OptionKind;
  readonly group: string;
  readonly default: string | number | boolean | undefined;
  readonly help: string;
  readonly values?: readonly string[];
  readonly min?: number;
  readonly max?: number;
  readonly secret?: boolean;
}

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

export const OPTIONS = {
  config: {
    kind: 'string', group: 'Application', default: undefined,
    help: 'Path to a YAML configuration file (keys as in the YAML column of --help).',
  },
  db: {
    kind: 'string', group: 'Database', default: './data',
    help: 'Directory holding the RocksDB database (created if missing).',
  },
  dev: {
    kind: 'bool', group: 'Application', default: false,
    help: 'Development mode for local work: serves plain HTTP even with --insecure false (no certificates needed), logs a warning that the node is in dev mode, and keeps auto-scavenge off (explicitly enabling it stops the start).',
  },
  memDb: {
    kind: 'bool', group: 'Database', default: false,
    help: 'Keep the database in memory only (tmpfs); nothing survives a restart.',
  },
  streamInfoCacheSize: {
    kind: 'int', group: 'Database', default: 100_000, min: 100, max: 100_000_000,
    help: 'Streams whose information (number, last event number) is kept in memory; the others are read from the database when used.',
  },
  chunkSize: {
    kind: 'size', group: 'Database', default: 256 * 1024 * 1024, min: 4096, max: 2 ** 40,
    help: 'Size in bytes of a chunk: the range of log positions the scavenger weighs and rewrites as a unit.',
  },
  logCacheSize: {
    kind: 'size', group: 'Database', default: 64 * 1024 * 1024, min: 0, max: 2 ** 40,
    help: 'Bytes of the most recent log records kept in memory, so that reads of recent data (projections, feeds) skip RocksDB (0: none).',
  },
  dbCacheSize: {
    kind: 'size', group: 'Database', default: 64 * 1024 * 1024, min: 1024 * 1024, max: 2 ** 32 - 1,
    help: 'Bytes of RocksDB\'s block cache: recently read blocks of the log, the stream index and stream information.',
  },
  sharedReadCacheSize: {
    kind: 'size', group: 'Database', default: 32 * 1024 * 1024, min: 0, max: 2 ** 40,
    help: 'Bytes of decoded log records shared by the projections reading the log, so that projections near each other read and decode it once (0: each reads on its own).',
  },
  eventIdFilterSize: {
    kind: 'size', group: 'Database', default: 8 * 1024 * 1024, min: 0, max: 2 ** 31,
    help: 'Bytes of the in-memory filter of stored event ids, which answers most idempotency checks of new events without a database read (0: none; ~10 bits per id keeps its false positives near 1%).',
  },
  httpIp: {
    kind: 'string', group: 'Interface', default: '127.0.0.1',
    help: 'IP address the HTTP server listens on.',
  },
  httpPort: {
    kind: 'int', group: 'Interface', default: 2113, min: 0, max: 65535,
    help: 'TCP port of the node (0 picks a free port): the HTTP API over HTTP/1.1 and the gRPC API over HTTP/2, told apart per connection.',
  },
  clusterSize: {
    kind: 'int', group: 'Cluster', default: 1, min: 1, max: 7,
    help: 'Number of voting nodes in the cluster. 1: a single node as ever (no etcd). 3 (or 5): each node keeps its own copy of the log; one leader elected through etcd acknowledges a write once a majority holds it.',
  },
  etcdEndpoints: {
    kind: 'string', group: 'Cluster', default: 'http://127.0.0.1:2379',
    help: 'Comma-separated etcd client URLs (cluster size > 1): membership, leader election on a lease, and the leader\'s term live there.',
  },
  clusterName: {
    kind: 'string', group: 'Cluster', default: 'svc',
    help: 'Name of the cluster: the etcd key prefix its nodes share (several clusters may use one etcd).',
  },
  nodeName: {
    kind: 'string', group: 'Cluster', default: undefined,
    help: 'Name of this node within its cluster (unique; cluster size > 1). Unset: the advertised HTTP address (ip:port).',
  },
  advertiseHttpIp: {
    kind: 'string', group: 'Cluster', default: undefined,
    help: 'Address other nodes and clients use to reach this node\'s HTTP server (307 Location, forwarded writes, gossip). Unset: --http-ip.',
  },
  advertiseHttpPort: {
    kind: 'int', group: 'Cluster', default: 0, min: 0, max: 65535,
    help: 'Port other nodes and clients use to reach this node\'s HTTP server (0: the port it listens on).',
  },
  intIp: {
    kind: 'string', group: 'Cluster', default: '127.0.0.1',
    help: 'IP address the internal replication server listens on (cluster size > 1); also advertised to the other nodes.',
  },
  intPort: {
    kind: 'int', group: 'Cluster', default: 1112, min: 0, max: 65535,
    help: 'TCP port of the internal replication server: the leader ships the log to its followers there (0 picks a free port).',
  },
  leaseTtl: {
    kind: 'int', group: 'Cluster', default: 2, min: 2, max: 60,
    help: 'Seconds of this node\'s etcd lease: a leader that cannot renew it within this time stops acknowledging writes, and another node takes over (failover takes about this long).',
  },
  nodePriority: {
    kind: 'int', group: 'Cluster', default: 0, min: -2_147_483_648, max: 2_147_483_647,
    help: 'This node\'s priority in leader elections (cluster size > 1): among nodes whose logs are equally up to date, the higher priority leads. It takes effect at the next election (it never starts one); POST /admin/node/priority/{n} changes it until the node restarts.',
  },
  clusterConnectionLifetime: {
    kind: 'int', group: 'Cluster', default: 600, min: 1, max: 86_400,
    help: 'Seconds a connection between nodes (replication, forwarded requests) lives before it is replaced by a new one: a certificate reloaded by SIGHUP or POST /admin/reloadconfig takes effect between nodes within this time.',
  },
  logLevel: {
    kind: 'enum', group: 'Logging', default: 'info', values: LOG_LEVELS,
    help: 'Log level of the structured (pino) log written to stdout.',
  },
  defaultAdminPassword: {
    kind: 'string', group: 'Default User', default: 'changeit', secret: true,
    help: 'Password of the admin user created on the first start of a new database.',
  },
  defaultOpsPassword: {
    kind: 'string', group: 'Default User', default: 'changeit', secret: true,
    help: 'Password of the ops user created on the first start of a new database.',
  },
  allowAnonymousStreamAccess: {
    kind: 'bool', group: 'Authentication', default: false,
    help: 'Let requests without credentials read and write streams whose ACL grants $all.',
  },
  insecureGrpcUser: {
    kind: 'enum', group: 'Authentication', default: 'system', values: ['system', 'anonymous'],
    help: 'Who a gRPC call without credentials runs as on a plain (--insecure) node. The official gRPC clients send no credentials over a plain connection, '
      + 'so `system` (every operation allowed, as the established server does in insecure mode) lets them work; `anonymous` applies the rules of a request without credentials, as over HTTP. '
      + 'Calls with credentials are authenticated either way, and a TLS node always takes a call without credentials as anonymous.',
  },
  disableHttpCaching: {
    kind: 'bool', group: 'Interface', default: false,
    help: 'Answer every read with no-cache instead of caching immutable pages for a year.',
  },
  httpSendBufferSize: {
    kind: 'size', group: 'Interface', default: 32 * 1024 * 1024, min: 64 * 1024, max: 2 ** 40,
    help: 'Bytes of feed pages the node holds made and not yet taken by their clients, for all HTTP connections together. '
      + 'A big page is written a part (~64 KiB, or one entry if bigger) at a time, the next only once the client has taken the one before, '
      + 'so a client that stops reading holds one part; past this total, the next parts of every page wait until some are taken or their connections closed.',
  },
  httpSendTimeout: {
    kind: 'int', group: 'Interface', default: 30, min: 1, max: 3600,
    help: 'Seconds a client may leave a part of a feed page untaken (it stopped reading) before its connection is closed, which frees what it held.',
  },
  insecure: {
    kind: 'bool', group: 'Certificate', default: true,
    help: 'Serve plain HTTP without TLS or certificates (the default for a node on loopback). Set false to serve HTTPS.',
  },
  certificateFile: {
    kind: 'string', group: 'Certificate', default: undefined,
    help: 'PEM file with the node certificate (and its chain); reloaded by POST /admin/reloadconfig or SIGHUP.',
  },
  certificatePrivateKeyFile: {
    kind: 'string', group: 'Certificate', default: undefined,
    help: 'PEM file with the private key of the node certificate.',
  },
  trustedRootCertificatesPath: {
    kind: 'string', group: 'Certificate', default: undefined,
    help: 'Directory (or PEM file) of trusted root certificates the node certificate must chain to.',
  },
  certificateReservedNodeCommonName: {
    kind: 'string', group: 'Certificate', default: undefined,
    help: 'Common name the node certificate must carry (wildcards like *.example.com allowed); checked on start and reload.',
  },
  runProjections: {
    kind: 'enum', group: 'Projections', default: 'All', values: ['None', 'System', 'All'],
    help: 'Which projections may run: None, only the System ones, or All.',
  },
  startStandardProjections: {
    kind: 'bool', group: 'Projections', default: true,
    help: 'Create the system projections enabled on a new database (otherwise they are created disabled).',
  },
  projectionMemoryLimit: {
    kind: 'int', group: 'Projections', default: 128, min: 16, max: 4096,
    help: 'Memory limit in MB of the sandbox (isolate) of each running projection.',
  },
  projectionExecutionTimeout: {
    kind: 'int', group: 'Projections', default: 5000, min: 10, max: 600_000,
    help: 'CPU time in ms a projection may spend on one batch of events (or on its definition) before it faults.',
  },
  projectionPartitionCache: {
    kind: 'int', group: 'Projections', default: 10_000, min: 1, max: 10_000_000,
    help: 'Partitions whose state a running projection keeps in its sandbox; the others are read from their checkpoints when an event needs them (projections without checkpoints keep all theirs, within --projection-memory-limit).',
  },
  maxProjectionStateSize: {
    kind: 'size', group: 'Projections', default: 0, min: 0, max: 16 * 1024 * 1024,
    help: 'Largest state + result of one projection partition, in bytes (0: no limit of its own; a partition is still stored as one event within --max-append-size); a projection over it faults.',
  },
  maxProjectionEmitsPerEvent: {
    kind: 'int', group: 'Projections', default: 250_000, min: 0, max: 100_000_000,
    help: 'Events one event may make a projection emit (emit, linkTo, linkStreamTo, copyTo) before the projection faults (0: no limit of its own; the sandbox\'s --projection-memory-limit still bounds them).',
  },
  maxAppendSize: {
    kind: 'size', group: 'Database', default: 4 * 1024 * 1024, min: 1024, max: 64 * 1024 * 1024,
    help: 'Largest data + metadata of one event, in bytes; larger events answer 413.',
  },
  disableScavengeMerging: {
    kind: 'bool', group: 'Scavenge', default: false,
    help: 'Do not merge adjacent scavenged chunks whose remaining bytes fit in one chunk (merging only joins entries of the chunk table: no data moves).',
  },
  scavengeHistoryMaxAge: {
    kind: 'int', group: 'Scavenge', default: 30, min: 1, max: 36500,
    help: 'Days the scavenge history streams ($scavenges, $scavenges-{id}) are kept ($maxAge).',
  },
  alwaysKeepScavenged: {
    kind: 'bool', group: 'Scavenge', default: false,
    help: 'Deprecated and without effect: a scavenged chunk is always kept (records are removed in place). Accepted with a warning.',
  },
  scavengeBackendPageSize: {
    kind: 'size', group: 'Scavenge', default: 16 * 1024, min: 1024, max: 1024 * 1024,
    help: 'Block size in bytes of the scavenge state database (its own RocksDB under <db>/scavenging).',
  },
  scavengeBackendCacheSize: {
    kind: 'size', group: 'Scavenge', default: 64 * 1024 * 1024, min: 0, max: 2 ** 40,
    help: 'Block cache in bytes of the scavenge state database.',
  },
  scavengeHashUsersCacheCapacity: {
    kind: 'int', group: 'Scavenge', default: 100_000, min: 1, max: 100_000_000,
    help: 'Streams whose scavenge data (metadata, tombstone, discard points) is kept in memory while a scavenge runs; the others are read from the scavenge database.',
  },
  autoScavengeEnabled: {
    kind: 'bool', group: 'Auto-scavenge', default: undefined,
    help: 'Run the auto-scavenge coordinator (YAML also AutoScavenge: {Enabled: ...}). Unset: on when a valid license key with the AUTO_SCAVENGE entitlement is given and the node is neither in dev mode nor in memory. true together with --dev or --mem-db stops the start.',
  },
  licenseKey: {
    kind: 'string', group: 'Licensing', default: undefined, secret: true,
    help: 'License key: a token signed with the licensing private key, naming the licensee, the expiry and the entitlements (AUTO_SCAVENGE). Never logged.',
  },
  licensePublicKey: {
    kind: 'string', group: 'Licensing', default: undefined,
    help: 'Ed25519 public key license keys are verified against, as PEM text or the path of a PEM file; unset: the project\'s key (src/license/public-key.ts).',
  },
} as const satisfies Record<string, OptionSpec>;

export type OptionName = keyof typeof OPTIONS;

// A bool without a default is tri-state: undefined means "not set", which the option's help defines.
type ValueOf<S extends OptionSpec> = S['kind'] extends 'bool' ? (S['default'] extends undefined ? boolean | undefined : boolean)
  : S['kind'] extends 'int' | 'size' ? number
  : S['default'] extends undefined ? string | undefined : string;

export type Config = { -readonly [K in OptionName]: ValueOf<(typeof OPTIONS)[K]> };

export function cliFlag(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}

export function envVar(name: string): string {
  return `SVC_${name.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()}`;
}

export function yamlKey(name: string): string {
  return name[0].toUpperCase() + name.slice(1);
}
