import { describe, expect, it } from 'vitest';
import { formatUuid, parseUuid } from '../src/store/uuid.js';

// Event ids as clients send them: hyphenated (either case), 32 plain digits, braced; anything
// else, and the empty GUID, is not an id.

describe('parseUuid', () => {
  const id = '0f8fad5b-d9cb-469f-a165-70867728950e';

  it('reads the forms clients send', () => {
    for (const text of [id, id.toUpperCase(), id.replace(/-/g, ''), `{${id}}`, ` ${id} `]) {
      expect(formatUuid(parseUuid(text)!), text).toBe(id);
    }
    expect(formatUuid(parseUuid('00000000-0000-0000-0000-000000000001')!)).toBe('00000000-0000-0000-0000-000000000001');
  });

  it('refuses what is not a GUID, and the empty GUID', () => {
    for (const text of ['00000000-0000-0000-0000-000000000000', `${id.slice(0, 35)}g`, `${id.slice(0, 34)}é0`, `zzzzzzzz${id.slice(8)}`,
      id.slice(0, 35), `${id.slice(0, 8)}x${id.slice(9)}`, '', 'not a guid']) {
      expect(parseUuid(text), text).toBeUndefined();
    }
  });

  it('gives each id its own bytes', () => {
    const a = parseUuid(id)!;
    const b = parseUuid('00000000-0000-0000-0000-000000000002')!;
    expect(formatUuid(a)).toBe(id);
    expect(a.length).toBe(16);
    expect(b.length).toBe(16);
  });
});
