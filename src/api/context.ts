import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import type { Store } from '../store/index.js';
import type { UserStore } from '../auth/users.js';
import type { AccessControl } from '../auth/access.js';
import type { AclOperation } from '../store/index.js';
import type { Config, ConfigSource, OptionName } from '../config/index.js';
import type { StatsCollector } from '../stats/collector.js';
import type { ProjectionManager } from '../projections/manager.js';
import type { SubscriptionService } from '../subscriptions/service.js';
import { ANONYMOUS, type Principal } from '../auth/principal.js';
import { ApiError } from './errors.js';

export interface ReloadOutcome {
  result: 'Reloaded' | 'Failed' | 'AlreadyInProgress';
  message: string;
}

/** The node's own controls, for the node and admin endpoints. */
export interface NodeControl {
  readonly version: string;
  readonly stats: StatsCollector;
  currentConfig(): { config: Config; sources: Record<OptionName, ConfigSource> };
  gossip(): Record<string, unknown>;
  requestShutdown(): void;
  reload(): Promise<ReloadOutcome>;
}

/** What the HTTP plugins get from the node. */
export interface ApiContext {
  store: Store;
  users: UserStore;
  access: AccessControl;
  config: Config;
  log: Logger;
  node: NodeControl;
  projections: ProjectionManager;
  subscriptions: SubscriptionService;
}

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal;
  }
}

export const ACL_CHALLENGE = 'BasicCustom realm="SVC"';

export function principalOf(req: FastifyRequest): Principal {
  return req.principal ?? ANONYMOUS;
}

/** 401 with a challenge unless the principal may do `op` on the stream. */
export function requireAccess(ctx: ApiContext, req: FastifyRequest, op: AclOperation, streamId: string): void {
  if (!ctx.access.canAccess(principalOf(req), op, streamId)) {
    throw new ApiError('UNAUTHORIZED', '', { 'WWW-Authenticate': ACL_CHALLENGE });
  }
}

export function requireAuthenticated(req: FastifyRequest): void {
  if (!principalOf(req).authenticated) throw new ApiError('UNAUTHORIZED', '', { 'WWW-Authenticate': ACL_CHALLENGE });
}

export function sendText(reply: FastifyReply, status: number, text: string, reason?: string): FastifyReply {
  if (reason) reply.raw.statusMessage = reason;
  return reply.code(status).type('text/plain; charset=utf-8').send(text);
}
