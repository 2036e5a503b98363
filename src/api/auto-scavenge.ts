import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  AutoScavengeFailedError, AutoScavengeNotEnabledError, AutoScavengeRejectedError, InvalidScheduleError, type AutoScavengeCoordinator,
} from '../autoscavenge/index.js';
import type { ApiContext } from './context.js';
import { badRequest } from './errors.js';
import { requireAuthenticated, requireOps } from './guards.js';
import { parseJson } from './json-body.js';
import { sendJson } from './reply.js';

// The auto-scavenge endpoints (reference §3.5): /enabled and /status for any authenticated user,
// configure, pause and resume for $admins or $ops (refusals 401, as every refusal of this API).
// The feature off answers 503 problem+json on all but /enabled (configure checks its body first).
// The coordinator (src/autoscavenge) does the work; the answers the established servers write:
// rejected 400 with the reason as a JSON string, a dead loop 500 problem+json.

const NOT_JSON = 'The body must be a JSON object with a "schedule" member (a five-field cron expression).';

function sendProblem(reply: FastifyReply, status: number, title: string): FastifyReply {
  return reply.code(status).type('application/problem+json; charset=utf-8').send(JSON.stringify({ title, status }));
}

async function answerFailure(reply: FastifyReply, err: unknown): Promise<FastifyReply> {
  if (err instanceof AutoScavengeNotEnabledError) return sendProblem(reply, 503, err.message);
  if (err instanceof AutoScavengeFailedError) return sendProblem(reply, 500, err.message);
  if (err instanceof AutoScavengeRejectedError) return sendJson(reply, 400, err.message);
  if (err instanceof InvalidScheduleError) throw badRequest(err.message);
  throw err;
}

function scheduleOf(body: unknown): string {
  const doc = parseJson(body, NOT_JSON);
  const schedule = doc !== null && typeof doc === 'object' && !Array.isArray(doc) ? (doc as { schedule?: unknown }).schedule : undefined;
  if (typeof schedule !== 'string') throw badRequest(NOT_JSON);
  return schedule;
}

export function registerAutoScavenge(app: FastifyInstance, ctx: ApiContext): void {
  const coordinator: AutoScavengeCoordinator = ctx.autoScavenge;
  const requireEnabled = async (_req: FastifyRequest, reply: FastifyReply) => {
    if (!coordinator.enabled) await sendProblem(reply, 503, new AutoScavengeNotEnabledError().message);
  };
  const control = { onRequest: [requireOps, requireEnabled] };

  app.get('/auto-scavenge/enabled', { onRequest: requireAuthenticated }, async (_req, reply) =>
    sendJson(reply, 200, { enabled: coordinator.enabled }));

  app.get('/auto-scavenge/status', { onRequest: [requireAuthenticated, requireEnabled] }, async (_req, reply) =>
    sendJson(reply, 200, coordinator.status()));

  // The body is checked first: a malformed request is 400 whether or not the feature is on.
  app.post('/auto-scavenge/configure', { onRequest: requireOps }, async (req, reply) => {
    try {
      await coordinator.configure(scheduleOf(req.body));
      return sendJson(reply, 200, {});
    } catch (err) {
      return answerFailure(reply, err);
    }
  });

  // 200: nothing runs now; 202 (no body): the running node scavenge is being stopped, no other starts.
  app.post('/auto-scavenge/pause', control, async (_req, reply) => {
    try {
      return (await coordinator.pause()) === 'Paused' ? sendJson(reply, 200, {}) : reply.code(202).send();
    } catch (err) {
      return answerFailure(reply, err);
    }
  });

  app.post('/auto-scavenge/resume', control, async (_req, reply) => {
    try {
      await coordinator.resume();
      return sendJson(reply, 200, {});
    } catch (err) {
      return answerFailure(reply, err);
    }
  });
}
