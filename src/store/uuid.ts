import { randomFillSync } from 'node:crypto';

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

const POOL_IDS = 4096;
let pool = Buffer.alloc(0);
let poolNext = POOL_IDS;

/** A random (version 4) id. Views into a pool filled from the CSPRNG, which is never rewritten. */
export function newUuid(): Buffer {
  if (poolNext >= POOL_IDS) {
    pool = randomFillSync(Buffer.allocUnsafeSlow(POOL_IDS * 16));
    poolNext = 0;
  }
  const id = pool.subarray(poolNext * 16, poolNext * 16 + 16);
  poolNext++;
  id[6] = (id[6] & 0x0f) | 0x40;
  id[8] = (id[8] & 0x3f) | 0x80;
  return id;
}
