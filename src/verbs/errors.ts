import type { AclOperation } from '../store/index.js';
import { DomainError } from '../errors.js';

// The verbs' own refusals. Each door maps them (with the store's errors) to its protocol's
// answer: api/errors.ts for HTTP, api/grpc/errors.ts for gRPC.

/** The principal may not do this to the stream (its ACL, or `$all`'s rule). */
export class AccessDeniedError extends DomainError {
  readonly code = 'ACCESS_DENIED';

  constructor(readonly streamId: string, readonly operation: AclOperation) {
    super(`Access to stream '${streamId}' is denied`);
  }
}

/** A request a verb cannot carry out as asked (its reason says what to change); nothing was done. */
export class InvalidRequestError extends DomainError {
  readonly code = 'INVALID_REQUEST';
}
