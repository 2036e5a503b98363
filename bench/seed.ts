import {
  appendBody, AUTHORIZATION, EVENTS_JSON, EVENTS_PER_READ_STREAM, READ_PAGE, READ_STREAMS, readStreamName,
} from './workload.js';

// Pre-writes the streams scenario (c) reads, before any measurement, so reads hit full pages
// of a store that already holds data rather than an empty one.

const SEED_CONCURRENCY = 16;

async function check(res: Response, what: string): Promise<string> {
  const text = await res.text();
  if (!res.ok) throw new Error(`${what} answered ${res.status}: ${text.slice(0, 200)}`);
  return text;
}

export async function seedReadStreams(url: string): Promise<void> {
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < READ_STREAMS; i = next++) {
      const res = await fetch(`${url}/streams/${readStreamName(i)}`, {
        method: 'POST',
        headers: { Authorization: AUTHORIZATION, 'Content-Type': EVENTS_JSON },
        body: appendBody(EVENTS_PER_READ_STREAM, i * EVENTS_PER_READ_STREAM),
      });
      await check(res, `seeding ${readStreamName(i)}`);
    }
  };
  await Promise.all(Array.from({ length: SEED_CONCURRENCY }, worker));
}

/** One real page, as the ceiling server's GET answer: same size and shape on the wire. */
export async function samplePage(url: string): Promise<string> {
  const res = await fetch(`${url}/streams/${readStreamName(0)}/0/forward/${READ_PAGE}?embed=body`, {
    headers: { Authorization: AUTHORIZATION, Accept: 'application/json' },
  });
  return check(res, 'sample page');
}
