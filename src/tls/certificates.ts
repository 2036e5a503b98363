import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { createPrivateKey, X509Certificate } from 'node:crypto';
import type { Config } from '../config/index.js';

// Loading and checking the node certificate. Everything is validated before it is used, so a
// reload that finds a missing file, a key that does not match, a chain that does not verify or
// the wrong common name leaves the previous certificate in force.

export interface CertificateSet {
  cert: Buffer;
  key: Buffer;
  ca: Buffer[];
  subject: string;
  commonName: string;
  thumbprint: string;
  validTo: string;
}

export class CertificateError extends Error {}

const PEM_CERT = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

function read(path: string, what: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new CertificateError(`cannot read the ${what} ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}

function splitPem(pem: Buffer): X509Certificate[] {
  return (pem.toString('utf8').match(PEM_CERT) ?? []).map((block) => new X509Certificate(block));
}

function trustedRoots(path: string): X509Certificate[] {
  let files: string[];
  try {
    files = statSync(path).isDirectory()
      ? readdirSync(path).filter((f) => /\.(pem|crt|cer)$/i.test(f)).map((f) => join(path, f))
      : [path];
  } catch (err) {
    throw new CertificateError(`cannot read the trusted root certificates ${path}: ${(err as NodeJS.ErrnoException).code}`);
  }
  const roots = files.flatMap((f) => splitPem(read(f, 'trusted root certificate')));
  if (roots.length === 0) throw new CertificateError(`no trusted root certificate found in ${path}`);
  return roots;
}

function commonNameOf(cert: X509Certificate): string {
  const line = cert.subject.split('\n').find((l) => l.startsWith('CN='));
  return line ? line.slice(3) : '';
}

/** Whether a certificate common name matches a reserved name (`*.example.com` matches one label). */
export function matchesName(pattern: string, name: string): boolean {
  if (pattern === name) return true;
  if (!pattern.startsWith('*.')) return false;
  const suffix = pattern.slice(1); // ".example.com"
  return name.endsWith(suffix) && !name.slice(0, -suffix.length).includes('.');
}

/** Verifies that `leaf` chains through `intermediates` to one of `roots`. */
function verifiesTo(leaf: X509Certificate, intermediates: X509Certificate[], roots: X509Certificate[]): boolean {
  let current = leaf;
  for (let depth = 0; depth < 10; depth++) {
    const root = roots.find((r) => current.checkIssued(r) && current.verify(r.publicKey));
    if (root) return true;
    const next = intermediates.find((i) => i !== current && current.checkIssued(i) && current.verify(i.publicKey));
    if (!next) return false;
    current = next;
  }
  return false;
}

/** Loads the configured certificate and key and checks them; throws CertificateError on any problem. */
export function loadCertificates(config: Config): CertificateSet {
  if (!config.certificateFile || !config.certificatePrivateKeyFile) {
    throw new CertificateError('a secure node needs --certificate-file and --certificate-private-key-file (or --insecure)');
  }
  const certPem = read(config.certificateFile, 'certificate file');
  const keyPem = read(config.certificatePrivateKeyFile, 'private key file');
  const chain = splitPem(certPem);
  if (chain.length === 0) throw new CertificateError(`no certificate found in ${config.certificateFile}`);
  const [leaf, ...intermediates] = chain;
  let key;
  try {
    key = createPrivateKey(keyPem);
  } catch (err) {
    throw new CertificateError(`cannot parse the private key ${config.certificatePrivateKeyFile}: ${(err as Error).message}`);
  }
  if (!leaf.checkPrivateKey(key)) throw new CertificateError('the private key does not match the certificate');
  const now = Date.now();
  if (Date.parse(leaf.validTo) < now || Date.parse(leaf.validFrom) > now) {
    throw new CertificateError(`the certificate is not valid now (valid ${leaf.validFrom} to ${leaf.validTo})`);
  }
  const ca: Buffer[] = [];
  if (config.trustedRootCertificatesPath) {
    const roots = trustedRoots(config.trustedRootCertificatesPath);
    if (!verifiesTo(leaf, intermediates, roots)) {
      throw new CertificateError('the certificate chain does not verify against the trusted root certificates');
    }
    ca.push(...roots.map((r) => Buffer.from(r.toString())));
  }
  const commonName = commonNameOf(leaf);
  const reserved = config.certificateReservedNodeCommonName;
  if (reserved && !matchesName(reserved, commonName)) {
    throw new CertificateError(`the certificate common name ${commonName} does not match the reserved node common name ${reserved}`);
  }
  return {
    cert: certPem, key: keyPem, ca, subject: leaf.subject.replace(/\n/g, ', '), commonName,
    thumbprint: leaf.fingerprint256, validTo: leaf.validTo,
  };
}
