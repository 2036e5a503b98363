import type { FastifyInstance } from 'fastify';
import { AutoScavengeNotEnabledError, type AutoScavengeCoordinator } from '../autoscavenge/index.js';
import type { ApiContext } from './context.js';
import { badRequest } from './errors.js';
import { requireAuthenticated, requireOps } from './guards.js';
import { parseJson } from './json-body.js';
import { sendJson } from './reply.js';

// The auto-scavenge endpoints (reference §3.5): /enabled and /status for any authenticated user,
// configure, pause and resume for $admins or $ops (refusals 401, as every refusal of this API).
// The feature off answers 503 on all but /enabled (configure checks its body first). The
// coordinator (src/autoscavenge) does the work; its refusals are answered by the error table
// (api/errors.ts) in the bodies the established servers write: off 503 and a dead loop 500 as
// problem+json, a rejected command 400 with the reason as a JSON string.

const NOT_JSON = 'The body must be a JSON object with a "schedule" member (a five-field cron expression).';

function scheduleOf(body: unknown): string {
  const doc = parseJson(body, NOT_JSON);
  const schedule = doc !== null && typeof doc === 'object' && !Array.isArray(doc) ? (doc as { schedule?: unknown }).schedule : undefined;
  if (typeof schedule !== 'string') throw badRequest(NOT_JSON);
  return schedule;
}

export function registerAutoScavenge(app: FastifyInstance, ctx: ApiContext): void {
  const coordinator: AutoScavengeCoordinator = ctx.autoScavenge;
  const requireEnabled = async () => {
    if (!coordinator.enabled) throw new AutoScavengeNotEnabledError();
  };
  const control = { onRequest: [requireOps, requireEnabled] };

  app.get('/auto-scavenge/enabled', { onRequest: requireAuthenticated }, async (_req, reply) =>
    sendJson(reply, 200, { enabled: coordinator.enabled }));

  app.get('/auto-scavenge/status', { onRequest: [requireAuthenticated, requireEnabled] }, async (_req, reply) =>
    sendJson(reply, 200, coordinator.status()));

  // The body is checked first: a malformed request is 400 whether or not the feature is on.
  app.post('/auto-scavenge/configure', { onRequest: requireOps }, async (req, reply) => {
    await coordinator.configure(scheduleOf(req.body));
    return sendJson(reply, 200, {});
  });

  // 200: nothing runs now; 202 (no body): the running node scavenge is being stopped, no other starts.
  app.post('/auto-scavenge/pause', control, async (_req, reply) =>
    (await coordinator.pause()) === 'Paused' ? sendJson(reply, 200, {}) : reply.code(202).send());

  app.post('/auto-scavenge/resume', control, async (_req, reply) => {
    await coordinator.resume();
    return sendJson(reply, 200, {});
  });
}
