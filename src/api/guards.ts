import type { FastifyRequest } from 'fastify';
import { isAdmin, isOps, type Principal } from '../auth/index.js';
import type { AclOperation } from '../store/index.js';
import { ApiError, type ApiErrorCode } from './errors.js';
import { principalOf, type ApiContext } from './context.js';

// Who may use a route. The role checks are route hooks (`onRequest: requireOps`): they run right
// after authentication, before the body is read or validated. A stream's ACL needs the stream
// (and for a subscription or projection, the thing found first), so handlers call
// `requireAccess` (or a role check) once they know it.

type Guard = (req: FastifyRequest) => Promise<void>;

function guard(allowed: (principal: Principal) => boolean, refusal: ApiErrorCode): Guard {
  return async (req) => {
    if (!allowed(principalOf(req))) throw new ApiError(refusal);
  };
}

export const requireAuthenticated = guard((p) => p.authenticated, 'ACCESS_DENIED');
export const requireOps = guard(isOps, 'UNAUTHORIZED');
export const requireAdmin = guard(isAdmin, 'UNAUTHORIZED');
/** The projections API refuses in words where the others send no body. */
export const requireOpsForProjections = guard(isOps, 'NOT_AUTHORIZED');

/** 401 with a challenge unless the principal may do `op` on the stream. */
export function requireAccess(ctx: ApiContext, req: FastifyRequest, op: AclOperation, streamId: string): void {
  if (!ctx.access.canAccess(principalOf(req), op, streamId)) throw new ApiError('ACCESS_DENIED');
}
