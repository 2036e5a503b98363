import { describe, expect, it } from 'vitest';
import { withMember } from '../../web/src/pages/streams/metadata-text.ts';

// The console's ACL form changes `$acl` in the metadata's text and nothing else: members it
// does not own keep their bytes (big numbers, order, spacing, escapes).

const ACL = '{"$r":["$admins"]}';

describe('withMember', () => {
  it('replaces a member\'s value and keeps every other byte', () => {
    const text = '{ "big": 9223372036854775807, "$acl": {"$r": "x", "$w": ["a}b"]}, "s": "q\\"{[" }';
    expect(withMember(text, '$acl', ACL)).toBe(`{ "big": 9223372036854775807, "$acl": ${ACL}, "s": "q\\"{[" }`);
  });

  it('adds a missing member last, on its own line in an indented document', () => {
    expect(withMember('{}', '$acl', ACL)).toBe(`{"$acl": ${ACL}}`);
    expect(withMember(' { } ', '$acl', ACL)).toBe(` {"$acl": ${ACL} } `);
    expect(withMember('{"a":1}', '$acl', ACL)).toBe(`{"a":1, "$acl": ${ACL}}`);
    expect(withMember('{\n  "a": 1.50,\n  "b": [1, 2]\n}', '$acl', ACL)).toBe(`{\n  "a": 1.50,\n  "b": [1, 2],\n  "$acl": ${ACL}\n}`);
  });

  it('removes a member wherever it is, with its comma', () => {
    expect(withMember('{"$acl":{},"a":1}', '$acl', undefined)).toBe('{"a":1}');
    expect(withMember('{"a":1, "$acl": {"$r": []}, "b":2}', '$acl', undefined)).toBe('{"a":1, "b":2}');
    expect(withMember('{"a":1,"$acl":"x"}', '$acl', undefined)).toBe('{"a":1}');
    expect(withMember('{ "$acl": {} }', '$acl', undefined)).toBe('{  }');
    expect(withMember('{"a":1}', '$acl', undefined)).toBe('{"a":1}');
  });

  it('knows a key however it is escaped, and changes every occurrence of it', () => {
    expect(withMember('{"\\u0024acl":1,"$acl":2}', '$acl', '3')).toBe('{"\\u0024acl":3,"$acl":3}');
    expect(withMember('{"\\u0024acl":1,"a":true,"$acl":2}', '$acl', undefined)).toBe('{"a":true}');
  });

  it('refuses what is not one JSON object', () => {
    for (const text of ['[]', '"x"', '{"a":1', '{"a" 1}', '{"a":1} x', '{"a":}', '']) {
      expect(() => withMember(text, '$acl', ACL), text).toThrow(/not a JSON object/);
    }
  });
});
