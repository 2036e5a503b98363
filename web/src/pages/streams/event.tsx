import { ApiFailure } from '../../api';
import { ErrorBox, Json, useAsync } from '../../components';
import { href } from '../../router';
import { call, ATOM, EMBED, formatTime, streamPath, type Entry } from './client';

// One event of a stream (GET /streams/{s}/{n}): its fields, data and metadata, and the events around it.

export function EventView({ stream, number }: { stream: string; number: number }) {
  const event = useAsync((signal) => call(`${streamPath(stream)}/${number}?${EMBED}`, { accept: ATOM, signal }).then((r) => r.json<Entry>()),
    [stream, number]);
  const status = event.error instanceof ApiFailure ? event.error.status : undefined;
  const e = event.data;
  const content = e?.content;
  return (
    <section aria-labelledby="event-title" class="stream">
      <nav class="crumbs" aria-label="Breadcrumb"><a href={href('streams')}>Streams</a> › <a href={href('streams', stream)}>{stream}</a></nav>
      <h1 id="event-title">Event {number}@{stream}</h1>
      <nav class="pager row" aria-label="Events">
        {number > 0 ? <a href={href('streams', stream, number - 1)}>Previous event</a> : <span class="muted" aria-disabled="true">Previous event</span>}
        <a href={href('streams', stream, number + 1)}>Next event</a>
        <a href={href('streams', stream)}>All events of {stream}</a>
      </nav>
      {status === 404 ? <p class="gone" role="status">No event {number} in stream “{stream}” (404 Not Found).</p>
        : status === 410 ? <p class="gone" role="status">The stream has been hard-deleted (410 Deleted).</p>
        : <ErrorBox error={event.error} />}
      {e && !event.error ? (
        <>
          <dl class="fields">
            <div><dt>Stream</dt><dd>{content?.eventStreamId ?? e.streamId}</dd></div>
            <div><dt>Number</dt><dd>{content?.eventNumber ?? e.eventNumber}</dd></div>
            <div><dt>Type</dt><dd>{e.eventType ?? e.summary}</dd></div>
            <div><dt>Time</dt><dd>{formatTime(e.updated)}</dd></div>
            <div><dt>Event id</dt><dd><code>{e.eventId ?? content?.eventId}</code></dd></div>
          </dl>
          <h2>Data</h2>
          {e.data !== undefined && e.data !== null ? <Json value={e.data} label="Data" /> : <p class="muted">(none)</p>}
          <h2>Metadata</h2>
          {e.metaData ? <Json value={e.metaData} label="Metadata" /> : <p class="muted">(none)</p>}
        </>
      ) : null}
    </section>
  );
}
