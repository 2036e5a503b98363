import {
  appendBody, AUTHORIZATION, EVENTS_JSON, EVENTS_PER_READ_STREAM, READ_EVENT_ACCEPT, READ_PAGE, READ_PAGE_ACCEPT, READ_STREAMS,
  readStreamName,
} from './workload.js';

// Pre-writes the streams scenarios (c) and (d) read, before any measurement, so reads hit full pages
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

export interface Answer { body: string; type: string }

/** Real answers of the read scenarios, for the ceiling server to serve: same size and shape on the wire. */
export interface ReadSamples { page: Answer; event: Answer }

async function sample(url: string, path: string, accept: string): Promise<Answer> {
  const res = await fetch(`${url}${path}`, { headers: { Authorization: AUTHORIZATION, Accept: accept } });
  return { body: await check(res, `sample ${path}`), type: res.headers.get('content-type') ?? accept };
}

export async function sampleReads(url: string): Promise<ReadSamples> {
  return {
    page: await sample(url, `/streams/${readStreamName(0)}/0/forward/${READ_PAGE}?embed=body`, READ_PAGE_ACCEPT),
    event: await sample(url, `/streams/${readStreamName(0)}/0`, READ_EVENT_ACCEPT),
  };
}
