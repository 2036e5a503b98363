import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestNode, type TestNode } from './node.js';

// A node serving TLS on its one port with a certificate for localhost and 127.0.0.1, signed by a
// CA made for the test (openssl, EC keys): what the official gRPC clients need to send their
// credentials (they send none over a plain connection), so the ACLs are in force.

export interface TlsTestNode extends TestNode {
  /** The CA certificate file, for `tlsCAFile=` in a connection string. */
  readonly caFile: string;
}

export async function startTlsTestNode(): Promise<TlsTestNode> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-tls-node-'));
  const openssl = (args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl(['req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=SVC gRPC Test CA',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
  writeFileSync(join(dir, 'ext.cnf'), 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n'
    + 'extendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n');
  openssl(['req', ...ec, '-keyout', 'node.key', '-out', 'node.csr', '-subj', '/CN=localhost']);
  openssl(['x509', '-req', '-in', 'node.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-set_serial', '7', '-days', '2', '-out', 'node.crt', '-extfile', 'ext.cnf']);
  const node = await startTestNode({
    insecure: false, certificateFile: join(dir, 'node.crt'), certificatePrivateKeyFile: join(dir, 'node.key'),
    trustedRootCertificatesPath: join(dir, 'ca.crt'),
  } as never);
  const dispose = node.dispose.bind(node);
  return Object.assign(node, {
    caFile: join(dir, 'ca.crt'),
    async dispose() {
      await dispose();
      rmSync(dir, { recursive: true, force: true });
    },
  });
}
