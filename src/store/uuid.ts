import { randomFillSync } from 'node:crypto';

const UUID = /^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$/i;
const BRACED = /^\{(.*)\}$/;

/** Hex digit values by character code (-1: not a hex digit). */
const HEX = new Int8Array(128).fill(-1);
for (let i = 0; i < 10; i++) HEX[48 + i] = i;
for (let i = 0; i < 6; i++) HEX[65 + i] = HEX[97 + i] = 10 + i;
/** Where each byte's two digits start in the hyphenated form. */
const HYPHENATED_DIGITS = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];

/** Parses a GUID in the forms clients send (hyphenated, plain 32 hex, braced) to 16 bytes. */
export function parseUuid(text: string): Buffer | undefined {
  if (text.length === 36 && text.charCodeAt(8) === DASH && text.charCodeAt(13) === DASH && text.charCodeAt(18) === DASH && text.charCodeAt(23) === DASH) {
    // The common form, digit by digit: no regular expression, no intermediate strings (the two
    // were ~6% of the server's time for 100-event appends).
    const bytes = pooledId();
    let nonZero = 0;
    for (let b = 0; b < 16; b++) {
      const i = HYPHENATED_DIGITS[b];
      const byte = hexPair(text.charCodeAt(i), text.charCodeAt(i + 1));
      if (byte < 0) return undefined;
      nonZero |= bytes[b] = byte;
    }
    return nonZero === 0 ? undefined : bytes;
  }
  const inner = text.trim().replace(BRACED, '$1');
  if (!UUID.test(inner)) return undefined;
  const bytes = Buffer.from(inner.replace(/-/g, ''), 'hex');
  return isEmpty(bytes) ? undefined : bytes;
}

/**
 * parseUuid of the UTF-8 text in `utf8[start, end)` (an id as a gRPC request carries it): the
 * common form is read off the bytes, with no string made (~0.15 µs an event).
 */
export function parseUuidBytes(utf8: Buffer, start: number, end: number): Buffer | undefined {
  if (end - start === 36 && utf8[start + 8] === DASH && utf8[start + 13] === DASH && utf8[start + 18] === DASH && utf8[start + 23] === DASH) {
    const bytes = pooledId();
    let nonZero = 0;
    for (let b = 0; b < 16; b++) {
      const i = start + HYPHENATED_DIGITS[b];
      const byte = hexPair(utf8[i], utf8[i + 1]);
      if (byte < 0) return undefined;
      nonZero |= bytes[b] = byte;
    }
    return nonZero === 0 ? undefined : bytes;
  }
  return parseUuid(utf8.toString('utf8', start, end));
}

/** The byte two hex digits (character codes) make; -1 if either is not one. */
function hexPair(hi: number, lo: number): number {
  const h = hi < 128 ? HEX[hi] : -1;
  const l = lo < 128 ? HEX[lo] : -1;
  return h < 0 || l < 0 ? -1 : (h << 4) | l;
}

const DASH = 0x2d;
const PARSED_POOL_IDS = 4096;
let parsedPool = Buffer.alloc(0);
let parsedNext = PARSED_POOL_IDS;

/** 16 bytes of their own for a parsed id: a view into a pool, never handed out twice (fewer small allocations). */
function pooledId(): Buffer {
  if (parsedNext >= PARSED_POOL_IDS) {
    parsedPool = Buffer.allocUnsafeSlow(PARSED_POOL_IDS * 16);
    parsedNext = 0;
  }
  return parsedPool.subarray(parsedNext * 16, ++parsedNext * 16);
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
