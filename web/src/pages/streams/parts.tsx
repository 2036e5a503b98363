import { Json } from '../../components';
import { href } from '../../router';
import { entryTarget, formatTime, linkPage, type Entry, type Feed } from './client';

// Pieces the stream, event and $all views share: the events table and the pager.

/** Events, newest first, each with its number, type, time, and data and metadata pretty-printed. */
export function EventsTable({ entries, caption, showStream }: { entries: Entry[]; caption: string; showStream?: boolean }) {
  return (
    <table class={showStream ? "events" : "events own"}>
      <caption>{caption}</caption>
      <thead>
        <tr>
          {showStream ? <th scope="col" class="col-stream">Stream</th> : null}
          <th scope="col" class="col-num">#</th><th scope="col" class="col-type">Type</th><th scope="col" class="col-time">Time</th>
          <th scope="col" class="col-data">Data</th><th scope="col" class="col-meta">Metadata</th>
        </tr>
      </thead>
      <tbody>
        {entries.map((e) => {
          // A link event ($>) resolved to its target: the row is the link's place in its stream, pointing at the target.
          const target = entryTarget(e);
          const own = e.positionStreamId !== undefined && e.positionEventNumber !== undefined
            ? { streamId: e.positionStreamId, eventNumber: e.positionEventNumber } : target;
          const { streamId, eventNumber } = own;
          const name = `${eventNumber}@${streamId}`;
          const targetName = `${target.eventNumber}@${target.streamId}`;
          return (
            <tr key={name} data-event={name}>
              {showStream ? <td><a href={href('streams', streamId)}>{streamId}</a></td> : null}
              <td>
                <a href={href('streams', streamId, eventNumber)} aria-label={`Event ${name}`}>{eventNumber}</a>
                {targetName !== name ? <> <a class="target" href={href('streams', target.streamId, target.eventNumber)}>→ {targetName}</a></> : null}
              </td>
              <td>{e.eventType ?? e.summary}</td>
              <td class="time">{formatTime(e.updated)}</td>
              <td>{e.data === undefined || e.data === null ? <span class="muted">{e.eventType ? '(none)' : '(event gone)'}</span> : <Json value={e.data} label={`Data of ${name}`} />}</td>
              <td>{e.metaData ? <Json value={e.metaData} label={`Metadata of ${name}`} /> : <span class="muted">(none)</span>}</td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}

/** The feed's own links as pages: newest, newer, older, oldest (routes under `base`). */
export function Pager({ feed, base, atHead }: { feed: Feed; base: string[]; atHead: boolean }) {
  const page = (relation: string) => linkPage(feed, relation);
  const item = (label: string, target: string[] | undefined) => (
    target ? <a href={href(...base, ...target)}>{label}</a> : <span class="muted" aria-disabled="true">{label}</span>
  );
  return (
    <nav class="pager row" aria-label="Pages">
      {item('Newest', page('first'))}
      {/* At the head the feed's "previous" link is where new events will appear: nothing to page to yet. */}
      {item('Newer', feed.headOfStream || atHead ? undefined : page('previous'))}
      {item('Older', page('next'))}
      {item('Oldest', page('last'))}
    </nav>
  );
}
