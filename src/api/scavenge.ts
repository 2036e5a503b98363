import type { FastifyInstance, FastifyRequest } from 'fastify';
import { SCAVENGES_STREAM } from '../scavenge/index.js';
import type { ResolvedEvent } from '../store/index.js';
import { SCAVENGE_RULES, type ScavengeAsk } from '../verbs/index.js';
import { formatUpdated } from './atom.js';
import { principalOf, type ApiContext } from './context.js';
import { requireOps } from './guards.js';
import { lowerCaseMembers } from './json-body.js';
import { sendJson, sendText } from './reply.js';
import { formatted, integerText } from './schemas.js';

// The scavenge admin endpoints ($admins or $ops): start a scavenge, see the running one and the
// last one, stop one, merge the indexes. The scavenger (src/scavenge) does the work; this file
// reads the request and writes the answers the established servers write
// (subscriptions-and-maintenance.md §2.13). One more of our own: the history of the runs
// $scavenges records, as a list that is empty before the first scavenge (reading the stream
// itself answers 404 then, a stream without events).

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

const HISTORY_QUERY = {
  type: 'object',
  properties: { count: integerText({ minimum: 1, maximum: 1000 }, 'count must be an integer from 1 to 1000') },
};
const HISTORY_RUNS = 50;

/** One run in GET /admin/scavenge/history: what its started and completed events say (null until they do). */
interface ScavengeRun {
  scavengeId: string;
  scavengeLink: string;
  nodeEndpoint: string | null;
  started: string | null;
  completed: string | null;
  result: string | null;
  timeTaken: string | null;
  spaceSaved: number | null;
  error: string | null;
}

/** The runs of $scavenges' links (resolved, newest first), newest run first, up to `count`. */
function scavengeRuns(links: readonly ResolvedEvent[], count: number): ScavengeRun[] {
  const runs = new Map<string, ScavengeRun>();
  for (const { event } of links) {
    if (!event || (event.eventType !== '$scavengeStarted' && event.eventType !== '$scavengeCompleted')) continue;
    let data: Record<string, unknown>;
    try {
      data = JSON.parse(event.data.toString('utf8')) as Record<string, unknown>;
    } catch {
      continue;
    }
    if (typeof data?.scavengeId !== 'string') continue;
    const id = data.scavengeId;
    if (!runs.has(id) && runs.size === count) continue;
    const run = runs.get(id) ?? {
      scavengeId: id, scavengeLink: scavengeLink(id), nodeEndpoint: null, started: null, completed: null, result: null, timeTaken: null, spaceSaved: null, error: null,
    };
    if (typeof data.nodeEndpoint === 'string') run.nodeEndpoint = data.nodeEndpoint;
    if (event.eventType === '$scavengeStarted') {
      run.started = formatUpdated(event.created);
    } else {
      run.completed = formatUpdated(event.created);
      run.result = typeof data.result === 'string' ? data.result : null;
      run.timeTaken = typeof data.timeTaken === 'string' ? data.timeTaken : null;
      run.spaceSaved = typeof data.spaceSaved === 'number' ? data.spaceSaved : null;
      run.error = typeof data.error === 'string' ? data.error : null;
    }
    runs.set(id, run);
  }
  return [...runs.values()];
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

  // Two links per run (started, completed): the newest 2 × count links hold the newest `count` runs.
  app.get('/admin/scavenge/history', { onRequest: requireOps, schema: { querystring: HISTORY_QUERY } }, async (req, reply) => {
    const { count } = req.query as { count?: string };
    const runs = count === undefined ? HISTORY_RUNS : Number(count);
    const page = ctx.verbs.streams.readStream(principalOf(req), SCAVENGES_STREAM, -1, 2 * runs, 'backward', true);
    return sendJson(reply, 200, page.status === 'ok' ? scavengeRuns(page.events, runs) : []);
  });

  // Answers once the scavenge has stopped, with the id of the one stopped (also for `current`).
  app.delete<{ Params: { scavengeId: string } }>('/admin/scavenge/:scavengeId', { onRequest: requireOps }, async (req, reply) =>
    sendText(reply, 200, await ctx.verbs.operations.stopScavenge(principalOf(req), req.params.scavengeId)));

  app.post('/admin/mergeindexes', { onRequest: requireOps }, async (req, reply) => sendJson(reply, 200, ctx.verbs.operations.mergeIndexes(principalOf(req))));
}
