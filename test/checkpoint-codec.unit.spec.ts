import { describe, expect, it } from 'vitest';
import {
  decodeCheckpointBody, encodeCheckpointBody, isOfEpoch, readTag, tagMetadata, tagVersion, type PartitionValue,
} from '../src/projections/checkpoint-codec.js';

const json = (value: unknown) => Buffer.from(JSON.stringify(value), 'utf8');

describe('checkpoint bodies', () => {
  const cases: [string, PartitionValue | undefined, string][] = [
    ['nothing stored', undefined, '[]'],
    ['a result that is the state', { state: '{"n":2}', result: '{"n":2}' }, '[{"n":2}]'],
    ['a transformed result', { state: '{"n":2}', result: '{"doubled":4}' }, '[{"n":2},{"doubled":4}]'],
    ['no result (filterBy, a null transform)', { state: '{"n":2}', result: null }, '[{"n":2},null]'],
    ['a null state, no result', { state: null, result: null }, '[null]'],
    ['a null state with a result', { state: null, result: '{"r":1}' }, '[null,{"r":1}]'],
    ['states that are not objects', { state: '[1,"two",{"3":null}]', result: '7' }, '[[1,"two",{"3":null}],7]'],
  ];
  for (const [what, value, body] of cases) {
    it(`round trip: ${what}`, () => {
      expect(encodeCheckpointBody(value)).toBe(body);
      expect(decodeCheckpointBody(body)).toEqual(value);
      expect(decodeCheckpointBody(Buffer.from(body, 'utf8'))).toEqual(value);
    });
  }

  it('reads the bodies the writers before this codec left on disk', () => {
    // Partitions: [state] when the result was the state, [state,result] (null included) otherwise.
    expect(decodeCheckpointBody('[{"n":1}]')).toEqual({ state: '{"n":1}', result: '{"n":1}' });
    expect(decodeCheckpointBody('[{"n":1},{"mean":1}]')).toEqual({ state: '{"n":1}', result: '{"mean":1}' });
    expect(decodeCheckpointBody('[{"n":-1},null]')).toEqual({ state: '{"n":-1}', result: null });
    // The root: [] when no event reached it, [state] or [state,result]; a null state as null.
    expect(decodeCheckpointBody('[]')).toBeUndefined();
    expect(decodeCheckpointBody('[null]')).toEqual({ state: null, result: null });
    // Their [state] for a root whose result was null or transformed (and a completed query's) can
    // only read as result = state: the body never held the result.
    expect(decodeCheckpointBody('[{"n":3}]')).toEqual({ state: '{"n":3}', result: '{"n":3}' });
  });

  it('refuses a body that is not a JSON array', () => {
    expect(() => decodeCheckpointBody('{"n":1}')).toThrow(/JSON array/);
    expect(() => decodeCheckpointBody('not json')).toThrow();
  });
});

describe('checkpoint tags', () => {
  it('round trip: the tag written with a checkpoint reads back as its projection, epoch, version and position', () => {
    const v = tagVersion(7, -1, 3);
    expect(v).toBe('7:-1:3:4');
    const metadata = tagMetadata(v, 1234);
    expect(metadata).toEqual({ $v: '7:-1:3:4', $c: 1234, $p: 1234 });
    expect(readTag(json(metadata))).toEqual({ projectionId: 7, epoch: -1, version: 3, position: 1234, completed: false });
    expect(readTag(json({ ...metadata, $cp: true }))?.completed).toBe(true);
  });

  it('reads the tag among an emitted event\'s own metadata, and the established servers\' stream tags ($s)', () => {
    expect(readTag(json({ user: 'x', $correlationId: 'c', $v: '2:0:1:4', $c: 5, $p: 5 }))).toMatchObject({ projectionId: 2, epoch: 0, position: 5 });
    expect(readTag(json({ $v: '7:-1:0:4', $s: { '$ce-order': 0 } }))).toEqual({ projectionId: 7, epoch: -1, version: 0, position: 0, completed: false });
  });

  it('finds no tag in metadata a projection did not write', () => {
    for (const m of ['', 'not json', 'null', '[]', '42', '{"user":"x"}', '{"$v":7}']) expect(readTag(Buffer.from(m, 'utf8')), m).toBeUndefined();
  });

  it('tells this epoch of this projection from others', () => {
    const tag = readTag(json(tagMetadata(tagVersion(7, 2, 3), 0)));
    expect(isOfEpoch(tag, 7, 2)).toBe(true);
    expect(isOfEpoch(tag, 7, 3)).toBe(false); // reset since
    expect(isOfEpoch(tag, 8, 2)).toBe(false); // another projection
    expect(isOfEpoch(undefined, 7, 2)).toBe(false);
  });
});
