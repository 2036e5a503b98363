import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import { ExpectedVersion, ReplicationLostError, WriteTimeoutError, type ReplicationGate, type ShippedBatch, type Store } from '../store/index.js';
import { commonPoint } from './epochs.js';
import {
  encodeFrame, FRAME, FrameError, frameName, recordsFrame, type ControlReply, type Frame, type Hello, type WriteRequest, type Written,
} from './frames.js';

// The leader's side of replication, and the writer's gate on the leader. Every durable batch is
// shipped to each follower that is live; a follower behind (new, restarted, or too slow for the
// live stream) is sent the log from where it stands, a page at a time, until it reaches the end,
// and then goes live. A batch's callers are answered once a quorum (the leader, whose batches
// are synced, and enough followers' acks of durable positions) holds the log up to its end and
// the leader's etcd lease surely still holds: a leader cut off from etcd never acknowledges past
// its lease, and its followers will have dropped it before another leader's term begins.

/** Records per catch-up frame. */
const CATCH_UP_RECORDS = 2000;
/** A live follower whose socket holds more unsent bytes than this falls back to catching up from the log. */
const MAX_UNSENT_BYTES = 32 * 1024 * 1024;
const HEARTBEAT_MS = 250;
/** Log bytes this leader holds that no quorum does yet, at most: beyond them writes are refused (503) until followers catch up. */
const MAX_UNCOMMITTED_BYTES = 64 * 1024 * 1024;
/** A write no quorum holds within this long fails (it may still survive: "500 Write timeout" in the established servers). */
export const WRITE_TIMEOUT_MS = 10_000;

interface Waiting {
  position: number;
  settle: () => void;
  fail: (err: Error) => void;
  since: number;
}

export class LeaderReplication implements ReplicationGate {
  private readonly sessions = new Set<FollowerSession>();
  private readonly waiting: Waiting[] = [];
  private ended: Error | undefined;
  private announcing = false;
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly store: Store, readonly term: number, private readonly clusterSize: number,
    private readonly leaseHolds: () => boolean, private readonly log: Logger) {
    this.timer = setInterval(() => this.tick(), HEARTBEAT_MS);
    this.timer.unref();
  }

  refusal(): string | undefined {
    if (this.ended) return this.ended.message;
    // Held back from readers and in memory until a quorum holds them: past this, no more writes.
    const waiting = this.store.logEnd - this.store.headPosition;
    if (waiting > MAX_UNCOMMITTED_BYTES) {
      return `no quorum holds the last ${Math.round(waiting / (1024 * 1024))} MB of the log: writes wait until a follower catches up`;
    }
    return undefined;
  }

  shipped(batch: ShippedBatch, nextPosition: number): void {
    for (const session of this.sessions) session.live(batch, nextPosition);
  }

  whenReplicated(position: number, settle: () => void, fail: (err: Error) => void): void {
    if (this.ended) {
      fail(this.ended);
      return;
    }
    this.waiting.push({ position, settle, fail, since: performance.now() });
    this.release();
  }

  /** The highest position a quorum holds durably: the leader's own end and its followers' acks, the majority-th highest. */
  quorumPosition(): number {
    const positions = [this.store.logEnd, ...[...this.sessions].map((s) => s.acked)].sort((a, b) => b - a);
    const majority = Math.floor(this.clusterSize / 2) + 1;
    return positions.length >= majority ? positions[majority - 1] : -1;
  }

  /** The followers' replication state, for gossip. */
  followers(): { name: string; acked: number; live: boolean }[] {
    return [...this.sessions].map((s) => ({ name: s.name, acked: s.acked, live: s.isLive }));
  }

  private release(): void {
    if (this.waiting.length === 0 || !this.leaseHolds()) return;
    const quorum = this.quorumPosition();
    let i = 0;
    while (i < this.waiting.length && this.waiting[i].position <= quorum) i++;
    if (i === 0) return;
    for (const w of this.waiting.splice(0, i)) w.settle();
    this.announceCommit();
  }

  /**
   * Tells the followers where the quorum holds the log (what readers see here): they show no more.
   * Once per turn of the event loop: the acks read in one turn make one COMMIT frame per follower.
   */
  private announceCommit(): void {
    if (this.announcing) return;
    this.announcing = true;
    setImmediate(() => {
      this.announcing = false;
      const commit = this.store.headPosition;
      for (const session of this.sessions) session.commit(commit);
    });
  }

  private tick(): void {
    this.release();
    const now = performance.now();
    while (this.waiting.length > 0 && now - this.waiting[0].since > WRITE_TIMEOUT_MS) {
      this.waiting.shift()!.fail(new WriteTimeoutError(`no quorum of the cluster held the write within ${WRITE_TIMEOUT_MS} ms`));
    }
    for (const session of this.sessions) session.heartbeat();
  }

  /** A follower connected for this term (its HELLO read): answers where the logs agree and starts sending. */
  attach(socket: Socket, hello: Hello, onFrame: (handler: (frame: Frame) => void) => void): void {
    if (this.ended) {
      socket.end(encodeFrame(FRAME.REFUSED, { message: 'this leader has ended its term' }));
      return;
    }
    for (const s of this.sessions) if (s.name === hello.name) s.close(); // its earlier connection
    const common = commonPoint(this.store, hello);
    socket.write(encodeFrame(FRAME.START, { term: this.term, common }));
    if (hello.logEnd > common) {
      this.log.info({ follower: hello.name, logEnd: hello.logEnd, common }, 'follower holds records past the common point: it truncates and reconnects');
      socket.end();
      return;
    }
    const session = new FollowerSession(this.store, socket, hello.name, hello.logEnd, this.log);
    this.sessions.add(session);
    this.log.info({ follower: hello.name, from: hello.logEnd, head: this.store.logEnd }, 'follower connected');
    session.commit(this.store.headPosition);
    socket.on('close', () => {
      this.sessions.delete(session);
      session.close();
      this.log.info({ follower: hello.name }, 'follower disconnected');
    });
    onFrame((frame) => {
      switch (frame.type) {
        case FRAME.ACK: return this.acked(session, frame.body);
        case FRAME.WRITE: return this.appendFor(session, frame.body);
        case FRAME.CONTROL_REPLY: return session.replied(frame.body);
        default: throw new FrameError(`a ${frameName(frame.type)} frame from a follower`);
      }
    });
    session.catchUp();
  }

  /** A follower's durable end: it holds only what this leader shipped, so never more than this log. */
  private acked(session: FollowerSession, position: number): void {
    if (position > this.store.logEnd) throw new FrameError(`an ACK of ${position}, past this leader's log end ${this.store.logEnd}`);
    session.acked = Math.max(session.acked, position);
    this.release();
  }

  /** Sends `request` to the follower named `name` (its ClusterHooks.serve answers); rejects when it is not connected. */
  request(name: string, request: unknown, timeoutMs: number): Promise<unknown> {
    const session = [...this.sessions].find((s) => s.name === name);
    if (!session) return Promise.reject(new Error(`${name} is not connected to this leader`));
    return session.request(request, timeoutMs);
  }

  /** A follower's own append (its node scavenge's point and history): appended here, answered WRITTEN once a quorum holds it. */
  private appendFor(session: FollowerSession, request: WriteRequest): void {
    const answer = (written: Written) => session.send(encodeFrame(FRAME.WRITTEN, written));
    const expected = ExpectedVersion.fromNumber(request.expected);
    if (!expected) {
      answer({ id: request.id, error: 'malformed write request' });
      return;
    }
    const events = request.events.map((e) => ({
      eventId: Buffer.from(e.eventId, 'base64'), eventType: e.eventType, isJson: e.isJson,
      data: Buffer.from(e.data, 'base64'), metadata: Buffer.from(e.metadata, 'base64'),
    }));
    this.store.append(request.stream, expected, events).then(
      (r) => answer({ id: request.id, firstEventNumber: r.firstEventNumber, position: r.position }),
      (err: Error) => answer({ id: request.id, error: `${err.name}: ${err.message}` }));
  }

  /** The term is over (lease lost, another leader, shutdown): every waiting write fails, followers are dropped. */
  end(err: Error): void {
    if (this.ended) return;
    this.ended = err instanceof ReplicationLostError ? err : new ReplicationLostError(err.message);
    clearInterval(this.timer);
    for (const w of this.waiting.splice(0)) w.fail(this.ended);
    for (const s of this.sessions) s.close();
    this.sessions.clear();
  }
}

/** One follower's connection on the leader. */
class FollowerSession {
  /** Durable end of the follower's log, as it last acknowledged. */
  acked: number;
  /** Where the next record to send starts (at least). */
  private cursor: number;
  private mode: 'catchUp' | 'live' = 'catchUp';
  private catchingUp = false;
  private closed = false;
  /** The commit position last sent (COMMIT). */
  private committed = -1;

  constructor(private readonly store: Store, private readonly socket: Socket, readonly name: string, from: number,
    private readonly log: Logger) {
    this.acked = from;
    this.cursor = from;
  }

  get isLive(): boolean {
    return this.mode === 'live';
  }

  live(batch: ShippedBatch, nextPosition: number): void {
    if (this.closed || this.mode !== 'live') return;
    if (this.socket.writableLength > MAX_UNSENT_BYTES) {
      // Too slow for the live stream: read the log from here instead, at the socket's pace.
      this.mode = 'catchUp';
      this.cursor = batch.positions[0];
      this.catchUp();
      return;
    }
    this.socket.write(recordsFrame(batch));
    this.cursor = nextPosition;
  }

  /** Sends the log from the cursor a page at a time (waiting for the socket to drain), then goes live. */
  catchUp(): void {
    if (this.catchingUp) return;
    this.catchingUp = true;
    void (async () => {
      try {
        while (!this.closed) {
          const batch = this.store.logRows(this.cursor, CATCH_UP_RECORDS);
          if (batch.positions.length === 0) {
            // Synchronously after the read that found nothing more: the next durable batch is shipped live.
            this.mode = 'live';
            this.cursor = this.store.logEnd;
            return;
          }
          const last = batch.positions.length - 1;
          this.cursor = batch.positions[last] + batch.records[last].length;
          if (!this.socket.write(recordsFrame(batch))) await drainedOrClosed(this.socket);
        }
      } catch (err) {
        this.log.warn({ follower: this.name, err: (err as Error).message }, 'sending the log to a follower failed');
        this.socket.destroy();
      } finally {
        this.catchingUp = false;
      }
    })();
  }

  private readonly requests = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }>();
  private nextRequest = 1;

  /** A CONTROL to this follower; resolves its CONTROL_REPLY's answer. */
  request(request: unknown, timeoutMs: number): Promise<unknown> {
    if (this.closed) return Promise.reject(new Error(`${this.name} is not connected`));
    const id = this.nextRequest++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.requests.delete(id);
        reject(new Error(`${this.name} did not answer within ${timeoutMs} ms`));
      }, timeoutMs);
      this.requests.set(id, { resolve, reject, timer });
      this.socket.write(encodeFrame(FRAME.CONTROL, { id, request }));
    });
  }

  replied(reply: ControlReply): void {
    const pending = this.requests.get(reply.id);
    if (!pending) return;
    this.requests.delete(reply.id);
    clearTimeout(pending.timer);
    if (reply.error !== undefined) pending.reject(new Error(reply.error));
    else pending.resolve(reply.answer);
  }

  /** A control frame (the answer to a follower's WRITE). */
  send(frame: Buffer): void {
    if (!this.closed) this.socket.write(frame);
  }

  /** COMMIT: the leader's commit position, when it moved since the last one sent. */
  commit(position: number): void {
    if (this.closed || position <= this.committed) return;
    this.committed = position;
    this.socket.write(encodeFrame(FRAME.COMMIT, position));
  }

  heartbeat(): void {
    if (this.closed) return;
    this.socket.write(encodeFrame(FRAME.HEARTBEAT, this.store.logEnd));
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const pending of this.requests.values()) {
      clearTimeout(pending.timer);
      pending.reject(new Error(`${this.name} disconnected`));
    }
    this.requests.clear();
    this.socket.destroy();
  }
}

function drainedOrClosed(socket: Socket): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      socket.off('drain', done);
      socket.off('close', done);
      resolve();
    };
    socket.once('drain', done);
    socket.once('close', done);
  });
}
