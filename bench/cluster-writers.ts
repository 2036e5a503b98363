import { randomUUID } from 'node:crypto';
import { AUTHORIZATION as ADMIN } from './workload.js';

// Concurrent writers against a cluster, for the failover tests (test/cluster-failover.e2e.spec.ts)
// and the soak (bench/cluster-soak.ts). Writer i appends one
// event at a time to its own stream with the exact expected version, through any running node
// (round robin; a follower forwards). An attempt that fails or times out is retried with the
// same event id until a node answers 201: idempotency makes a retry of a write that did land a
// no-op, so each writer's stream must end up holding exactly its acknowledged events, in order.

export interface WriterResults {
  /** Each writer's stream and the ids it got 201 for, in order. */
  acknowledged: Map<string, string[]>;
  /** Every 201: when its request was sent and when the answer came (Date.now()). */
  ackTimes: { sent: number; at: number }[];
  /** Answers that no retry explains (e.g. 400 wrong expected version): a test expects none. */
  unexpected: string[];
}

export interface Writers {
  stop(): Promise<WriterResults>;
  /** Resolves at the first 201 to a request sent after `since`; when it came. */
  firstAckAfter(since: number, timeoutMs?: number): Promise<number>;
  readonly acked: number;
}

/** `targets`: the nodes running now (their HTTP base URLs). */
export function startWriters(targets: () => string[], count = 32, prefix = `w-${randomUUID().slice(0, 8)}`): Writers {
  const results: WriterResults = { acknowledged: new Map(), ackTimes: [], unexpected: [] };
  let stopping = false;
  let turn = 0;
  const loops = Array.from({ length: count }, async (_, i) => {
    const stream = `${prefix}-${i}`;
    const acked: string[] = [];
    results.acknowledged.set(stream, acked);
    while (!stopping) {
      const id = randomUUID();
      for (let attempt = 0; ; attempt++) {
        const running = targets();
        const target = running[turn++ % Math.max(1, running.length)];
        const sent = Date.now();
        const status = target ? await appendOnce(target, stream, id, acked.length - 1) : 0;
        if (status === 201) {
          acked.push(id);
          results.ackTimes.push({ sent, at: Date.now() });
          break;
        }
        if (status === 400 || status === 410) results.unexpected.push(`${stream} event ${acked.length}: ${status}`);
        if (attempt > 600) throw new Error(`${stream}: no node took event ${acked.length} in 600 attempts`);
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  });
  return {
    get acked() { return results.ackTimes.length; },
    async stop() {
      stopping = true;
      await Promise.all(loops);
      return results;
    },
    async firstAckAfter(since, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const t = results.ackTimes.find((a) => a.sent > since);
        if (t !== undefined) return t.at;
        if (Date.now() > deadline) throw new Error('no acknowledged write after the failover');
        await new Promise((r) => setTimeout(r, 10));
      }
    },
  };
}

async function appendOnce(url: string, stream: string, id: string, expected: number): Promise<number> {
  try {
    const res = await fetch(`${url}/streams/${stream}`, {
      method: 'POST', signal: AbortSignal.timeout(5000),
      headers: { authorization: ADMIN, 'content-type': 'application/vnd.eventstore.events+json', 'SVC-ExpectedVersion': String(expected) },
      body: JSON.stringify([{ eventId: id, eventType: 'written', data: { id } }]),
    });
    await res.arrayBuffer();
    return res.status;
  } catch {
    return 0;
  }
}

/** The stream's event ids on `url`, oldest first (every page). */
export async function streamIds(url: string, stream: string): Promise<string[]> {
  const ids: string[] = [];
  for (let from = 0; ; from += 1000) {
    const res = await fetch(`${url}/streams/${stream}/${from}/forward/1000?embed=body`, {
      headers: { authorization: ADMIN, accept: 'application/vnd.eventstore.atom+json' }, signal: AbortSignal.timeout(10_000),
    });
    if (res.status === 404) return ids;
    if (res.status !== 200) throw new Error(`reading ${stream} on ${url}: ${res.status}`);
    const page = (await res.json()) as { entries: { eventNumber: number; eventId: string }[] };
    const entries = [...page.entries].reverse();
    entries.forEach((e, i) => {
      if (e.eventNumber !== from + i) throw new Error(`${stream} on ${url}: event ${e.eventNumber} where ${from + i} was expected`);
    });
    ids.push(...entries.map((e) => e.eventId));
    if (entries.length < 1000) return ids;
  }
}

/** Every record of `$all` on `url` as "stream/number/id", oldest first. */
export async function allRecords(url: string): Promise<string[]> {
  const out: string[] = [];
  let next: string | undefined = `${url}/streams/%24all/head/backward/1000`;
  while (next) {
    const res: Response = await fetch(`${next}?embed=body`, { headers: { authorization: ADMIN, accept: 'application/vnd.eventstore.atom+json' }, signal: AbortSignal.timeout(10_000) });
    if (res.status !== 200) throw new Error(`reading $all on ${url}: ${res.status}`);
    const page = (await res.json()) as { entries: { positionStreamId: string; positionEventNumber: number; eventId: string }[]; links: { relation: string; uri: string }[] };
    for (const e of page.entries) out.push(`${e.positionStreamId}/${e.positionEventNumber}/${e.eventId}`);
    next = page.entries.length > 0 ? page.links.find((l) => l.relation === 'next')?.uri : undefined;
  }
  return out.reverse();
}
