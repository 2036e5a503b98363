import type { FastifyRequest } from 'fastify';

// Every URL the server emits is absolute, built from the request (and the X-Forwarded-*
// headers a proxy sets), so clients can follow links exactly as given.

function first(value: string | string[] | undefined): string | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  return v?.split(',')[0].trim() || undefined;
}

export function baseUrl(req: FastifyRequest): string {
  const proto = first(req.headers['x-forwarded-proto']) ?? req.protocol;
  let host = first(req.headers['x-forwarded-host']) ?? req.headers.host ?? `${req.hostname}`;
  const port = first(req.headers['x-forwarded-port']);
  if (port && /^\d+$/.test(port)) host = `${host.replace(/:\d+$/, '')}:${port}`;
  const prefix = (first(req.headers['x-forwarded-prefix']) ?? '').replace(/\/+$/, '');
  const cleanPrefix = prefix && !prefix.startsWith('/') ? `/${prefix}` : prefix;
  return `${proto}://${host}${cleanPrefix}`;
}

/** Escapes a stream name for a path segment; `$` and `@` are escaped too (`/streams/%24all`). */
export function escapeStream(streamId: string): string {
  return encodeURIComponent(streamId);
}

export function streamUrl(base: string, streamId: string): string {
  return `${base}/streams/${escapeStream(streamId)}`;
}

export function eventUrl(base: string, streamId: string, eventNumber: number): string {
  return `${streamUrl(base, streamId)}/${eventNumber}`;
}

/** `$all` positions: 16 hex digits of commit position then 16 of prepare position; both are the log position here. */
export function formatAllPosition(position: number): string {
  const hex = position.toString(16).toUpperCase().padStart(16, '0');
  return hex + hex;
}

export function parseAllPosition(text: string): number | undefined {
  if (!/^[0-9a-fA-F]{32}$/.test(text)) return undefined;
  const commit = parseInt(text.slice(0, 16), 16);
  const prepare = parseInt(text.slice(16), 16);
  if (!Number.isSafeInteger(commit) || !Number.isSafeInteger(prepare)) return undefined;
  return Math.max(commit, prepare);
}
