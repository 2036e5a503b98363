import { mkdtempSync, rmSync } from 'node:fs';
import { request as httpRequest, Agent } from 'node:http';
import { connect, type ClientHttp2Session } from 'node:http2';
import { randomUUID } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { methodOf } from '../src/api/grpc/codecs.js';
import { NODE_MAIN, startServer } from './processes.js';

// `npm run bench:grpc` (and part of `npm run bench`): the gRPC door beside the HTTP door in the
// same run, on the same node, with the same client model (CONCURRENCY calls in flight on kept-
// alive connections from this process, no decoding beyond what each protocol needs): appends of
// 1 and 100 events per call, reads of 20 events, and a catch-up subscription over EVENTS events
// (gRPC: one $all subscription until caught_up; HTTP: $all pages of 4,096 followed forward).
// Targets (issue 29): gRPC at least the HTTP figure for appends and reads, catch-up >= 300,000/s.

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const WARMUP = Number(process.env.BENCH_WARMUP_SECONDS ?? 2);
const EVENTS = Number(process.env.BENCH_GRPC_EVENTS ?? 1_000_000);
const CONCURRENCY = 32;
const CATCH_UP_TARGET = 300_000;
/** BENCH_GRPC_ONLY=append,read,catchup narrows the run; BENCH_CPU_PROF=dir profiles the node. */
const ONLY = (process.env.BENCH_GRPC_ONLY ?? 'append,read,catchup').split(',');
const CPU_PROF = process.env.BENCH_CPU_PROF;
const STREAMS = 'event_store.client.streams.Streams';
const AUTH = `Basic ${Buffer.from('admin:changeit').toString('base64')}`;
const log = (line: string) => process.stdout.write(`${line}\n`);
const int = (n: number) => Math.round(n).toLocaleString('en-US');

const append = methodOf(STREAMS, 'Append');
const read = methodOf(STREAMS, 'Read');

function frame(body: Buffer): Buffer {
  const out = Buffer.alloc(5 + body.length);
  out.writeUInt32BE(body.length, 1);
  body.copy(out, 5);
  return out;
}

const data = Buffer.from(JSON.stringify({ orderId: 'o-1234', amount: 42.5, currency: 'EUR', lines: [{ sku: 'A-1', qty: 2 }] }));

function appendFrames(stream: string, n: number): Buffer {
  const parts = [frame(append.requestSerialize({ options: { stream_identifier: { stream_name: Buffer.from(stream) }, any: {} } }))];
  for (let i = 0; i < n; i++) {
    parts.push(frame(append.requestSerialize({
      proposed_message: { id: { string: randomUUID() }, metadata: { type: 'OrderPlaced', 'content-type': 'application/json' }, data },
    })));
  }
  return Buffer.concat(parts);
}

function httpBody(n: number): string {
  return JSON.stringify(Array.from({ length: n }, () => ({ eventId: randomUUID(), eventType: 'OrderPlaced', data: JSON.parse(data.toString()) })));
}

/** One gRPC call: sends `body` (framed requests), resolves with the response bytes and the status. */
function grpcCall(session: ClientHttp2Session, path: string, body: Buffer, onData?: (chunk: Buffer) => void): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers', authorization: AUTH });
    let status = -1;
    s.on('response', (h) => { if (h['grpc-status'] !== undefined) status = Number(h['grpc-status']); });
    s.on('trailers', (h) => { status = Number(h['grpc-status']); });
    s.on('data', onData ?? (() => undefined));
    s.on('error', reject);
    s.on('close', () => resolve(status));
    s.end(body);
  });
}

function httpCall(agent: Agent, url: string, method: string, path: string, body?: string, headers: Record<string, string> = {}): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${url}${path}`, { method, agent, headers: { Authorization: AUTH, ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Calls/s of `op` with CONCURRENCY in flight, after a warm-up; every call must succeed. */
async function rate(op: (i: number) => Promise<boolean>): Promise<number> {
  let failed = 0;
  const run = async (seconds: number) => {
    const until = performance.now() + seconds * 1000;
    let done = 0;
    let i = 0;
    await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < until) {
        if (!(await op(i++))) failed++;
        done++;
      }
    }));
    return done / seconds;
  };
  await run(WARMUP);
  const measured = await run(SECONDS);
  if (failed > 0) throw new Error(`${failed} calls failed`);
  return measured;
}

/**
 * Counts ReadResp messages by their content arm (1: event, 8: caught_up) without decoding or
 * copying them: a message's first six bytes (frame header and content tag) are all it reads,
 * and it skips the rest of the message as the chunks arrive.
 */
function frameCounter(onCaughtUp: () => void) {
  const head = Buffer.alloc(6);
  let headLength = 0;
  let skip = 0;
  let events = 0;
  return {
    get events() { return events; },
    push(chunk: Buffer) {
      let at = 0;
      while (at < chunk.length) {
        if (skip > 0) {
          const n = Math.min(skip, chunk.length - at);
          skip -= n;
          at += n;
          continue;
        }
        head[headLength++] = chunk[at++];
        if (headLength < 6) continue;
        headLength = 0;
        const tag = head[5] >> 3;
        if (tag === 1) events++;
        else if (tag === 8) onCaughtUp();
        skip = head.readUInt32BE(1) - 1;
      }
    },
  };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(process.env.BENCH_DATA_DIR ?? tmpdir(), 'svc-bench-grpc-'));
  const server = await startServer('node', NODE_MAIN, ['--db', dir, '--log-level', 'warn', '--run-projections', 'None'],
    CPU_PROF ? ['--cpu-prof', '--cpu-prof-dir', CPU_PROF] : []);
  // The window a streaming client gives the server (the Rust client, which the Node client reads
  // through, asks for megabytes too): the default 64 KiB would measure round trips, not the node.
  const session = connect(server.url, { settings: { initialWindowSize: 4 * 1024 * 1024 } });
  session.on('connect', () => session.setLocalWindowSize(16 * 1024 * 1024));
  const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  const rows: { what: string; http: number; grpc: number; unit: string }[] = [];
  try {
    log(`gRPC beside HTTP: ${CONCURRENCY} calls in flight, ${WARMUP}s warm-up + ${SECONDS}s each`);
    for (const n of ONLY.includes('append') ? [1, 100] : []) {
      const grpcRate = await rate(async (i) => (await grpcCall(session, `/${STREAMS}/Append`, appendFrames(`g${n}-${i % 1000}`, n))) === 0);
      const httpRate = await rate(async (i) => (await httpCall(agent, server.url, 'POST', `/streams/h${n}-${i % 1000}`, httpBody(n),
        { 'Content-Type': 'application/vnd.eventstore.events+json' })).status === 201);
      rows.push({ what: `append ${n} event${n > 1 ? 's' : ''} per call`, http: httpRate * n, grpc: grpcRate * n, unit: 'events/s' });
      log(`  append ${n}: HTTP ${int(httpRate)} calls/s, gRPC ${int(grpcRate)} calls/s`);
    }
    const readReq = (stream: string) => frame(read.requestSerialize({
      options: { stream: { stream_identifier: { stream_name: Buffer.from(stream) }, start: {} }, count: '20', uuid_option: { string: {} }, no_filter: {} },
    }));
    if (ONLY.includes('read')) {
    const grpcRead = await rate(async (i) => (await grpcCall(session, `/${STREAMS}/Read`, readReq(`g100-${i % 1000}`))) === 0);
    const httpRead = await rate(async (i) => (await httpCall(agent, server.url, 'GET', `/streams/h100-${i % 1000}/0/forward/20?embed=body`, undefined,
      { Accept: 'application/vnd.eventstore.atom+json' })).status === 200);
    rows.push({ what: '20-event reads', http: httpRead, grpc: grpcRead, unit: 'reads/s' });
    log(`  read 20: HTTP ${int(httpRead)} reads/s, gRPC ${int(grpcRead)} reads/s`);
    }

    // Catch-up over EVENTS events in $all.
    if (ONLY.includes('catchup')) {
    log(`  seeding ${int(EVENTS)} events for the catch-up ...`);
    const seedBatches = Math.ceil(EVENTS / 100);
    let next = 0;
    await Promise.all(Array.from({ length: 8 }, async () => {
      while (next < seedBatches) {
        const i = next++;
        if ((await grpcCall(session, `/${STREAMS}/Append`, appendFrames(`seed-${i % 10_000}`, 100))) !== 0) throw new Error('seed append failed');
      }
    }));
    // HTTP first: the gRPC catch-up is the last thing the node does (BENCH_CPU_PROF: profile-summary's LAST_SECONDS).
    const pageStart = performance.now();
    let position = '00000000000000000000000000000000';
    let httpEvents = 0;
    for (;;) {
      const res = await httpCall(agent, server.url, 'GET', `/streams/%24all/${position}/forward/4096?embed=body`, undefined,
        { Accept: 'application/vnd.eventstore.atom+json' });
      const page = JSON.parse(res.text) as { entries: unknown[]; links: { relation: string; uri: string }[] };
      httpEvents += page.entries.length;
      const previous = page.links.find((l) => l.relation === 'previous');
      if (page.entries.length === 0 || !previous) break;
      position = previous.uri.split('/').at(-3)!;
    }
    const httpCatchUp = httpEvents / ((performance.now() - pageStart) / 1000);
    const subscribe = frame(read.requestSerialize({ options: { all: { start: {} }, subscription: {}, uuid_option: { string: {} }, no_filter: {} } }));
    const started = performance.now();
    let caughtUpAt = 0;
    const sub = session.request({ ':method': 'POST', ':path': `/${STREAMS}/Read`, 'content-type': 'application/grpc', te: 'trailers', authorization: AUTH });
    const counter = frameCounter(() => { caughtUpAt = performance.now(); sub.close(); });
    sub.on('data', (c: Buffer) => counter.push(c));
    sub.on('error', () => undefined);
    sub.end(subscribe);
    await new Promise((resolve) => sub.on('close', resolve));
    const grpcCatchUp = counter.events / ((caughtUpAt - started) / 1000);
    rows.push({ what: `catch-up over ${int(EVENTS)} events`, http: httpCatchUp, grpc: grpcCatchUp, unit: 'events/s' });
    log(`  catch-up: gRPC ${int(counter.events)} events to caught_up, HTTP ${int(httpEvents)} events paged`);
    }
  } finally {
    session.close();
    agent.destroy();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  log('');
  log('| scenario | HTTP | gRPC | gRPC / HTTP | target | verdict |');
  log('|---|---:|---:|---:|---|---|');
  for (const r of rows) {
    const catchUp = r.what.startsWith('catch-up');
    const ok = catchUp ? r.grpc >= CATCH_UP_TARGET : r.grpc >= r.http;
    log(`| ${r.what} | ${int(r.http)} ${r.unit} | ${int(r.grpc)} ${r.unit} | ${(r.grpc / r.http).toFixed(2)} | `
      + `${catchUp ? `gRPC >= ${int(CATCH_UP_TARGET)}/s` : 'gRPC >= HTTP'} | ${ok ? 'PASS' : 'MISS'} |`);
  }
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
