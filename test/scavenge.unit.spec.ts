import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import {
  ExpectedVersion, METADATA_EVENT_TYPE, metastreamOf, newUuid, Store, type EventRecord, type ProposedEvent,
} from '../src/store/index.js';
import { Scavenger } from '../src/scavenge/scavenger.js';
import type { ScavengeRequest } from '../src/scavenge/types.js';

// The scavenge engine against a store with every removable kind over many small chunks: what
// remains is exactly what a model of the rules keeps, at the same positions.

const CHUNK = 4096;
const dirs: string[] = [];
const closers: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close().catch(() => {});
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function open(dir = mkdtempSync(join(tmpdir(), 'svc-scavenge-')), inMemory = false) {
  if (!dirs.includes(dir)) dirs.push(dir);
  const store = await Store.open({ dir, inMemory, chunkSize: CHUNK });
  const scavenger = new Scavenger(store, {
    stateDir: join(store.location, 'scavenging'), chunkSize: CHUNK, disableMerging: false, historyMaxAgeDays: 30,
    backendPageSize: 16384, backendCacheSize: 8 * 1024 * 1024, streamCacheCapacity: 1000, nodeEndpoint: () => '127.0.0.1:2113',
  }, pino({ level: 'silent' }));
  await scavenger.open();
  const close = async () => {
    await scavenger.close();
    await store.close();
  };
  closers.push(close);
  return { dir, store, scavenger, close };
}

function event(type = 'T', data: unknown = { pad: 'x'.repeat(40) }): ProposedEvent {
  return { eventId: newUuid(), eventType: type, isJson: true, data: Buffer.from(JSON.stringify(data)), metadata: Buffer.alloc(0) };
}

async function setMetadata(store: Store, stream: string, doc: unknown) {
  await store.append(metastreamOf(stream), ExpectedVersion.any, [event(METADATA_EVENT_TYPE, doc)]);
}

async function scavenge(scavenger: Scavenger, request: Partial<ScavengeRequest> = {}) {
  const id = scavenger.start({ threads: 1, threshold: 0, throttlePercent: 100, syncOnly: false, startFromChunk: 0, ...request });
  while (scavenger.current()) await new Promise((r) => setTimeout(r, 10));
  return { id, result: scavenger.last()!.result };
}

function allRecords(store: Store): EventRecord[] {
  const out: EventRecord[] = [];
  for (let position = 0; ;) {
    const page = store.readAllForward(position, 500);
    out.push(...page.records);
    if (page.isEnd) return out;
    position = page.nextPosition;
  }
}

const key = (r: EventRecord) => `${r.position}:${r.streamId}:${r.eventNumber}`;

/** Writes every removable kind, interleaved so each chunk mixes them. */
async function build(store: Store) {
  await setMetadata(store, 'hard', { $maxAge: 100000 });
  await setMetadata(store, 'count', { $maxCount: 3 });
  await setMetadata(store, 'tb', { $tb: 10 });
  for (let i = 0; i < 5; i++) await setMetadata(store, 'history', { version: i });
  for (let i = 0; i < 30; i++) {
    for (const s of ['keep', 'soft', 'hard', 'count', 'tb', 'history']) await store.append(s, ExpectedVersion.any, [event()]);
  }
  await store.append('links', ExpectedVersion.any, [
    { ...event('$>'), isJson: false, data: Buffer.from('0@count') },
    { ...event('$>'), isJson: false, data: Buffer.from('29@count') },
  ]);
  await store.deleteStream('soft', ExpectedVersion.any, false);
  await store.deleteStream('hard', ExpectedVersion.any, true);
}

/** What the rules keep of the records below the point. */
function survives(r: EventRecord): boolean {
  if (r.tombstone) return true;
  switch (r.streamId) {
    case 'soft': return r.eventNumber === 29;
    case 'hard': return false;
    case '$$hard': return false;
    case 'count': return r.eventNumber >= 27;
    case 'tb': return r.eventNumber >= 10;
    case '$$history': return r.eventNumber === 4;
    case '$$soft': return true; // its only record: the soft delete
    default: return true;
  }
}

describe('scavenge engine', () => {
  it('removes exactly what the rules remove, keeps everything else at the same positions, and the index with it', async () => {
    const { store, scavenger } = await open();
    await build(store);
    const before = allRecords(store);
    const { result } = await scavenge(scavenger);
    expect(result).toBe('Success');
    const after = allRecords(store);
    const point = after.find((r) => r.streamId === '$scavengePoints')!;
    expect(point).toBeDefined();
    const expected = before.filter(survives).map(key);
    // (The run's started event is written before its point.)
    const belowPoint = after.filter((r) => r.position < point.position && !r.streamId.includes('$scavenges-') && r.streamId !== '$scavenges').map(key);
    expect(belowPoint).toEqual(expected);
    // Stream reads are unchanged; removed events are gone from single reads too.
    const count = store.readStreamForward('count', 0, 100);
    expect(count.status === 'ok' && count.events.map((e) => e.event!.eventNumber)).toEqual([27, 28, 29]);
    expect(store.readEvent('count', 5).status).toBe('notFound');
    expect(store.readEvent('hard', 0).status).toBe('deleted');
    // A link to a removed event resolves to the link alone; to a kept one, to it.
    const links = store.readStreamForward('links', 0, 10, true);
    expect(links.status === 'ok' && links.events.map((e) => e.event?.eventNumber ?? null)).toEqual([null, 29]);
    // The record count followed.
    expect(store.recordCount).toBe(after.length);
  });

  it('scavenges an in-memory (tmpfs) store like any other, and leaves nothing behind on close', async () => {
    const { store, scavenger, close } = await open(undefined, true);
    await build(store);
    expect((await scavenge(scavenger)).result).toBe('Success');
    expect(allRecords(store).filter((r) => r.streamId === 'hard' && !r.tombstone)).toEqual([]);
    const location = store.location;
    await close();
    const { existsSync } = await import('node:fs');
    expect(existsSync(location)).toBe(false);
  });

  it('forgets removed event ids: a retry of one is a new write', async () => {
    const { store, scavenger } = await open();
    const first = event();
    await store.append('ids', ExpectedVersion.any, [first]);
    for (let i = 0; i < 5; i++) await store.append('ids', ExpectedVersion.any, [event()]);
    await setMetadata(store, 'ids', { $tb: 3 });
    expect((await store.append('ids', ExpectedVersion.any, [first])).idempotent).toBe(true);
    await scavenge(scavenger);
    const retry = await store.append('ids', ExpectedVersion.any, [first]);
    expect(retry.idempotent).toBe(false);
    expect(retry.firstEventNumber).toBe(6);
  });

  it('threshold -1 executes every chunk and a high threshold executes none', async () => {
    const a = await open();
    await build(a.store);
    const data = (store: Store) => allRecords(store).filter((r) => !r.streamId.includes('$scavenge')).map(key);
    const before = data(a.store);
    await scavenge(a.scavenger, { threshold: 1_000_000 });
    expect(data(a.store)).toEqual(before);
    // The point's threshold holds for the run; a new run with -1 writes a new point.
    await scavenge(a.scavenger, { threshold: -1 });
    const chunks = a.store.physicalChunks(0, 1000).filter((c) => c.version > 0);
    expect(chunks.length).toBeGreaterThan(0);
    expect(allRecords(a.store).filter((r) => r.streamId === 'hard' && !r.tombstone)).toEqual([]);
  });

  it('a stopped run resumes where it stopped and ends as one run would', async () => {
    const one = await open();
    await build(one.store);
    await scavenge(one.scavenger);
    const expected = allRecords(one.store).filter((r) => !r.streamId.includes('$scavenge')).map((r) => `${r.streamId}:${r.eventNumber}`);

    const two = await open();
    await build(two.store);
    const id = two.scavenger.start({ threads: 1, threshold: 0, throttlePercent: 1, syncOnly: false, startFromChunk: 0 });
    while ((two.scavenger.current()?.progress.eventsExamined ?? 0) === 0) await new Promise((r) => setTimeout(r, 5));
    expect(await two.scavenger.stop(id)).toBe(true);
    expect(two.scavenger.last()!.result).toBe('Stopped');
    const { result } = await scavenge(two.scavenger, { threshold: 1_000_000 }); // resumes: the new threshold is ignored
    expect(result).toBe('Success');
    const got = allRecords(two.store).filter((r) => !r.streamId.includes('$scavenge')).map((r) => `${r.streamId}:${r.eventNumber}`);
    expect(got).toEqual(expected);
  });

  it('syncOnly does nothing without an unreached point, and a second run only removes what became removable', async () => {
    const { store, scavenger } = await open();
    await build(store);
    expect((await scavenge(scavenger, { syncOnly: true })).result).toBe('Success');
    expect(store.readEvent('$scavengePoints', 0).status).toBe('noStream');
    await scavenge(scavenger);
    await store.append('count', ExpectedVersion.any, [event(), event()]);
    await scavenge(scavenger);
    const count = allRecords(store).filter((r) => r.streamId === 'count').map((r) => r.eventNumber);
    expect(count).toEqual([29, 30, 31]);
    expect(store.readEvent('$scavengePoints', 1).status).toBe('ok');
  });

  it('writes the history: started, chunks, completed, and links in $scavenges', async () => {
    const { store, scavenger } = await open();
    await build(store);
    const { id } = await scavenge(scavenger);
    const events = [...store.streamRecords(`$scavenges-${id}`)];
    const types = events.map((e) => e.eventType);
    expect(types[0]).toBe('$scavengeStarted');
    expect(types.at(-1)).toBe('$scavengeCompleted');
    expect(types).toContain('$scavengeChunksCompleted');
    const completed = JSON.parse(events.at(-1)!.data.toString());
    expect(completed).toMatchObject({ scavengeId: id, result: 'Success', error: null, nodeEndpoint: '127.0.0.1:2113' });
    expect(completed.timeTaken).toMatch(/^\d{2}:\d{2}:\d{2}\.\d{7}$/);
    expect(completed.spaceSaved).toBeGreaterThan(0);
    const links = [...store.streamRecords('$scavenges')].map((l) => l.data.toString());
    expect(links).toEqual([`0@$scavenges-${id}`, `${events.length - 1}@$scavenges-${id}`]);
  });
});
