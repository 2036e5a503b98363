import { checkServerIdentity, connect, createSecureContext, createServer, type PeerCertificate, type SecureContext, type TLSSocket } from 'node:tls';
import type { Logger } from 'pino';
import { matchesName, type CertificateSet } from '../tls/index.js';
import type { Transport } from './transport.js';

// Mutual TLS between nodes with the node certificates: each side presents its certificate and
// checks the other's chain against the trusted roots (--trusted-root-certificates-path) and,
// when --certificate-reserved-node-common-name is set, its common name. A reload (SIGHUP,
// POST /admin/reloadconfig) swaps the certificates in: the server takes them for the next
// handshake, new connections present them, and existing connections are replaced within
// --cluster-connection-lifetime, so a renewed CA or node certificate reaches every link.
// Until every node holds the new chain, the handshakes that fail are logged and retried.

export class TlsTransport implements Transport {
  private context: SecureContext;
  private roots: string[] | undefined;
  private readonly servers = new Set<ReturnType<typeof createServer>>();

  constructor(private certificates: CertificateSet, private reservedName: string | undefined, private readonly log: Logger) {
    this.context = this.contextOf(certificates);
    this.roots = rootsOf(certificates);
  }

  private contextOf(c: CertificateSet): SecureContext {
    return createSecureContext({ cert: c.cert, key: c.key, ...(c.ca.length ? { ca: c.ca } : {}) });
  }

  /** New certificates (a reload): the next handshakes on either side use them. */
  reload(certificates: CertificateSet, reservedName: string | undefined): void {
    this.certificates = certificates;
    this.reservedName = reservedName;
    this.roots = rootsOf(certificates);
    this.context = this.contextOf(certificates);
    for (const server of this.servers) server.setSecureContext({ cert: certificates.cert, key: certificates.key, ...(certificates.ca.length ? { ca: certificates.ca } : {}) });
  }

  /** The trusted roots the peers' chains must verify against (undefined: the system's). */
  get trustedRoots(): string[] | undefined {
    return this.roots;
  }

  get reservedNodeName(): string | undefined {
    return this.reservedName;
  }

  /** A peer certificate's common name against the reserved name; an Error when it does not match. */
  checkPeerName(cert: PeerCertificate): Error | undefined {
    const name = typeof cert.subject?.CN === 'string' ? cert.subject.CN : '';
    if (this.reservedName && !matchesName(this.reservedName, name)) {
      return new Error(`the peer certificate's common name ${name || '(none)'} does not match the reserved node common name ${this.reservedName}`);
    }
    return undefined;
  }

  createServer(onConnection: (socket: TLSSocket) => void) {
    const c = this.certificates;
    const server = createServer({
      cert: c.cert, key: c.key, ...(c.ca.length ? { ca: c.ca } : {}), requestCert: true, rejectUnauthorized: true,
    }, (socket) => {
      const problem = this.checkPeerName(socket.getPeerCertificate());
      if (problem) {
        this.log.warn({ err: problem.message, peer: socket.remoteAddress }, 'a node connection was refused');
        socket.destroy();
        return;
      }
      onConnection(socket);
    });
    this.servers.add(server);
    server.on('close', () => this.servers.delete(server));
    return server;
  }

  connect(host: string, port: number): TLSSocket {
    return connect({
      host, port, secureContext: this.context,
      // The peer is named by the reserved common name when one is set (nodes are reached by address).
      checkServerIdentity: (hostname, cert) => (this.reservedName ? this.checkPeerName(cert) : checkServerIdentity(hostname, cert)),
    });
  }
}

function rootsOf(c: CertificateSet): string[] | undefined {
  return c.ca.length ? c.ca.map((b) => b.toString('utf8')) : undefined;
}
