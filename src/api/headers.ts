import type { FastifyRequest } from 'fastify';
import { badRequest } from './errors.js';

// Custom headers come in three spellings: our SVC- prefix, and the Kurrent- and ES- forms that
// existing clients send. The first present wins in that order.

const PREFIXES = ['svc-', 'kurrent-', 'es-'];
const ALIASES: Record<string, readonly string[]> = {
  requireleader: ['requireleader', 'requiresmaster', 'requiremaster'],
};

export function customHeader(req: FastifyRequest, name: string): string | undefined {
  const lower = name.toLowerCase();
  for (const prefix of PREFIXES) {
    for (const alias of ALIASES[lower] ?? [lower]) {
      const value = req.headers[prefix + alias];
      if (value !== undefined) return Array.isArray(value) ? value[0] : value;
    }
  }
  return undefined;
}

function wrongFormat(name: string): Error {
  return badRequest(`SVC-${name} header in wrong format.`);
}

export function booleanHeader(req: FastifyRequest, name: string, fallback: boolean): boolean {
  const value = customHeader(req, name);
  if (value === undefined) return fallback;
  const v = value.trim().toLowerCase();
  if (v === 'true') return true;
  if (v === 'false') return false;
  throw wrongFormat(name);
}

export function integerHeader(req: FastifyRequest, name: string): number | undefined {
  const value = customHeader(req, name);
  if (value === undefined) return undefined;
  const n = /^\s*-?\d+\s*$/.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(n)) throw wrongFormat(name);
  return n;
}

/** Response headers clients read are sent in every spelling. */
export function currentVersionHeaders(version: number): Record<string, string> {
  const v = String(version);
  return { 'SVC-CurrentVersion': v, 'Kurrent-CurrentVersion': v, 'ES-CurrentVersion': v };
}
