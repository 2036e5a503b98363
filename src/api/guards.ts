import type { FastifyRequest } from 'fastify';
import type { AclOperation } from '../store/index.js';
import { demand, type Right, type RightsArea } from '../verbs/index.js';
import { ApiError } from './errors.js';
import { principalOf, type ApiContext } from './context.js';

// Who may use a route. The role checks are route hooks (`onRequest: requireOps`): they run right
// after authentication, before the body is read or validated, and ask the verbs' one rule
// (verbs/rights.ts), whose refusal the error table answers (a role: 401 without a body; the
// projections API in words; authentication: 401 with a challenge). The verbs ask the same rule
// again when they run, for the doors that have no hooks (gRPC). A stream's ACL needs the stream
// (and for a subscription or projection, the thing found first), so handlers call
// `requireAccess` (or a verb) once they know it.

type Guard = (req: FastifyRequest) => Promise<void>;

export function requireRight(right: Right, area: RightsArea): Guard {
  return async (req) => demand(principalOf(req), right, area);
}

export const requireAuthenticated = requireRight('authenticated', 'node');
export const requireOps = requireRight('ops', 'node');
export const requireAdmin = requireRight('admin', 'users');
export const requireOpsForProjections = requireRight('ops', 'projections');

/** 401 with a challenge unless the principal may do `op` on the stream. */
export function requireAccess(ctx: ApiContext, req: FastifyRequest, op: AclOperation, streamId: string): void {
  if (!ctx.access.canAccess(principalOf(req), op, streamId)) throw new ApiError('ACCESS_DENIED');
}
