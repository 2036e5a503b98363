import type { FastifyInstance } from 'fastify';
import type { ApiContext } from './context.js';
import { requireOps } from './guards.js';
import { decodeJsonBody } from './json-body.js';
import { sendJson } from './reply.js';
import type { BackupRequest } from '../backup/index.js';

// POST /admin/backup ($admins or $ops): a point-in-time backup of the running node into a
// directory on its machine, answered once it is complete (src/backup, src/store/backup.ts;
// docs/operations.md). 409 while a scavenge or another backup runs; a directory it cannot use is
// 400, 403 or 507 with the reason (src/backup/target.ts).

const NOT_AN_OBJECT = 'The body must be a JSON object: {"to": "/absolute/directory", "differential": false}.';

const BODY = {
  type: 'object',
  errorMessage: NOT_AN_OBJECT,
  allOf: [
    { required: ['to'], errorMessage: 'to is required: the absolute path of the backup directory on the node\'s machine.' },
    // No NUL (no path holds one) and absolute: a relative path would be relative to wherever the node was started.
    { properties: { to: { type: 'string', pattern: '^/[^\\u0000]*$', errorMessage: 'to must be an absolute path (starting with /) of a directory on the node\'s machine.' } } },
    { properties: { differential: { type: 'boolean', errorMessage: 'differential must be true or false.' } } },
    { propertyNames: { enum: ['to', 'differential'] }, errorMessage: 'The body takes only "to" and "differential".' },
  ],
};

export function registerBackup(app: FastifyInstance, ctx: ApiContext): void {
  app.post('/admin/backup', { onRequest: requireOps, preValidation: decodeJsonBody, schema: { body: BODY } }, async (req, reply) => {
    const body = req.body as { to: string; differential?: boolean };
    const request: BackupRequest = { to: body.to, differential: body.differential ?? false };
    return sendJson(reply, 200, await ctx.backups.run(request));
  });
}
