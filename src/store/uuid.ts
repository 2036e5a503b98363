import { randomUUID } from 'node:crypto';

const UUID = /^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$/i;
const BRACED = /^\{(.*)\}$/;

const HYPHENATED = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Parses a GUID in the forms clients send (hyphenated, plain 32 hex, braced) to 16 bytes. */
export function parseUuid(text: string): Buffer | undefined {
  if (text.length === 36 && HYPHENATED.test(text)) {
    // The common form, without building intermediate strings.
    const bytes = Buffer.allocUnsafe(16);
    bytes.write(text.slice(0, 8), 0, 'hex');
    bytes.write(text.slice(9, 13), 4, 'hex');
    bytes.write(text.slice(14, 18), 6, 'hex');
    bytes.write(text.slice(19, 23), 8, 'hex');
    bytes.write(text.slice(24), 10, 'hex');
    return isEmpty(bytes) ? undefined : bytes;
  }
  const inner = text.trim().replace(BRACED, '$1');
  if (!UUID.test(inner)) return undefined;
  const bytes = Buffer.from(inner.replace(/-/g, ''), 'hex');
  return isEmpty(bytes) ? undefined : bytes;
}

/** The empty GUID is not an id. */
function isEmpty(bytes: Buffer): boolean {
  for (let i = 0; i < 16; i++) if (bytes[i] !== 0) return false;
  return true;
}

export function formatUuid(bytes: Buffer): string {
  const h = bytes.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

export function newUuid(): Buffer {
  return parseUuid(randomUUID())!;
}
