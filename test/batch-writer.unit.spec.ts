import { describe, expect, it } from 'vitest';
import { JsonBatchWriter } from '../src/projections/batch-writer.js';
import { formatUuid, newUuid } from '../src/store/index.js';

const text = (s: string) => Buffer.from(s, 'utf8');

describe('the JSON batch writer (events crossing into the sandbox)', () => {
  it('writes names, GUIDs, raw JSON and text that parse back to the same values', () => {
    const w = new JsonBatchWriter();
    const id = newUuid();
    const tricky = 'quote " backslash \\ newline \n tab \t nul \u0000 emoji 🎉 accents éü';
    w.raw(text('[{"name":')).string(tricky).raw(text(',"id":')).guid(id).raw(text(',"body":'))
      .raw(Buffer.from('{"n":1,"list":[1,2,{"x":"y"}]}')).raw(text(',"text":')).textOf(Buffer.from(tricky))
      .raw(text(',"numbers":[')).int(0).byte(0x2c).int(1234567890123).byte(0x2c).int(-5).raw(text(']}]'));
    expect(JSON.parse(w.text())).toEqual([{
      name: tricky, id: formatUuid(id), body: { n: 1, list: [1, 2, { x: 'y' }] }, text: tricky, numbers: [0, 1234567890123, -5],
    }]);
  });

  it('grows past its initial buffer and starts over on reset', () => {
    const w = new JsonBatchWriter();
    const big = 'x'.repeat(3 * 1024 * 1024);
    w.byte(0x5b).string(big).byte(0x5d);
    expect(JSON.parse(w.text())).toEqual([big]);
    w.reset();
    w.byte(0x5b).int(1).byte(0x5d);
    expect(w.text()).toBe('[1]');
  });
});
