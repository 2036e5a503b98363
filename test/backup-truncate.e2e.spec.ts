import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { EVENTS_JSON, newEvent, startTestNode, uniq, type TestNode } from './support/node.js';
import { allEnd, appendOk, CHUNK_SIZE, deleteStream, readStream, request, setMetadata, type Target } from './support/scavenge.js';
import { contentsOf } from './support/backup.js';
import { Rocks } from '../src/store/rocks.js';
import { truncateOp } from '../src/store/truncate.js';

// The truncate checkpoint (src/store/truncate.ts), set directly below the head of a database
// with later data: at the next start the later records are gone from $all, stream reads and
// stream infos (last event numbers, tombstones, streams that did not exist yet), their event ids
// are free again, and appends go on with contiguous numbers from the truncated head.

const PAD = 't'.repeat(200);
let t: TestNode | undefined;
afterAll(async () => { await t?.dispose(); });

async function appendAt(target: Target, stream: string, expected: string, id?: string): Promise<Response> {
  const event = { ...newEvent('Next', { pad: PAD }), ...(id ? { eventId: id } : {}) };
  return request(target, `/streams/${stream}`, {
    method: 'POST', headers: { 'Content-Type': EVENTS_JSON, 'SVC-ExpectedVersion': expected }, body: JSON.stringify([event]),
  });
}

describe('truncating the log at start', () => {
  it('removes every record at or above the truncate checkpoint with its index, ids and stream infos; appends go on', async () => {
    t = await startTestNode({ chunkSize: CHUNK_SIZE });
    const [kept, created, hard, soft, only] = [uniq('kept'), uniq('created'), uniq('hard'), uniq('soft'), uniq('tomb')];
    for (let i = 0; i < 3; i++) await appendOk(t, kept, [newEvent('Kept', { i, pad: PAD })]);
    await appendOk(t, hard, [newEvent('Hard', { pad: PAD })]);
    await appendOk(t, soft, [newEvent('Soft', { pad: PAD })]);
    await setMetadata(t, only, { note: 'a stream with metadata only' });
    const before = await contentsOf(t);
    const target = await allEnd(t);

    // later data, over several chunks: more events (one with an id we send again below), a new
    // stream, a hard delete, a soft delete, a tombstone of a stream that had no events
    const laterId = crypto.randomUUID();
    expect((await appendAt(t, kept, '2', laterId)).status).toBe(201);
    for (let i = 0; i < 60; i++) await appendOk(t, i % 2 ? kept : created, [newEvent('Later', { i, pad: PAD })]);
    await deleteStream(t, hard, true);
    await deleteStream(t, soft, false);
    await deleteStream(t, only, true);
    const head = await allEnd(t);
    expect(head - target).toBeGreaterThan(4 * CHUNK_SIZE);
    await t.node.close();

    const rocks = await Rocks.open(t.dir, false);
    rocks.writeDurable([truncateOp(target)]);
    await rocks.close();
    // The scavenge state knows the records about to go: it goes with them.
    mkdirSync(join(t.dir, 'scavenging'), { recursive: true });
    writeFileSync(join(t.dir, 'scavenging', 'stale'), 'x');
    await t.restart();

    // removed: the new stream, the soft-deleted one's metastream (its $tb is its first record), the tombstoned one without events
    expect(t.node.store.truncation).toMatchObject({ position: target, from: head, streamsRemoved: 3 });
    expect(t.node.store.truncation!.records).toBe(1 + 60 + 3); // events, and the three deletes (a tombstone or a $tb each)
    expect(existsSync(join(t.dir, 'scavenging'))).toBe(false);
    expect(await contentsOf(t)).toEqual(before);
    expect(await allEnd(t)).toBe(target);
    expect((await readStream(t, created)).status).toBe(404);
    expect((await readStream(t, hard)).status).toBe(200);
    expect((await readStream(t, soft)).entries.length).toBe(1);

    // Stream infos: numbering goes on from the truncated head; the removed stream starts anew.
    expect((await appendAt(t, kept, '3')).status).toBe(400);
    const next = await appendAt(t, kept, '2', laterId); // the id of a removed event is free again: a new write
    expect(next.status).toBe(201);
    expect(next.headers.get('location')).toMatch(new RegExp(`/streams/${kept}/3$`));
    expect((await appendAt(t, created, '-1')).headers.get('location')).toMatch(new RegExp(`/streams/${created}/0$`));
    expect((await appendAt(t, hard, '0')).status).toBe(201);
    expect((await appendAt(t, only, '-1')).status).toBe(201);
    const after = await contentsOf(t);
    expect(after.all.slice(0, before.all.length)).toEqual(before.all);
    expect(after.all.slice(before.all.length).map((r) => `${r.eventNumber}@${r.streamId}`))
      .toEqual([`3@${kept}`, `0@${created}`, `1@${hard}`, `0@${only}`]);
    expect(after.all[before.all.length].position).toBeGreaterThanOrEqual(target);

    // A later start finds nothing to truncate.
    await t.restart();
    expect(t.node.store.truncation).toBeUndefined();
    expect((await contentsOf(t)).all).toEqual(after.all);
  }, 60_000);
});
