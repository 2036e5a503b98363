import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import type { TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccessDeniedError, KurrentDBClient, jsonEvent, START } from '@kurrent/kurrentdb-client';
import { ADMIN, uniq } from './support/node.js';
import { startTlsTestNode, type TlsTestNode } from './support/tls-node.js';

// The official client over TLS (issue 29): the connection string people write for a secure node,
// `tls=true&tlsCAFile=...`, against the node's certificate on its one port (ALPN: the gRPC clients
// offer h2 alone and get it; a client offering http/1.1 too gets the HTTP API). Over TLS
// the client sends its credentials on every call, so the ACLs are in force: admin reads $all,
// ops may not, and a call without credentials is anonymous.

let t: TlsTestNode;

function clientFor(user: string | undefined): KurrentDBClient {
  const port = new URL(t.url).port;
  const who = user ? `${user}:changeit@` : '';
  return KurrentDBClient.connectionString(`kurrentdb://${who}localhost:${port}?tls=true&tlsCAFile=${t.caFile}`);
}

beforeAll(async () => {
  t = await startTlsTestNode();
}, 60_000);

afterAll(async () => {
  await t?.dispose();
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
          ca: readFileSync(t.caFile), ALPNProtocols: ['h2', 'http/1.1'], agent: false,
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
