import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  ExpectedVersion, METADATA_EVENT_TYPE, metastreamOf, newUuid, parseUuid, formatUuid,
  type ProposedEvent,
} from '../store/index.js';
import { ApiError, badRequest } from './errors.js';
import { booleanHeader, customHeader, integerHeader } from './headers.js';
import { requestMediaType, MEDIA } from './media.js';
import { ARRAY_TYPES, EVENTS_BODY, INCOMING_TYPES, SINGLE_TYPES, eventsOf, singleEvent } from './append-body.js';
import { decodeJsonBody } from './json-body.js';
import { formatted, metadataOwner, STREAM_NAME } from './schemas.js';
import { baseUrl, eventUrl } from './urls.js';
import { principalOf, type ApiContext } from './context.js';
import { sendText } from './reply.js';

// Writes to streams: appends in the array, single-body and idempotent-URL forms, metadata
// writes, and soft and hard deletes.

type StreamParams = { stream: string };
type EventArray = Record<string, unknown>[];

const STREAM_PARAMS = { type: 'object', properties: { stream: STREAM_NAME } };
const APPEND = { schema: { params: STREAM_PARAMS, body: EVENTS_BODY }, preValidation: decodeJsonBody };
const INCOMING = {
  schema: { params: { type: 'object', properties: { stream: STREAM_NAME, guid: formatted('uuid', 'Invalid request. Unable to parse guid') } } },
};
const METADATA_WRITE = {
  schema: { params: { type: 'object', properties: { stream: metadataOwner('Metadata of a metadata stream cannot be written.') } }, body: EVENTS_BODY },
  preValidation: decodeJsonBody,
};

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

async function appendAndAnswer(ctx: ApiContext, req: FastifyRequest, reply: FastifyReply, streamId: string,
  events: ProposedEvent[], status: 200 | 201 = 201): Promise<FastifyReply> {
  booleanHeader(req, 'RequireLeader', false); // a single node is always the leader; the header is only validated
  // The verb checks the ACL (and refuses $all); the store's write door every rule of what is
  // written (a metastream's events must be metadata documents: refused 400).
  const result = await ctx.verbs.streams.append(principalOf(req), streamId, expectedVersion(req), events);
  reply.raw.statusMessage = status === 201 ? 'Created' : 'OK';
  return reply.code(status).header('Location', eventUrl(baseUrl(req), streamId, result.firstEventNumber)).send();
}

export function registerStreamWrites(app: FastifyInstance, ctx: ApiContext): void {
  const maxEventSize = ctx.config.maxAppendSize;

  app.post<{ Params: StreamParams }>('/streams/:stream', APPEND, async (req, reply) => {
    const streamId = req.params.stream;
    const mediaType = requestMediaType(req);
    if (!mediaType) throw new ApiError('UNSUPPORTED_MEDIA_TYPE');
    if (ARRAY_TYPES.includes(mediaType)) {
      return appendAndAnswer(ctx, req, reply, streamId, eventsOf(req.body as EventArray, maxEventSize));
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

  app.post<{ Params: StreamParams & { guid: string } }>('/streams/:stream/incoming/:guid', INCOMING, async (req, reply) => {
    const streamId = req.params.stream;
    const mediaType = requestMediaType(req);
    if (!mediaType || !INCOMING_TYPES.includes(mediaType)) throw new ApiError('UNSUPPORTED_MEDIA_TYPE');
    const eventId = parseUuid(req.params.guid)!;
    const eventType = headerEventType(req);
    // The seed's answer for the idempotent URL is 200 (with the Location of the event, as 201 has).
    return appendAndAnswer(ctx, req, reply, streamId, [singleEvent(body(req), mediaType, eventId, eventType, maxEventSize)], 200);
  });

  app.post<{ Params: StreamParams }>('/streams/:stream/metadata', METADATA_WRITE, async (req, reply) => {
    const streamId = req.params.stream;
    const type = customHeader(req, 'EventType');
    if (type !== undefined && type !== METADATA_EVENT_TYPE) throw badRequest('Bad Request. You should not include an event type for metadata.');
    const mediaType = requestMediaType(req);
    if (!mediaType) throw new ApiError('UNSUPPORTED_MEDIA_TYPE');
    let events: ProposedEvent[];
    if (ARRAY_TYPES.includes(mediaType)) {
      events = eventsOf(req.body as EventArray, maxEventSize).map((e) => ({ ...e, eventType: METADATA_EVENT_TYPE }));
    } else if (mediaType === MEDIA.json) {
      const idHeader = customHeader(req, 'EventId');
      if (!idHeader) throw badRequest("Empty eventId provided. (Parameter 'eventId')");
      const eventId = parseUuid(idHeader);
      if (!eventId) throw badRequest('SVC-EventId header in wrong format.');
      events = [singleEvent(body(req), mediaType, eventId, METADATA_EVENT_TYPE, maxEventSize)];
    } else {
      throw new ApiError('UNSUPPORTED_MEDIA_TYPE');
    }
    return appendAndAnswer(ctx, req, reply, metastreamOf(streamId), events);
  });

  app.delete<{ Params: StreamParams }>('/streams/:stream', { schema: { params: STREAM_PARAMS } }, async (req, reply) => {
    const streamId = req.params.stream;
    const hard = booleanHeader(req, 'HardDelete', false);
    booleanHeader(req, 'RequireLeader', false);
    await ctx.verbs.streams.delete(principalOf(req), streamId, expectedVersion(req), hard);
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
