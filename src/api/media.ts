import type { FastifyRequest } from 'fastify';
import { ApiError } from './errors.js';

// Content negotiation as the established servers do it: `?format=` overrides Accept; no Accept
// takes the route's first type; otherwise the ranges are ordered by q and the first type of
// the route's list that matches the best range wins; nothing matching answers 406.

export const MEDIA = {
  streamDescK: 'application/vnd.kurrent.streamdesc+json',
  streamDescL: 'application/vnd.eventstore.streamdesc+json',
  atomXml: 'application/atom+xml',
  atomJsonK: 'application/vnd.kurrent.atom+json',
  atomJsonL: 'application/vnd.eventstore.atom+json',
  textXml: 'text/xml',
  appXml: 'application/xml',
  json: 'application/json',
  eventXml: 'application/vnd.eventstore.event+xml',
  eventJsonK: 'application/vnd.kurrent.event+json',
  eventJsonL: 'application/vnd.eventstore.event+json',
  eventsXml: 'application/vnd.eventstore.events+xml',
  eventsJsonK: 'application/vnd.kurrent.events+json',
  eventsJsonL: 'application/vnd.eventstore.events+json',
  octet: 'application/octet-stream',
  text: 'text/plain',
  competingJsonK: 'application/vnd.kurrent.competingatom+json',
  competingJsonL: 'application/vnd.eventstore.competingatom+json',
  competingXml: 'application/vnd.eventstore.competingatom+xml',
} as const;

/** Persistent subscription message feeds speak only these. */
export const COMPETING_TYPES = [MEDIA.competingJsonK, MEDIA.competingJsonL, MEDIA.competingXml] as const;

export const FEED_TYPES = [
  MEDIA.streamDescK, MEDIA.streamDescL, MEDIA.atomXml, MEDIA.atomJsonK, MEDIA.atomJsonL, MEDIA.textXml,
  MEDIA.appXml, MEDIA.json, MEDIA.eventXml, MEDIA.eventJsonK, MEDIA.eventJsonL, MEDIA.eventsXml,
  MEDIA.eventsJsonK, MEDIA.eventsJsonL,
] as const;

export const EVENT_TYPES = [
  MEDIA.atomXml, MEDIA.atomJsonK, MEDIA.atomJsonL, MEDIA.textXml, MEDIA.appXml, MEDIA.json,
  MEDIA.eventXml, MEDIA.eventJsonK, MEDIA.eventJsonL, MEDIA.octet,
] as const;

export const JSON_XML_TYPES = [MEDIA.json, MEDIA.textXml, MEDIA.appXml] as const;

const FORMATS: Record<string, string> = {
  json: MEDIA.json, text: MEDIA.text, xml: MEDIA.textXml, atom: MEDIA.atomXml, atomxj: MEDIA.atomJsonK,
};

interface Range { type: string; subtype: string; q: number; index: number }

function parseAccept(accept: string): Range[] {
  const ranges: Range[] = [];
  accept.split(',').forEach((part, index) => {
    const [mediaRange, ...params] = part.trim().split(';');
    const [type, subtype] = mediaRange.trim().toLowerCase().split('/');
    if (!type || !subtype) return;
    let q = 1;
    for (const p of params) {
      const [k, v] = p.trim().split('=');
      if (k === 'q') q = Number(v);
    }
    if (Number.isFinite(q) && q > 0) ranges.push({ type, subtype, q, index });
  });
  return ranges.sort((a, b) => b.q - a.q || a.index - b.index);
}

function matches(range: Range, mediaType: string): boolean {
  const [type, subtype] = mediaType.split('/');
  return (range.type === '*' || range.type === type) && (range.subtype === '*' || range.subtype === subtype);
}

/** The response type for this request among `supported`, in the route's preference order. */
export function negotiate(req: FastifyRequest, supported: readonly string[]): string {
  const format = (req.query as Record<string, string | undefined>).format;
  if (format !== undefined) {
    const forced = FORMATS[format.toLowerCase()];
    if (!forced || !supported.includes(forced)) throw new ApiError('NOT_ACCEPTABLE');
    return forced;
  }
  const accept = req.headers.accept;
  if (!accept || !accept.trim()) return supported[0];
  for (const range of parseAccept(accept)) {
    const found = supported.find((t) => matches(range, t));
    if (found) return found;
  }
  throw new ApiError('NOT_ACCEPTABLE');
}

/** `type/subtype` of the request body, lower-cased, or undefined; only utf-8 (or no) charset is accepted. */
export function requestMediaType(req: FastifyRequest): string | undefined {
  const header = req.headers['content-type'];
  if (!header) return undefined;
  const [type, ...params] = header.split(';');
  for (const p of params) {
    const [k, v] = p.trim().toLowerCase().split('=');
    if (k === 'charset' && (v ?? '').replace(/"/g, '') !== 'utf-8') return undefined; // `charset` without a value is no utf-8
  }
  return type.trim().toLowerCase();
}
