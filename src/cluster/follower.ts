import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import { ExpectedVersion, NotLeaderError, type AppendResult, type ProposedEvent, type Store } from '../store/index.js';
import { epochHistory } from './epochs.js';
import {
  decodeJson, decodePosition, decodeRecords, FRAME, FrameError, isStart, jsonFrame, positionFrame, readFrames,
  type Control, type Hello, type Start, type Written,
} from './frames.js';
import type { Transport } from './transport.js';

// A follower's side of replication: one connection to the leader of one term. HELLO names the
// term and where this log ends (with its newest epochs); START answers where the two logs agree.
// A follower holding records past that point must drop them (Sink.truncate: the truncate
// checkpoint, then a restart); otherwise it applies each record frame through the writer's
// replicated path, at the leader's positions, and acknowledges its durable end after each.

/** Record bytes being applied or waiting at most before the socket stops reading (back pressure on the leader). */
const MAX_APPLYING_BYTES = 64 * 1024 * 1024;
/** No frame from the leader (it sends heartbeats) for this long: the connection is dead. */
const SILENCE_MS = 3000;

export interface FollowerEvents {
  /** START received: the follower now receives the log. */
  started(): void;
  /** The follower reached the leader's end (per its heartbeat). */
  caughtUp(): void;
  /** The follower's log must end at `common` before it can follow. */
  truncate(common: number): void;
  /** The connection ended (`reason`); the node decides whether to reconnect. */
  closed(reason: string): void;
  /** Answers a request of the leader's (CONTROL). */
  serve?(request: unknown): Promise<unknown>;
}

export interface LeaderAddress {
  name: string;
  intHost: string;
  intPort: number;
  term: number;
}

export class FollowerReplication {
  private socket: Socket | undefined;
  private applying: Promise<void> = Promise.resolve();
  /** Bytes of records queued for the writer and not yet durable. */
  private inFlight = 0;
  private stopped = false;
  /** A batch failed to apply: later ones of this connection are refused. */
  private failed = false;
  private caughtUp = false;
  private silence: NodeJS.Timeout | undefined;
  private closedReason: string | undefined;
  /** The leader's commit position, as last heard (COMMIT). */
  private leaderCommit = 0;

  private renewal: NodeJS.Timeout | undefined;
  /** This node's own appends sent to the leader (WRITE), by id, until WRITTEN or the connection closes. */
  private readonly writes = new Map<number, { resolve: (w: Written) => void; reject: (e: Error) => void }>();
  private nextWrite = 1;

  /** `lifetimeMs`: the connection is replaced after about this long (certificates reloaded since take effect). */
  constructor(private readonly store: Store, private readonly leader: LeaderAddress, private readonly self: { name: string; instanceId: string },
    private readonly transport: Transport, private readonly events: FollowerEvents, private readonly log: Logger,
    private readonly lifetimeMs: number) {}

  get term(): number {
    return this.leader.term;
  }

  start(): void {
    const socket = this.transport.connect(this.leader.intHost, this.leader.intPort);
    this.socket = socket;
    socket.setNoDelay(true);
    socket.on('error', (err) => { this.closedReason ??= err.message; });
    // Followers renew at slightly different times, so the leader keeps a quorum meanwhile.
    this.renewal = setTimeout(() => {
      this.closedReason = 'connection renewed (--cluster-connection-lifetime)';
      socket.destroy();
    }, this.lifetimeMs * (0.9 + Math.random() * 0.1));
    this.renewal.unref();
    socket.on('close', () => {
      clearTimeout(this.silence);
      clearTimeout(this.renewal);
      if (!this.stopped) this.events.closed(this.closedReason ?? 'the leader closed the connection');
      this.stopped = true;
      this.failWrites();
    });
    const hello: Hello = {
      name: this.self.name, instanceId: this.self.instanceId, term: this.leader.term,
      epochs: epochHistory(this.store), logEnd: this.store.logEnd,
    };
    socket.write(jsonFrame(FRAME.HELLO, hello));
    this.armSilence();
    let started = false;
    readFrames(socket, (type, payload) => {
      this.armSilence();
      if (type === FRAME.REFUSED) {
        this.closedReason = `refused: ${payload.toString('utf8')}`;
        socket.destroy();
        return;
      }
      if (!started) {
        if (type !== FRAME.START) throw new FrameError('the first frame from the leader is not START');
        const start = decodeJson<Start>(payload, isStart);
        if (start.term !== this.leader.term) throw new FrameError(`START for term ${start.term}, not ${this.leader.term}`);
        started = true;
        if (hello.logEnd > start.common) {
          this.stop();
          this.events.truncate(start.common);
          return;
        }
        this.events.started();
        return;
      }
      if (type === FRAME.RECORDS) this.apply(decodeRecords(payload));
      else if (type === FRAME.COMMIT) this.committed(decodePosition(payload));
      else if (type === FRAME.HEARTBEAT) this.heard(payload.readDoubleBE(0));
      else if (type === FRAME.WRITTEN) this.written(JSON.parse(payload.toString('utf8')) as Written);
      else if (type === FRAME.CONTROL) this.control(JSON.parse(payload.toString('utf8')) as Control);
      else throw new FrameError(`unexpected frame ${type} from the leader`);
    });
  }

  /**
   * Appends through the leader (a follower writes nothing itself): resolves once the leader's
   * quorum holds the events and they are in this node's copy too.
   */
  async append(stream: string, expected: ExpectedVersion, events: ProposedEvent[]): Promise<Pick<AppendResult, 'firstEventNumber' | 'position'>> {
    if (this.stopped || !this.socket) throw new NotLeaderError('not connected to the leader');
    const id = this.nextWrite++;
    const written = await new Promise<Written>((resolve, reject) => {
      this.writes.set(id, { resolve, reject });
      this.socket!.write(jsonFrame(FRAME.WRITE, {
        id, stream, expected: ExpectedVersion.toNumber(expected),
        events: events.map((e) => ({
          eventId: e.eventId.toString('base64'), eventType: e.eventType, isJson: e.isJson,
          data: e.data.toString('base64'), metadata: e.metadata.toString('base64'),
        })),
      }));
    });
    if (written.error !== undefined || written.position === undefined || written.firstEventNumber === undefined) {
      throw new Error(`the leader refused the write to ${stream}: ${written.error ?? 'no position'}`);
    }
    // The record at `position` is replicated and committed here: this node's reads show it.
    const deadline = performance.now() + 10_000;
    while (this.store.headPosition <= written.position) {
      if (this.stopped) throw new NotLeaderError('the connection to the leader closed before the write was replicated');
      if (performance.now() > deadline) throw new Error(`the write to ${stream} was not replicated here within 10 s`);
      await new Promise((r) => setTimeout(r, 10));
    }
    return { firstEventNumber: written.firstEventNumber, position: written.position };
  }

  /** A request from the leader to this node's own services (FollowerEvents.serve), answered CONTROL_REPLY. */
  private control(c: Control): void {
    const reply = (body: Record<string, unknown>) => {
      if (!this.stopped) this.socket!.write(jsonFrame(FRAME.CONTROL_REPLY, { id: c.id, ...body }));
    };
    const serve = this.events.serve;
    if (!serve) {
      reply({ error: 'this node serves no requests' });
      return;
    }
    serve(c.request).then((answer) => reply({ answer }), (err: Error) => reply({ error: err.message }));
  }

  private written(w: Written): void {
    const pending = this.writes.get(w.id);
    if (!pending) return;
    this.writes.delete(w.id);
    pending.resolve(w);
  }

  private failWrites(): void {
    for (const pending of this.writes.values()) pending.reject(new NotLeaderError('the connection to the leader closed'));
    this.writes.clear();
  }

  private armSilence(): void {
    clearTimeout(this.silence);
    this.silence = setTimeout(() => {
      this.closedReason = `no frame from the leader for ${SILENCE_MS} ms`;
      this.socket?.destroy();
    }, SILENCE_MS);
    this.silence.unref();
  }

  private apply(batch: ReturnType<typeof decodeRecords>): void {
    let bytes = 0;
    for (const r of batch.records) bytes += r.length;
    this.inFlight += bytes;
    if (this.inFlight >= MAX_APPLYING_BYTES) this.socket!.pause();
    // Queued in the writer at once (batches that wait together are written with one fsync);
    // acknowledged in order as each becomes durable.
    const applied = this.store.applyReplicated(batch, () => !this.failed && !this.stopped);
    this.applying = this.applying.then(async () => {
      try {
        await applied;
      } catch (err) {
        if (!this.failed && !this.stopped) this.log.error({ err: (err as Error).message }, 'a replicated batch could not be applied; reconnecting');
        this.failed = true;
        this.closedReason ??= (err as Error).message;
        this.socket?.destroy();
        return;
      } finally {
        this.inFlight -= bytes;
        if (this.inFlight < MAX_APPLYING_BYTES / 2) this.socket?.resume();
      }
      if (this.stopped) return;
      this.socket!.write(positionFrame(FRAME.ACK, this.store.logEnd));
      // (the leader's commit may have arrived before these records did)
      this.store.commitThrough(this.leaderCommit);
    });
  }

  /** The leader's quorum holds its log up to `position`: what this copy holds of it is shown to readers. */
  private committed(position: number): void {
    this.leaderCommit = Math.max(this.leaderCommit, position);
    if (!this.stopped) this.store.commitThrough(this.leaderCommit);
  }

  private heard(leaderHead: number): void {
    // Acknowledge on every heartbeat too: the leader learns our end even when no records flow.
    void this.applying.then(() => {
      if (this.stopped) return;
      this.socket!.write(positionFrame(FRAME.ACK, this.store.logEnd));
      if (!this.caughtUp && this.store.logEnd >= leaderHead) {
        this.caughtUp = true;
        this.events.caughtUp();
      }
    });
  }

  /** Closes the connection; resolves once no replicated batch is being applied. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.silence);
    clearTimeout(this.renewal);
    this.socket?.destroy();
    this.failWrites();
    await this.applying;
  }
}
