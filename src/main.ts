import { ConfigError, helpText, loadConfig } from './config/index.js';
import { startNode, VERSION } from './node.js';
import { staleConsole, staleSource } from './build-check.js';
import { restoreCommand } from './cli/index.js';

// `npm start` entry: read the configuration, start one node; SIGINT/SIGTERM shut it down
// cleanly, SIGHUP reloads the configuration (log level, certificates). `restore` restores a
// backup into a stopped node's data directory (src/cli/restore.ts).

async function main(argv: string[]): Promise<void> {
  if (argv[0] === 'restore') {
    process.exit(await restoreCommand(argv.slice(1)));
  }
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(`${helpText()}\n`);
    return;
  }
  if (argv.includes('--version')) {
    process.stdout.write(`${VERSION}\n`);
    return;
  }
  const staleServer = staleSource();
  const stale = staleServer ? `src/${staleServer}` : staleConsole();
  if (stale) {
    process.stderr.write(`The build in dist/ is older than the sources (${stale} changed since): run \`npm run build\`, then start again.\n`);
    process.exit(2);
  }
  const read = () => loadConfig(argv, process.env);
  let loaded;
  try {
    loaded = read();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  // Signals are taken from before the start: one that arrives while the node starts (a
  // supervisor that saw the start line) stops it cleanly once it has started.
  let signalled: string | undefined;
  let stop = (signal: string) => { signalled ??= signal; };
  process.once('SIGINT', () => stop('SIGINT'));
  process.once('SIGTERM', () => stop('SIGTERM'));
  // A cluster node that stopped leading, or must truncate its log, restarts in place (with the
  // configuration as it is now); signals then stop the running one.
  let node!: Awaited<ReturnType<typeof startNode>>;
  const start = async (config: typeof loaded.config): Promise<void> => {
    node = await startNode(config, {
      sources: loaded.sources,
      reloadConfig: read,
      onShutdown: () => process.exit(0),
      onRestart: (reason) => {
        node.log.warn({ reason }, 'restarting the node');
        let next = loaded.config;
        try {
          next = read().config;
        } catch (err) {
          node.log.error({ err: (err as Error).message }, 'the configuration no longer loads; restarting with the one in force');
        }
        start(next).catch((err) => {
          process.stderr.write(`Failed to restart: ${(err as Error).message}\n`);
          process.exit(1);
        });
      },
    });
  };
  await start(loaded.config);
  stop = (signal: string) => {
    node.log.info({ signal }, 'signal received');
    node.close().then(() => process.exit(0), (err) => {
      node.log.error({ err }, 'shutdown failed');
      process.exit(1);
    });
  };
  if (signalled) stop(signalled);
  // bin/start.sh (`npm start`) preloads jemalloc when the machine has it; say which one runs.
  node.log.info({ allocator: /jemalloc/.test(process.env.LD_PRELOAD ?? '') ? 'jemalloc' : 'glibc malloc' }, 'memory allocator');
  process.on('SIGHUP', () => {
    node.log.info('SIGHUP received: reloading the configuration');
    void node.reload();
  });
}

main(process.argv.slice(2)).catch((err) => {
  if (err instanceof ConfigError) { // a contradiction only the start can see (e.g. --auto-scavenge-enabled with --dev)
    process.stderr.write(`${err.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`Failed to start: ${(err as Error).message}\n`);
  process.exit(1);
});
