// The atom+json text, written field by field (src/api/atom.ts): clients compare it byte for byte,
// so these tests pin the exact text of an entry and of a feed, the order of every field at every
// embed level, and that stored JSON data goes out as stored.

import { describe, expect, it } from 'vitest';
import { storedRecord } from './support/records.js';
import { formatUuid, type EventRecord, type ResolvedEvent } from '../src/store/index.js';
import { entryJson, feedJsonText, link, type Embed, type FeedModel } from '../src/api/atom.js';

const BASE = 'http://h:1';
const CREATED = Date.UTC(2024, 4, 1, 10, 0, 0, 123) * 1000 + 456; // 2024-05-01T10:00:00.123456Z

function record(streamId: string, eventNumber: number, type: string, data: string, metadata = '', isJson = true): EventRecord {
  return storedRecord({ position: 1000 + eventNumber, created: CREATED }, streamId, eventNumber, type, data, metadata, isJson);
}

const EMBEDS: Embed[] = ['none', 'content', 'rich', 'body', 'pretty', 'tryharder'];
const HEAD = ['title', 'id', 'updated', 'author', 'summary', 'retryCount', 'content', 'links'];
const RICH = ['eventId', 'eventType', 'eventNumber', 'data', 'metaData', 'linkMetaData', 'streamId', 'isJson', 'isRedacted',
  'isMetaData', 'isLinkMetaData', 'positionEventNumber', 'positionStreamId'];

describe('atom+json entries', () => {
  const order = record('order "7"', 3, 'Placed', '{"total":5,"name":"é \\"q\\""}', '{"$correlationId":"c-1"}');

  it('an entry at embed=body, exactly', () => {
    const id = formatUuid(order.eventId);
    const url = `${BASE}/streams/order%20%227%22/3`;
    expect(entryJson(BASE, { event: order }, 'body', false)).toBe(
      `{"title":"3@order \\"7\\"","id":"${url}","updated":"2024-05-01T10:00:00.123456Z","author":{"name":"SVC"},`
      + '"summary":"Placed","retryCount":null,'
      + `"content":{"eventStreamId":"order \\"7\\"","eventNumber":3,"eventType":"Placed","eventId":"${id}",`
      + '"data":{"total":5,"name":"é \\"q\\""},"metadata":{"$correlationId":"c-1"}},'
      + `"links":[{"uri":"${url}","relation":"edit","type":null},{"uri":"${url}","relation":"alternate","type":null}],`
      + `"eventId":"${id}","eventType":"Placed","eventNumber":3,"data":"{\\"total\\":5,\\"name\\":\\"é \\\\\\"q\\\\\\"\\"}",`
      + '"metaData":"{\\"$correlationId\\":\\"c-1\\"}","linkMetaData":null,"streamId":"order \\"7\\"","isJson":true,'
      + '"isRedacted":false,"isMetaData":true,"isLinkMetaData":false,"positionEventNumber":3,"positionStreamId":"order \\"7\\""}');
  });

  it('a link whose target is gone, with a lease: its target, its own time and type, the lease\'s count and links', () => {
    const gone = record('$ce-order', 0, '$>', '9@order-9', '{"$o":1}', false);
    const lease = { retryCount: 2, links: [link(`${BASE}/ack`, 'ack'), link(`${BASE}/nack`, 'nack')] };
    const url = `${BASE}/streams/order-9/9`;
    expect(entryJson(BASE, { link: gone }, 'rich', false, lease)).toBe(
      `{"title":"9@order-9","id":"${url}","updated":"2024-05-01T10:00:00.123456Z","author":{"name":"SVC"},"summary":"$>",`
      + `"retryCount":2,"content":null,"links":[{"uri":"${url}","relation":"edit","type":null},`
      + `{"uri":"${url}","relation":"alternate","type":null},{"uri":"${BASE}/ack","relation":"ack","type":null},`
      + `{"uri":"${BASE}/nack","relation":"nack","type":null}],"data":null,"metaData":null,"linkMetaData":null,"isJson":false,`
      + '"isRedacted":false,"isMetaData":false,"isLinkMetaData":false,"positionEventNumber":0,"positionStreamId":"$ce-order"}');
  });

  const cases: [string, ResolvedEvent][] = [
    ['JSON data and metadata', { event: order }],
    ['text data', { event: record('s', 0, 'Note', 'plain "text"', '', false) }],
    ['text data that looks like an object', { event: record('s', 1, 'Obj', '{"t":1}', '', false) }],
    ['JSON metadata on text data', { event: record('s', 2, 'Mixed', 'text', '{"m":1}', true) }],
    ['no data', { event: record('s', 3, 'Empty', '', '', false) }],
    ['a resolved link', { event: order, link: record('$ce-order', 5, '$>', '3@order "7"', '{"l":1}', false) }],
  ];

  for (const embed of EMBEDS) {
    it(`embed=${embed}: valid compact JSON with the fields in their order, for every kind of event`, () => {
      for (const [what, e] of cases) {
        for (const withContent of [false, true]) {
          const text = entryJson(BASE, e, embed, withContent);
          const doc = JSON.parse(text) as Record<string, unknown>;
          expect(JSON.stringify(doc), what).toBe(text);
          const rich = embed === 'none' || embed === 'content' ? [] : RICH.filter((k) => e.event || !['eventId', 'eventType', 'eventNumber', 'streamId'].includes(k));
          expect(Object.keys(doc), what).toEqual([...HEAD, ...rich]);
          if (doc.content) {
            expect(Object.keys(doc.content as object), what).toEqual(['eventStreamId', 'eventNumber', 'eventType', 'eventId', 'data', 'metadata']);
          }
        }
      }
    });
  }

  it('stored JSON data goes out as stored: spacing kept, not re-serialised', () => {
    const spaced = record('s', 0, 'Spaced', '{ "a" :  [1, 2],\n "b": 1.50 }');
    expect(entryJson(BASE, { event: spaced }, 'content', false)).toContain('"data":{ "a" :  [1, 2],\n "b": 1.50 },');
  });

  it('re-indented data and metadata (pretty, tryharder) and compacted content keep every digit', () => {
    const big = record('s', 0, 'Big', '{"id": 9007199254740993, "f": 1.50}', '{"$tb":9223372036854775807}');
    const notFlagged = record('s', 1, 'Big', '{"id":12345678901234567890}', '', false);
    const metaOnly = record('s', 2, 'Mixed', 'text', '{"n":9007199254740993}', true);
    for (const embed of ['pretty', 'tryharder'] as const) {
      const doc = JSON.parse(entryJson(BASE, { event: big }, embed, false));
      expect(doc.data).toBe('{\n  "id": 9007199254740993,\n  "f": 1.50\n}');
      expect(doc.metaData).toBe('{\n  "$tb": 9223372036854775807\n}');
    }
    const tried = JSON.parse(entryJson(BASE, { event: notFlagged }, 'tryharder', false));
    expect(tried).toMatchObject({ data: '{\n  "id": 12345678901234567890\n}', isJson: true });
    // The content object carries metadata compacted (and data not known to be JSON), digits kept.
    expect(entryJson(BASE, { event: big }, 'content', false)).toContain('"metadata":{"$tb":9223372036854775807}}');
    expect(entryJson(BASE, { event: metaOnly }, 'content', false)).toContain('"data":"text","metadata":{"n":9007199254740993}}');
  });
});

describe('atom+json feeds', () => {
  it('a feed, exactly (entries as entryJson writes them)', () => {
    const a = record('s', 0, 'A', '{"n":0}');
    const b = record('s', 1, 'B', '{"n":1}');
    const feed: FeedModel = {
      title: "Event stream 's'", id: `${BASE}/streams/s`, updated: '2024-05-01T10:00:00.123456Z', streamId: 's',
      headOfStream: true, selfUrl: `${BASE}/streams/s`, eTag: '1;-1', links: [link(`${BASE}/streams/s`, 'self')],
      entries: [{ event: b }, { event: a }],
    };
    expect(feedJsonText(BASE, feed, 'content')).toBe(
      `{"title":"Event stream 's'","id":"${BASE}/streams/s","updated":"2024-05-01T10:00:00.123456Z","streamId":"s",`
      + `"author":{"name":"SVC"},"headOfStream":true,"selfUrl":"${BASE}/streams/s","eTag":"1;-1",`
      + `"links":[{"uri":"${BASE}/streams/s","relation":"self","type":null}],`
      + `"entries":[${entryJson(BASE, { event: b }, 'content', false)},${entryJson(BASE, { event: a }, 'content', false)}]}`);
    expect(feedJsonText(BASE, { ...feed, streamId: null, selfUrl: null, eTag: null, entries: [] }, 'body')).toBe(
      `{"title":"Event stream 's'","id":"${BASE}/streams/s","updated":"2024-05-01T10:00:00.123456Z","streamId":null,`
      + `"author":{"name":"SVC"},"headOfStream":true,"selfUrl":null,"eTag":null,`
      + `"links":[{"uri":"${BASE}/streams/s","relation":"self","type":null}],"entries":[]}`);
  });
});
