import type { Config } from '../config/index.js';
import { LicensePublicKeyError, licensePublicKey } from './public-key.js';
import { verifyLicense } from './token.js';

// Whether this node runs auto-scavenge, and why — decided once at start from the configuration
// and the license key. The reason is logged as one line so the troubleshooting checklist
// (license, dev mode, in-memory database) is answerable from the log alone.

export const AUTO_SCAVENGE_ENTITLEMENT = 'AUTO_SCAVENGE';

export interface AutoScavengeEnablement {
  enabled: boolean;
  reason: string;
  /** Set when the configuration contradicts itself: the start stops with this message. */
  fatal?: string;
}

type EnablementConfig = Pick<Config, 'autoScavengeEnabled' | 'dev' | 'memDb' | 'licenseKey' | 'licensePublicKey'>;

export function autoScavengeEnablement(config: EnablementConfig, now: Date): AutoScavengeEnablement {
  const explicit = config.autoScavengeEnabled;
  const conflict = config.dev ? 'dev mode (--dev)' : config.memDb ? 'an in-memory database (--mem-db)' : undefined;
  if (explicit === true && conflict) {
    const fatal = `AutoScavenge is not compatible with ${conflict}: --auto-scavenge-enabled true cannot be combined with it.`;
    return { enabled: false, reason: fatal, fatal };
  }
  if (explicit === false) return { enabled: false, reason: 'disabled by configuration (--auto-scavenge-enabled false)' };
  if (conflict) return { enabled: false, reason: `the node runs with ${conflict}` };
  let publicKey;
  try {
    publicKey = licensePublicKey(config.licensePublicKey);
  } catch (err) {
    if (!(err instanceof LicensePublicKeyError)) throw err;
    return { enabled: false, reason: err.message, fatal: err.message };
  }
  const check = verifyLicense(config.licenseKey, publicKey, now);
  if (!check.valid) return { enabled: false, reason: check.message };
  const { licensee, expires, entitlements } = check.license;
  if (!entitlements.includes(AUTO_SCAVENGE_ENTITLEMENT)) {
    return { enabled: false, reason: `the license key of ${licensee} is not entitled to ${AUTO_SCAVENGE_ENTITLEMENT} (it grants: ${entitlements.join(', ') || 'nothing'})` };
  }
  return { enabled: true, reason: `licensed to ${licensee} until ${expires}` };
}
