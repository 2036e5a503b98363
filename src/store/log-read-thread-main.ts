import { parentPort, workerData } from 'node:worker_threads';
import { LogSpaces } from './log-spaces.js';
import { Rocks } from './rocks.js';
import type { ForwardRead, ThreadAnswer } from './log-read-thread.js';
import { isStop } from './handle-thread.js';

// The log-read thread (log-read-thread.ts): reads rows of the log through the store's open
// RocksDB handle and answers with them packed into three transferable buffers.
//
// A reader of much of the log asks for page after page, each from where the last one ended, and
// only asks for the next once the last has reached it: the thread stood idle for that round trip
// (a catch-up's event loop waited on reads for 2.4 of 3.4 s while the thread was 70% busy). So
// once it has answered a full page the thread reads the pages after it (DEPTH of them, each once
// no request waits) and keeps them a moment for the requests that follow. A page read so is
// handed out only while it is fresh (FRESH_MS: what it holds is what a read would find), to a
// request from exactly where the page before ended, and, when the request's end of the log is
// later than the page's, only if the page is full (then no record past the earlier end belongs to it).

const { handle, splitFrom } = workerData as { handle: bigint; splitFrom: number };
const spaces = new LogSpaces(await Rocks.attach(handle), splitFrom);
/** Told to stop (HandleThread.close): no more reads ahead; the thread ends once idle. */
let stopping = false;

interface Packed {
  count: number;
  positions: Float64Array<ArrayBuffer>;
  offsets: Uint32Array<ArrayBuffer>;
  bytes: Buffer<ArrayBuffer>;
  /** Where the page after it starts, when there is one to read ahead. */
  next: number | undefined;
}
interface Ahead { read: ForwardRead; packed: Packed; at: number }

/** Pages read ahead of a reader, and kept at most (by where they start), and their bytes at most (big events make big pages). */
const DEPTH = 3;
const MAX_AHEAD = 16;
const MAX_AHEAD_BYTES = 16 * 1024 * 1024;
const FRESH_MS = 50;
const ahead = new Map<number, Ahead>();
let aheadBytes = 0;

function keep(from: number, kept: Ahead): void {
  // (pages no reader came for in time are of no use: a reader that stopped leaves its own behind)
  for (const [at, old] of ahead) if (kept.at - old.at > FRESH_MS) drop(at);
  while (ahead.size >= MAX_AHEAD) drop(ahead.keys().next().value!);
  ahead.set(from, kept);
  aheadBytes += kept.packed.bytes.length;
}

function drop(from: number): Ahead | undefined {
  const kept = ahead.get(from);
  if (!kept) return undefined;
  ahead.delete(from);
  aheadBytes -= kept.packed.bytes.length;
  return kept;
}

function read(request: ForwardRead): Packed {
  const { from, limit, to, userOnly } = request;
  const rows = spaces.forward(from, limit, to, userOnly === true);
  const count = rows.positions.length;
  let total = 0;
  for (const v of rows.values) total += v.length;
  // (Buffer#copy: TypedArray#set from the binding's Buffers took 0.7 µs a row, copy 0.04)
  const bytes = Buffer.allocUnsafeSlow(total); // (its own ArrayBuffer: it is transferred)
  const offsets = new Uint32Array(count + 1);
  const positions = Float64Array.from(rows.positions);
  let at = 0;
  for (let i = 0; i < count; i++) {
    offsets[i] = at;
    at += rows.values[i].copy(bytes, at);
  }
  offsets[count] = at;
  // A full page may have more after it (fewer rows than asked: the end of what it may read).
  const next = limit !== undefined && count === limit ? positions[count - 1] + (offsets[count] - offsets[count - 1]) : undefined;
  return { count, positions, offsets, bytes, next: next !== undefined && next < to ? next : undefined };
}

/** The page read ahead for `request`, if it is what a read now would answer. */
function takeAhead(request: ForwardRead): Packed | undefined {
  const kept = drop(request.from);
  if (!kept) return undefined;
  const { read: r, packed } = kept;
  const fits = r.limit === request.limit && r.userOnly === request.userOnly
    && (r.to === request.to || (request.to > r.to && packed.next !== undefined));
  return fits && performance.now() - kept.at <= FRESH_MS ? packed : undefined;
}

/** Reads the page starting at `from` ahead (unless it is kept already), then the one after it, up to `depth` pages. */
function readAhead({ limit, to, userOnly }: ForwardRead, from: number, depth: number): void {
  if (stopping) return;
  let at: number | undefined = from;
  // (pages already read ahead count: a reader that keeps up has DEPTH waiting)
  while (at !== undefined && depth > 0 && ahead.has(at)) {
    at = ahead.get(at)!.packed.next;
    depth--;
  }
  if (at === undefined || depth <= 0) return;
  const request: ForwardRead = { from: at, limit, to, userOnly };
  setImmediate(() => { // (after any request that came meanwhile)
    if (ahead.has(request.from) || aheadBytes >= MAX_AHEAD_BYTES) return;
    let packed: Packed;
    try {
      packed = read(request);
    } catch {
      return; // (a read ahead that fails is only not kept: the request itself will say why)
    }
    keep(request.from, { read: request, packed, at: performance.now() });
    if (packed.next !== undefined && depth > 1) readAhead(request, packed.next, depth - 1);
  });
}

parentPort!.on('message', (request: ForwardRead & { id: number }) => {
  if (isStop(request)) {
    stopping = true;
    parentPort!.close(); // ends once the read under way, if any, is done
    return;
  }
  const { id } = request;
  let packed: Packed;
  try {
    packed = takeAhead(request) ?? read(request);
  } catch (err) {
    const failed: ThreadAnswer = { id, error: (err as Error).message };
    parentPort!.postMessage(failed);
    return;
  }
  const { count, positions, offsets, bytes, next } = packed;
  const answer: ThreadAnswer = { id, count, positions: positions.buffer, offsets: offsets.buffer, bytes: bytes.buffer };
  parentPort!.postMessage(answer, [positions.buffer, offsets.buffer, bytes.buffer]);
  if (next !== undefined) readAhead(request, next, DEPTH);
});
