import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  ExpectedVersion, isMetastream, metadataProblem, metastreamOf, newUuid, parseUuid, formatUuid,
  type ProposedEvent,
} from '../store/index.js';
import { ApiError, badRequest } from './errors.js';
import { booleanHeader, customHeader, integerHeader } from './headers.js';
import { requestMediaType, MEDIA } from './media.js';
import { ARRAY_TYPES, INCOMING_TYPES, SINGLE_TYPES, parseEventArray, singleEvent } from './append-body.js';
import { baseUrl, eventUrl } from './urls.js';
import type { ApiContext } from './context.js';
import { requireAccess } from './guards.js';
import { sendText } from './reply.js';

// Writes to streams: appends in the array, single-body and idempotent-URL forms, metadata
// writes, and soft and hard deletes.

type StreamParams = { stream: string };

export function streamParam(req: FastifyRequest): string {
  const stream = (req.params as StreamParams).stream;
  if (!stream) throw badRequest('Stream name must not be empty.');
  return stream;
}

function expectedVersion(req: FastifyRequest): ExpectedVersion {
  const n = integerHeader(req, 'ExpectedVersion');
  if (n === undefined) return ExpectedVersion.any;
  const expected = ExpectedVersion.fromNumber(n);
  if (!expected) throw badRequest('SVC-ExpectedVersion header in wrong format.');
  return expected;
}

function body(req: FastifyRequest): Buffer {
  return Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
}

function headerEventType(req: FastifyRequest): string {
  const type = customHeader(req, 'EventType');
  if (!type) throw badRequest('Must include an event type with the request either in body or as SVC-EventType header.');
  return type;
}

/** Metastream writes must carry a valid metadata document. */
function checkMetadataEvents(events: ProposedEvent[]): void {
  for (const e of events) {
    let doc: unknown;
    try {
      doc = JSON.parse(e.data.toString('utf8'));
    } catch {
      throw badRequest('Stream metadata must be a JSON object.');
    }
    const problem = metadataProblem(doc);
    if (problem) throw badRequest(problem);
  }
}

async function appendAndAnswer(ctx: ApiContext, req: FastifyRequest, reply: FastifyReply, streamId: string,
  events: ProposedEvent[]): Promise<FastifyReply> {
  requireAccess(ctx, req, 'w', streamId); // refuses $all for everyone
  booleanHeader(req, 'RequireLeader', false); // a single node is always the leader; the header is only validated
  if (isMetastream(streamId)) checkMetadataEvents(events);
  const result = await ctx.store.append(streamId, expectedVersion(req), events);
  reply.raw.statusMessage = 'Created';
  return reply.code(201).header('Location', eventUrl(baseUrl(req), streamId, result.firstEventNumber)).send();
}

export function registerStreamWrites(app: FastifyInstance, ctx: ApiContext): void {
  const maxEventSize = ctx.config.maxAppendSize;

  app.post('/streams/:stream', async (req, reply) => {
    const streamId = streamParam(req);
    const mediaType = requestMediaType(req);
    if (!mediaType) throw new ApiError('UNSUPPORTED_MEDIA_TYPE');
    if (ARRAY_TYPES.includes(mediaType)) {
      return appendAndAnswer(ctx, req, reply, streamId, parseEventArray(body(req), maxEventSize));
    }
    if (!SINGLE_TYPES.includes(mediaType)) throw new ApiError('UNSUPPORTED_MEDIA_TYPE');
    const eventType = headerEventType(req);
    const idHeader = customHeader(req, 'EventId');
    if (idHeader === undefined) {
      // No id: send the client to an idempotent URL carrying a fresh one, so its retries are safe.
      const location = `${baseUrl(req)}${req.url.split('?')[0]}/incoming/${formatUuid(newUuid())}`;
      reply.raw.statusMessage = 'Temporary Redirect';
      return reply.code(307).header('Location', location).type('text/plain; charset=utf-8').send('Forwarding to idempotent URI');
    }
    const eventId = parseUuid(idHeader);
    if (!eventId) throw badRequest('SVC-EventId header in wrong format.');
    return appendAndAnswer(ctx, req, reply, streamId, [singleEvent(body(req), mediaType, eventId, eventType, maxEventSize)]);
  });

  app.post('/streams/:stream/incoming/:guid', async (req, reply) => {
    const streamId = streamParam(req);
    const mediaType = requestMediaType(req);
    if (!mediaType || !INCOMING_TYPES.includes(mediaType)) throw new ApiError('UNSUPPORTED_MEDIA_TYPE');
    const eventId = parseUuid((req.params as { guid: string }).guid);
    if (!eventId) throw badRequest('Invalid request. Unable to parse guid');
    const eventType = headerEventType(req);
    return appendAndAnswer(ctx, req, reply, streamId, [singleEvent(body(req), mediaType, eventId, eventType, maxEventSize)]);
  });

  app.post('/streams/:stream/metadata', async (req, reply) => {
    const streamId = streamParam(req);
    if (isMetastream(streamId)) throw badRequest('Metadata of a metadata stream cannot be written.');
    const type = customHeader(req, 'EventType');
    if (type !== undefined && type !== '$metadata') throw badRequest('Bad Request. You should not include an event type for metadata.');
    const mediaType = requestMediaType(req);
    if (!mediaType) throw new ApiError('UNSUPPORTED_MEDIA_TYPE');
    let events: ProposedEvent[];
    if (ARRAY_TYPES.includes(mediaType)) {
      events = parseEventArray(body(req), maxEventSize).map((e) => ({ ...e, eventType: '$metadata' }));
    } else if (mediaType === MEDIA.json) {
      const idHeader = customHeader(req, 'EventId');
      if (!idHeader) throw badRequest("Empty eventId provided. (Parameter 'eventId')");
      const eventId = parseUuid(idHeader);
      if (!eventId) throw badRequest('SVC-EventId header in wrong format.');
      events = [singleEvent(body(req), mediaType, eventId, '$metadata', maxEventSize)];
    } else {
      throw new ApiError('UNSUPPORTED_MEDIA_TYPE');
    }
    return appendAndAnswer(ctx, req, reply, metastreamOf(streamId), events);
  });

  app.delete('/streams/:stream', async (req, reply) => {
    const streamId = streamParam(req);
    requireAccess(ctx, req, 'd', streamId);
    const hard = booleanHeader(req, 'HardDelete', false);
    booleanHeader(req, 'RequireLeader', false);
    await ctx.store.deleteStream(streamId, expectedVersion(req), hard);
    reply.raw.statusMessage = 'Stream deleted';
    return reply.code(204).send();
  });

  // Trailing slashes redirect to the canonical URL, without authorization.
  const redirect = async (req: FastifyRequest, reply: FastifyReply) => {
    const [path, query] = req.url.split('?');
    const location = `${baseUrl(req)}${path.replace(/\/+$/, '')}${query ? `?${query}` : ''}`;
    reply.raw.statusMessage = 'Temporary Redirect';
    reply.header('Location', location).header('Cache-Control', 'max-age=31536000, public');
    return sendText(reply, 307, 'Moved Permanently');
  };
  app.route({ method: ['GET', 'POST', 'DELETE'], url: '/streams/:stream/', handler: redirect });
  app.route({ method: ['GET', 'POST'], url: '/streams/:stream/metadata/', handler: redirect });
}
