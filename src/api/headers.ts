import type { FastifyRequest } from 'fastify';
import { badRequest } from './errors.js';
import { HEADER_PREFIXES } from './header-spellings.js';

// Reading our custom request headers (in any of their spellings) and their typed values; a value
// in the wrong format answers 400.

const PREFIXES = HEADER_PREFIXES.map((prefix) => prefix.toLowerCase());
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
