import { useState } from 'preact/hooks';
import { ApiFailure } from '../../api';
import { ConfirmButton, ErrorBox, Field, Json, Notice, useAction, useAsync } from '../../components';
import { prettyJson } from '../../json';
import { href, navigate } from '../../router';
import { call, ATOM, EVENTS, eventNumberOf, pagePath, SOFT_DELETED_TB, streamPath, type Feed } from './client';
import { Pager } from './parts';
import { EventsTable } from './rows';
import { LiveEvents } from './tail';
import { AclForm } from './acl';
import type { Metadata } from './metadata-text';

// One stream: a page of its events (newest first, paged through the feed's links), appending an
// event, its metadata shown and edited as JSON, and soft or hard deletion behind a confirmation.

async function readMetadata(stream: string, signal: AbortSignal): Promise<Metadata> {
  try {
    const res = await call(`${streamPath(stream)}/metadata`, { signal });
    const text = res.text.trim() || '{}';
    let doc: any;
    try { doc = JSON.parse(text); } catch { doc = undefined; }
    return { status: 'ok', doc, text };
  } catch (error) {
    if (error instanceof ApiFailure && error.status === 404) return { status: 'none' };
    return { status: 'error', error };
  }
}

export function StreamView({ stream, page }: { stream: string; page: string[] }) {
  const [tick, setTick] = useState(0);
  const refresh = () => setTick((t) => t + 1);
  const meta = useAsync((signal) => readMetadata(stream, signal), [stream], [tick]);
  // The metadata says first whether there are events to read: not for a stream that does not
  // exist (404), was hard-deleted (410) or soft-deleted ($tb at the end of time), whose feed the
  // node refuses as well.
  const tb = meta.data?.status === 'ok' ? meta.data.doc?.$tb : undefined;
  const softDeleted = typeof tb === 'number' && tb >= SOFT_DELETED_TB;
  const metaStatus = meta.data?.status === 'none' ? 404 : meta.data?.status === 'error' && meta.data.error instanceof ApiFailure ? meta.data.error.status : undefined;
  const readable = meta.data !== undefined && !softDeleted && metaStatus !== 404 && metaStatus !== 410;
  const feed = useAsync((signal) => (readable ? call(pagePath(stream, page), { accept: ATOM, signal }).then((r) => r.json<Feed>()) : Promise.resolve(undefined)),
    [stream, page.join('/'), readable], [tick]);
  const status = feed.error instanceof ApiFailure ? feed.error.status : softDeleted ? 404 : metaStatus === 404 || metaStatus === 410 ? metaStatus : undefined;
  const hardDeleted = status === 410;
  const atHead = page.length === 0 || page[0] === 'head';
  // While a delete is under way the live tail asks nothing (its wait would end in the 404 of the delete).
  const [deleting, setDeleting] = useState(false);

  return (
    <section aria-labelledby="stream-title" class="stream">
      <nav class="crumbs" aria-label="Breadcrumb"><a href={href('streams')}>Streams</a></nav>
      <h1 id="stream-title">Stream <span class="name">{stream}</span></h1>

      <section aria-labelledby="events-title">
        <div class="row spread">
          <h2 id="events-title">Events</h2>
          <button type="button" class="secondary" onClick={refresh} disabled={feed.loading}>Refresh</button>
        </div>
        {hardDeleted ? (
          <p class="gone" role="status">This stream has been hard-deleted (410 Deleted): its events are gone and its name cannot be written again.</p>
        ) : softDeleted ? (
          <p class="gone" role="status">This stream has been deleted (soft delete: 404 for reads, its metadata holds <code>$tb</code>). Appending an event recreates it; its old events stay hidden.</p>
        ) : status === 404 ? (
          <p class="gone" role="status">No stream named “{stream}” (404 Not Found). Appending an event creates it.</p>
        ) : (
          <ErrorBox error={feed.error} />
        )}
        {feed.data && !feed.error ? (
          <>
            <Pager feed={feed.data} base={['streams', stream]} atHead={atHead} />
            {atHead
              ? <LiveEvents stream={stream} feed={feed.data} caption={`Events of ${stream}, newest first`} hold={deleting} />
              : feed.data.entries.length > 0
                ? <EventsTable entries={feed.data.entries} caption={`Events of ${stream}, newest first`} />
                : <p class="muted">No events on this page.</p>}
          </>
        ) : (feed.loading || meta.data === undefined) && !feed.error ? <p class="muted">Loading…</p> : null}
      </section>

      {hardDeleted ? null : (
        <>
          <AppendForm stream={stream} onAppended={() => (atHead ? refresh() : navigate('streams', stream))} />
          <MetadataEditor stream={stream} meta={meta.data} onSaved={refresh} />
          <AclForm stream={stream} meta={meta.data} onSaved={refresh} />
          <DeleteActions stream={stream} disabled={status === 404 && !softDeleted} onDeleting={setDeleting}
            onDeleted={() => (atHead ? refresh() : navigate('streams', stream))} />
        </>
      )}
    </section>
  );
}

function AppendForm({ stream, onAppended }: { stream: string; onAppended: () => void }) {
  const [type, setType] = useState('');
  const [data, setData] = useState('{\n  \n}');
  const [dataIsJson, setDataIsJson] = useState(true);
  const [metadata, setMetadata] = useState('');
  const [expected, setExpected] = useState('');
  const { busy, error, done, run } = useAction();

  const submit = (e: Event) => {
    e.preventDefault();
    void run(async () => {
      // Checked here first: a form the node would refuse is not sent.
      const event: Record<string, unknown> = { eventId: crypto.randomUUID(), eventType: type.trim() };
      event.data = dataIsJson ? checkedJson(data, 'Data') : data;
      if (metadata.trim()) event.metadata = checkedJson(metadata, 'Metadata');
      if (expected.trim() && !/^-?\d+$/.test(expected.trim())) throw new Error('Expected version must be a whole number (-1: the stream must not exist, -2: any, -4: must exist).');
      const res = await call(streamPath(stream), {
        method: 'POST', contentType: EVENTS, body: [event],
        headers: expected.trim() ? { 'SVC-ExpectedVersion': expected.trim() } : {},
      });
      const n = eventNumberOf(res.headers.get('Location'));
      setExpected('');
      onAppended();
      return n === undefined ? `Appended a ${type.trim()} event.` : `Appended event ${n} (${type.trim()}).`;
    });
  };

  return (
    <section aria-labelledby="append-title">
      <h2 id="append-title">Append an event</h2>
      <form aria-labelledby="append-title" onSubmit={submit}>
        <div class="row top">
          <Field label="Event type">
            <input required value={type} onInput={(e) => setType(e.currentTarget.value)} />
          </Field>
          <Field label="Expected version (optional)" hint="The stream's last event number; -1: must not exist">
            <input inputMode="numeric" value={expected} onInput={(e) => setExpected(e.currentTarget.value)} />
          </Field>
        </div>
        <Field label="Data">
          <textarea rows={6} spellcheck={false} value={data} onInput={(e) => setData(e.currentTarget.value)} />
        </Field>
        <label class="check">
          <input type="checkbox" checked={dataIsJson} onChange={(e) => setDataIsJson(e.currentTarget.checked)} /> Data is JSON
        </label>
        <Field label="Event metadata (optional JSON)">
          <textarea rows={3} spellcheck={false} value={metadata} onInput={(e) => setMetadata(e.currentTarget.value)} />
        </Field>
        <ErrorBox error={error} />
        {done ? <Notice>{done}</Notice> : null}
        <button type="submit" disabled={busy}>Append</button>
      </form>
    </section>
  );
}

/** The JSON text itself, sent as typed (the node stores it as it is; a parsed copy would round big numbers). */
function checkedJson(text: string, what: string): string {
  try {
    JSON.parse(text);
    return text;
  } catch (err) {
    throw new Error(`${what} is not valid JSON: ${(err as Error).message}`);
  }
}

function MetadataEditor({ stream, meta, onSaved }: { stream: string; meta: Metadata | undefined; onSaved: () => void }) {
  const [editing, setEditing] = useState<string>();
  const { busy, error, done, run, setError, setDone } = useAction();
  const current = meta?.status === 'ok' ? meta.text : meta?.status === 'none' ? '{}' : undefined;

  const save = (e: Event) => {
    e.preventDefault();
    if (editing === undefined) return;
    void run(async () => {
      // The text goes as it is: the node judges it (and answers 400 for what is not a metadata object).
      const res = await call(`${streamPath(stream)}/metadata`, {
        method: 'POST', contentType: EVENTS, body: [{ eventId: crypto.randomUUID(), eventType: '$metadata', data: editing }],
      });
      setEditing(undefined);
      onSaved();
      return `Metadata saved (event ${eventNumberOf(res.headers.get('Location')) ?? '?'} of $$${stream}).`;
    });
  };

  return (
    <section aria-labelledby="metadata-title">
      <h2 id="metadata-title">Stream metadata</h2>
      {meta?.status === 'error' ? <ErrorBox error={meta.error} /> : null}
      {editing === undefined ? (
        <>
          {current !== undefined ? <Json value={current} label="Current metadata" /> : <p class="muted">Loading…</p>}
          {meta?.status === 'none' ? <p class="muted">The stream has no metadata yet.</p> : null}
          {done ? <Notice>{done}</Notice> : null}
          <button type="button" class="secondary" disabled={current === undefined} onClick={() => {
            setDone(undefined);
            setError(undefined);
            setEditing(prettyJson(current ?? '{}'));
          }}>Edit metadata</button>
        </>
      ) : (
        <form aria-labelledby="metadata-title" onSubmit={save}>
          <Field label="Metadata (JSON)" hint="$maxCount, $maxAge (seconds), $tb, $cacheControl, $acl ({$r, $w, $d, $mr, $mw}) and your own keys">
            <textarea rows={10} spellcheck={false} value={editing} onInput={(e) => setEditing(e.currentTarget.value)} />
          </Field>
          <ErrorBox error={error} />
          <div class="row">
            <button type="submit" disabled={busy}>Save metadata</button>
            <button type="button" class="secondary" onClick={() => { setEditing(undefined); setError(undefined); }}>Cancel</button>
          </div>
        </form>
      )}
    </section>
  );
}

function DeleteActions({ stream, disabled, onDeleting, onDeleted }: {
  stream: string; disabled: boolean; onDeleting: (deleting: boolean) => void; onDeleted: () => void;
}) {
  const [done, setDone] = useState<string>();
  const remove = (hard: boolean) => async () => {
    setDone(undefined);
    onDeleting(true);
    try {
      await call(streamPath(stream), { method: 'DELETE', headers: hard ? { 'SVC-HardDelete': 'true' } : {} });
    } finally {
      onDeleting(false);
    }
    setDone(hard ? `Stream ${stream} hard-deleted.` : `Stream ${stream} deleted.`);
    onDeleted();
  };
  return (
    <section aria-labelledby="delete-title">
      <h2 id="delete-title">Delete</h2>
      <p class="muted">A soft delete hides the events (appending again recreates the stream); a hard delete removes them and the name for good.</p>
      {done ? <Notice>{done}</Notice> : null}
      <div class="row">
        <ConfirmButton label="Delete stream" confirmLabel="Delete" disabled={disabled} onConfirm={remove(false)}
          question={`Soft-delete stream “${stream}”? Its events are hidden; appending to it again recreates it.`} />
        <ConfirmButton label="Hard delete stream" confirmLabel="Hard delete" danger disabled={disabled} onConfirm={remove(true)}
          question={`Hard-delete stream “${stream}”? Its events are removed and the name can never be written again. This cannot be undone.`} />
      </div>
    </section>
  );
}
