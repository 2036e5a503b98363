import { describe, expect, it } from 'vitest';
import { JsonBatchWriter } from '../src/projections/batch-writer.js';
import { formatUuid, newUuid } from '../src/store/index.js';

describe('the JSON batch writer (events crossing into the sandbox)', () => {
  it('writes names, GUIDs, raw JSON and text that parse back to the same values', () => {
    const w = new JsonBatchWriter();
    const id = newUuid();
    const tricky = 'quote " backslash \\ newline \n tab \t nul \u0000 emoji 🎉 accents éü';
    w.ascii('[{"name":').string(tricky).ascii(',"id":').guid(id).ascii(',"body":')
      .raw(Buffer.from('{"n":1,"list":[1,2,{"x":"y"}]}')).ascii(',"text":').textOf(Buffer.from(tricky)).ascii('}]');
    expect(JSON.parse(w.text())).toEqual([{ name: tricky, id: formatUuid(id), body: { n: 1, list: [1, 2, { x: 'y' }] }, text: tricky }]);
  });

  it('grows past its initial buffer and starts over on reset', () => {
    const w = new JsonBatchWriter();
    const big = 'x'.repeat(3 * 1024 * 1024);
    w.ascii('[').string(big).ascii(']');
    expect(JSON.parse(w.text())).toEqual([big]);
    w.reset();
    w.ascii('[1]');
    expect(w.text()).toBe('[1]');
  });
});
