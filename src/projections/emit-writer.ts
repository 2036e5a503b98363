import {
  LINK_EVENT_TYPE, metadataEvent, metastreamOf, proposedEvent, type Store, type StreamWrite,
} from '../store/index.js';
import type { EmittedEvent } from './sandbox.js';
import { encodeCheckpointBody, readTag, tagMetadata, type PartitionValue } from './checkpoint-codec.js';
import type { CheckpointContent } from './partition-cache.js';
import { event, WriteSet } from './write-set.js';
import { LoopSlices } from '../loop-slices.js';
import {
  checkpointStream, emittedStreamsStream, EVENT, partitionCheckpointStream, partitionResultStream, partitionsStream,
} from './streams.js';

// What one run of a projection writes: the events its handlers emitted and its results wait here
// for the next checkpoint, which writes them with the changed partitions and the checkpoint
// itself as one set of writes for ONE store transaction. The writer owns the rules of writing
// into a stream the projection emits to (it must be the projection's own, and what an older
// epoch wrote there is hidden); checkpoint bodies and tags come from checkpoint-codec.ts.
// A checkpoint's emitted events are made into writes in slices of the event loop's time (one
// event may emit hundreds of thousands), as the store then builds and writes them (client-writes.ts).

/** Bounds the streams a run remembers having claimed; a forgotten one is checked again from its last event. */
const OWNED_STREAMS_CACHE = 10_000;

/** What a run writes with, fixed for the run (a projection's definition and settings change only while it is stopped). */
export interface WriterRun {
  name: string;
  projectionId: number;
  epoch: number;
  /** The tag's `$v`. */
  tagVersion: string;
  trackEmittedStreams: boolean;
  /** `maxWriteBatchLength`: no write to one stream holds more events than this (0: no limit). */
  maxWriteLength: number;
  resultStreamName: string;
  partitionResultPattern: string | null;
  /** Whether a projection id belongs to a projection that still exists. */
  isLiveProjection(id: number): boolean;
}

/** One checkpoint's writes, for one transaction. */
export interface PreparedWrite {
  writes: StreamWrite[];
  /** Records in it (`checkpointStatus`). */
  records: number;
  /** Emitted and result events in it. */
  visibleEvents: number;
}

export class EmitWriter {
  /** Emitted events since the last checkpoint, in the order the handlers emitted them. */
  private emitted: EmittedEvent[] = [];
  /** Result changes since the last checkpoint, one per change in event order: [partition, result JSON | null]. */
  private results: [string, string | null][] = [];
  /** The write under way (a checkpoint starts only once the previous one is written). */
  private writing: PreparedWrite | undefined;
  /** Streams this run has checked it may write to (ownership, epoch truncation), least recently used first. */
  private readonly ownedStreams = new Map<string, true>();

  constructor(private readonly store: Store, private readonly run: WriterRun) {}

  /** Keeps what a batch emitted and its result changes for the next checkpoint. */
  add(emitted: readonly EmittedEvent[], results: readonly [string, string | null][]): void {
    // One handler may emit any number of events: never spread them into a call's arguments.
    if (this.emitted.length === 0) this.emitted = emitted.slice();
    else for (const e of emitted) this.emitted.push(e);
    for (const r of results) this.results.push(r);
  }

  /** Emitted events waiting for the next checkpoint. */
  get pendingEmits(): number {
    return this.emitted.length;
  }

  /** Emitted and result events waiting for the next checkpoint. */
  get pendingEvents(): number {
    return this.emitted.length + this.results.length;
  }

  /** The write under way, if any (`checkpointStatus`, writePendingEventsBeforeCheckpoint). */
  get inFlight(): PreparedWrite | undefined {
    return this.writing;
  }

  /**
   * Writes a prepared checkpoint as one transaction (`deferSync`: its fsync may wait for the next
   * synced write; `ahead`: before the other projections' checkpoints queued, see Store.transact).
   */
  async write(prepared: PreparedWrite, deferSync = false, ahead = false): Promise<void> {
    this.writing = prepared;
    try {
      await this.store.transact(prepared.writes, deferSync, ahead);
    } finally {
      this.writing = undefined;
    }
  }

  /** The most events pending for one emitted stream. */
  longestEmittedWrite(): number {
    const perStream = new Map<string, number>();
    let longest = 0;
    for (const e of this.emitted) {
      const n = (perStream.get(e.streamId) ?? 0) + 1;
      perStream.set(e.streamId, n);
      if (n > longest) longest = n;
    }
    return longest;
  }

  /**
   * The checkpoint at `position`: what is pending (after the events `atCheckpoint` adds, given
   * the tag), then the partitions and the root checkpoint. What was pending is in it now.
   */
  async checkpoint(position: number, content: CheckpointContent,
    atCheckpoint?: (tag: Record<string, unknown>) => EmittedEvent[]): Promise<PreparedWrite> {
    const { writes, tag } = this.begin(position);
    for (const e of atCheckpoint?.(tag) ?? []) this.emitted.push(e);
    await this.addEmitted(writes, tag);
    this.addResults(writes, tag);
    this.addCheckpoint(writes, tag, content, false);
    return this.prepared(writes);
  }

  /**
   * A query's end (§15): what is pending; its results, running ones (`phase2` undefined: a query
   * without handlers) or one Result per partition in the order given; $Eof; and with checkpoints
   * (`content`), its last checkpoint, marked completed.
   */
  async complete(position: number, phase2: readonly [string, PartitionValue][] | undefined,
    content: CheckpointContent | undefined): Promise<PreparedWrite> {
    const { writes, tag } = this.begin(position);
    await this.addEmitted(writes, tag);
    if (phase2 === undefined) this.addResults(writes, tag);
    else this.addQueryResults(writes, tag, phase2);
    const main = this.run.resultStreamName;
    this.claim(writes, main);
    writes.add(main, event(EVENT.eof, '', false, tag));
    if (content) this.addCheckpoint(writes, tag, content, true);
    return this.prepared(writes);
  }

  private begin(position: number): { writes: WriteSet; tag: Record<string, unknown> } {
    return { writes: new WriteSet(this.store, this.run.maxWriteLength), tag: tagMetadata(this.run.tagVersion, position) };
  }

  private prepared(writes: WriteSet): PreparedWrite {
    const visibleEvents = this.pendingEvents;
    this.emitted = [];
    this.results = [];
    return { writes: writes.toStreamWrites(), records: writes.count, visibleEvents };
  }

  /**
   * Emitted events, each with the tag added to its metadata; a stream new to the projection is
   * tracked if asked. In slices: nothing else changes what is pending meanwhile (the projection
   * waits for its checkpoint to start), and the streams claimed are the projection's own.
   */
  private async addEmitted(writes: WriteSet, tag: Record<string, unknown>): Promise<void> {
    // The tag's keys win over the emitted metadata's: appended last, JSON readers take the last duplicate.
    const tagJson = JSON.stringify(tag);
    const { name, trackEmittedStreams } = this.run;
    const emitted = this.emitted;
    const slices = new LoopSlices();
    for (let i = 0; i < emitted.length; i++) {
      if ((i & 63) === 0 && slices.due()) await slices.next();
      const e = emitted[i];
      const firstWrite = this.claim(writes, e.streamId);
      const own = JSON.stringify(e.metadata);
      const metadata = own === '{}' ? tagJson : `${own.slice(0, -1)},${tagJson.slice(1)}`;
      writes.add(e.streamId, proposedEvent({ eventType: e.eventType, data: e.data, isJson: e.isJson, metadata, idempotent: false }));
      // A stream this projection never wrote before is tracked with the write that first fills it.
      if (trackEmittedStreams && firstWrite) writes.add(emittedStreamsStream(name), event(EVENT.streamTracked, e.streamId, false, tag));
    }
  }

  /** Results per change (§11): one Result or ResultRemoved each, in event order; a partition's also linked from the main result stream. */
  private addResults(writes: WriteSet, tag: Record<string, unknown>): void {
    const { name, resultStreamName: main, partitionResultPattern } = this.run;
    for (const [partition, result] of this.results) {
      const type = result === null ? EVENT.resultRemoved : EVENT.result;
      const data = result ?? '';
      if (partition === '') {
        this.claim(writes, main);
        writes.add(main, event(type, data, result !== null, tag));
        continue;
      }
      const stream = partitionResultStream(name, partition, partitionResultPattern);
      this.claim(writes, stream);
      this.claim(writes, main);
      const n = writes.add(stream, event(type, data, result !== null, tag));
      writes.add(main, event(LINK_EVENT_TYPE, `${n}@${stream}`, false, tag));
    }
  }

  /** A query's phase 2: one Result per partition (no data when its result is null), marked with its partition. */
  private addQueryResults(writes: WriteSet, tag: Record<string, unknown>, partitions: readonly [string, PartitionValue][]): void {
    const main = this.run.resultStreamName;
    this.claim(writes, main);
    for (const [partition, v] of partitions) {
      writes.add(main, event(EVENT.result, v.result ?? '', v.result !== null, { ...tag, ...(partition ? { partition } : {}) }));
    }
  }

  /** New partitions registered, changed partitions' checkpoints, and the root checkpoint last (a completed query's marked $cp). */
  private addCheckpoint(writes: WriteSet, tag: Record<string, unknown>, content: CheckpointContent, completed: boolean): void {
    const { name } = this.run;
    for (const p of content.newPartitions) writes.add(partitionsStream(name), event(EVENT.partition, p, false, tag));
    // (up to thousands of partition streams, most of them not in the store's memory: read at once)
    const streams = Array.from(content.changed.keys(), (p) => partitionCheckpointStream(name, p));
    this.store.prefetchStreamInfos(streams);
    // A new one gets its metadata with its first checkpoint (WriteSet.addCheckpoint): its metastream
    // is read too, here and by the writer's decision. (One by one, these cost a catch-up of twenty
    // partitioned projections 8.6 s of the event loop's 190 in point reads.)
    this.store.prefetchStreamInfos(metastreamsOfNew(this.store, streams));
    let i = 0;
    for (const v of content.changed.values()) {
      writes.addCheckpoint(streams[i++], event(EVENT.partitionCheckpoint, encodeCheckpointBody(v), true, tag));
    }
    const rootTag = completed ? { ...tag, $cp: true } : tag;
    writes.addCheckpoint(checkpointStream(name), event(EVENT.checkpoint, encodeCheckpointBody(content.root), true, rootTag));
  }

  /**
   * Before the first write of a run to a stream: it must not hold events written by anyone else,
   * and events of an older epoch (before a reset) are hidden behind a new $tb. Returns whether the
   * stream is new to this projection.
   */
  private claim(writes: WriteSet, streamId: string): boolean {
    if (this.ownedStreams.delete(streamId)) {
      this.ownedStreams.set(streamId, true); // most recently used last
      return false;
    }
    const info = this.store.streamInfo(streamId);
    if (info?.tombstoned) throw new Error(`Stream : ${streamId} is deleted. Cannot emit events to it`);
    let firstWrite = true;
    const last = this.store.readEvent(streamId, -1);
    if (last.status === 'ok' && last.event.event) {
      const tag = readTag(last.event.event.metadata);
      if (!tag) throw new Error(`The '${streamId}' stream managed by projection ${this.run.name} has been written to from the outside.`);
      const mine = tag.projectionId === this.run.projectionId;
      if (!mine && this.run.isLiveProjection(tag.projectionId)) {
        throw new Error(`Multiple projections emitting to the same stream detected. Stream: '${streamId}'.`);
      }
      firstWrite = !mine;
      // Written by an older epoch of this projection, or by a deleted one: hide those events.
      if (!mine || tag.epoch < this.run.epoch) {
        const meta = { ...this.store.metadataOf(streamId).raw, $tb: info!.lastEventNumber + 1 };
        writes.add(metastreamOf(streamId), metadataEvent(meta, { idempotent: false }));
      }
    }
    this.ownedStreams.set(streamId, true);
    if (this.ownedStreams.size > OWNED_STREAMS_CACHE) this.ownedStreams.delete(this.ownedStreams.keys().next().value!);
    return firstWrite;
  }
}

/** The metastreams of those of `streams` that do not exist. */
function* metastreamsOfNew(store: Store, streams: readonly string[]): Generator<string> {
  for (const s of streams) if (!store.streamInfo(s)) yield metastreamOf(s);
}
