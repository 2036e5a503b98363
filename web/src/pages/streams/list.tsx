import { useState } from 'preact/hooks';
import { isAdmin, type Session } from '../../api';
import { ErrorBox, Field, useAsync } from '../../components';
import { href, navigate } from '../../router';
import { RecentlyCreated } from './created';
import { call, ALL, ATOM, entryTarget, formatTime, linkPage, streamPath, type Feed } from './client';

// The streams' front page: open a stream by name, the streams written most recently (from
// reading $all backward: the newest events, one row per stream) and those created most recently
// (created.tsx). Both sources are admins' only by default: others are told so and nothing is
// asked on their behalf.

interface Recent {
  stream: string;
  lastEventNumber?: number;
  lastType?: string;
  time: string;
}

interface RecentList {
  streams: Recent[];
  /** How many events were looked at. */
  scanned: number;
}

const SCAN_PAGE = 100;
const SCAN_PAGES = 5;
const WANTED = 50;

/** Distinct streams of the newest events in $all (newest first), up to SCAN_PAGES pages. */
async function recentFromAll(signal: AbortSignal): Promise<RecentList> {
  const seen = new Map<string, Recent>();
  let scanned = 0;
  let page: string[] | undefined = ['head', 'backward', String(SCAN_PAGE)];
  for (let i = 0; i < SCAN_PAGES && page; i++) {
    const [from, direction, count]: string[] = page;
    const feed = (await call(`${streamPath(ALL)}/${from}/${direction}/${count}?embed=rich`, { accept: ATOM, signal })).json<Feed>();
    for (const e of feed.entries) {
      scanned++;
      const { streamId, eventNumber } = entryTarget(e);
      if (!seen.has(streamId)) seen.set(streamId, { stream: streamId, lastEventNumber: eventNumber, lastType: e.eventType ?? e.summary, time: e.updated });
    }
    if ([...seen.keys()].filter((s) => !s.startsWith('$')).length >= WANTED) break;
    page = linkPage(feed, 'next');
  }
  return { streams: [...seen.values()], scanned };
}

export function StreamList({ session }: { session: Session }) {
  const admin = isAdmin(session);
  const [name, setName] = useState('');
  const [system, setSystem] = useState(false);
  const recent = useAsync((signal) => (admin ? recentFromAll(signal) : Promise.resolve(undefined)), [admin]);
  const [tick, setTick] = useState(0);
  const filter = name.trim().toLowerCase();
  const shown = (recent.data?.streams ?? [])
    .filter((r) => system || !r.stream.startsWith('$'))
    .filter((r) => !filter || r.stream.toLowerCase().includes(filter));

  return (
    <section aria-labelledby="streams-title">
      <h1 id="streams-title">Streams</h1>
      <form class="row bottom" role="search" aria-label="Open a stream" onSubmit={(e) => {
        e.preventDefault();
        if (name.trim()) navigate('streams', name.trim());
      }}>
        <Field label="Stream name">
          <input value={name} onInput={(e) => setName(e.currentTarget.value)} autocomplete="off" spellcheck={false} />
        </Field>
        <button type="submit" disabled={!name.trim()}>Open</button>
        {admin ? <a class="all-link" href={href('streams', ALL)}>Browse all events ($all)</a> : null}
      </form>

      <div class="row spread">
        <h2 id="recent-title">Recently written streams</h2>
        <div class="row">
          {admin ? (
            <label class="check"><input type="checkbox" checked={system} onChange={(e) => setSystem(e.currentTarget.checked)} /> Include system streams</label>
          ) : null}
          {admin ? <button type="button" class="secondary" onClick={() => { recent.reload(); setTick((t) => t + 1); }} disabled={recent.loading}>Refresh</button> : null}
        </div>
      </div>
      {admin ? (
        <p class="muted">The streams of the newest events in $all{recent.data ? ` (the last ${recent.data.scanned} events)` : ''}, most recent first.</p>
      ) : (
        <p class="notice-plain" role="status">
          Recently written and created streams come from $all and the $streams system stream, which your user may not read (admins
          only by default). Open a stream by its name above.
        </p>
      )}
      <ErrorBox error={recent.error} />
      {recent.data ? (
        shown.length > 0 ? (
          <table aria-labelledby="recent-title">
            <thead>
              <tr>
                <th scope="col">Stream</th>
                <th scope="col">Last event</th><th scope="col">Type</th><th scope="col">Written</th>
              </tr>
            </thead>
            <tbody>
              {shown.map((r) => (
                <tr key={r.stream}>
                  <td><a href={href('streams', r.stream)}>{r.stream}</a></td>
                  <td>{r.lastEventNumber}</td><td>{r.lastType}</td><td class="time">{formatTime(r.time)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        ) : <p class="muted">{filter ? `No recent stream matches “${name.trim()}”: Open looks it up by name.` : 'No streams written yet.'}</p>
      ) : recent.loading && admin ? <p class="muted">Loading…</p> : null}
      <RecentlyCreated admin={admin} filter={filter} system={system} refresh={tick} />
    </section>
  );
}
