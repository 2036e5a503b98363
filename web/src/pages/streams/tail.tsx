import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiFailure } from '../../api';
import { errorText } from '../../components';
import { call, ATOM, EMBED, pagePath, type Entry, type Feed } from './client';
import { entryName, EventsTable } from './rows';

// The live tail of a stream or of $all, as the established console follows a feed: from the head
// page the view already read, it asks for the page after the newest event with `ES-LongPoll`, so
// the node answers as soon as something is appended (or, after LONG_POLL_SECONDS, with an empty
// page and the same URL to ask again). New events go on top; at most TAIL_ROWS are kept.
// Pause aborts the waiting request; Resume re-reads the head (one bounded request however long
// the pause was) and goes on from there.

/** Rows kept in memory while following: older ones drop off the bottom (the pages keep them). */
export const TAIL_ROWS = 200;
/** How long one request waits for new events; the node answers within this + 10 s. */
const LONG_POLL_SECONDS = 20;
/** Events per forward page: catching up after a burst takes few requests. */
const FORWARD_COUNT = 100;
/** A failed request (not a refusal) is retried after this, doubling up to RETRY_MAX_MS. */
const RETRY_MS = 1000;
const RETRY_MAX_MS = 30_000;

/** The feed's `previous` link (the next events, forward) as a path on this node, `count` per page. */
export function forwardPath(feed: Feed): string | undefined {
  const link = feed.links.find((l) => l.relation === 'previous');
  if (!link) return undefined;
  const parts = new URL(link.uri, location.href).pathname.split('/');
  if (parts.length >= 3 && parts[parts.length - 2] === 'forward') parts[parts.length - 1] = String(FORWARD_COUNT);
  return `${parts.join('/')}?${EMBED}`;
}

/** `fresh` (newest first) on top of `rows`, without repeats, at most TAIL_ROWS. */
function prepend(fresh: Entry[], rows: Entry[]): Entry[] {
  const known = new Set(rows.map(entryName));
  return [...fresh.filter((e) => !known.has(entryName(e))), ...rows].slice(0, TAIL_ROWS);
}

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => { clearTimeout(timer); resolve(); }, { once: true });
  });
}

/**
 * The newest events of `stream` (ALL for $all), starting from `feed` (its head page) and
 * following new ones while live. A new `feed` (Refresh, an append from the form) starts over.
 * `hold` stops the requests for a while without pausing (the page is deleting the stream).
 */
export function LiveEvents({ stream, feed, caption, showStream, hold }: {
  stream: string; feed: Feed; caption: string; showStream?: boolean; hold?: boolean;
}) {
  const [rows, setRows] = useState<Entry[]>(feed.entries);
  const [live, setLive] = useState(true);
  const [error, setError] = useState<unknown>();
  const [stopped, setStopped] = useState<string>();
  const [notice, setNotice] = useState<string>();
  const [generation, setGeneration] = useState(0);
  const shown = useRef(rows);
  shown.current = rows;
  const cursor = useRef(forwardPath(feed));
  /** Paused since the cursor was current: Resume reads the head again. */
  const stale = useRef(false);
  const started = useRef(feed);
  /** The running loop's: aborted as soon as a new feed arrives, so nothing it had asked for lands on the new rows. */
  const running = useRef<AbortController | undefined>(undefined);

  useEffect(() => {
    if (started.current === feed) return;
    started.current = feed;
    running.current?.abort();
    cursor.current = forwardPath(feed);
    stale.current = false;
    setRows(feed.entries);
    setStopped(undefined);
    setNotice(undefined);
    setGeneration((g) => g + 1);
  }, [feed]);

  useEffect(() => {
    if (!live || hold || stopped) return;
    const controller = new AbortController();
    running.current = controller;
    const { signal } = controller;
    const catchUp = async () => {
      const head = (await call(pagePath(stream, ['head', 'backward', String(TAIL_ROWS)]), { accept: ATOM, signal })).json<Feed>();
      if (signal.aborted) return;
      const before = shown.current;
      const known = new Set(before.map(entryName));
      // The head page down to the newest row already shown is what arrived meanwhile.
      const seen = head.entries.findIndex((e) => known.has(entryName(e)));
      const joined = before.length === 0 || seen >= 0;
      // More arrived than one head page holds: the rows start again from the head, contiguous.
      setRows(joined ? prepend(head.entries.slice(0, seen < 0 ? undefined : seen), before) : head.entries.slice(0, TAIL_ROWS));
      setNotice(joined ? undefined : `More than ${TAIL_ROWS} events arrived while paused: the newest ${TAIL_ROWS} are shown.`);
      cursor.current = forwardPath(head);
      stale.current = false;
    };
    void (async () => {
      let failures = 0;
      while (!signal.aborted) {
        try {
          if (stale.current) await catchUp();
          const at = cursor.current;
          if (!at || signal.aborted) return;
          const page = (await call(at, { accept: ATOM, headers: { 'ES-LongPoll': String(LONG_POLL_SECONDS) }, signal })).json<Feed>();
          if (signal.aborted) return;
          if (page.entries.length > 0) setRows((r) => prepend(page.entries, r));
          // An empty page at the end has no `previous`: the same URL is asked again.
          cursor.current = forwardPath(page) ?? at;
          failures = 0;
          setError(undefined);
        } catch (err) {
          if (signal.aborted) return;
          if (err instanceof ApiFailure && (err.status === 404 || err.status === 410 || err.status === 401)) {
            setStopped(err.status === 401 ? 'Live updates stopped: the node refused the read.' : 'Live updates stopped: the stream is gone (deleted). Refresh to see it.');
            return;
          }
          setError(err);
          failures++;
          await pause(Math.min(RETRY_MAX_MS, RETRY_MS * 2 ** (failures - 1)), signal);
        }
      }
    })();
    return () => controller.abort();
  }, [live, hold, stopped, generation, stream]);

  const following = live && !stopped;
  return (
    <>
      <div class="tail-bar">
        <span class={following ? 'tail-state live' : 'tail-state'} data-tail={stopped ? 'stopped' : live ? 'live' : 'paused'}>
          <span class="dot" aria-hidden="true" />
          {stopped ? stopped : live ? `Live: new events appear at the top (the newest ${TAIL_ROWS} are kept).` : 'Paused: new events are not shown until you resume.'}
        </span>
        {stopped ? null : live
          ? <button type="button" class="secondary" onClick={() => { stale.current = true; setLive(false); }}>Pause</button>
          : <button type="button" class="secondary" onClick={() => setLive(true)}>Resume</button>}
      </div>
      {notice ? <p class="notice-plain">{notice}</p> : null}
      {error ? <p class="error" role="alert">Live updates failed, retrying: {errorText(error)}</p> : null}
      {rows.length > 0
        ? <EventsTable entries={rows} caption={caption} showStream={showStream} />
        : <p class="muted">No events yet{following ? ': new ones will appear here.' : '.'}</p>}
    </>
  );
}
