import type { FastifyInstance, FastifyRequest } from 'fastify';
import { SCAVENGE_RULES, type ScavengeAsk } from '../verbs/index.js';
import { principalOf, type ApiContext } from './context.js';
import { requireOps } from './guards.js';
import { lowerCaseMembers } from './json-body.js';
import { sendJson, sendText } from './reply.js';
import { formatted, integerText } from './schemas.js';

// The scavenge admin endpoints ($admins or $ops): start a scavenge, see the running one and the
// last one, stop one, merge the indexes. The scavenger (src/scavenge) does the work; this file
// reads the request and writes the answers the established servers write
// (subscriptions-and-maintenance.md §2.13).

/** The id GET /admin/scavenge/last names when no scavenge has run since the process started. */
const NO_SCAVENGE_ID = '00000000-0000-0000-0000-000000000000';

/** The query of POST /admin/scavenge, its names lower-cased (see lowerCaseQueryNames). */
interface StartQuery {
  threads?: string;
  threshold?: string;
  throttlepercent?: string;
  synconly?: string;
  startfromchunk?: string;
}

/**
 * Checked in this order, the first failure answering its 400 (and nothing starts), by the verbs'
 * rules (verbs/operations.ts), which check them again with what only they know (a start chunk
 * this node cannot honour). The multi-thread rule comes after both values it reads were found valid.
 */
const { threads, threshold, throttlePercent, syncOnly, startFromChunk } = SCAVENGE_RULES;
const START_QUERY = {
  type: 'object',
  allOf: [
    { properties: { threads: { allOf: [
      integerText({ minimum: threads.minimum }, threads.tooFew),
      integerText({ maximum: threads.maximum }, threads.tooMany),
    ] } } },
    { properties: { threshold: integerText({}, threshold.message) } },
    { properties: { throttlepercent: integerText({ minimum: throttlePercent.minimum, maximum: throttlePercent.maximum }, throttlePercent.message) } },
    {
      if: { required: ['threads'], properties: { threads: { type: 'string', integerText: { minimum: 2 } } } },
      then: { properties: { throttlepercent: integerText({ minimum: 100, maximum: 100 }, throttlePercent.multiThreaded) } },
    },
    { properties: { synconly: formatted('boolean', syncOnly.message) } },
    { properties: { startfromchunk: integerText({ minimum: startFromChunk.minimum }, startFromChunk.message) } },
  ],
};

/** preValidation hook: query names match without regard to case, as the established servers match them. */
async function lowerCaseQueryNames(req: FastifyRequest): Promise<void> {
  req.query = lowerCaseMembers(req.query as Record<string, unknown>);
}

/** The request a valid query (START_QUERY checked it) asks for; what it leaves out takes the defaults. */
function scavengeAsk(query: StartQuery): ScavengeAsk {
  return {
    threads: query.threads === undefined ? 1 : Number(query.threads),
    threshold: query.threshold === undefined ? 0 : Number(query.threshold),
    throttlePercent: query.throttlepercent === undefined ? 100 : Number(query.throttlepercent),
    syncOnly: query.synconly?.toLowerCase() === 'true',
    startFromChunk: query.startfromchunk === undefined ? 0 : Number(query.startfromchunk),
  };
}

function scavengeLink(scavengeId: string): string {
  return `/admin/scavenge/${scavengeId}`;
}

export function registerScavenge(app: FastifyInstance, ctx: ApiContext): void {
  const { scavenger } = ctx;

  // The body is ignored: clients send none, or `{}` as JSON.
  app.post('/admin/scavenge', { onRequest: requireOps, preValidation: lowerCaseQueryNames, schema: { querystring: START_QUERY } },
    async (req, reply) => {
      const scavengeId = ctx.verbs.operations.startScavenge(principalOf(req), scavengeAsk(req.query as StartQuery));
      return sendJson(reply, 200, { scavengeId });
    });

  app.get('/admin/scavenge/current', { onRequest: requireOps }, async (_req, reply) => {
    const current = scavenger.current();
    if (!current) return sendJson(reply, 200, { scavengeId: '', scavengeLink: '' });
    return sendJson(reply, 200, { scavengeId: current.scavengeId, scavengeLink: scavengeLink(current.scavengeId), progress: current.progress });
  });

  app.get('/admin/scavenge/last', { onRequest: requireOps }, async (_req, reply) => {
    const last = scavenger.last();
    if (!last) return sendJson(reply, 200, { scavengeId: NO_SCAVENGE_ID, scavengeLink: '', scavengeResult: 'Unknown' });
    return sendJson(reply, 200, { scavengeId: last.scavengeId, scavengeLink: scavengeLink(last.scavengeId), scavengeResult: last.result });
  });

  // Answers once the scavenge has stopped, with the id of the one stopped (also for `current`).
  app.delete<{ Params: { scavengeId: string } }>('/admin/scavenge/:scavengeId', { onRequest: requireOps }, async (req, reply) =>
    sendText(reply, 200, await ctx.verbs.operations.stopScavenge(principalOf(req), req.params.scavengeId)));

  app.post('/admin/mergeindexes', { onRequest: requireOps }, async (req, reply) => sendJson(reply, 200, ctx.verbs.operations.mergeIndexes(principalOf(req))));
}
