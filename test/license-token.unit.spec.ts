import { createPublicKey, generateKeyPairSync, sign } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { DEFAULT_LICENSE_PUBLIC_KEY, LicensePublicKeyError, licensePublicKey, verifyLicense } from '../src/license/index.js';
import { foreignLicense, TEST_PRIVATE_KEY, TEST_PUBLIC_KEY_FILE, testLicense } from './support/license.js';

// License keys: <base64url payload>.<base64url Ed25519 signature>, each failure named.

const publicKey = licensePublicKey(TEST_PUBLIC_KEY_FILE);
const now = new Date('2026-06-01T12:00:00Z');

/** A key whose payload is the given text, correctly signed with the test key. */
function signedPayload(text: string): string {
  const body = Buffer.from(text).toString('base64url');
  return `${body}.${sign(null, Buffer.from(body), TEST_PRIVATE_KEY).toString('base64url')}`;
}

describe('verifyLicense', () => {
  it('accepts a key signed by the trusted key and gives its payload', () => {
    const check = verifyLicense(testLicense({ licensee: 'Acme', expires: '2027-01-31' }), publicKey, now);
    expect(check).toEqual({
      valid: true,
      license: { licensee: 'Acme', expires: '2027-01-31', entitlements: ['AUTO_SCAVENGE'], issued: '2025-01-01T00:00:00.000Z' },
    });
  });

  it('a missing or blank key is missing', () => {
    for (const key of [undefined, '', '  ']) {
      expect(verifyLicense(key, publicKey, now)).toMatchObject({ valid: false, failure: 'missing', message: 'no license key (--license-key)' });
    }
  });

  it('a key not shaped <payload>.<signature> in base64url is malformed', () => {
    for (const key of ['nonsense', 'a.b.c', 'abc.', '.abc', 'ab$c.def', `${testLicense()}.x`]) {
      expect(verifyLicense(key, publicKey, now), key).toMatchObject({ valid: false, failure: 'malformed' });
    }
  });

  it('a correctly signed payload that is not a license is malformed', () => {
    const good = { licensee: 'A', expires: '2027-01-01', entitlements: ['AUTO_SCAVENGE'], issued: '2025-01-01' };
    const payloads = [
      'not json', '[]', 'null', JSON.stringify({ ...good, licensee: '' }), JSON.stringify({ ...good, expires: 'soon' }),
      JSON.stringify({ ...good, entitlements: 'AUTO_SCAVENGE' }), JSON.stringify({ ...good, entitlements: [1] }),
      JSON.stringify({ licensee: 'A', expires: '2027-01-01', entitlements: [] }),
    ];
    for (const text of payloads) {
      expect(verifyLicense(signedPayload(text), publicKey, now), text).toMatchObject({ valid: false, failure: 'malformed' });
    }
    expect(verifyLicense(signedPayload(JSON.stringify(good)), publicKey, now).valid).toBe(true);
  });

  it('a key signed by another key, or changed after signing, is wrongly signed', () => {
    expect(verifyLicense(foreignLicense(), publicKey, now)).toMatchObject({ valid: false, failure: 'wrongly signed' });
    const [, signature] = testLicense().split('.');
    const forged = `${Buffer.from(JSON.stringify({ licensee: 'Mallory', expires: '2099-01-01', entitlements: ['AUTO_SCAVENGE'], issued: '2025-01-01' })).toString('base64url')}.${signature}`;
    expect(verifyLicense(forged, publicKey, now)).toMatchObject({ valid: false, failure: 'wrongly signed' });
    expect(verifyLicense(testLicense(), licensePublicKey(undefined), now)).toMatchObject({ valid: false, failure: 'wrongly signed' });
  });

  it('a key past its expiry is expired, naming the licensee and the date; up to the instant it is valid', () => {
    const key = testLicense({ licensee: 'Acme', expires: '2026-06-01T12:00:00Z' });
    expect(verifyLicense(key, publicKey, now).valid).toBe(true);
    expect(verifyLicense(key, publicKey, new Date(now.getTime() + 1))).toEqual({
      valid: false, failure: 'expired', message: 'the license key of Acme expired on 2026-06-01T12:00:00Z',
    });
  });
});

describe('licensePublicKey', () => {
  it('takes PEM text or a PEM file, and defaults to the project key', () => {
    const pem = readFileSync(TEST_PUBLIC_KEY_FILE, 'utf8');
    const der = (k: ReturnType<typeof licensePublicKey>) => k.export({ type: 'spki', format: 'der' }).toString('hex');
    expect(der(licensePublicKey(pem))).toBe(der(publicKey));
    expect(der(licensePublicKey(undefined))).toBe(der(createPublicKey(DEFAULT_LICENSE_PUBLIC_KEY)));
    expect(der(licensePublicKey(undefined))).not.toBe(der(publicKey));
  });

  it('rejects a missing file, text that is no key, and a key of another type', () => {
    expect(() => licensePublicKey('/no/such/key.pem')).toThrow(LicensePublicKeyError);
    expect(() => licensePublicKey('/no/such/key.pem')).toThrow(/Cannot read the license public key file \/no\/such\/key.pem/);
    expect(() => licensePublicKey('-----BEGIN PUBLIC KEY-----\nnope\n-----END PUBLIC KEY-----\n')).toThrow(/not a PEM public key/);
    const rsa = generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey.export({ type: 'spki', format: 'pem' }) as string;
    expect(() => licensePublicKey(rsa)).toThrow(/must be an Ed25519 key, not rsa/);
  });
});
