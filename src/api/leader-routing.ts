import { Agent as HttpAgent, request as httpRequest, type ClientRequest, type IncomingHttpHeaders } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from './errors.js';
import { booleanHeader } from './headers.js';
import type { PeerCertificate } from 'node:tls';
import { matchesName } from '../tls/index.js';

// Which node answers a request in a cluster. Every node serves reads of streams, `$all`, feeds
// and users from its own copy of the log. Writes (appends, deletes, metadata, users), and
// everything that runs on the leader only (projections, persistent subscriptions, the
// auto-scavenge coordinator) are forwarded by a follower to the leader, whose answer it relays; with
// `SVC-RequiresMaster: true` (or a RequireLeader spelling) a follower answers 307 with the
// leader's URL instead, for reads of streams too. Node endpoints (/info, /gossip, /stats, /metrics, /ping,
// /admin/shutdown, /admin/reloadconfig, /admin/backup, /admin/mergeindexes, /admin/scavenge*: a node
// scavenge removes records from that node's copy, as in the established servers) are each node's own.

/** Marks a forwarded request: a node that gets one and does not lead answers 503 instead of forwarding it again. */
export const FORWARDED_HEADER = 'svc-forwarded-by';
/** `/streams/$epochs` and its metastream `$$$epochs`, escaped or not, with anything after. */
const EPOCHS_PATH = /^\/streams\/(?:%24|\$)(?:(?:%24|\$){2})?epochs(?:[/?]|$)/i;
/** Hop-by-hop headers (RFC 9110 7.6.1): not relayed in either direction. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade']);

export interface LeaderRouting {
  readonly name: string;
  /** Whether this node leads and serves writes now. */
  readonly isLeader: boolean;
  /** The leader's advertised HTTP URL, when another node leads. */
  leaderHttpUrl(): string | undefined;
  /** Calls `listener` whenever the leader changes (a new term, or none). */
  onLeaderChange(listener: () => void): void;
  /** Trusted roots for HTTPS to the leader (undefined: the system's, or plain HTTP). */
  trustedRoots(): string[] | undefined;
  /** The reserved node common name the leader's certificate must carry, if set (then instead of its address). */
  readonly reservedName: string | undefined;
  /** Connections to the leader are replaced after this long (a reloaded certificate takes effect). */
  readonly connectionLifetimeMs: number;
}

/** Whether a request is answered by the leader; `streamRoute`: a stream route, where RequireLeader applies. */
export function leaderOnly(method: string, path: string): { leader: boolean; streamRoute: boolean } {
  const read = method === 'GET' || method === 'HEAD';
  if (path.startsWith('/streams')) return { leader: !read, streamRoute: true };
  if (path.startsWith('/subscriptions') || path.startsWith('/projection') || path.startsWith('/auto-scavenge')) {
    return { leader: true, streamRoute: false };
  }
  if (path.startsWith('/users')) return { leader: !read, streamRoute: false };
  return { leader: false, streamRoute: false };
}

export function registerLeaderRouting(app: FastifyInstance, cluster: LeaderRouting): void {
  let agent: { http: HttpAgent; https: HttpsAgent; roots: string[] | undefined; since: number } | undefined;
  const agentFor = (url: URL): HttpAgent => {
    const roots = cluster.trustedRoots();
    if (!agent || agent.roots !== roots || performance.now() - agent.since > cluster.connectionLifetimeMs) {
      // Kept-alive connections are replaced: reloaded certificates take effect (those in use finish first).
      agent?.http.destroy();
      agent?.https.destroy();
      const reserved = cluster.reservedName;
      agent = {
        http: new HttpAgent({ keepAlive: true, maxSockets: 256 }),
        https: new HttpsAgent({
          keepAlive: true, maxSockets: 256, ...(roots ? { ca: roots } : {}),
          ...(reserved ? { checkServerIdentity: (_host: string, cert: PeerCertificate) => commonNameProblem(reserved, cert) } : {}),
        }),
        roots, since: performance.now(),
      };
    }
    return url.protocol === 'https:' ? agent.https : agent.http;
  };
  // Requests forwarded to a leader that is replaced (dead, frozen, cut off) fail at once with 503,
  // rather than waiting on it: the client retries and reaches the new one.
  const inFlight = new Set<ClientRequest>();
  cluster.onLeaderChange(() => {
    for (const upstream of inFlight) upstream.destroy(new Error('the leader changed'));
  });

  app.addHook('onRequest', async (req, reply) => {
    if (req.method === 'OPTIONS') return;
    const path = req.url.split('?', 1)[0];
    // Epoch records are how logs are compared (epochs.ts): no client writes them or their metadata.
    if (req.method !== 'GET' && req.method !== 'HEAD' && EPOCHS_PATH.test(path)) throw new ApiError('EPOCHS_READ_ONLY');
    const { leader, streamRoute } = leaderOnly(req.method, path);
    const requireLeader = streamRoute && booleanHeader(req, 'RequireLeader', false);
    if ((!leader && !requireLeader) || cluster.isLeader) return;
    const leaderUrl = cluster.leaderHttpUrl();
    if (!leaderUrl || req.headers[FORWARDED_HEADER] !== undefined) {
      throw new ApiError('NOT_READY', leaderUrl ? 'This node does not lead (the request was forwarded to it as the leader); retry.' : undefined);
    }
    const target = new URL(req.url, leaderUrl);
    if (requireLeader) {
      return reply.code(307).header('Location', target.href).type('text/plain; charset=utf-8').send('Temporary Redirect');
    }
    return forward(req, reply, target, agentFor(target), cluster.name, inFlight);
  });
}

/** Sends the request as it came (method, path, headers, body) to the leader and relays its answer. */
function forward(req: FastifyRequest, reply: FastifyReply, target: URL, agent: HttpAgent, by: string,
  inFlight: Set<ClientRequest>): Promise<FastifyReply> {
  return new Promise((resolve, reject) => {
    const headers = relayable(req.headers);
    headers[FORWARDED_HEADER] = by;
    const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
    const upstream = send(target, { method: req.method, headers, agent }, (res) => {
      reply.raw.statusMessage = res.statusMessage ?? '';
      reply.code(res.statusCode ?? 502).headers(relayable(res.headers));
      resolve(reply.send(res));
    });
    inFlight.add(upstream);
    upstream.on('close', () => inFlight.delete(upstream));
    upstream.on('error', (err) => reject(new ApiError('NOT_READY', `The leader could not be reached (${err.message}); retry.`)));
    req.raw.pipe(upstream);
  });
}

function relayable(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = value;
  return out;
}

function commonNameProblem(reserved: string, cert: PeerCertificate): Error | undefined {
  const name = typeof cert.subject?.CN === 'string' ? cert.subject.CN : '';
  return matchesName(reserved, name) ? undefined : new Error(`the leader's certificate common name ${name} does not match ${reserved}`);
}
