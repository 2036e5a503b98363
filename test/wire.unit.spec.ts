// The batch wire format (src/projections/language/wire-format.js), written by the runtime's
// encoder (src/projections/wire.ts, from log records) and read back by the sandbox's decoder:
// every field a handler can see arrives as it was stored, for full and for plain event objects.

import { afterEach, describe, expect, it } from 'vitest';
import { decodeRecord, encodeRecord } from '../src/store/record.js';
import { formatUuid, newUuid, type EventRecord } from '../src/store/index.js';
import { Sandbox } from '../src/projections/sandbox.js';
import { BatchEncoder, FULL_DELIVERY } from '../src/projections/wire.js';
import type { Selected } from '../src/projections/source.js';

let sandbox: Sandbox | undefined;
afterEach(() => sandbox?.dispose());

function record(streamId: string, eventNumber: number, type: string, data: string, metadata = '', isJson = true): EventRecord {
  const bytes = encodeRecord(streamId, eventNumber, {
    eventId: newUuid(), eventType: type, isJson, data: Buffer.from(data), metadata: Buffer.from(metadata),
  }, 1_700_000_000_000_000, false);
  return decodeRecord(100 + eventNumber, bytes);
}

const selected = (event: EventRecord, extra: Partial<Selected> = {}): Selected =>
  ({ event, link: undefined, category: null, deletedPartition: undefined, ...extra });

/** Runs the batch through a query whose $any handler returns what it saw; returns the partitions' states. */
async function seen(query: string, batch: Selected[], full: boolean): Promise<Record<string, unknown>> {
  sandbox = await Sandbox.create(query, { memoryLimitMb: 32, timeoutMs: 1000 });
  const { plainEvents } = await sandbox.start({ emitEnabled: false }, {});
  expect(plainEvents).toBe(!full);
  const outcome = await sandbox.process(new BatchEncoder(FULL_DELIVERY).encode(batch), true);
  expect(outcome.fault).toBeNull();
  return Object.fromEntries(outcome.changed.map(([p, state]) => [p, JSON.parse(state!)]));
}

const FIELDS = `{ type: e.eventType, stream: e.streamId, seq: e.sequenceNumber, id: e.eventId, json: e.isJson,
  body: e.body === undefined ? 'undefined' : e.body, raw: e.bodyRaw, meta: e.metadata, metaRaw: e.metadataRaw,
  link: e.linkMetadata, partition: e.partition, category: e.category }`;

describe('the batch wire format, from log records to event objects', () => {
  const order = record('order-7', 3, 'Placed', '{"total":5,"name":"é \\"q\\""}', '{"$correlationId":"c-1"}');
  const text = record('order-7', 4, 'Note', 'plain text', '', false);
  const link = record('$ce-order', 0, '$>', '3@order-7', '{"$o":"order-7"}', false);

  for (const full of [false, true]) {
    it(`${full ? 'full (the query passes its events on)' : 'plain'} event objects carry every field as stored`, async () => {
      const query = full
        ? `fromAll().foreachStream().when({ $any: function (s, e) { return describe(e); } }); function describe(e) { return ${FIELDS}; }`
        : `fromAll().foreachStream().when({ $any: function (s, e) { return ${FIELDS}; } })`;
      const states = await seen(query, [selected(order), selected(text, { link, category: 'order' })], full);
      // The second event of the partition replaces the first one's state.
      expect(states['order-7']).toEqual({
        type: 'Note', stream: 'order-7', seq: 4, id: formatUuid(text.eventId), json: false, body: 'undefined',
        raw: 'plain text', meta: null, metaRaw: null, link: { $o: 'order-7' }, partition: 'order-7', category: 'order',
      });
    });
  }

  it('JSON data is spliced in and read back whole; the id, metadata and raw body of a full event are exact', async () => {
    const states = await seen(`fromAll().when({ Placed: function (s, e) { return frozen(e); } });
      function frozen(e) { return { total: e.body.total, name: e.data.name, raw: e.bodyRaw, meta: e.metadata, id: e.eventId, frozen: Object.isFrozen(e) }; }`,
    [selected(order)], true);
    expect(states['']).toEqual({
      total: 5, name: 'é "q"', raw: '{"total":5,"name":"é \\"q\\""}', meta: { $correlationId: 'c-1' }, id: formatUuid(order.eventId), frozen: true,
    });
  });

  it('a metastream event is partitioned by its stream; a deletion notification reaches $deleted', async () => {
    const meta = record('$$order-9', 0, '$metadata', '{"$maxAge":10}');
    const tombstone = record('order-9', 1, '$streamDeleted', '', '', false);
    const states = await seen(`fromAll().foreachStream().when({
      $any: function (s, e) { return { stream: e.streamId, partition: e.partition }; },
      $deleted: function (s, e, partition) { s.deleted = partition; return s; } })`,
    [selected(meta), selected(tombstone, { deletedPartition: 'order-9' })], true); // storing `partition` is a use the analysis cannot follow
    expect(states['order-9']).toEqual({ stream: '$$order-9', partition: 'order-9', deleted: 'order-9' });
  });
});
