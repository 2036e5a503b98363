import { createPrivateKey, generateKeyPairSync } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { mintLicense } from '../license/index.js';
import { commandArgs } from './args.js';

// `npm run license -- keypair --out DIR` writes a new Ed25519 pair (license-private-key.pem,
// mode 600, and license-public-key.pem); `npm run license -- mint --private-key FILE --licensee
// NAME --expires DATE --entitlement AUTO_SCAVENGE [--entitlement ...]` prints a license key.
// Nodes check keys against --license-public-key (or the project's key). Exit 0, or 2 on bad arguments.

const USAGE = [
  'Usage: npm run license -- keypair --out DIR',
  '       npm run license -- mint --private-key FILE --licensee NAME --expires DATE --entitlement AUTO_SCAVENGE [--entitlement ...]',
].join('\n');

function keypair(argv: string[]): number {
  const values = commandArgs(argv, { out: { type: 'string' } }, USAGE, ['out']);
  if (typeof values === 'number') return values;
  mkdirSync(values.out!, { recursive: true });
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const privatePath = join(values.out!, 'license-private-key.pem');
  const publicPath = join(values.out!, 'license-public-key.pem');
  writeFileSync(privatePath, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600, flag: 'wx' });
  writeFileSync(publicPath, publicKey.export({ type: 'spki', format: 'pem' }), { flag: 'wx' });
  process.stdout.write(`wrote ${privatePath} (keep it secret) and ${publicPath} (give it to nodes as --license-public-key)\n`);
  return 0;
}

function mint(argv: string[], now: Date): number {
  const values = commandArgs(argv, {
    'private-key': { type: 'string' }, licensee: { type: 'string' }, expires: { type: 'string' },
    entitlement: { type: 'string', multiple: true },
  }, USAGE, ['private-key', 'licensee', 'expires', 'entitlement']);
  if (typeof values === 'number') return values;
  if (Number.isNaN(Date.parse(values.expires!))) throw new UsageError(`--expires ${values.expires} is not an ISO date (e.g. 2027-01-31).`);
  const privateKey = createPrivateKey(readFileSync(values['private-key']!, 'utf8'));
  if (privateKey.asymmetricKeyType !== 'ed25519') throw new UsageError(`--private-key must be an Ed25519 key, not ${privateKey.asymmetricKeyType}.`);
  const key = mintLicense({
    licensee: values.licensee!, expires: values.expires!, entitlements: values.entitlement!, issued: now.toISOString(),
  }, privateKey);
  process.stdout.write(`${key}\n`);
  return 0;
}

class UsageError extends Error {}

function main(argv: string[]): number {
  const [command, ...rest] = argv;
  try {
    if (command === 'keypair') return keypair(rest);
    if (command === 'mint') return mint(rest, new Date());
    if (command === '--help' || command === 'help') {
      process.stdout.write(`${USAGE}\n`);
      return 0;
    }
    throw new UsageError(`Unknown command ${command ?? '(none)'}.`);
  } catch (err) {
    // a key file that cannot be read or parsed is a bad argument too
    process.stderr.write(`${(err as Error).message}\n${USAGE}\n`);
    return 2;
  }
}

process.exitCode = main(process.argv.slice(2));
