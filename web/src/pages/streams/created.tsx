import { ApiFailure, getJson } from '../../api';
import { ErrorBox, useAsync } from '../../components';
import { href } from '../../router';
import { positionOf, type ProjectionStats } from '../projections/model';
import { call, ATOM, entryTarget, formatTime, streamPath, type Feed } from './client';

// The streams created most recently, from the $streams system stream, where the $streams system
// projection links the first event of every new stream. Only admins may read it by default (a
// system stream's ACL), and the console knows no more of the user's rights than their groups:
// for anyone else nothing is asked (StreamList says why). Before reading, the projection's
// statistics say whether it ever ran: when not, the stream does not exist and reading it would
// only be a 404.

const WANTED = 50;
const STREAMS = '$streams';

interface Created {
  stream: string;
  time: string;
}

type CreatedList = { status: 'ok'; streams: Created[] } | { status: 'not-run' };

async function recentlyCreated(signal: AbortSignal): Promise<CreatedList> {
  const stats = (await getJson<{ projections: ProjectionStats[] }>(`/projection/${encodeURIComponent(STREAMS)}/statistics`, { signal })).projections[0];
  const ran = /^Running/.test(stats?.status ?? '') || positionOf(stats?.position) > 0 || positionOf(stats?.lastCheckpoint) > 0;
  if (!ran) return { status: 'not-run' };
  try {
    const feed = (await call(`${streamPath(STREAMS)}/head/backward/${WANTED}?embed=rich`, { accept: ATOM, signal })).json<Feed>();
    return { status: 'ok', streams: feed.entries.map((e) => ({ stream: entryTarget(e).streamId, time: e.updated })) };
  } catch (err) {
    if (err instanceof ApiFailure && err.status === 404) return { status: 'not-run' };
    throw err;
  }
}

export function RecentlyCreated({ admin, filter, system, refresh }: { admin: boolean; filter: string; system: boolean; refresh: number }) {
  const created = useAsync((signal) => (admin ? recentlyCreated(signal) : Promise.resolve(undefined)), [admin], [refresh]);
  if (!admin) return null;
  const list = created.data;
  const shown = list?.status === 'ok'
    ? list.streams.filter((c) => (system || !c.stream.startsWith('$')) && (!filter || c.stream.toLowerCase().includes(filter))) : [];
  return (
    <>
      <h2 id="created-title">Recently created streams</h2>
      {list?.status === 'not-run' ? (
        <p class="notice-plain" role="status">
          Recently created streams come from the $streams system stream, which the $streams system projection writes: it has not run on
          this node (start it on the Projections page).
        </p>
      ) : <p class="muted">Streams in the order they were created, newest first (from the $streams system stream).</p>}
      <ErrorBox error={created.error} />
      {list?.status === 'ok' ? (
        shown.length > 0 ? (
          <table aria-labelledby="created-title">
            <thead><tr><th scope="col">Stream</th><th scope="col">Created</th></tr></thead>
            <tbody>
              {shown.map((c) => (
                <tr key={c.stream} data-created={c.stream}>
                  <td><a href={href('streams', c.stream)}>{c.stream}</a></td>
                  <td class="time">{formatTime(c.time)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        ) : <p class="muted">{filter ? 'No recently created stream matches.' : 'No streams created yet.'}</p>
      ) : created.loading ? <p class="muted">Loading…</p> : null}
    </>
  );
}
