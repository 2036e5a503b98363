import { readFileSync } from 'node:fs';
import { ConfigError, helpText, loadConfig } from './config/index.js';
import { startNode } from './node.js';

// `npm start` entry: read the configuration, start one node, shut down cleanly on a signal.

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

async function main(argv: string[]): Promise<void> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(`${helpText()}\n`);
    return;
  }
  if (argv.includes('--version')) {
    process.stdout.write(`${version()}\n`);
    return;
  }
  let loaded;
  try {
    loaded = loadConfig(argv, process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const node = await startNode(loaded.config);
  const stop = (signal: string) => {
    node.log.info({ signal }, 'signal received');
    node.close().then(() => process.exit(0), (err) => {
      node.log.error({ err }, 'shutdown failed');
      process.exit(1);
    });
  };
  process.once('SIGINT', () => stop('SIGINT'));
  process.once('SIGTERM', () => stop('SIGTERM'));
}

main(process.argv.slice(2)).catch((err) => {
  process.stderr.write(`Failed to start: ${(err as Error).message}\n`);
  process.exit(1);
});
