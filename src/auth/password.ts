import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';

// Passwords are stored as scrypt hashes with a per-user random salt (node:crypto, no native deps).
const KEY_LENGTH = 32;
const COST = { N: 16384, r: 8, p: 1, maxmem: 64 * 1024 * 1024 };

export interface PasswordHash { salt: string; hash: string }

function derive(password: string, salt: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scrypt(password, salt, KEY_LENGTH, COST, (err, key) => (err ? reject(err) : resolve(key)));
  });
}

export async function hashPassword(password: string): Promise<PasswordHash> {
  const salt = randomBytes(16);
  const hash = await derive(password, salt);
  return { salt: salt.toString('base64'), hash: hash.toString('base64') };
}

/**
 * scrypt keys HMAC-SHA256 with the password, and HMAC pads short keys with zero bytes: 'pw' and
 * 'pw\0' derive the same hash. A password holding NUL is therefore never a match (and the
 * users API refuses to set one).
 */
export function hasNul(password: string): boolean {
  return password.includes('\u0000');
}

export async function verifyPassword(password: string, stored: PasswordHash): Promise<boolean> {
  if (hasNul(password)) return false;
  const expected = Buffer.from(stored.hash, 'base64');
  const actual = await derive(password, Buffer.from(stored.salt, 'base64'));
  return expected.length === actual.length && timingSafeEqual(expected, actual);
}
