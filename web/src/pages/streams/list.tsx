import { useState } from 'preact/hooks';
import { ApiFailure, isAdmin, type Session } from '../../api';
import { ErrorBox, Field, useAsync } from '../../components';
import { href, navigate } from '../../router';
import { call, ALL, ATOM, entryTarget, formatTime, linkPage, streamPath, type Feed } from './client';

// The streams' front page: open a stream by name, and the streams written most recently. For
// admins these come from reading $all backward (the newest events, one row per stream); others
// cannot read $all, nor by default the $streams system stream (where the $streams projection
// links each new stream), so it is read for them only when they ask (a node may grant it).

interface Recent {
  stream: string;
  lastEventNumber?: number;
  lastType?: string;
  time: string;
}

interface RecentList {
  source: '$all' | '$streams';
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
  return { source: '$all', streams: [...seen.values()], scanned };
}

/** The newest links of $streams: one per stream created (the projection writes them). */
async function recentFromStreams(signal: AbortSignal): Promise<RecentList> {
  const feed = (await call(`${streamPath('$streams')}/head/backward/${WANTED}?embed=rich`, { accept: ATOM, signal })).json<Feed>();
  return {
    source: '$streams',
    streams: feed.entries.map((e) => ({ stream: entryTarget(e).streamId, time: e.updated })),
    scanned: feed.entries.length,
  };
}

export function StreamList({ session }: { session: Session }) {
  const admin = isAdmin(session);
  const [name, setName] = useState('');
  const [system, setSystem] = useState(false);
  const [askStreams, setAskStreams] = useState(false);
  const recent = useAsync((signal) => (admin ? recentFromAll(signal) : askStreams ? recentFromStreams(signal) : Promise.resolve(undefined)),
    [admin, askStreams]);
  const filter = name.trim().toLowerCase();
  const shown = (recent.data?.streams ?? [])
    .filter((r) => system || !r.stream.startsWith('$'))
    .filter((r) => !filter || r.stream.toLowerCase().includes(filter));
  const status = recent.error instanceof ApiFailure ? recent.error.status : undefined;

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
          {admin || askStreams ? <button type="button" class="secondary" onClick={recent.reload} disabled={recent.loading}>Refresh</button> : null}
        </div>
      </div>
      {admin ? (
        <p class="muted">The streams of the newest events in $all{recent.data ? ` (the last ${recent.data.scanned} events)` : ''}, most recent first.</p>
      ) : !askStreams ? (
        <p class="notice-plain" role="status">
          Recently written streams come from $all or the $streams system stream, which only admins may read unless the node grants more.
          Open a stream by its name above, or <button type="button" class="link" onClick={() => setAskStreams(true)}>read $streams</button>.
        </p>
      ) : status === 401 ? (
        <p class="notice-plain" role="status">
          Recently written streams come from $all or the $streams system stream, which your user may not read (admins only by default).
          Open a stream by its name above.
        </p>
      ) : status === 404 ? (
        <p class="notice-plain" role="status">
          Recently created streams come from the $streams system stream, which is empty: the $streams system projection has not run on
          this node. Open a stream by its name above.
        </p>
      ) : (
        <p class="muted">Streams in the order they were created, newest first (from the $streams system stream).</p>
      )}
      {status === 401 || status === 404 ? null : <ErrorBox error={recent.error} />}
      {recent.data ? (
        shown.length > 0 ? (
          <table aria-labelledby="recent-title">
            <thead>
              <tr>
                <th scope="col">Stream</th>
                {recent.data.source === '$all' ? <><th scope="col">Last event</th><th scope="col">Type</th><th scope="col">Written</th></> : <th scope="col">Created</th>}
              </tr>
            </thead>
            <tbody>
              {shown.map((r) => (
                <tr key={r.stream}>
                  <td><a href={href('streams', r.stream)}>{r.stream}</a></td>
                  {recent.data!.source === '$all' ? <><td>{r.lastEventNumber}</td><td>{r.lastType}</td><td class="time">{formatTime(r.time)}</td></> : <td class="time">{formatTime(r.time)}</td>}
                </tr>
              ))}
            </tbody>
          </table>
        ) : <p class="muted">{filter ? `No recent stream matches “${name.trim()}”: Open looks it up by name.` : 'No streams written yet.'}</p>
      ) : recent.loading && (admin || askStreams) ? <p class="muted">Loading…</p> : null}
    </section>
  );
}
