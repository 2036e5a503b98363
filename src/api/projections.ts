import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Principal } from '../auth/index.js';
import {
  DEFAULT_CONFIG, DEFAULT_DEBUG_EVENTS, type DebugEvents, type Projection, type ProjectionConfig, type ProjectionMode, type SourceDefinition,
} from '../projections/index.js';
import { createRight, type DebugRequest, type ProjectionFigures, type ProjectionListing } from '../verbs/index.js';
import { ApiError, badRequest } from './errors.js';
import { decodeJsonBody, lowerCaseBodyMembers } from './json-body.js';
import { baseUrl, escapeStream } from './urls.js';
import { inEverySpelling } from './header-spellings.js';
import { principalOf, type ApiContext } from './context.js';
import { requireAuthenticated, requireOpsForProjections, requireRight } from './guards.js';
import { sendJson } from './reply.js';
import { debugReportJson } from './debug-report.js';
import { formatted } from './schemas.js';

// The projections API: create, list, read state and result, query and config, commands, delete.
// Answers are JSON; errors are text with the reason, as the established servers answer them.

type Query = Record<string, string | undefined>;

function flagSchema(name: string) {
  return formatted('flag', `'{value}' is not a valid value for ${name}: use yes/true/1 or no/false/0.`);
}

/** A query of yes/no flags, their names matched without regard to case as the established servers read them. */
function flagsQuery(...names: string[]) {
  const caseless = (name: string) => `^${[...name].map((c) => `[${c.toLowerCase()}${c.toUpperCase()}]`).join('')}$`;
  return { type: 'object', patternProperties: Object.fromEntries(names.map((name) => [caseless(name), flagSchema(name)])) };
}

/** A flag's value (its schema checked it), or `fallback` when absent or empty. */
function isYes(value: string | undefined, fallback: boolean): boolean {
  return value === undefined || value === '' ? fallback : /^(yes|true|1)$/i.test(value);
}

/** The flag `name` of the query, whatever the case of its name. */
function flag(q: Query, name: string, fallback: boolean): boolean {
  const key = Object.keys(q).find((k) => k.toLowerCase() === name.toLowerCase());
  return isYes(key === undefined ? undefined : q[key], fallback);
}

const configCount = (name: keyof ProjectionConfig) =>
  ({ type: ['integer', 'null'], minimum: 0, errorMessage: `${name} must be an integer of at least 0.` });
const configBoolean = (name: keyof ProjectionConfig) => ({ type: ['boolean', 'null'], errorMessage: `${name} must be a boolean.` });

const SCHEMAS = {
  create: { querystring: {
    ...flagsQuery('enabled', 'emit', 'checkpoints', 'trackemittedstreams'),
    properties: { type: { type: 'string', pattern: '^[jJ][sS]$', errorMessage: 'Unsupported projection handler type: {value}' } },
  } },
  readEvents: { body: { errorMessage: 'The body must be JSON: {"query": {...}, "position": {...}, "maxEvents": n}.' } },
  /** The shapes of a debug run's body; its bounds are the verb's (ProjectionVerbs.debug). */
  debug: { body: {
    type: 'object',
    // Not additionalProperties: fastify's validator would drop unknown members, and a misspelt one be ignored.
    propertyNames: { enum: ['query', 'name', 'emit', 'mode', 'events'], errorMessage: 'Unknown member {value}: the body takes query, name, emit, mode and events.' },
    errorMessage: 'The body must be a JSON object: {"query": "...", "name": "...", "emit": false, "mode": "Continuous", "events": {...}} (each optional).',
    properties: {
      query: { type: 'string', errorMessage: 'query must be the source of a query (a string).' },
      name: { type: 'string', minLength: 1, errorMessage: 'name must be the name of a projection.' },
      emit: { type: 'boolean', errorMessage: 'emit must be true or false.' },
      mode: { enum: ['Continuous', 'OneTime', 'Transient'], errorMessage: 'mode must be Continuous, OneTime or Transient.' },
      events: {
        type: 'object',
        propertyNames: { enum: ['first', 'stream', 'from', 'count'], errorMessage: 'Unknown member events.{value}: events takes first, or stream, from and count.' },
        errorMessage: 'events must be {"first": n} or {"stream": "s", "from": n, "count": k}.',
        properties: {
          first: { type: 'integer', errorMessage: 'events.first must be an integer.' },
          stream: { type: 'string', minLength: 1, errorMessage: 'events.stream must be a stream name.' },
          from: { type: 'integer', errorMessage: 'events.from must be an event number.' },
          count: { type: 'integer', errorMessage: 'events.count must be an integer.' },
        },
      },
    },
  } },
  query: { querystring: flagsQuery('config') },
  updateQuery: { querystring: { type: 'object', properties: { emit: flagSchema('emit') } } },
  /** Member names lower-cased (see lowerCaseBodyMembers), checked in this order; null is the default. */
  config: { body: {
    type: 'object',
    errorMessage: 'Failed to parse the projection config',
    properties: {
      projectionexecutiontimeout: { type: ['number', 'null'], exclusiveMinimum: 0, errorMessage: 'projectionExecutionTimeout must be greater than 0.' },
      emitenabled: configBoolean('emitEnabled'),
      trackemittedstreams: configBoolean('trackEmittedStreams'),
      checkpointafterms: configCount('checkpointAfterMs'),
      checkpointhandledthreshold: configCount('checkpointHandledThreshold'),
      checkpointunhandledbytesthreshold: configCount('checkpointUnhandledBytesThreshold'),
      pendingeventsthreshold: configCount('pendingEventsThreshold'),
      maxwritebatchlength: configCount('maxWriteBatchLength'),
      maxallowedwritesinflight: configCount('maxAllowedWritesInFlight'),
    },
  } },
  enable: { querystring: flagsQuery('enableRunAs') },
  delete: { querystring: flagsQuery('deleteCheckpointStream', 'deleteEmittedStreams', 'deleteStateStream') },
};

function source(req: FastifyRequest): string {
  if (!req.headers['content-type'] && !Buffer.isBuffer(req.body)) throw new ApiError('UNSUPPORTED_MEDIA_TYPE');
  // The body is the query text, raw: clients send it form-encoded, and it must not be decoded.
  return Buffer.isBuffer(req.body) ? req.body.toString('utf8') : '';
}

function statistics(base: string, figures: ProjectionFigures, p: Projection): Record<string, unknown> {
  const url = `${base}/projection/${encodeURIComponent(p.name)}`;
  const produces = p.definition?.producesResults ?? false;
  const { checkpointStatus, bufferedEvents, writePendingEventsBeforeCheckpoint, writePendingEventsAfterCheckpoint, ...head } = figures;
  return {
    ...head,
    statusUrl: url,
    stateUrl: `${url}/state`,
    resultUrl: `${url}/result`,
    queryUrl: `${url}/query?config=yes`,
    resultStreamUrl: produces ? `${base}/streams/${escapeStream(p.resultStreamName)}` : null,
    enableCommandUrl: `${url}/command/enable`,
    disableCommandUrl: `${url}/command/disable`,
    checkpointStatus, bufferedEvents, writePendingEventsBeforeCheckpoint, writePendingEventsAfterCheckpoint,
  };
}

function configOf(c: ProjectionConfig): Record<string, unknown> {
  return {
    // The established server leaks its message type id into this answer, and clients' own tests assert it.
    msgTypeId: 300,
    emitEnabled: c.emitEnabled, trackEmittedStreams: c.trackEmittedStreams, checkpointAfterMs: c.checkpointAfterMs,
    checkpointHandledThreshold: c.checkpointHandledThreshold, checkpointUnhandledBytesThreshold: c.checkpointUnhandledBytesThreshold,
    pendingEventsThreshold: c.pendingEventsThreshold, maxWriteBatchLength: c.maxWriteBatchLength,
    maxAllowedWritesInFlight: c.maxAllowedWritesInFlight, projectionExecutionTimeout: c.projectionExecutionTimeout,
  };
}

/** The config a PUT body asks for (SCHEMAS.config checked its members); absent or null members take defaults. */
function configFrom(doc: Record<string, unknown>, current: ProjectionConfig): ProjectionConfig {
  const num = (k: keyof ProjectionConfig) => (doc[k.toLowerCase()] as number | null | undefined) ?? 0;
  const bool = (k: keyof ProjectionConfig) => (doc[k.toLowerCase()] as boolean | null | undefined) ?? false;
  const timeout = doc.projectionexecutiontimeout;
  const config: ProjectionConfig = {
    emitEnabled: bool('emitEnabled'),
    trackEmittedStreams: bool('trackEmittedStreams'),
    checkpointAfterMs: num('checkpointAfterMs'),
    checkpointHandledThreshold: num('checkpointHandledThreshold') || current.checkpointHandledThreshold,
    checkpointUnhandledBytesThreshold: num('checkpointUnhandledBytesThreshold') || current.checkpointUnhandledBytesThreshold,
    pendingEventsThreshold: num('pendingEventsThreshold') || current.pendingEventsThreshold,
    maxWriteBatchLength: num('maxWriteBatchLength') || current.maxWriteBatchLength,
    maxAllowedWritesInFlight: num('maxAllowedWritesInFlight'),
    projectionExecutionTimeout: typeof timeout === 'number' ? timeout : null,
  };
  if (config.checkpointUnhandledBytesThreshold < config.checkpointHandledThreshold) {
    throw badRequest('checkpointUnhandledBytesThreshold must be at least checkpointHandledThreshold.');
  }
  return config;
}

/**
 * A query's definition as the established servers report it (projections.md §3-4): its sources at
 * the top, and under `options` what its own calls declared (when, foreachStream, partitionBy,
 * outputState/transformBy/filterBy, a $deleted or $initShared handler, options(), outputTo). False,
 * 0 and null are left out (http-wire.md §8.3), except resultStreamName: null says the query names
 * none (outputConfig holds the stream in effect).
 */
function definitionOf(d: SourceDefinition): Record<string, unknown> {
  const definition: Record<string, unknown> = {};
  if (d.allStreams) definition.allStreams = true;
  if (d.allEvents || d.handlerOrder.length === 0) definition.allEvents = true;
  if (d.byStream) definition.byStreams = true;
  if (d.byCustomPartitions) definition.byCustomPartitions = true;
  if (d.categories.length) definition.categories = d.categories;
  if (d.events.length) definition.events = d.events;
  if (d.streams.length) definition.streams = d.streams;
  const options: Record<string, unknown> = { resultStreamName: d.resultStreamName };
  if (d.partitionResultStreamNamePattern !== null) options.partitionResultStreamNamePattern = d.partitionResultStreamNamePattern;
  const flags: Array<[string, boolean]> = [
    ['definesFold', d.definesFold], ['producesResults', d.producesResults], ['definesStateTransform', d.definesStateTransform],
    ['handlesDeletedNotifications', d.handlesDeletedNotifications], ['biState', d.biState],
    ['$includeLinks', d.includeLinks], ['reorderEvents', d.reorderEvents],
  ];
  for (const [name, set] of flags) if (set) options[name] = true;
  if (d.processingLag) options.processingLag = d.processingLag;
  definition.options = options;
  return definition;
}

function queryConfig(p: Projection): Record<string, unknown> {
  const out: Record<string, unknown> = { name: p.name, query: p.persisted.query, type: 'JS' };
  if (p.persisted.config.emitEnabled) out.emitEnabled = true;
  if (p.persisted.config.trackEmittedStreams) out.trackEmittedStreams = true;
  if (p.checkpoints) out.checkpointsEnabled = true;
  out.definition = p.definition ? definitionOf(p.definition) : {};
  out.outputConfig = { resultStreamName: p.resultStreamName };
  return out;
}

/** A debug run's body, as SCHEMAS.debug checked it. */
interface DebugBody {
  query?: string; name?: string; emit?: boolean; mode?: ProjectionMode;
  events?: { first?: number; stream?: string; from?: number; count?: number };
}

/** Which of the two forms of `events` the body uses (a stream range reads from 0, DEFAULT_DEBUG_EVENTS events, unless told). */
function debugRequestOf(body: DebugBody): DebugRequest {
  const e = body.events;
  let events: DebugEvents | undefined;
  if (e?.stream !== undefined) {
    if (e.first !== undefined) throw badRequest('events takes either first or a stream range, not both.');
    events = { stream: e.stream, from: e.from ?? 0, count: e.count ?? DEFAULT_DEBUG_EVENTS };
  } else if (e !== undefined) {
    if (e.from !== undefined || e.count !== undefined) throw badRequest('events.from and events.count need events.stream.');
    if (e.first !== undefined) events = { first: e.first };
  }
  return { query: body.query, name: body.name, emit: body.emit, mode: body.mode, events };
}

const MODES: Record<string, ProjectionMode> = { continuous: 'Continuous', onetime: 'OneTime', transient: 'Transient' };

export function registerProjections(app: FastifyInstance, ctx: ApiContext): void {
  const verbs = ctx.verbs.projections;
  const nameOf = (req: FastifyRequest) => (req.params as { name: string }).name;
  const find = (req: FastifyRequest) => verbs.find(principalOf(req), nameOf(req));
  const statisticsOf = (req: FastifyRequest, p: Projection) => statistics(baseUrl(req), verbs.figures(p), p);
  const authenticated = { onRequest: requireAuthenticated };
  const ops = { onRequest: requireOpsForProjections };

  const listing = (which: ProjectionListing) => async (req: FastifyRequest, reply: FastifyReply) =>
    sendJson(reply, 200, { projections: verbs.list(principalOf(req), which).map((p) => statisticsOf(req, p)) });
  app.get('/projections/any', authenticated, listing('any'));
  app.get('/projections/all-non-transient', authenticated, listing('all-non-transient'));
  for (const [path, mode] of Object.entries(MODES)) {
    app.get(`/projections/${path}`, authenticated, listing(mode));
    app.post(`/projections/${path}`, { onRequest: requireRight(createRight(mode), 'projections'), schema: SCHEMAS.create }, async (req, reply) => {
      const q = req.query as Query;
      const p = await verbs.create(principalOf(req), {
        name: q.name || undefined, mode, query: source(req), enabled: flag(q, 'enabled', true),
        emit: flag(q, 'emit', false), checkpoints: flag(q, 'checkpoints', false),
        trackEmittedStreams: flag(q, 'trackemittedstreams', false),
      });
      reply.header('Location', `${baseUrl(req)}/projection/${encodeURIComponent(p.name)}`);
      return sendJson(reply, 201, { name: p.name });
    });
  }

  app.post('/projections/read-events', { ...authenticated, schema: SCHEMAS.readEvents, preValidation: decodeJsonBody }, async (req, reply) =>
    sendJson(reply, 200, verbs.readEvents(principalOf(req), req.body)));

  app.post('/projections/debug', { ...authenticated, schema: SCHEMAS.debug, preValidation: decodeJsonBody }, async (req, reply) => {
    const report = await verbs.debug(principalOf(req), debugRequestOf(req.body as DebugBody));
    return reply.code(200).type('application/json; charset=utf-8').send(debugReportJson(report));
  });

  app.get('/projection/:name', authenticated, async (req, reply) => sendJson(reply, 200, statisticsOf(req, find(req))));

  app.get('/projection/:name/statistics', authenticated, async (req, reply) =>
    sendJson(reply, 200, { projections: [statisticsOf(req, find(req))] }));

  for (const which of ['state', 'result'] as const) {
    app.get(`/projection/:name/${which}`, authenticated, async (req, reply) => {
      const partition = (req.query as Query).partition ?? '';
      const value = await verbs.read(principalOf(req), nameOf(req), partition);
      const position = JSON.stringify({ $c: value.position, $p: value.position });
      reply.headers(inEverySpelling('Position', position));
      return reply.code(200).type('application/json; charset=utf-8').send(value[which]);
    });
  }

  app.get('/projection/:name/query', { ...authenticated, schema: SCHEMAS.query }, async (req, reply) => {
    const p = find(req);
    if (flag(req.query as Query, 'config', false)) return sendJson(reply, 200, queryConfig(p));
    return reply.code(200).type('application/javascript; charset=utf-8').send(p.persisted.query);
  });

  app.put('/projection/:name/query', { ...authenticated, schema: SCHEMAS.updateQuery }, async (req, reply) => {
    const { emit } = req.query as Query;
    const name = nameOf(req);
    await verbs.updateQuery(principalOf(req), name, source(req), emit === undefined ? undefined : isYes(emit, false));
    return sendJson(reply, 200, { name });
  });

  app.get('/projection/:name/config', ops, async (req, reply) => sendJson(reply, 200, configOf(verbs.config(principalOf(req), nameOf(req)))));

  app.put('/projection/:name/config', { ...ops, schema: SCHEMAS.config, preValidation: [decodeJsonBody, lowerCaseBodyMembers] }, async (req, reply) => {
    const config = await verbs.updateConfig(principalOf(req), nameOf(req),
      (current) => configFrom(req.body as Record<string, unknown>, current ?? DEFAULT_CONFIG));
    return sendJson(reply, 200, configOf(config));
  });

  const commands: Record<string, (who: Principal, name: string, req: FastifyRequest) => Promise<void>> = {
    enable: (who, name, req) => verbs.enable(who, name, flag(req.query as Query, 'enableRunAs', false)),
    disable: (who, name) => verbs.disable(who, name, true),
    reset: (who, name) => verbs.reset(who, name),
    abort: (who, name) => verbs.disable(who, name, false),
  };
  for (const [command, run] of Object.entries(commands)) {
    const options = command === 'enable' ? { ...authenticated, schema: SCHEMAS.enable } : authenticated;
    app.post(`/projection/:name/command/${command}`, options, async (req, reply) => {
      const name = nameOf(req);
      await run(principalOf(req), name, req);
      return sendJson(reply, 200, { name });
    });
  }

  app.delete('/projection/:name', { ...ops, schema: SCHEMAS.delete }, async (req, reply) => {
    const q = req.query as Query;
    await verbs.delete(principalOf(req), nameOf(req), {
      deleteCheckpointStream: flag(q, 'deleteCheckpointStream', false),
      deleteEmittedStreams: flag(q, 'deleteEmittedStreams', false),
      deleteStateStream: flag(q, 'deleteStateStream', false),
    });
    return reply.code(204).send();
  });
}
