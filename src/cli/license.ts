import { createPrivateKey, generateKeyPairSync } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { mintLicense } from '../license/token.js';

// `npm run license -- keypair --out DIR` writes a new Ed25519 pair (license-private-key.pem,
// mode 600, and license-public-key.pem); `npm run license -- mint --private-key FILE --licensee
// NAME --expires DATE --entitlement AUTO_SCAVENGE [--entitlement ...]` prints a license key.
// Nodes check keys against --license-public-key (or the project's key). Exit 0, or 2 on bad arguments.

const USAGE = [
  'Usage: npm run license -- keypair --out DIR',
  '       npm run license -- mint --private-key FILE --licensee NAME --expires DATE --entitlement AUTO_SCAVENGE [--entitlement ...]',
].join('\n');

class UsageError extends Error {}

function keypair(argv: string[]): string {
  const { values } = parseArgs({ args: argv, options: { out: { type: 'string' } } });
  if (!values.out) throw new UsageError('--out is required.');
  mkdirSync(values.out, { recursive: true });
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const privatePath = join(values.out, 'license-private-key.pem');
  const publicPath = join(values.out, 'license-public-key.pem');
  writeFileSync(privatePath, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600, flag: 'wx' });
  writeFileSync(publicPath, publicKey.export({ type: 'spki', format: 'pem' }), { flag: 'wx' });
  return `wrote ${privatePath} (keep it secret) and ${publicPath} (give it to nodes as --license-public-key)`;
}

function mint(argv: string[], now: Date): string {
  const { values } = parseArgs({
    args: argv,
    options: {
      'private-key': { type: 'string' }, licensee: { type: 'string' }, expires: { type: 'string' },
      entitlement: { type: 'string', multiple: true },
    },
  });
  const missing = ['private-key', 'licensee', 'expires', 'entitlement'].filter((k) => values[k as keyof typeof values] === undefined);
  if (missing.length) throw new UsageError(`${missing.map((k) => `--${k}`).join(', ')} required.`);
  if (Number.isNaN(Date.parse(values.expires!))) throw new UsageError(`--expires ${values.expires} is not an ISO date (e.g. 2027-01-31).`);
  const privateKey = createPrivateKey(readFileSync(values['private-key']!, 'utf8'));
  if (privateKey.asymmetricKeyType !== 'ed25519') throw new UsageError(`--private-key must be an Ed25519 key, not ${privateKey.asymmetricKeyType}.`);
  return mintLicense({
    licensee: values.licensee!, expires: values.expires!, entitlements: values.entitlement!, issued: now.toISOString(),
  }, privateKey);
}

function main(argv: string[]): number {
  const [command, ...rest] = argv;
  try {
    if (command === 'keypair') process.stdout.write(`${keypair(rest)}\n`);
    else if (command === 'mint') process.stdout.write(`${mint(rest, new Date())}\n`);
    else if (command === '--help' || command === 'help') process.stdout.write(`${USAGE}\n`);
    else throw new UsageError(`Unknown command ${command ?? '(none)'}.`);
    return 0;
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n${USAGE}\n`);
    return 2;
  }
}

process.exitCode = main(process.argv.slice(2));
