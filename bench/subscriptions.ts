import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import autocannon from 'autocannon';
import { NODE_MAIN, startServer } from './processes.js';

// Persistent subscriptions (issue 6): EVENTS events consumed by PULLERS concurrent HTTP pullers
// taking BATCH messages per request and acking each batch in one request (the ackAll link):
// messages/s end to end against the target. Then the live figure: events appended at a steady
// rate while the pullers long-poll, time from sending the append to the message's delivery.

const EVENTS = Number(process.env.BENCH_SUB_EVENTS ?? 100_000);
const PULLERS = 8;
const BATCH = 50;
const TARGET = 20_000;
const LIVE_RATE = Number(process.env.BENCH_SUB_LIVE_RATE ?? 500);
const LIVE_SECONDS = Number(process.env.BENCH_SUB_LIVE_SECONDS ?? 10);
const AUTH = { Authorization: `Basic ${Buffer.from('admin:changeit').toString('base64')}` };
const FEED = { ...AUTH, Accept: 'application/vnd.eventstore.competingatom+json' };
const STREAM = 'bench-orders';
const TITLE = /"title":"(\d+)@/g;
const ACK_ALL = /"uri":"([^"]+)","relation":"ackAll"/;
const GROUP = 'workers';

const log = (line: string) => process.stdout.write(`${line}\n`);
const int = (n: number) => Math.round(n).toLocaleString('en-US');

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

async function ok(res: Response, what: string): Promise<string> {
  const text = await res.text();
  if (!res.ok) throw new Error(`${what} answered ${res.status}: ${text.slice(0, 200)}`);
  return text;
}

function append(url: string, events: unknown[]): Promise<Response> {
  return fetch(`${url}/streams/${STREAM}`, {
    method: 'POST', headers: { ...AUTH, 'Content-Type': 'application/vnd.eventstore.events+json' }, body: JSON.stringify(events),
  });
}

interface Entry { title: string; links: { uri: string; relation: string }[] }

/** Pulls and acks until `done()`; calls `onMessage` for each delivered entry. */
async function puller(url: string, done: () => boolean, onMessage: (e: Entry) => void, longPoll: boolean): Promise<void> {
  const headers = longPoll ? { ...FEED, 'ES-LongPoll': '1' } : FEED;
  while (!done()) {
    const feed = JSON.parse(await ok(await fetch(`${url}/subscriptions/${STREAM}/${GROUP}/${BATCH}`, { headers }), 'pull')) as
      { entries: Entry[]; links: { uri: string; relation: string }[] };
    if (feed.entries.length === 0) {
      if (!longPoll) await new Promise((r) => setTimeout(r, 5));
      continue;
    }
    for (const e of feed.entries) onMessage(e);
    const ackAll = feed.links.find((l) => l.relation === 'ackAll')!.uri;
    await ok(await fetch(ackAll, { method: 'POST', headers: AUTH }), 'ack');
  }
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(process.env.BENCH_DATA_DIR ?? '/tmp', 'svc-bench-sub-'));
  const prof = process.env.BENCH_CPU_PROF;
  const server = await startServer('node', NODE_MAIN, ['--db', dir, '--log-level', 'warn', '--run-projections', 'None'],
    prof ? ['--cpu-prof', '--cpu-prof-dir', prof] : []);
  try {
    const url = server.url;
    for (let i = 0; i < EVENTS; i += 500) {
      const batch = Array.from({ length: Math.min(500, EVENTS - i) }, (_, k) => ({
        eventId: randomUUID(), eventType: 'OrderPlaced', data: { n: i + k, customer: `c${(i + k) % 997}`, total: 42.5 },
      }));
      await ok(await append(url, batch), 'seeding');
    }
    await ok(await fetch(`${url}/subscriptions/${STREAM}/${GROUP}`, {
      method: 'PUT', headers: { ...AUTH, 'Content-Type': 'application/json' }, body: JSON.stringify({ startFrom: 0 }),
    }), 'creating the group');

    // Catch-up: drain EVENTS messages. autocannon drives the pull → ack sequence on each connection.
    const seen = new Set<string>();
    let deliveries = 0;
    let finishedAt = 0;
    const started = performance.now();
    const origin = new URL(url).origin;
    const run = autocannon({
      url, connections: PULLERS, duration: 120,
      requests: [
        {
          method: 'GET', path: `/subscriptions/${STREAM}/${GROUP}/${BATCH}`, headers: FEED,
          onResponse: (status, body, context) => {
            context.ack = undefined;
            if (status !== 200) return;
            for (const m of body.matchAll(TITLE)) {
              deliveries++;
              seen.add(m[1]);
            }
            const ackAll = ACK_ALL.exec(body);
            if (ackAll) context.ack = ackAll[1].slice(origin.length);
            if (seen.size >= EVENTS && !finishedAt) {
              finishedAt = performance.now();
              run.stop();
            }
          },
        },
        {
          method: 'POST', headers: AUTH,
          setupRequest: (request, context) => (context.ack ? { ...request, path: context.ack as string } : null),
        },
      ],
    });
    const result = await run;
    if (!finishedAt) throw new Error(`only ${seen.size} of ${EVENTS} messages were delivered in 120 s`);
    if (result.non2xx + result.errors > 0) throw new Error(`${result.non2xx} non-2xx answers, ${result.errors} errors`);
    const seconds = (finishedAt - started) / 1000;
    const rate = EVENTS / seconds;
    log(`persistent subscription catch-up: ${int(EVENTS)} messages by ${PULLERS} pullers × ${BATCH}/request, acked in bulk`);
    log(`  ${int(rate)} messages/s (${seconds.toFixed(2)} s; ${int(deliveries - EVENTS)} redeliveries)   target ≥ ${int(TARGET)}: ${rate >= TARGET ? 'PASS' : 'MISS'}`);

    // Live: pullers long-poll while events arrive at LIVE_RATE.
    const sentAt = new Map<string, number>();
    const latencies: number[] = [];
    let writing = true;
    const liveWanted = LIVE_RATE * LIVE_SECONDS;
    const pullers = Promise.all(Array.from({ length: PULLERS }, () => puller(url, () => !writing && latencies.length >= liveWanted, (e) => {
      const t = sentAt.get(e.title);
      if (t !== undefined) {
        latencies.push(performance.now() - t);
        sentAt.delete(e.title);
      }
    }, true)));
    const liveStart = performance.now();
    const pending: Promise<unknown>[] = [];
    const appendLatencies: number[] = [];
    for (let i = 0; i < liveWanted; i++) {
      const due = liveStart + (i * 1000) / LIVE_RATE;
      const wait = due - performance.now();
      if (wait > 1) await new Promise((r) => setTimeout(r, wait));
      const t = performance.now();
      sentAt.set(`${EVENTS + i}@${STREAM}`, t);
      pending.push(append(url, [{ eventId: randomUUID(), eventType: 'OrderPlaced', data: { n: EVENTS + i } }])
        .then((r) => ok(r, 'live append'))
        .then(() => appendLatencies.push(performance.now() - t)));
    }
    await Promise.all(pending);
    writing = false;
    await Promise.race([pullers, new Promise((r) => setTimeout(r, 15_000))]);
    log(`persistent subscription live: ${int(LIVE_RATE)} appends/s for ${LIVE_SECONDS} s, ${PULLERS} long-polling pullers`);
    log(`  append → delivery p50 ${percentile(latencies, 50).toFixed(1)} ms, p99 ${percentile(latencies, 99).toFixed(1)} ms` +
      ` (${int(latencies.length)} of ${int(liveWanted)} delivered); the append's own 201 p50 ${percentile(appendLatencies, 50).toFixed(1)} ms,` +
      ` p99 ${percentile(appendLatencies, 99).toFixed(1)} ms`);
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
