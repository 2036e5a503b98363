import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { OPTIONS, type OptionName } from '../config/index.js';
import { ApiError, badRequest } from './errors.js';
import { MEDIA, negotiate } from './media.js';
import { simpleXml } from './atom.js';
import { principalOf, type ApiContext } from './context.js';
import { flattenStatistics } from '../verbs/index.js';
import { requireAuthenticated, requireOps } from './guards.js';
import { sendJson } from './reply.js';
import { NodeMetrics } from '../metrics/index.js';

// Node endpoints: /info, /info/options, /ping, /stats, /metrics, /gossip, and the admin commands.

const INFO_TYPES = [MEDIA.json, MEDIA.textXml, MEDIA.appXml, MEDIA.text] as const;
const STATS_TYPES = [MEDIA.json, MEDIA.textXml, MEDIA.appXml] as const;

function send(req: FastifyRequest, reply: FastifyReply, types: readonly string[], root: string, body: unknown): FastifyReply {
  const mediaType = negotiate(req, types);
  if (mediaType === MEDIA.json) return sendJson(reply, 200, body);
  if (mediaType === MEDIA.text) return reply.type('text/plain; charset=utf-8').send(typeof body === 'object' && body && 'text' in body ? String(body.text) : JSON.stringify(body));
  return reply.type(`${mediaType}; charset=utf-8`).send(simpleXml(root, xmlSafe(body)));
}

/** XML element names cannot hold `/` or `:`: those keys (drive paths) are written with `_`. */
function xmlSafe(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(xmlSafe);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k.replace(/[^A-Za-z0-9._-]/g, '_').replace(/^(?=[^A-Za-z_])/, '_'), xmlSafe(v)]));
}

export function registerNodeInfo(app: FastifyInstance, ctx: ApiContext): void {
  const { node } = ctx;

  app.get('/info', async (req, reply) => send(req, reply, INFO_TYPES, 'info', {
    dbVersion: node.version, esVersion: node.version, state: node.state().toLowerCase(),
    features: { projections: true, userManagement: true, atomPub: true },
    authentication: { type: 'internal', properties: {} },
  }));

  app.get('/info/options', { onRequest: requireOps }, async (req, reply) => {
    const { config, sources } = node.currentConfig();
    const options = (Object.keys(OPTIONS) as OptionName[]).map((name) => {
      const spec = OPTIONS[name] as { help: string; group: string; kind: string; secret?: boolean; values?: readonly string[] };
      const value = config[name];
      return {
        name: name[0].toUpperCase() + name.slice(1),
        description: spec.help,
        group: spec.group,
        value: spec.secret && value !== undefined ? '********' : value === undefined ? null : String(value),
        configurationSource: sources[name],
        deprecationMessage: null,
        schema: { type: spec.kind === 'bool' ? 'boolean' : spec.kind === 'string' ? 'string' : spec.kind === 'enum' ? 'string' : 'integer', ...(spec.values ? { enum: spec.values } : {}) },
      };
    });
    return send(req, reply, [MEDIA.json], 'options', options);
  });

  app.get('/ping', async (req, reply) => send(req, reply, INFO_TYPES, 'ping', { text: 'Ping request successfully handled' }));

  const stats = async (req: FastifyRequest, reply: FastifyReply) => {
    const path = ((req.params as { '*'?: string })['*'] ?? '').split('/').filter(Boolean);
    const grouped = String((req.query as Record<string, unknown>).group ?? 'true').toLowerCase() !== 'false';
    let body: unknown = ctx.verbs.operations.statistics(principalOf(req));
    if (path.length > 0 && !grouped) throw badRequest('A statistics path cannot be combined with group=false.');
    for (const segment of path) {
      // Own members only: `/stats/constructor` is no statistic.
      if (typeof body !== 'object' || body === null || !Object.hasOwn(body, segment)) throw new ApiError('NOT_FOUND');
      body = (body as Record<string, unknown>)[segment];
    }
    if (!grouped) body = flattenStatistics(body as Record<string, unknown>);
    reply.header('Cache-Control', 'max-age=1, public');
    return send(req, reply, STATS_TYPES, 'Stats', body);
  };
  app.get('/stats', { onRequest: requireAuthenticated }, stats);
  app.get('/stats/*', { onRequest: requireAuthenticated }, stats);

  // The same figures and more for a Prometheus server to scrape (docs/operations.md, Metrics); as
  // /stats, for authenticated users (a scrape configuration gives basic_auth).
  app.get('/metrics', { onRequest: requireAuthenticated }, async (req, reply) => {
    negotiate(req, [MEDIA.text]); // Prometheus asks for text/plain among others; who wants only JSON gets 406
    return reply.type(NodeMetrics.contentType).send(await ctx.metrics.exposition());
  });

  app.get('/gossip', async (req, reply) => {
    reply.header('Cache-Control', 'max-age=0, no-cache, must-revalidate');
    return send(req, reply, [MEDIA.json, MEDIA.textXml, MEDIA.appXml], 'ClusterInfo', node.gossip());
  });

  // A single node hears gossip from no one, and cluster members learn of each other through etcd:
  // what a stranger posts must never be advertised to clients that discover the cluster through GET /gossip.
  // Who may post is asked first, as at every node command (a refused caller gets 401, never 403): the
  // established server takes gossip only from its cluster's own nodes, which no HTTP caller is here,
  // so $ops and $admins stand for them and alone hear why their gossip is not taken.
  app.post('/gossip', { onRequest: requireOps }, async () => {
    throw ctx.config.clusterSize === 1 ? new ApiError('GOSSIP_REFUSED')
      : new ApiError('GOSSIP_REFUSED', 'Cluster members learn of each other through etcd: this node takes gossip from no node.');
  });

  app.post('/admin/shutdown', { onRequest: requireOps }, async (req, reply) => {
    reply.raw.once('finish', ctx.verbs.operations.shutdown(principalOf(req)));
    return sendJson(reply, 200, {});
  });

  // A cluster leader gives up its term (another node leads); a follower or a single node has nothing to give up.
  app.post('/admin/node/resign', { onRequest: requireOps }, async (req, reply) =>
    sendJson(reply, 200, { resigned: await ctx.verbs.operations.resign(principalOf(req)) }));

  // The established server's answer: 200 with no body. A value that is no decimal integer (`1.5`,
  // `0x10`, ` 1`) reaches the verb as NaN, which refuses it with the range.
  app.post('/admin/node/priority/:priority', { onRequest: requireOps }, async (req, reply) => {
    const text = (req.params as { priority: string }).priority;
    await ctx.verbs.operations.setNodePriority(principalOf(req), /^[+-]?\d+$/.test(text) ? Number(text) : NaN);
    return reply.code(200).send();
  });

  app.post('/admin/reloadconfig', { onRequest: requireOps }, async (_req, reply) => {
    const outcome = await node.reload();
    return sendJson(reply, 200, outcome);
  });
}
