import { useState } from 'preact/hooks';
import { getJson, isAdmin, isOps, request, seg, type Session } from '../../api';
import type { ComponentChildren } from 'preact';
import { ConfirmButton, ErrorBox, Field, Notice, Position, formatNumber, useAction, useAsync, useInterval } from '../../components';
import { href, navigate } from '../../router';
import type { ViewProps } from '../../view';
import { Failure } from './failure';
import { Parked } from './parked';
import { DEFAULTS, SettingsFields, fromConfig, toBody, type Settings } from './settings';
import './subscriptions.css';

// Persistent subscriptions: every group with its figures (GET /subscriptions, or one stream's),
// a form to create one; a group's page with its live info (buffers, in flight, parked), its
// settings to update, delete, and its parked messages to view and replay.
// Routes: #/subscriptions, #/subscriptions/{stream}, #/subscriptions/{stream}/{group}.

const REFRESH_MS = 2000;
const groupPath = (stream: string, group: string) => `/subscriptions/${seg(stream)}/${seg(group)}`;

export default function Subscriptions({ path, session }: ViewProps) {
  if (path.length >= 2) return <Group stream={path[0]} group={path[1]} session={session} />;
  return <List stream={path[0]} session={session} />;
}

function List({ stream, session }: { stream?: string; session: Session }) {
  const groups = useAsync(async (signal) => {
    if (stream === undefined) return getJson<any[]>('/subscriptions', { signal });
    try {
      return await getJson<any[]>(`/subscriptions/${seg(stream)}`, { signal });
    } catch (err: any) {
      if (err?.status === 404) return [];
      throw err;
    }
  }, [stream]);
  useInterval(groups.reload, REFRESH_MS);
  const rows = groups.data ?? [];
  return (
    <section aria-labelledby="subs-title">
      <h1 id="subs-title">{stream === undefined ? 'Persistent subscriptions' : `Persistent subscriptions on ${stream}`}</h1>
      {stream !== undefined ? <p><a href={href('subscriptions')}>All subscriptions</a></p> : null}
      <ErrorBox error={groups.error} />
      <table aria-label="Subscriptions">
        <thead>
          <tr><th>Stream</th><th>Group</th><th>Status</th><th>Processed</th><th>Last known event</th><th>Last checkpoint</th><th>In flight</th><th>Connections</th></tr>
        </thead>
        <tbody>
          {rows.map((g) => (
            <tr key={`${g.eventStreamId}/${g.groupName}`}>
              <td><a href={href('subscriptions', g.eventStreamId)}>{g.eventStreamId}</a></td>
              <td><a href={href('subscriptions', g.eventStreamId, g.groupName)}>{g.groupName}</a></td>
              <td>{g.status}</td>
              <td>{formatNumber(g.totalItemsProcessed)}</td>
              <td>{g.lastKnownEventPosition ?? '–'}</td>
              <td>{g.lastCheckpointedEventPosition ?? '–'}</td>
              <td>{formatNumber(g.totalInFlightMessages)}</td>
              <td>{formatNumber(g.connectionCount)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {groups.data && rows.length === 0 ? <p class="muted">No persistent subscriptions{stream !== undefined ? ' on this stream' : ''}.</p> : null}
      {isOps(session)
        ? <CreateForm stream={stream} onCreated={(s, g) => navigate('subscriptions', s, g)} />
        : <p class="muted">Creating, changing and deleting subscriptions takes an operator or an admin.</p>}
    </section>
  );
}

function CreateForm({ stream, onCreated }: { stream?: string; onCreated: (stream: string, group: string) => void }) {
  const [target, setTarget] = useState(stream ?? '');
  const [group, setGroup] = useState('');
  const [settings, setSettings] = useState<Settings>(DEFAULTS);
  const { busy, error, run } = useAction();
  return (
    <form aria-label="New subscription" class="sub-form" onSubmit={(e) => {
      e.preventDefault();
      void run(async () => {
        await request(groupPath(target, group), { method: 'PUT', body: toBody(settings) });
        onCreated(target, group);
      });
    }}>
      <h2>New subscription</h2>
      <div class="row">
        <Field label="Stream"><input name="stream" required value={target} onInput={(e) => setTarget(e.currentTarget.value)} /></Field>
        <Field label="Group"><input name="group" required value={group} onInput={(e) => setGroup(e.currentTarget.value)} /></Field>
      </div>
      <SettingsFields id="new-sub" value={settings} onChange={setSettings} />
      <Failure error={error} />
      <div class="row">
        <button type="submit" disabled={busy}>Create subscription</button>
        <button type="button" class="secondary" onClick={() => setSettings(DEFAULTS)}>Reset to defaults</button>
      </div>
    </form>
  );
}

function Group({ stream, group, session }: { stream: string; group: string; session: Session }) {
  const info = useAsync((signal) => getJson<any>(`${groupPath(stream, group)}/info`, { signal }), [stream, group]);
  useInterval(info.reload, REFRESH_MS);
  const [parkedTick, setParkedTick] = useState(0);
  const g = info.data;
  const missing = (info.error as any)?.status === 404;
  return (
    <section aria-labelledby="sub-title">
      <p><a href={href('subscriptions')}>All subscriptions</a> · <a href={href('subscriptions', stream)}>Subscriptions on {stream}</a></p>
      <h1 id="sub-title">{group} on {stream}</h1>
      {missing ? <p class="error" role="alert">There is no subscription {group} on {stream}.</p> : <ErrorBox error={info.error} />}
      {g && !missing ? (
        <>
          <dl class="cards" aria-label="Subscription figures">
            <Figure name="status" label="Status" value={g.status} />
            <Figure name="processed" label="Processed" value={formatNumber(g.totalItemsProcessed)} />
            <Figure name="last-known" label="Last known event" value={<Position text={g.lastKnownEventPosition} />} />
            <Figure name="last-checkpoint" label="Last checkpoint" value={<Position text={g.lastCheckpointedEventPosition} />} />
            <Figure name="in-flight" label="In flight" value={formatNumber(g.totalInFlightMessages)} />
            <Figure name="outstanding" label="Outstanding" value={formatNumber(g.outstandingMessagesCount)} />
            <Figure name="read-buffer" label="Read buffer" value={formatNumber(g.readBufferCount)} />
            <Figure name="live-buffer" label="Live buffer" value={formatNumber(g.liveBufferCount)} />
            <Figure name="retry-buffer" label="Retry buffer" value={formatNumber(g.retryBufferCount)} />
            <Figure name="parked" label="Parked" value={formatNumber(g.parkedMessageCount)} />
            <Figure name="oldest-parked" label="Oldest parked (s)" value={formatNumber(g.oldestParkedMessage)} />
            <Figure name="rate" label="Items/s" value={formatNumber(g.averageItemsPerSecond, 1)} />
          </dl>
          {g.connections?.length ? (
            <>
              <h2>Connections</h2>
              <table aria-label="Connections">
                <thead><tr><th>From</th><th>User</th><th>Name</th><th>In flight</th><th>Available slots</th><th>Items</th></tr></thead>
                <tbody>
                  {g.connections.map((c: any, i: number) => (
                    <tr key={i}><td>{c.from}</td><td>{c.username}</td><td>{c.connectionName}</td><td>{c.inFlightMessages}</td>
                      <td>{c.availableSlots}</td><td>{formatNumber(c.totalItemsProcessed)}</td></tr>
                  ))}
                </tbody>
              </table>
            </>
          ) : null}
          <h2>Parked messages</h2>
          {isOps(session) ? <Replay stream={stream} group={group} onReplayed={() => { info.reload(); setParkedTick((t) => t + 1); }} /> : null}
          <Parked stream={stream} group={group} tick={parkedTick} readable={isAdmin(session)} />
          {isOps(session) ? (
            <>
              <EditForm stream={stream} group={group} config={g.config} onSaved={info.reload} />
              <h2>Delete</h2>
              <p>Deleting the subscription drops its consumers and discards its checkpoint and parked messages.</p>
              <ConfirmButton label="Delete subscription" danger question={`Delete the subscription ${group} on ${stream}?`}
                confirmLabel="Delete" onConfirm={async () => {
                  await request(groupPath(stream, group), { method: 'DELETE' });
                  navigate('subscriptions');
                }} />
            </>
          ) : (
            <>
              <h2>Settings</h2>
              <dl class="sub-config">
                {Object.entries(g.config ?? {}).map(([k, v]) => <div key={k}><dt>{k}</dt><dd>{String(v)}</dd></div>)}
              </dl>
            </>
          )}
        </>
      ) : null}
    </section>
  );
}

function Figure({ name, label, value }: { name: string; label: string; value: ComponentChildren }) {
  return <div><dt>{label}</dt><dd data-figure={name}>{value}</dd></div>;
}

function Replay({ stream, group, onReplayed }: { stream: string; group: string; onReplayed: () => void }) {
  const [stopAt, setStopAt] = useState('');
  const { busy, error, done, run } = useAction();
  return (
    <form aria-label="Replay parked messages" class="row" onSubmit={(e) => {
      e.preventDefault();
      void run(async () => {
        const q = stopAt.trim() === '' ? '' : `?stopAt=${encodeURIComponent(stopAt.trim())}`;
        await request(`${groupPath(stream, group)}/replayParked${q}`, { method: 'POST' });
        onReplayed();
        return 'Replay started: the parked messages go back to the group ahead of new events.';
      });
    }}>
      <Field label="Stop before parked event number" hint="Optional: empty replays them all">
        <input name="stopAt" inputMode="numeric" value={stopAt} onInput={(e) => setStopAt(e.currentTarget.value)} />
      </Field>
      <button type="submit" disabled={busy}>Replay parked messages</button>
      {done ? <Notice>{done}</Notice> : null}
      <Failure error={error} />
    </form>
  );
}

function EditForm({ stream, group, config, onSaved }: { stream: string; group: string; config: any; onSaved: () => void }) {
  // Seeded once from the group's config; the live refresh of /info does not overwrite what is being typed.
  const [settings, setSettings] = useState<Settings>(() => fromConfig(config));
  const { busy, error, done, run, setDone } = useAction();
  return (
    <form aria-label="Update subscription" class="sub-form" onSubmit={(e) => {
      e.preventDefault();
      void run(async () => {
        await request(groupPath(stream, group), { method: 'POST', body: toBody(settings) });
        onSaved();
        return 'Settings saved.';
      });
    }}>
      <h2>Settings</h2>
      <p class="muted">Updating restarts the group from its last checkpoint: messages in flight are delivered again.</p>
      <SettingsFields id="edit-sub" value={settings} onChange={(s) => { setSettings(s); setDone(undefined); }} />
      <Failure error={error} />
      {done ? <Notice>{done}</Notice> : null}
      <div class="row">
        <button type="submit" disabled={busy}>Save settings</button>
        <button type="button" class="secondary" onClick={() => setSettings(fromConfig(config))}>Undo changes</button>
      </div>
    </form>
  );
}
