import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import type { TLSSocket } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccessDeniedError, KurrentDBClient, jsonEvent, START } from '@kurrent/kurrentdb-client';
import { ADMIN, startTestNode, uniq, type TestNode } from './support/node.js';

// The official client over TLS (issue 29): the connection string people write for a secure node,
// `tls=true&tlsCAFile=...`, against the node's certificate on its one port (ALPN: the gRPC clients
// offer h2 alone and get it; a client offering http/1.1 too gets the HTTP API). Over TLS
// the client sends its credentials on every call, so the ACLs are in force: admin reads $all,
// ops may not, and a call without credentials is anonymous.

let dir: string;
let t: TestNode;

function openssl(args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
}

function clientFor(user: string | undefined): KurrentDBClient {
  const port = new URL(t.url).port;
  const who = user ? `${user}:changeit@` : '';
  return KurrentDBClient.connectionString(`kurrentdb://${who}localhost:${port}?tls=true&tlsCAFile=${join(dir, 'ca.crt')}`);
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'svc-grpc-tls-'));
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl(['req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=SVC gRPC Test CA',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
  writeFileSync(join(dir, 'ext.cnf'), 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n'
    + 'extendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n');
  openssl(['req', ...ec, '-keyout', 'node.key', '-out', 'node.csr', '-subj', '/CN=localhost']);
  openssl(['x509', '-req', '-in', 'node.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-set_serial', '7', '-days', '2', '-out', 'node.crt', '-extfile', 'ext.cnf']);
  t = await startTestNode({
    insecure: false, certificateFile: join(dir, 'node.crt'), certificatePrivateKeyFile: join(dir, 'node.key'),
    trustedRootCertificatesPath: join(dir, 'ca.crt'),
  } as never);
}, 60_000);

afterAll(async () => {
  await t?.dispose();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('gRPC over TLS', () => {
  it('admin appends, reads and subscribes to $all; HTTPS on the same port sees it', async () => {
    const client = clientFor('admin');
    try {
      const stream = uniq('tls');
      await client.appendToStream(stream, jsonEvent({ type: 'Secure', data: { ok: true } }));
      const events = [];
      for await (const e of client.readStream(stream)) events.push(e.event?.type);
      expect(events).toEqual(['Secure']);
      const sub = client.subscribeToAll({ fromPosition: START });
      for await (const e of sub) {
        expect(e.event).toBeDefined();
        break;
      }
      // A client offering both h2 and http/1.1 (as browsers and curl do) gets the HTTP API on the same port.
      const body = await new Promise<{ status: number; alpn: string | false; text: string }>((resolve, reject) => {
        const req = request(`${t.url}/streams/${stream}/0`, {
          ca: readFileSync(join(dir, 'ca.crt')), ALPNProtocols: ['h2', 'http/1.1'], agent: false,
          headers: { Authorization: ADMIN, Accept: 'application/json' },
        }, (res) => {
          let text = '';
          res.on('data', (c) => { text += c; });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, alpn: (res.socket as TLSSocket).alpnProtocol, text }));
        });
        req.on('error', reject);
        req.end();
      });
      expect(body).toEqual({ status: 200, alpn: 'http/1.1', text: '{"ok":true}' });
    } finally {
      await client.dispose();
    }
  });

  it('ops may not read $all (the ACL is in force), and a call without credentials is anonymous', async () => {
    const ops = clientFor('ops');
    const anonymous = clientFor(undefined);
    try {
      const refused = await (async () => {
        for await (const e of ops.readAll({ maxCount: 1 })) return e;
        return undefined;
      })().catch((e) => e);
      expect(refused).toBeInstanceOf(AccessDeniedError);
      const stream = uniq('guarded');
      await clientFor('admin').setStreamMetadata(stream, { acl: { writeRoles: ['$admins'] } } as never);
      const denied = await anonymous.appendToStream(stream, jsonEvent({ type: 'E', data: {} })).catch((e) => e);
      expect(denied).toBeInstanceOf(AccessDeniedError);
      await ops.appendToStream(uniq('open'), jsonEvent({ type: 'E', data: {} }));
    } finally {
      await ops.dispose();
      await anonymous.dispose();
    }
  });
});
