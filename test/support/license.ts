import { createPrivateKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { mintLicense, type LicensePayload } from '../../src/license/index.js';

// The committed TEST key pair (fixtures/license/, for tests only) and keys minted with it.

export const TEST_PUBLIC_KEY_FILE = fileURLToPath(new URL('../../fixtures/license/test-license-public-key.pem', import.meta.url));
export const TEST_PRIVATE_KEY_FILE = fileURLToPath(new URL('../../fixtures/license/test-license-private-key.pem', import.meta.url));
export const TEST_PRIVATE_KEY: KeyObject = createPrivateKey(readFileSync(TEST_PRIVATE_KEY_FILE, 'utf8'));

export function testLicense(overrides: Partial<LicensePayload> = {}, privateKey: KeyObject = TEST_PRIVATE_KEY): string {
  return mintLicense({
    licensee: 'Test Co', expires: '2099-01-01', entitlements: ['AUTO_SCAVENGE'], issued: '2025-01-01T00:00:00.000Z', ...overrides,
  }, privateKey);
}

/** A license signed by a throwaway key the nodes do not trust. */
export function foreignLicense(): string {
  return testLicense({}, generateKeyPairSync('ed25519').privateKey);
}
