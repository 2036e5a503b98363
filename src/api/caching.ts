import type { FastifyReply, FastifyRequest } from 'fastify';

// Conditional GET and Cache-Control for reads: pages that can never change are cacheable for a
// year; the head of a stream carries an ETag "<version>;<hash of the media type>" and answers
// 304 when the client already has it. A stream whose metadata was ever written hashes the
// metadata's version with the media type: new metadata ($maxCount, $tb, $acl) changes what the
// head page shows without a new event, and a client holding the old page must get the new one.

const IMMUTABLE = 'max-age=31536000, private';
const NO_CACHE = 'max-age=0, no-cache, must-revalidate';

/** FNV-1a of the media type as a signed 32-bit decimal: stable across restarts. */
export function mediaTypeHash(mediaType: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < mediaType.length; i++) {
    h ^= mediaType.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h | 0;
}

/** The ETag of a stream's head page: its last event number, and its media type (with the metadata's version, when it has metadata). */
export function etagOf(version: number, mediaType: string, metadataVersion = -1): string {
  return `${version};${mediaTypeHash(metadataVersion >= 0 ? `${mediaType};metadata=${metadataVersion}` : mediaType)}`;
}

export type Cacheability = { immutable: true } | { immutable: false; version: number; maxAge?: number; metadataVersion?: number };

/** Sets the caching headers; true when the client's copy is current and a 304 was sent. */
export function applyCaching(req: FastifyRequest, reply: FastifyReply, mediaType: string, c: Cacheability,
  disabled: boolean): boolean {
  reply.header('Vary', 'Accept');
  if (c.immutable) {
    reply.header('Cache-Control', disabled ? NO_CACHE : IMMUTABLE);
    return false;
  }
  const etag = etagOf(c.version, mediaType, c.metadataVersion);
  const ifNoneMatch = req.headers['if-none-match'];
  if (ifNoneMatch && ifNoneMatch.split(',').some((t) => t.trim().replace(/^W\//, '').replace(/"/g, '') === etag)) {
    reply.code(304).header('Cache-Control', NO_CACHE).send();
    return true;
  }
  reply.header('ETag', `"${etag}"`);
  reply.header('Cache-Control', !disabled && c.maxAge ? `max-age=${c.maxAge}, private` : NO_CACHE);
  return false;
}
