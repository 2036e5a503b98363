import { useState } from 'preact/hooks';
import { ApiFailure, getJson, seg } from '../../api';
import { ErrorBox, Json, useAsync, useInterval, When } from '../../components';
import { href } from '../../router';

// A group's parked messages: the links in $persistentsubscription-{stream}::{group}-parked,
// read newest first as an Atom feed with their bodies (embed=body resolves each link to the
// event it parks). A replayed message stays listed until the group has handled it.

const PAGE = 20;
const REFRESH_MS = 2000;
const ATOM = 'application/vnd.eventstore.atom+json';

export const parkedStream = (stream: string, group: string) => `$persistentsubscription-${stream}::${group}-parked`;

interface Page {
  entries: any[];
  /** Older messages (the feed's `next`), newer (`previous`) as same-origin paths. */
  older?: string;
  newer?: string;
}

const local = (uri: string | undefined) => {
  if (!uri) return undefined;
  const u = new URL(uri, location.href);
  return u.pathname + u.search;
};

const withBody = (path: string) => path + (path.includes('?') ? '&' : '?') + 'embed=body';

/**
 * `readable`: whether the user may read the parked stream, a system stream (admins only by
 * default); for anyone else it is read only when they ask (a node may grant more).
 */
export function Parked({ stream, group, tick, readable }: { stream: string; group: string; tick: number; readable: boolean }) {
  const first = `/streams/${seg(parkedStream(stream, group))}/head/backward/${PAGE}`;
  const [at, setAt] = useState(first);
  const [asked, setAsked] = useState(false);
  const reading = readable || asked;
  const page = useAsync<Page | undefined>(async (signal) => {
    if (!reading) return undefined;
    try {
      const feed = await getJson(withBody(at), { accept: ATOM, signal });
      const linkTo = (rel: string) => local(feed.links?.find((l: any) => l.relation === rel)?.uri);
      return { entries: feed.entries ?? [], older: linkTo('next'), newer: at === first ? undefined : linkTo('previous') };
    } catch (err) {
      // No parked stream yet (or deleted with its group): nothing parked.
      if (err instanceof ApiFailure && (err.status === 404 || err.status === 410)) return { entries: [] };
      if (err instanceof ApiFailure && err.status === 401) throw new Error('Your account may not read the parked messages (a system stream, admins only by default).');
      throw err;
    }
  }, [at, tick, reading]);
  useInterval(() => { if (reading && !page.error) page.reload(); }, REFRESH_MS);
  const entries = page.data?.entries ?? [];
  if (!reading) {
    return (
      <p class="muted" role="status">
        Parked messages are kept in {parkedStream(stream, group)}, a system stream only admins may read by default.{' '}
        <button type="button" class="link" onClick={() => setAsked(true)}>Read it</button>
      </p>
    );
  }
  return (
    <div class="parked">
      <ErrorBox error={page.error} />
      {page.data && entries.length === 0 ? <p class="muted" role="status">No parked messages.</p> : null}
      {entries.length > 0 ? (
        <table aria-label="Parked messages">
          <thead><tr><th>Parked #</th><th>Event</th><th>Type</th><th>Parked at</th><th>Reason</th><th>Data</th></tr></thead>
          <tbody>
            {entries.map((e) => {
              let meta: any;
              try { meta = e.linkMetaData ? JSON.parse(e.linkMetaData) : undefined; } catch { meta = undefined; }
              return (
                <tr key={`${e.positionEventNumber}`}>
                  <td>{e.positionEventNumber ?? '–'}</td>
                  <td>{e.streamId !== undefined && e.eventNumber !== undefined
                    ? <a href={href('streams', e.streamId)}>{e.title}</a> : e.title}</td>
                  <td>{e.eventType ?? e.summary}</td>
                  <td><When iso={meta?.added ?? e.updated} /></td>
                  <td class="reason">{meta?.reason ?? ''}</td>
                  <td>{e.data !== undefined ? <details><summary>Show</summary><Json value={e.data} label={`Data of ${e.title}`} /></details> : '–'}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      ) : null}
      <div class="row">
        <button type="button" class="secondary" onClick={() => setAt(first)} disabled={at === first}>Newest</button>
        <button type="button" class="secondary" onClick={() => page.data?.newer && setAt(page.data.newer)} disabled={!page.data?.newer}>Newer</button>
        <button type="button" class="secondary" onClick={() => page.data?.older && setAt(page.data.older)} disabled={!page.data?.older}>Older</button>
        <button type="button" class="secondary" onClick={page.reload}>Refresh</button>
      </div>
    </div>
  );
}
