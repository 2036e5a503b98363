import { randomUUID } from 'node:crypto';

const UUID = /^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$/i;
const BRACED = /^\{(.*)\}$/;

/** Parses a GUID in the forms clients send (hyphenated, plain 32 hex, braced) to 16 bytes. */
export function parseUuid(text: string): Buffer | undefined {
  const inner = text.trim().replace(BRACED, '$1');
  if (!UUID.test(inner)) return undefined;
  const bytes = Buffer.from(inner.replace(/-/g, ''), 'hex');
  return bytes.every((b) => b === 0) ? undefined : bytes; // the empty GUID is not an id
}

export function formatUuid(bytes: Buffer): string {
  const h = bytes.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

export function newUuid(): Buffer {
  return parseUuid(randomUUID())!;
}
