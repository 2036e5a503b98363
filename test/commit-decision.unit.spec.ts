import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  decideAppend, decideDelete, doorRefusal, type AppendDecision, type DeleteDecision, type StreamView,
} from '../src/store/commit-decision.js';
import {
  EMPTY_METADATA, ExpectedVersion, InvalidWriteError, metastreamOf, newUuid, parseMetadata, proposedEvent, Store, StreamDeletedError,
  WrongExpectedVersionError, type ProposedEvent, type StreamInfo, type StreamMetadata,
} from '../src/store/index.js';

// The commit decision (src/store/commit-decision.ts) against streams held in memory: what an
// append or a delete does for every expected version and every state a stream can be in, when an
// append is a retry, and what is refused. Then, on a real store, that a refusal changes nothing.

/** Streams in memory, as the writer's view shows them (each write's first id indexed, as the writer does). */
class Streams implements StreamView {
  private readonly infos = new Map<string, StreamInfo>();
  private readonly metadata = new Map<string, StreamMetadata>();
  /** Per stream number: each event's id, position (-1: removed) and whether it began a write. */
  private readonly events = new Map<number, { id: Buffer; position: number; first: boolean }[]>();
  private nextPosition = 0;

  write(streamId: string, ids: Buffer[]): void {
    const info = this.infos.get(streamId) ?? { streamNumber: this.infos.size + 1, lastEventNumber: -1, tombstoned: false };
    const events = this.events.get(info.streamNumber) ?? [];
    ids.forEach((id, i) => events.push({ id, position: (this.nextPosition += 100), first: i === 0 }));
    this.events.set(info.streamNumber, events);
    this.infos.set(streamId, { ...info, lastEventNumber: info.lastEventNumber + ids.length });
  }

  setMetadata(streamId: string, doc: string): void {
    this.write(metastreamOf(streamId), [newUuid()]);
    this.metadata.set(streamId, parseMetadata(Buffer.from(doc)));
  }

  softDelete(streamId: string): void {
    this.setMetadata(streamId, '{"$tb":9223372036854775807}');
  }

  tombstone(streamId: string): void {
    const info = this.infos.get(streamId) ?? { streamNumber: this.infos.size + 1, lastEventNumber: -1, tombstoned: false };
    this.infos.set(streamId, { ...info, tombstoned: true });
  }

  /** A scavenge removed the stream's first events. */
  remove(streamId: string, count: number): void {
    const events = this.events.get(this.infos.get(streamId)!.streamNumber)!;
    for (let i = 0; i < count; i++) events[i].position = -1;
  }

  info(streamId: string): StreamInfo | undefined {
    return this.infos.get(streamId);
  }

  metadataOf(streamId: string): StreamMetadata {
    return this.metadata.get(streamId) ?? EMPTY_METADATA;
  }

  eventNumberOf(info: StreamInfo, eventId: Buffer): number | undefined {
    const n = (this.events.get(info.streamNumber) ?? []).findIndex((e) => e.first && e.id.equals(eventId));
    return n < 0 ? undefined : n;
  }

  eventIdAt(_streamId: string, info: StreamInfo, eventNumber: number): Buffer | undefined {
    const e = this.events.get(info.streamNumber)?.[eventNumber];
    return e && e.position >= 0 ? e.id : undefined;
  }

  positionOf(info: StreamInfo, eventNumber: number): number {
    return this.events.get(info.streamNumber)?.[eventNumber]?.position ?? -1;
  }
}

function event(eventId = newUuid()): ProposedEvent {
  return proposedEvent({ eventType: 'T', data: '{}', isJson: true, eventId });
}

/** The states a stream can be in: each with two events (0 and 1) where it has any. */
function streams(): Streams {
  const s = new Streams();
  s.write('existing', [newUuid(), newUuid()]);
  s.write('soft-deleted', [newUuid(), newUuid()]);
  s.softDelete('soft-deleted');
  s.write('tombstoned', [newUuid(), newUuid()]);
  s.tombstone('tombstoned');
  s.setMetadata('metadata-only', '{"$maxCount":5}');
  return s;
}

/** A decision as a short text: write@N (+$tb=M), replay@N, wrong(current), deleted, invalid(rule), soft-delete, tombstone. */
function shown(d: AppendDecision | DeleteDecision): string {
  switch (d.kind) {
    case 'write': return `write@${d.firstEventNumber}${d.recreate ? ` +$tb=${String(d.recreate.$tb)}` : ''}`;
    case 'replay': return `replay@${d.result.firstEventNumber}`;
    case 'refuse':
      if (d.error instanceof WrongExpectedVersionError) return `wrong(${d.error.currentVersion})`;
      if (d.error instanceof StreamDeletedError) return 'deleted';
      return `invalid(${d.error.rule})`;
    default: return d.kind;
  }
}

const STATES = ['missing', 'existing', 'soft-deleted', 'tombstoned', 'metadata-only'] as const;
const EXPECTED: [string, ExpectedVersion][] = [
  ['any', ExpectedVersion.any], ['noStream', ExpectedVersion.noStream], ['streamExists', ExpectedVersion.streamExists],
  ['exact(1)', ExpectedVersion.exact(1)], ['exact(0)', ExpectedVersion.exact(0)],
];

describe('an append of new events', () => {
  it('is written, refused as a wrong version, or refused as deleted, by expected version and stream state', () => {
    const view = streams();
    const table = Object.fromEntries(EXPECTED.map(([name, expected]) => [name,
      STATES.map((state) => shown(decideAppend(view, state, expected, [event(), event()]))).join(' | ')]));
    expect(table).toEqual({
      // missing | existing | soft-deleted (recreated) | tombstoned | metadata-only
      any: 'write@0 | write@2 | write@2 +$tb=2 | deleted | write@0',
      noStream: 'write@0 | wrong(1) | write@2 +$tb=2 | deleted | write@0',
      streamExists: 'wrong(-1) | write@2 | deleted | deleted | write@0',
      'exact(1)': 'wrong(-1) | write@2 | write@2 +$tb=2 | deleted | wrong(-1)',
      'exact(0)': 'wrong(-1) | wrong(1) | wrong(1) | deleted | wrong(-1)',
    });
  });

  it('to the metadata stream of a hard-deleted stream is refused as deleted', () => {
    expect(shown(decideAppend(streams(), metastreamOf('tombstoned'), ExpectedVersion.any, [event()]))).toBe('deleted');
  });

  it('recreating a soft-deleted stream keeps its other metadata beside the new $tb', () => {
    const view = new Streams();
    view.write('s', [newUuid()]);
    view.setMetadata('s', '{"$tb":9223372036854775807,"custom":"kept"}');
    const decision = decideAppend(view, 's', ExpectedVersion.any, [event()]);
    expect(decision).toEqual({ kind: 'write', firstEventNumber: 1, recreate: { custom: 'kept', $tb: 1 } });
  });
});

describe('a retry of a completed append', () => {
  const ids = [newUuid(), newUuid()];
  const later = newUuid();
  function written(): Streams {
    const view = new Streams();
    view.write('s', ids);
    view.write('s', [later]);
    return view;
  }
  const retry = () => ids.map((id) => event(id));

  it('answers the original write\'s numbers and position, writing nothing, for every expectation it met', () => {
    const view = written();
    for (const expected of [ExpectedVersion.any, ExpectedVersion.streamExists, ExpectedVersion.noStream]) {
      expect(decideAppend(view, 's', expected, retry())).toEqual({
        kind: 'replay', result: { firstEventNumber: 0, lastEventNumber: 1, position: view.positionOf(view.info('s')!, 0), idempotent: true },
      });
    }
    expect(shown(decideAppend(view, 's', ExpectedVersion.exact(1), [event(later)]))).toBe('replay@2');
  });

  it('with an exact version is a retry only where that version put its first event', () => {
    const view = written();
    expect(shown(decideAppend(view, 's', ExpectedVersion.exact(0), [event(later)]))).toBe('wrong(2)');
    expect(shown(decideAppend(view, 's', ExpectedVersion.exact(2), [event(later)]))).toBe('write@3');
  });

  it('matching only in part is a conflict, not a retry', () => {
    expect(shown(decideAppend(written(), 's', ExpectedVersion.any, [event(ids[0]), event()]))).toBe('wrong(2)');
    expect(shown(decideAppend(written(), 's', ExpectedVersion.any, [event(ids[0]), event(ids[1]), event()]))).toBe('wrong(2)');
  });

  it('is a new write once a scavenge removed the original, or when its writer never retries by id', () => {
    const removed = written();
    removed.remove('s', 2);
    expect(shown(decideAppend(removed, 's', ExpectedVersion.any, retry()))).toBe('write@3');
    const once = retry().map((e) => ({ ...e, idempotent: false }));
    expect(shown(decideAppend(written(), 's', ExpectedVersion.any, once))).toBe('write@3');
  });

  it('expecting no stream of a soft-deleted stream recreates it, even with the ids of its first write', () => {
    const view = written();
    view.softDelete('s');
    expect(shown(decideAppend(view, 's', ExpectedVersion.noStream, retry()))).toBe('write@3 +$tb=3');
  });
});

describe('a delete', () => {
  it('soft or hard, is decided by the same expected-version check as an append', () => {
    const view = streams();
    const table = Object.fromEntries(EXPECTED.flatMap(([name, expected]) => [true, false].map((hard) => [`${name} ${hard ? 'hard' : 'soft'}`,
      STATES.map((state) => shown(decideDelete(view, state, expected, hard))).join(' | ')])));
    expect(table).toEqual({
      // missing | existing | soft-deleted | tombstoned | metadata-only
      'any hard': 'tombstone | tombstone | tombstone | deleted | tombstone',
      'any soft': 'wrong(-1) | soft-delete | soft-delete | deleted | soft-delete',
      'noStream hard': 'tombstone | wrong(1) | tombstone | deleted | tombstone',
      'noStream soft': 'wrong(-1) | wrong(1) | soft-delete | deleted | soft-delete',
      'streamExists hard': 'wrong(-1) | tombstone | deleted | deleted | tombstone',
      'streamExists soft': 'wrong(-1) | soft-delete | deleted | deleted | soft-delete',
      'exact(1) hard': 'wrong(-1) | tombstone | tombstone | deleted | wrong(-1)',
      'exact(1) soft': 'wrong(-1) | soft-delete | soft-delete | deleted | wrong(-1)',
      'exact(0) hard': 'wrong(-1) | wrong(1) | wrong(1) | deleted | wrong(-1)',
      'exact(0) soft': 'wrong(-1) | wrong(1) | wrong(1) | deleted | wrong(-1)',
    });
  });
});

describe('the write door', () => {
  it('refuses an operation by the first stream or event that breaks a rule, and lets the node write a reserved stream', () => {
    const limits = { maxEventBytes: 100 };
    const big = proposedEvent({ eventType: 'T', data: 'x'.repeat(101), isJson: false });
    const rule = (d: ReturnType<typeof doorRefusal>) => (d?.error instanceof InvalidWriteError ? d.error.rule : d);
    expect(rule(doorRefusal({ kind: 'append', streamId: '$all', expected: ExpectedVersion.any, events: [event()] }, limits))).toBe('stream-name');
    expect(rule(doorRefusal({ kind: 'append', streamId: 's', expected: ExpectedVersion.any, events: [event(), big] }, limits))).toBe('event-size');
    expect(rule(doorRefusal({ kind: 'delete', streamId: '$epochs', expected: ExpectedVersion.any, hard: true }, limits))).toBe('reserved');
    expect(rule(doorRefusal({ kind: 'append', streamId: '$epochs', expected: ExpectedVersion.any, events: [event()], reserved: true }, limits)))
      .toBeUndefined();
    expect(rule(doorRefusal({
      kind: 'transaction', deferSync: false,
      writes: [
        { streamId: 'a', expected: ExpectedVersion.any, events: [event()] },
        { streamId: '$$a', expected: ExpectedVersion.any, events: [proposedEvent({ eventType: '$metadata', data: '[1]', isJson: true })] },
      ],
    }, limits))).toBe('metadata');
  });
});

describe('a refusal in a batch', () => {
  const dirs: string[] = [];
  const stores: Store[] = [];
  afterEach(async () => {
    for (const s of stores.splice(0)) await s.close();
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  it('changes nothing: a transaction refused at its last write leaves no trace of its first, and the batch goes on', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-decision-'));
    dirs.push(dir);
    const store = await Store.open({ dir, inMemory: false, chunkSize: 64 * 1024 });
    stores.push(store);
    await store.append('t', ExpectedVersion.any, [event()]);
    const before = { end: store.logEnd, count: store.recordCount, streams: store.streamCount, t: store.streamInfo('t') };
    // Queued in one tick: one batch. Each refused operation fails alone.
    const outcomes = await Promise.allSettled([
      store.transact([
        { streamId: 'fresh', expected: ExpectedVersion.any, events: [event()] },
        { streamId: '$$fresh', expected: ExpectedVersion.any, events: [event()] },
        { streamId: 't', expected: ExpectedVersion.exact(5), events: [event()] },
      ]),
      store.append('t', ExpectedVersion.noStream, [event()]),
      store.deleteStream('never', ExpectedVersion.any, false),
      store.deleteStream('t', ExpectedVersion.exact(3), true),
    ]);
    expect(outcomes.map((o) => (o.status === 'rejected' ? o.reason.constructor.name : 'written')))
      .toEqual(['WrongExpectedVersionError', 'WrongExpectedVersionError', 'WrongExpectedVersionError', 'WrongExpectedVersionError']);
    expect({ end: store.logEnd, count: store.recordCount, streams: store.streamCount, t: store.streamInfo('t') }).toEqual(before);
    for (const stream of ['fresh', '$$fresh', 'never']) expect(store.streamInfo(stream)).toBeUndefined();
    // The next write takes the numbers and the stream number nothing refused took.
    expect(await store.append('t', ExpectedVersion.exact(0), [event()])).toMatchObject({ firstEventNumber: 1, idempotent: false });
    await store.append('fresh', ExpectedVersion.noStream, [event()]);
    expect(store.streamCount).toBe(before.streams + 1);
  });
});
