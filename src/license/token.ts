import { sign, verify, type KeyObject } from 'node:crypto';

// A license key is `<payload>.<signature>`: the payload is base64url(JSON of LicensePayload),
// the signature base64url(Ed25519 over the payload's base64url text as ASCII). Verifying
// reports the first thing wrong, in the order an operator would fix it: the key's shape, its
// signature, its fields, its expiry. Entitlements are the caller's question (enablement.ts).

export interface LicensePayload {
  licensee: string;
  /** ISO date (or date-time); the license is valid up to and including this instant (a date: its midnight UTC). */
  expires: string;
  entitlements: string[];
  /** ISO date-time the key was minted. */
  issued: string;
}

export type LicenseFailure = 'missing' | 'malformed' | 'wrongly signed' | 'expired';

export type LicenseCheck =
  | { valid: true; license: LicensePayload }
  | { valid: false; failure: LicenseFailure; message: string };

const SEGMENT = /^[A-Za-z0-9_-]+$/;

export function mintLicense(payload: LicensePayload, privateKey: KeyObject): string {
  const body = Buffer.from(JSON.stringify(payload)).toString('base64url');
  return `${body}.${sign(null, Buffer.from(body, 'ascii'), privateKey).toString('base64url')}`;
}

export function verifyLicense(key: string | undefined, publicKey: KeyObject, now: Date): LicenseCheck {
  const fail = (failure: LicenseFailure, message: string): LicenseCheck => ({ valid: false, failure, message });
  if (key === undefined || key.trim() === '') return fail('missing', 'no license key (--license-key)');
  const parts = key.trim().split('.');
  if (parts.length !== 2 || !parts.every((p) => SEGMENT.test(p))) {
    return fail('malformed', 'the license key is malformed: expected <payload>.<signature> in base64url');
  }
  const [body, signature] = parts;
  if (!verify(null, Buffer.from(body, 'ascii'), publicKey, Buffer.from(signature, 'base64url'))) {
    return fail('wrongly signed', 'the license key is wrongly signed: its signature does not match the license public key');
  }
  const payload = parsePayload(body);
  if (!payload) return fail('malformed', 'the license key is malformed: its payload lacks licensee, expires, entitlements or issued');
  if (now.getTime() > Date.parse(payload.expires)) {
    return fail('expired', `the license key of ${payload.licensee} expired on ${payload.expires}`);
  }
  return { valid: true, license: payload };
}

function parsePayload(body: string): LicensePayload | undefined {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
  const p = value as Partial<LicensePayload> | null;
  if (typeof p !== 'object' || p === null) return undefined;
  const date = (s: unknown) => typeof s === 'string' && !Number.isNaN(Date.parse(s));
  const ok = typeof p.licensee === 'string' && p.licensee !== '' && date(p.expires) && date(p.issued)
    && Array.isArray(p.entitlements) && p.entitlements.every((e) => typeof e === 'string');
  return ok ? { licensee: p.licensee!, expires: p.expires!, entitlements: p.entitlements!, issued: p.issued! } : undefined;
}
