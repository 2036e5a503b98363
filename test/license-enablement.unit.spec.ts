import { describe, expect, it } from 'vitest';
import { autoScavengeEnablement } from '../src/license/index.js';
import { loadConfig } from '../src/config/index.js';
import { foreignLicense, TEST_PUBLIC_KEY_FILE, testLicense } from './support/license.js';

// The rules of issue 15: a valid entitled license turns auto-scavenge on unless disabled; dev
// mode and an in-memory database keep it off, and explicitly enabling it with either is fatal.

const now = new Date('2026-06-01T00:00:00Z');
const base = { autoScavengeEnabled: undefined, dev: false, memDb: false, licenseKey: testLicense({ licensee: 'Acme', expires: '2027-01-01' }), licensePublicKey: TEST_PUBLIC_KEY_FILE };
type Overrides = Partial<Omit<typeof base, 'autoScavengeEnabled' | 'licenseKey'>> & { autoScavengeEnabled?: boolean; licenseKey?: string };
const decide = (overrides: Overrides) => autoScavengeEnablement({ ...base, ...overrides }, now);

describe('autoScavengeEnablement', () => {
  it('a valid entitled key turns it on when unset or enabled', () => {
    expect(decide({})).toEqual({ enabled: true, reason: 'licensed to Acme until 2027-01-01' });
    expect(decide({ autoScavengeEnabled: true })).toEqual({ enabled: true, reason: 'licensed to Acme until 2027-01-01' });
  });

  it('explicitly disabled stays off whatever the license', () => {
    expect(decide({ autoScavengeEnabled: false })).toEqual({ enabled: false, reason: 'disabled by configuration (--auto-scavenge-enabled false)' });
  });

  it('each license failure leaves it off with a reason naming the failure, even when enabled explicitly', () => {
    const cases: [string | undefined, RegExp][] = [
      [undefined, /^no license key \(--license-key\)$/],
      ['garbage', /malformed/],
      [testLicense({ expires: '2026-05-31' }), /expired on 2026-05-31/],
      [foreignLicense(), /wrongly signed/],
      [testLicense({ licensee: 'Acme', entitlements: ['OTHER'] }), /^the license key of Acme is not entitled to AUTO_SCAVENGE \(it grants: OTHER\)$/],
      [testLicense({ entitlements: [] }), /not entitled to AUTO_SCAVENGE \(it grants: nothing\)/],
    ];
    for (const [licenseKey, reason] of cases) {
      for (const autoScavengeEnabled of [undefined, true]) {
        const result = autoScavengeEnablement({ ...base, licenseKey, autoScavengeEnabled }, now);
        expect(result.enabled, String(licenseKey)).toBe(false);
        expect(result.fatal).toBeUndefined();
        expect(result.reason).toMatch(reason);
      }
    }
  });

  it('dev mode or an in-memory database keeps it off when not asked for, saying why', () => {
    expect(decide({ dev: true })).toEqual({ enabled: false, reason: 'the node runs with dev mode (--dev)' });
    expect(decide({ memDb: true })).toEqual({ enabled: false, reason: 'the node runs with an in-memory database (--mem-db)' });
    expect(decide({ dev: true, autoScavengeEnabled: false }).fatal).toBeUndefined();
  });

  it('explicitly enabled with dev mode or an in-memory database is fatal', () => {
    const dev = decide({ dev: true, autoScavengeEnabled: true });
    expect(dev).toMatchObject({ enabled: false, fatal: 'AutoScavenge is not compatible with dev mode (--dev): --auto-scavenge-enabled true cannot be combined with it.' });
    const mem = decide({ memDb: true, autoScavengeEnabled: true, licenseKey: undefined });
    expect(mem.enabled).toBe(false);
    expect(mem.fatal).toMatch(/^AutoScavenge is not compatible with an in-memory database \(--mem-db\)/);
  });

  it('an unreadable --license-public-key is fatal; the project key is used when unset', () => {
    expect(decide({ licensePublicKey: '/no/such.pem' }).fatal).toMatch(/Cannot read the license public key file \/no\/such.pem/);
    expect(autoScavengeEnablement({ ...base, licensePublicKey: undefined }, now)).toMatchObject({ enabled: false, reason: expect.stringMatching(/wrongly signed/) });
  });

  it('is decided from a loaded configuration: unset by default, then the environment, then the command line', () => {
    expect(loadConfig([]).config.autoScavengeEnabled).toBeUndefined();
    const env = { SVC_LICENSE_KEY: base.licenseKey, SVC_LICENSE_PUBLIC_KEY: TEST_PUBLIC_KEY_FILE, SVC_AUTO_SCAVENGE_ENABLED: 'false' };
    expect(autoScavengeEnablement(loadConfig([], env).config, now).enabled).toBe(false);
    expect(autoScavengeEnablement(loadConfig(['--auto-scavenge-enabled'], env).config, now).enabled).toBe(true);
  });
});
