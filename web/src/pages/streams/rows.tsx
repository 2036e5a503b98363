import { useId, useState } from 'preact/hooks';
import { Json } from '../../components';
import { href } from '../../router';
import { entryTarget, formatTime, type Entry } from './client';
import './rows.css';

// Events as compact rows: one line each (number, type, stream, time), which opens on a click to
// show the event's data and metadata. A page of 20 events is 20 lines instead of ~2,500 px of
// pretty-printed JSON. The toggle is a real button (aria-expanded, aria-controls), so a keyboard
// or a screen reader opens a row as a mouse does; a click anywhere else on the line does too.
// Data and metadata are the node's own text, shown by Json: re-indented, never parsed (no digit lost).

/** Where an entry sits: its own `n@stream` (a resolved link's place in its stream, not its target's). */
export function ownPlace(e: Entry): { streamId: string; eventNumber: number } {
  return e.positionStreamId !== undefined && e.positionEventNumber !== undefined
    ? { streamId: e.positionStreamId, eventNumber: e.positionEventNumber } : entryTarget(e);
}

/** The entry's name, `n@stream`: what rows are keyed and labelled by. */
export function entryName(e: Entry): string {
  const { streamId, eventNumber } = ownPlace(e);
  return `${eventNumber}@${streamId}`;
}

/** Events, newest first, one line each; `showStream` adds the stream column ($all). */
export function EventsTable({ entries, caption, showStream }: { entries: Entry[]; caption: string; showStream?: boolean }) {
  const [open, setOpen] = useState<ReadonlySet<string>>(new Set());
  const toggle = (name: string) => setOpen((was) => {
    const next = new Set(was);
    if (!next.delete(name)) next.add(name);
    return next;
  });
  const columns = showStream ? 5 : 4;
  return (
    <table class="events compact">
      <caption>{caption}</caption>
      <thead>
        <tr>
          <th scope="col" class="col-toggle"><span class="visually-hidden">Details</span></th>
          <th scope="col" class="col-num">#</th>
          <th scope="col" class="col-type">Type</th>
          {showStream ? <th scope="col" class="col-stream">Stream</th> : null}
          <th scope="col" class="col-time">Time</th>
        </tr>
      </thead>
      <tbody>
        {entries.map((e) => {
          const name = entryName(e);
          return <EventRow key={name} entry={e} name={name} open={open.has(name)} onToggle={() => toggle(name)} showStream={!!showStream} columns={columns} />;
        })}
      </tbody>
    </table>
  );
}

function EventRow({ entry: e, name, open, onToggle, showStream, columns }: {
  entry: Entry; name: string; open: boolean; onToggle: () => void; showStream: boolean; columns: number;
}) {
  const detailsId = useId();
  const own = ownPlace(e);
  const target = entryTarget(e);
  const targetName = `${target.eventNumber}@${target.streamId}`;
  return (
    <>
      <tr data-event={name} class={open ? 'line open' : 'line'} onClick={(ev) => {
        // Links and the button do their own thing; the rest of the line opens the row.
        if (!(ev.target as Element).closest('a, button')) onToggle();
      }}>
        <td class="col-toggle">
          <button type="button" class="disclosure" aria-expanded={open} aria-controls={open ? detailsId : undefined}
            aria-label={`Details of ${name}`} onClick={onToggle}>
            <span aria-hidden="true">{open ? '▾' : '▸'}</span>
          </button>
        </td>
        <td class="col-num">
          <a href={href('streams', own.streamId, own.eventNumber)} aria-label={`Event ${name}`}>{own.eventNumber}</a>
          {targetName !== name ? <> <a class="target" href={href('streams', target.streamId, target.eventNumber)}>→ {targetName}</a></> : null}
        </td>
        <td class="col-type" data-cell="type">{e.eventType ?? e.summary}</td>
        {showStream ? <td class="col-stream"><a href={href('streams', own.streamId)}>{own.streamId}</a></td> : null}
        <td class="col-time time">{formatTime(e.updated)}</td>
      </tr>
      {open ? (
        <tr id={detailsId} class="details" data-details={name}>
          <td colSpan={columns}>
            <div class="event-body">
              <div>
                <span class="body-label">Data</span>
                {e.data === undefined || e.data === null
                  ? <p class="muted">{e.eventType ? '(none)' : '(event gone)'}</p>
                  : <Json value={e.data} label={`Data of ${name}`} />}
              </div>
              <div>
                <span class="body-label">Metadata</span>
                {e.metaData ? <Json value={e.metaData} label={`Metadata of ${name}`} /> : <p class="muted">(none)</p>}
              </div>
            </div>
            {e.eventId ? <p class="muted event-id">Event id <code>{e.eventId}</code></p> : null}
          </td>
        </tr>
      ) : null}
    </>
  );
}
