import { isAdmin, type Session } from '../../api';
import { ErrorBox, useAsync } from '../../components';
import { href } from '../../router';
import { call, ALL, ATOM, pagePath, type Feed } from './client';
import { Pager } from './parts';
import { EventsTable } from './rows';
import { LiveEvents } from './tail';

// $all: every event in log order, newest first, paged backward and forward. Admins only (the
// node refuses $all to others; the view does not ask on their behalf).

export function AllView({ page, session }: { page: string[]; session: Session }) {
  const admin = isAdmin(session);
  const feed = useAsync((signal) => (admin ? call(pagePath(ALL, page), { accept: ATOM, signal }).then((r) => r.json<Feed>()) : Promise.resolve(undefined)),
    [admin, page.join('/')]);
  return (
    <section aria-labelledby="all-title" class="stream">
      <nav class="crumbs" aria-label="Breadcrumb"><a href={href('streams')}>Streams</a></nav>
      <h1 id="all-title">All events ($all)</h1>
      {!admin ? <p class="gone" role="status">Only admins can read $all.</p> : (
        <>
          <div class="row spread">
            <span class="muted">Every event of every stream, in the order the log holds them.</span>
            <button type="button" class="secondary" onClick={feed.reload} disabled={feed.loading}>Refresh</button>
          </div>
          <ErrorBox error={feed.error} />
          {feed.data ? (
            <>
              <Pager feed={feed.data} base={['streams', ALL]} atHead={page.length === 0 || page[0] === 'head'} />
              {page.length === 0 || page[0] === 'head'
                ? <LiveEvents stream={ALL} feed={feed.data} caption="Events in $all, newest first" showStream />
                : feed.data.entries.length > 0
                  ? <EventsTable entries={feed.data.entries} caption="Events in $all, newest first" showStream />
                  : <p class="muted">No events on this page.</p>}
            </>
          ) : feed.loading ? <p class="muted">Loading…</p> : null}
        </>
      )}
    </section>
  );
}
