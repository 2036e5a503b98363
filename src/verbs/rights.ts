import { DomainError } from '../errors.js';
import { isAdmin, isOps, type Principal } from '../auth/index.js';

// Who may run an operation that is not a stream's (a stream's ACL is AccessControl's): any
// authenticated user, $ops (admins too), $admins, or the account's own user. Every verb asks
// `demand` before it acts, whatever door it came through, and the HTTP door's route hooks ask
// the same function before a body is read (api/guards.ts): one rule, checked early or late.
// The node itself (SYSTEM: a plain gRPC call under --insecure-grpc-user system) passes every check.

export type Right = 'authenticated' | 'ops' | 'admin';

/** Whose operation it is, for the HTTP door's wording of a refusal (the projections API refuses in words). */
export type RightsArea = 'projections' | 'users' | 'node' | 'subscriptions';

/** The principal lacks the right an operation takes (`self`: it acts on another account). */
export class NotPermittedError extends DomainError {
  readonly code = 'NOT_PERMITTED';

  constructor(readonly area: RightsArea, readonly right: Right | 'self') {
    super(right === 'authenticated' ? 'Authentication is required' : right === 'self' ? 'Only the account\'s own user may do this'
      : `This takes the ${right === 'ops' ? '$ops or $admins' : '$admins'} group`);
  }
}

export function permits(who: Principal, right: Right): boolean {
  switch (right) {
    case 'authenticated': return who.authenticated;
    case 'ops': return isOps(who);
    case 'admin': return isAdmin(who);
  }
}

/** Throws NotPermittedError unless `who` has `right`. */
export function demand(who: Principal, right: Right, area: RightsArea): void {
  if (!permits(who, right)) throw new NotPermittedError(area, right);
}

/** Throws unless `who` is the account `login` (or the node itself; with `orAdmin`, an admin too). */
export function demandSelf(who: Principal, login: string, area: RightsArea, orAdmin = false): void {
  if (who.system || (who.authenticated && who.name === login)) return;
  if (orAdmin && isAdmin(who)) return;
  throw new NotPermittedError(area, who.authenticated ? 'self' : 'authenticated');
}
