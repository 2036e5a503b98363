import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import { ExpectedVersion, NotLeaderError, type AppendResult, type ProposedEvent, type ShippedBatch, type Store } from '../store/index.js';
import { epochHistory } from './epochs.js';
import {
  encodeFrame, FRAME, FrameError, frameName, PROTOCOL_VERSION, readFrames, type Control, type Frame, type Hello, type Written,
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
/** A write the leader acknowledged that this node's reads do not show within this long fails (the leader's own write timeout). */
const SEEN_HERE_MS = 10_000;

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
  /** The leader's log end, as last heard (HEARTBEAT); undefined before the first. */
  private leaderHead: number | undefined;

  private renewal: NodeJS.Timeout | undefined;
  /** This node's own appends sent to the leader (WRITE), by id, until WRITTEN or the connection closes. */
  private readonly writes = new Map<number, { resolve: (w: Written) => void; reject: (e: Error) => void }>();
  private nextWrite = 1;
  /** Aborted when the connection closes: appends waiting to see their write here stop waiting. */
  private readonly closing = new AbortController();

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
      version: PROTOCOL_VERSION, name: this.self.name, instanceId: this.self.instanceId, term: this.leader.term,
      epochs: epochHistory(this.store), logEnd: this.store.logEnd,
    };
    socket.write(encodeFrame(FRAME.HELLO, hello));
    this.armSilence();
    let started = false;
    readFrames(socket, (frame) => {
      this.armSilence();
      if (frame.type === FRAME.REFUSED) {
        this.closedReason = `refused: ${frame.body.message}`;
        socket.destroy();
      } else if (!started) {
        if (frame.type !== FRAME.START) throw new FrameError(`the first frame from the leader is ${frameName(frame.type)}, not START`);
        if (frame.body.term !== this.leader.term) throw new FrameError(`START for term ${frame.body.term}, not ${this.leader.term}`);
        started = true;
        this.started(hello.logEnd, frame.body.common);
      } else {
        this.received(frame);
      }
    }, (err) => {
      this.closedReason ??= err instanceof FrameError ? `a frame from the leader that does not fit the protocol: ${err.message}` : `handling a frame from the leader failed: ${err.message}`;
    });
  }

  /** START: the follower's log from `logEnd` follows the leader's, or must first be cut back to `common`. */
  private started(logEnd: number, common: number): void {
    if (logEnd > common) {
      void this.stop();
      this.events.truncate(common);
      return;
    }
    this.events.started();
  }

  /** A frame after START. */
  private received(frame: Frame): void {
    switch (frame.type) {
      case FRAME.RECORDS: return this.apply(frame.body);
      case FRAME.COMMIT: return this.committed(frame.body);
      case FRAME.HEARTBEAT: return this.heard(frame.body);
      case FRAME.WRITTEN: return this.written(frame.body);
      case FRAME.CONTROL: return this.control(frame.body);
      default: throw new FrameError(`a ${frameName(frame.type)} frame from the leader`);
    }
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
      this.socket!.write(encodeFrame(FRAME.WRITE, {
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
    await this.seenHere(written.position, stream);
    return { firstEventNumber: written.firstEventNumber, position: written.position };
  }

  /** Resolves once this node's reads show the record at `position` (it is replicated and committed here). */
  private async seenHere(position: number, stream: string): Promise<void> {
    const seen = () => this.store.headPosition > position;
    if (seen()) return;
    // Reads show a batch before the commit bus publishes it: each publication is the moment to look again.
    if (await this.store.bus.waitFor(seen, SEEN_HERE_MS, this.closing.signal)) return;
    if (this.stopped) throw new NotLeaderError('the connection to the leader closed before the write was replicated');
    throw new Error(`the write to ${stream} was not replicated here within ${SEEN_HERE_MS / 1000} s`);
  }

  /** A request from the leader to this node's own services (FollowerEvents.serve), answered CONTROL_REPLY. */
  private control(c: Control): void {
    const reply = (body: Record<string, unknown>) => {
      if (!this.stopped) this.socket!.write(encodeFrame(FRAME.CONTROL_REPLY, { id: c.id, ...body }));
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
    this.closing.abort();
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

  private apply(batch: ShippedBatch): void {
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
      this.socket!.write(encodeFrame(FRAME.ACK, this.store.logEnd));
      // (the leader's commit may have arrived before these records did)
      this.store.commitThrough(this.leaderCommit);
    });
  }

  /** The leader's quorum holds its log up to `position`: what this copy holds of it is shown to readers. */
  private committed(position: number): void {
    this.leaderCommit = Math.max(this.leaderCommit, position);
    if (!this.stopped) this.store.commitThrough(this.leaderCommit);
  }

  /** Bytes of the leader's log (its end as last heard) not written here yet; undefined before the first heartbeat. */
  get lagBytes(): number | undefined {
    return this.leaderHead === undefined ? undefined : Math.max(0, this.leaderHead - this.store.logEnd);
  }

  private heard(leaderHead: number): void {
    this.leaderHead = leaderHead;
    // Acknowledge on every heartbeat too: the leader learns our end even when no records flow.
    void this.applying.then(() => {
      if (this.stopped) return;
      this.socket!.write(encodeFrame(FRAME.ACK, this.store.logEnd));
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
