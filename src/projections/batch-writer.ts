// Writes a batch of events as one JSON text into one growing buffer: raw JSON data and the
// JSON-escaped names are copied as bytes, and the text is made once per batch, not per event.
// (Per-event strings were most of the host's cost of crossing into the sandbox.)

const HEX_HIGH = Uint8Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0').charCodeAt(0));
const HEX_LOW = Uint8Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0').charCodeAt(1));
/** The cache holds at most this many names, each of at most ESCAPED_MAX_LENGTH characters (about 26 MB at worst). */
const ESCAPED_LIMIT = 100_000;
const ESCAPED_MAX_LENGTH = 128;

export class JsonBatchWriter {
  private buf = Buffer.allocUnsafe(1 << 20);
  private length = 0;
  /** JSON-escaped UTF-8 of stream names and event types seen recently. */
  private static readonly escaped = new Map<string, Buffer>();

  reset(): void {
    this.length = 0;
  }

  private room(n: number): void {
    if (this.length + n <= this.buf.length) return;
    const bigger = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.length + n));
    this.buf.copy(bigger, 0, 0, this.length);
    this.buf = bigger;
  }

  /** One ASCII byte (punctuation). */
  byte(c: number): this {
    this.room(1);
    this.buf[this.length++] = c;
    return this;
  }

  /** Raw bytes that are already valid JSON (TypedArray.set: the cheapest copy for short runs). */
  raw(bytes: Uint8Array): this {
    this.room(bytes.length);
    this.buf.set(bytes, this.length);
    this.length += bytes.length;
    return this;
  }

  /** A non-negative integer, written digit by digit (no string made). */
  int(n: number): this {
    if (n < 0 || !Number.isSafeInteger(n)) return this.raw(Buffer.from(String(n), 'latin1'));
    this.room(16);
    const b = this.buf;
    let digits = 1;
    for (let m = n; m >= 10; m = Math.floor(m / 10)) digits++;
    let o = this.length + digits;
    this.length = o;
    do {
      b[--o] = 0x30 + (n % 10);
      n = Math.floor(n / 10);
    } while (n > 0);
    return this;
  }

  /** A JSON string of `text` (escaped), cached for names that repeat. */
  string(text: string): this {
    if (text.length > ESCAPED_MAX_LENGTH) return this.raw(Buffer.from(JSON.stringify(text), 'utf8')); // rare: not cached
    let bytes = JsonBatchWriter.escaped.get(text);
    if (!bytes) {
      bytes = Buffer.from(JSON.stringify(text), 'utf8');
      if (JsonBatchWriter.escaped.size >= ESCAPED_LIMIT) JsonBatchWriter.escaped.clear();
      JsonBatchWriter.escaped.set(text, bytes);
    }
    return this.raw(bytes);
  }

  /** A JSON string of arbitrary bytes read as UTF-8 (escaped, not cached). */
  textOf(bytes: Buffer): this {
    const escaped = JSON.stringify(bytes.toString('utf8'));
    this.room(escaped.length * 3);
    this.length += this.buf.write(escaped, this.length, 'utf8');
    return this;
  }

  /** A GUID from 16 bytes, quoted, in the hyphenated lower-case form. */
  guid(bytes: Buffer): this {
    this.room(38);
    const b = this.buf;
    let o = this.length;
    b[o++] = 0x22;
    for (let i = 0; i < 16; i++) {
      if (i === 4 || i === 6 || i === 8 || i === 10) b[o++] = 0x2d;
      const byte = bytes[i];
      b[o++] = HEX_HIGH[byte];
      b[o++] = HEX_LOW[byte];
    }
    b[o++] = 0x22;
    this.length = o;
    return this;
  }

  text(): string {
    return this.buf.toString('utf8', 0, this.length);
  }
}
