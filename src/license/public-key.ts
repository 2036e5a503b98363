import { createPublicKey, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';

// The project's licensing public key. Its private key is kept off the repository by whoever
// issues the project's licenses; operators who run their own licensing mint with their own
// private key (`npm run license -- keypair`, then `mint`) and point --license-public-key here.

export const DEFAULT_LICENSE_PUBLIC_KEY = `-----BEGIN PUBLIC KEY-----
MCowBQYDK2VwAyEAT+cUwDMTX2C2SA251Q5YiHVu2JMwj6IChNGFRHe+fKI=
-----END PUBLIC KEY-----
`;

/** Thrown when --license-public-key names no readable Ed25519 public key. */
export class LicensePublicKeyError extends Error {}

/** The key of --license-public-key (PEM text, or the path of a PEM file), or the project's. */
export function licensePublicKey(option: string | undefined): KeyObject {
  if (option === undefined) return createPublicKey(DEFAULT_LICENSE_PUBLIC_KEY);
  let pem = option;
  if (!option.includes('-----BEGIN')) {
    try {
      pem = readFileSync(option, 'utf8');
    } catch (err) {
      throw new LicensePublicKeyError(`Cannot read the license public key file ${option} (--license-public-key): ${(err as Error).message}`);
    }
  }
  let key: KeyObject;
  try {
    key = createPublicKey(pem);
  } catch (err) {
    throw new LicensePublicKeyError(`--license-public-key is not a PEM public key: ${(err as Error).message}`);
  }
  if (key.asymmetricKeyType !== 'ed25519') {
    throw new LicensePublicKeyError(`--license-public-key must be an Ed25519 key, not ${key.asymmetricKeyType}`);
  }
  return key;
}
