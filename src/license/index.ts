// Licensing: signed license keys (token.ts), the public key they are checked against
// (public-key.ts), and what they enable (enablement.ts).
export { mintLicense, verifyLicense, type LicensePayload, type LicenseCheck, type LicenseFailure } from './token.js';
export { DEFAULT_LICENSE_PUBLIC_KEY, LicensePublicKeyError, licensePublicKey } from './public-key.js';
export { autoScavengeEnablement, type AutoScavengeEnablement } from './enablement.js';
