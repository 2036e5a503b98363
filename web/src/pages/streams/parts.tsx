import { Json } from '../../components';
import { href } from '../../router';
import { entryTarget, formatTime, linkPage, type Entry, type Feed } from './client';

// Pieces the stream, event and $all views share: the events table and the pager.

/** Events, newest first, each with its number, type, time, and data and metadata pretty-printed. */
export function EventsTable({ entries, caption, showStream }: { entries: Entry[]; caption: string; showStream?: boolean }) {
  return (
    <table class="events">
      <caption>{caption}</caption>
      <thead>
        <tr>
          {showStream ? <th scope="col">Stream</th> : null}
          <th scope="col">#</th><th scope="col">Type</th><th scope="col">Time</th><th scope="col">Data</th><th scope="col">Metadata</th>
        </tr>
      </thead>
      <tbody>
        {entries.map((e) => {
          const { streamId, eventNumber } = entryTarget(e);
          const name = `${eventNumber}@${streamId}`;
          return (
            <tr key={e.id + (e.positionStreamId ?? '') + (e.positionEventNumber ?? '')} data-event={name}>
              {showStream ? <td><a href={href('streams', streamId)}>{streamId}</a></td> : null}
              <td><a href={href('streams', streamId, eventNumber)} aria-label={`Event ${name}`}>{eventNumber}</a></td>
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
export function Pager({ feed, base }: { feed: Feed; base: string[] }) {
  const page = (relation: string) => linkPage(feed, relation);
  const item = (label: string, target: string[] | undefined) => (
    target ? <a href={href(...base, ...target)}>{label}</a> : <span class="muted" aria-disabled="true">{label}</span>
  );
  return (
    <nav class="pager row" aria-label="Pages">
      {item('Newest', page('first'))}
      {item('Newer', feed.headOfStream ? undefined : page('previous'))}
      {item('Older', page('next'))}
      {item('Oldest', page('last'))}
    </nav>
  );
}
