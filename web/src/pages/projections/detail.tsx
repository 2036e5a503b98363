import { useEffect, useRef, useState } from 'preact/hooks';
import { isAdmin, isOps, request, type Session } from '../../api';
import { ConfirmButton, ErrorBox, Json, Notice, Position, formatBytes, formatNumber, useAction, useInterval } from '../../components';
import { href, navigate } from '../../router';
import { QueryEditor } from './editor';
import { StatusBadge, REFRESH_MS } from './list';
import {
  CATALOG_PAGE, lagOf, logHead, modeTitle, projectionPath, readTextStream, statisticsOf, syntaxErrorOf,
  type ProjectionStats, type QueryConfig, type TextStream,
} from './model';

// One projection: its figures (live), the commands, state and result per partition, the query
// (edited in place), the configuration, the full statistics and the streams it emitted to; a link
// to its debugger (debugger.tsx; system projections are native code, not debugged).

const isRunning = (status: string) => /^Running/.test(status);
const OTHER = '\u0000other';
const CATALOG_EVERY = 5; // catalogue streams are re-read every fifth refresh (10 s)

export function ProjectionDetail({ name, session }: { name: string; session: Session }) {
  const [stats, setStats] = useState<ProjectionStats>();
  const [head, setHead] = useState<number>();
  const [loadError, setLoadError] = useState<unknown>();
  const [config, setConfig] = useState<QueryConfig>();
  const [settings, setSettings] = useState<Record<string, unknown>>();
  const [partitions, setPartitions] = useState<TextStream>();
  const [emitted, setEmitted] = useState<TextStream>();
  const [tick, setTick] = useState(0);
  const busy = useRef(false);
  const ops = isOps(session);
  const mayCommand = ops || stats?.mode === 'Transient';

  const loadConfig = async () => {
    const c = await request(`${projectionPath(name)}/query?config=yes`).then((a) => a.json<QueryConfig>());
    setConfig(c);
    // The config route is the operators' (it answers 401, which would end anyone else's session).
    if (ops) setSettings(await request(`${projectionPath(name)}/config`).then((a) => a.json()).catch(() => undefined));
    return c;
  };

  const loadCatalogs = async (c: QueryConfig | undefined) => {
    if (!c) return;
    // Catalogue streams are system streams, only admins' by default: not asked for anyone else.
    if (!isAdmin(session)) {
      const refused = (why: string) => ({ items: [], more: false, refused: why });
      if (c.definition.byStreams || c.definition.byCustomPartitions) {
        setPartitions(refused(`The partitions are listed in $projections-${name}-partitions, which only admins may read by default: type a partition's name.`));
      }
      if (c.trackEmittedStreams) setEmitted(refused(`The streams it emitted to are listed in $projections-${name}-emittedstreams, which only admins may read by default.`));
      return;
    }
    if (c.definition.byStreams || c.definition.byCustomPartitions) {
      setPartitions(await readTextStream(`$projections-${name}-partitions`).catch((err) => ({ items: [], more: false, refused: String(err) })));
    }
    if (c.trackEmittedStreams) {
      setEmitted(await readTextStream(`$projections-${name}-emittedstreams`).catch((err) => ({ items: [], more: false, refused: String(err) })));
    }
  };

  const refresh = async (withCatalogs = false) => {
    if (busy.current) return;
    busy.current = true;
    try {
      const [s, h] = await Promise.all([statisticsOf(name), logHead().catch(() => undefined)]);
      setStats(s);
      setHead(h);
      setLoadError(undefined);
      setTick((t) => t + 1);
      if (withCatalogs) await loadCatalogs(config);
    } catch (err) {
      setLoadError(err);
    } finally {
      busy.current = false;
    }
  };

  useEffect(() => {
    setStats(undefined); setConfig(undefined); setSettings(undefined); setPartitions(undefined); setEmitted(undefined);
    void refresh();
    loadConfig().then(loadCatalogs).catch(setLoadError);
  }, [name]);
  useInterval(() => void refresh(tick % CATALOG_EVERY === 0), REFRESH_MS);

  if (!stats) {
    return (
      <section aria-labelledby="projection-title">
        <p><a href={href('projections')}>← Projections</a></p>
        <h1 id="projection-title">{name}</h1>
        <ErrorBox error={loadError} />
        {!loadError ? <p class="muted">Loading…</p> : null}
      </section>
    );
  }

  const lag = lagOf(stats, head);
  return (
    <section aria-labelledby="projection-title">
      <p><a href={href('projections')}>← Projections</a></p>
      <div class="row">
        <h1 id="projection-title">{name}</h1>
        <StatusBadge status={stats.status} />
        {/^\$/.test(name) ? null : <a class="button" href={href('projections', name, 'debug')}>Debug</a>}
      </div>
      <ErrorBox error={loadError} />
      <dl class="cards" aria-label="Projection figures">
        <div><dt>Status</dt><dd data-figure="status">{stats.status}</dd></div>
        <div><dt>Mode</dt><dd data-figure="mode">{modeTitle(stats.mode)}</dd></div>
        <div><dt>Progress</dt><dd data-figure="progress">{stats.progress < 0 ? 'unknown' : `${formatNumber(stats.progress, 1)} %`}</dd></div>
        <div><dt>Lag behind the log</dt><dd data-figure="lag" title={Number.isFinite(lag) ? `${formatNumber(lag)} bytes of log still to read` : undefined}>{Number.isFinite(lag) ? formatBytes(lag) : '–'}</dd></div>
        <div><dt>Position</dt><dd data-figure="position"><Position text={stats.position} /></dd></div>
        <div><dt>Last checkpoint</dt><dd><Position text={stats.lastCheckpoint} /></dd></div>
        <div><dt>Events processed</dt><dd data-figure="processed">{formatNumber(stats.eventsProcessedAfterRestart)}</dd></div>
        <div><dt>Buffered events</dt><dd>{formatNumber(stats.bufferedEvents)}</dd></div>
      </dl>
      {stats.stateReason ? (
        <div class="fault" role="alert" aria-label="Fault reason"><strong>Reason:</strong><pre>{stats.stateReason}</pre></div>
      ) : null}

      <Commands name={name} stats={stats} allowed={mayCommand} config={config} onDone={() => { void refresh(); loadConfig().catch(setLoadError); }} />

      <StateAndResult name={name} tick={tick} partitioned={!!(config?.definition.byStreams || config?.definition.byCustomPartitions)} partitions={partitions} />

      <QuerySection name={name} mode={stats.mode} config={config} allowed={mayCommand} onSaved={() => { void refresh(); loadConfig().then(loadCatalogs).catch(setLoadError); }} />

      <EmittedStreams name={name} stats={stats} config={config} emitted={emitted} onRefresh={() => loadCatalogs(config)} />

      <h2 id="statistics-title">Statistics</h2>
      <table aria-labelledby="statistics-title" class="stats">
        <thead><tr><th scope="col">Statistic</th><th scope="col">Value</th></tr></thead>
        <tbody>
          {Object.entries(stats).filter(([k]) => !/Url$/.test(k)).map(([k, v]) => (
            <tr key={k}><th scope="row">{k}</th><td>{typeof v === 'object' && v !== null ? JSON.stringify(v) : String(v)}</td></tr>
          ))}
        </tbody>
      </table>

      {settings ? (
        <>
          <h2 id="config-title">Configuration</h2>
          <table aria-labelledby="config-title" class="stats">
            <thead><tr><th scope="col">Setting</th><th scope="col">Value</th></tr></thead>
            <tbody>
              {Object.entries(settings).filter(([k]) => k !== 'msgTypeId').map(([k, v]) => (
                <tr key={k}><th scope="row">{k}</th><td>{v === null ? 'default' : String(v)}</td></tr>
              ))}
              {config ? <tr><th scope="row">checkpointsEnabled</th><td>{String(!!config.checkpointsEnabled)}</td></tr> : null}
            </tbody>
          </table>
        </>
      ) : null}
    </section>
  );
}

function Commands({ name, stats, allowed, config, onDone }: {
  name: string; stats: ProjectionStats; allowed: boolean; config?: QueryConfig; onDone: () => void;
}) {
  const { busy, error, done, run } = useAction();
  const [deleteCheckpoints, setDeleteCheckpoints] = useState(false);
  const [deleteEmitted, setDeleteEmitted] = useState(false);
  const running = isRunning(stats.status);

  // A confirmed command shows its refusal in its dialog; the others next to the buttons.
  const command = (which: 'enable' | 'disable' | 'reset' | 'abort', past: string, confirmed = false) => run(async () => {
    await request(`${projectionPath(name)}/command/${which}`, { method: 'POST', body: '', contentType: 'application/json' });
    onDone();
    return `${past}.`;
  }, confirmed);

  if (!allowed) {
    return <p class="muted">Only operators and admins may change this projection.</p>;
  }
  const tracked = !!config?.trackEmittedStreams;
  return (
    <div aria-label="Commands" role="group" class="commands">
      <div class="row">
        <button type="button" disabled={busy || running} onClick={() => command('enable', 'Enabled')}>Enable</button>
        <button type="button" class="secondary" disabled={busy || !running} onClick={() => command('disable', 'Disabled')}>Disable</button>
        <button type="button" class="secondary" disabled={busy || !running} onClick={() => command('abort', 'Aborted')}
          title="Stop without writing a checkpoint">Abort</button>
        <ConfirmButton label="Reset" danger disabled={busy}
          question={`Reset ${name}? It starts again from the beginning of its source with an empty state; its earlier results and emitted events are superseded.`}
          confirmLabel="Reset projection" onConfirm={() => command('reset', 'Reset', true)} />
        <ConfirmButton label="Delete" danger disabled={busy}
          question={`Delete ${name}?${deleteCheckpoints ? ' Its checkpoint stream is deleted too.' : ''}${deleteEmitted ? ' The streams it emitted to are deleted too.' : ''} A projection must be stopped (or faulted) to be deleted.`}
          confirmLabel="Delete projection"
          onConfirm={async () => {
            const q = new URLSearchParams({
              deleteCheckpointStream: deleteCheckpoints ? 'yes' : 'no',
              deleteEmittedStreams: deleteEmitted ? 'yes' : 'no',
              deleteStateStream: 'no',
            });
            await request(`${projectionPath(name)}?${q}`, { method: 'DELETE' });
            navigate('projections');
          }} />
      </div>
      <fieldset class="options compact">
        <legend>When deleting</legend>
        <label class="inline"><input type="checkbox" checked={deleteCheckpoints} onChange={(e) => setDeleteCheckpoints(e.currentTarget.checked)} /> Also delete the checkpoint stream</label>
        <label class="inline" title={tracked ? undefined : 'Only a projection that tracks its emitted streams can delete them.'}>
          <input type="checkbox" checked={deleteEmitted} disabled={!tracked} onChange={(e) => setDeleteEmitted(e.currentTarget.checked)} /> Also delete the emitted streams
        </label>
      </fieldset>
      <ErrorBox error={error} />
      {done && !error ? <Notice>{done}</Notice> : null}
    </div>
  );
}

function StateAndResult({ name, tick, partitioned, partitions }: { name: string; tick: number; partitioned: boolean; partitions?: TextStream }) {
  const [partition, setPartition] = useState('');
  const [state, setState] = useState<string>();
  const [result, setResult] = useState<string>();
  const [error, setError] = useState<unknown>();

  useEffect(() => {
    const controller = new AbortController();
    const q = partition ? `?partition=${encodeURIComponent(partition)}` : '';
    Promise.all([
      request(`${projectionPath(name)}/state${q}`, { signal: controller.signal }),
      request(`${projectionPath(name)}/result${q}`, { signal: controller.signal }),
    ]).then(([s, r]) => {
      setState(s.text); setResult(r.text); setError(undefined);
    }, (err) => { if (!controller.signal.aborted) setError(err); });
    return () => controller.abort();
  }, [name, partition, tick]);

  const listed = partitions?.items ?? [];
  return (
    <>
      <h2 id="state-title">State and result</h2>
      {partitioned ? (
        <div class="row partition-picker">
          <label for="partition-pick">Partition</label>
          <select id="partition-pick" value={listed.includes(partition) || partition === '' ? partition : OTHER} onChange={(e) => {
            const v = e.currentTarget.value;
            if (v !== OTHER) setPartition(v);
          }}>
            <option value="">(root partition)</option>
            {listed.map((p) => <option key={p} value={p}>{p}</option>)}
            {partition && !listed.includes(partition) ? <option value={OTHER}>{partition} (typed)</option> : null}
          </select>
          <label for="partition-name">Partition name</label>
          <input id="partition-name" value={partition} onChange={(e) => setPartition(e.currentTarget.value)} placeholder="type a partition" />
          <span class="muted">
            {partitions?.refused ?? `${formatNumber(listed.length)} partition${listed.length === 1 ? '' : 's'} listed from $projections-${name}-partitions${partitions?.more ? ` (the newest ${CATALOG_PAGE}; type any other)` : ''}.`}
          </span>
        </div>
      ) : null}
      <ErrorBox error={error} />
      <div class="two-columns">
        <div>
          <h3>State{partition ? ` of ${partition}` : ''}</h3>
          {state === '' ? <p class="muted" role="group" aria-label="State">No state yet.</p> : <Json value={state} label="State" />}
        </div>
        <div>
          <h3>Result{partition ? ` of ${partition}` : ''}</h3>
          {result === '' ? <p class="muted" role="group" aria-label="Result">No result.</p> : <Json value={result} label="Result" />}
        </div>
      </div>
    </>
  );
}

function QuerySection({ name, mode, config, allowed, onSaved }: { name: string; mode: string; config?: QueryConfig; allowed: boolean; onSaved: () => void }) {
  const [text, setText] = useState<string>();
  const [emit, setEmit] = useState(false);
  const { busy, error, done, run, setError, setDone } = useAction();
  // The stored query fills the editor once; later reloads of the config leave the user's text alone.
  // (Index.tsx keys the detail view by name, so another projection gets a fresh editor.)
  useEffect(() => {
    if (config && text === undefined) { setText(config.query); setEmit(!!config.emitEnabled); }
  }, [config, text]);
  const syntax = syntaxErrorOf(error);
  if (text === undefined) return <><h2>Query</h2><p class="muted">Loading…</p></>;
  const changed = config ? text !== config.query || emit !== !!config.emitEnabled : false;
  return (
    <>
      <h2 id="query-title">Query</h2>
      <form aria-labelledby="query-title" onSubmit={(e) => {
        e.preventDefault();
        void run(async () => {
          await request(`${projectionPath(name)}/query?emit=${emit ? 'yes' : 'no'}`, { method: 'PUT', body: text, contentType: 'application/javascript' });
          onSaved();
          return 'Query saved; the projection restarts from its last checkpoint with it.';
        });
      }}>
        <QueryEditor id="edit-query" label="Query source" value={text} onInput={(t) => { setText(t); setDone(undefined); }} error={syntax} />
        {mode !== 'Transient' ? (
          <label class="inline"><input type="checkbox" checked={emit} disabled={!allowed} onChange={(e) => setEmit(e.currentTarget.checked)} /> Allow emitting events</label>
        ) : null}
        {!syntax ? <ErrorBox error={error} /> : null}
        {done ? <Notice>{done}</Notice> : null}
        {allowed ? (
          <div class="row">
            <button type="submit" disabled={busy || !changed}>Save query</button>
            <button type="button" class="secondary" disabled={busy || !changed} onClick={() => { setText(config?.query ?? ''); setEmit(!!config?.emitEnabled); setError(undefined); }}>Revert</button>
          </div>
        ) : null}
      </form>
    </>
  );
}

function EmittedStreams({ name, stats, config, emitted, onRefresh }: {
  name: string; stats: ProjectionStats; config?: QueryConfig; emitted?: TextStream; onRefresh: () => void;
}) {
  const resultStream = stats.resultStreamUrl ? config?.outputConfig.resultStreamName : undefined;
  const partitioned = !!(config?.definition.byStreams || config?.definition.byCustomPartitions);
  const own = [
    ...(config?.checkpointsEnabled ? [`$projections-${name}-checkpoint`] : []),
    ...(partitioned ? [`$projections-${name}-partitions`] : []),
    ...(config?.trackEmittedStreams ? [`$projections-${name}-emittedstreams`] : []),
  ];
  return (
    <>
      <h2 id="emitted-title">Emitted streams</h2>
      <section aria-labelledby="emitted-title">
        {resultStream ? <p>Result stream: <a href={href('streams', resultStream)}>{resultStream}</a></p> : null}
        {!config ? <p class="muted">Loading…</p>
          : !config.emitEnabled ? <p class="muted">This projection does not emit events (emitting is off).</p>
          : !config.trackEmittedStreams ? <p class="muted">This projection emits events but does not track the streams it emits to, so the node keeps no list of them.</p>
          : emitted?.refused ? <p class="muted">{emitted.refused}</p>
          : (
            <>
              <ul aria-label="Emitted streams" class="stream-list">
                {(emitted?.items ?? []).map((s) => <li key={s}><a href={href('streams', s)}>{s}</a></li>)}
              </ul>
              <p class="muted">
                {emitted ? `${formatNumber(emitted.items.length)} stream${emitted.items.length === 1 ? '' : 's'}${emitted.more ? ` (the newest ${CATALOG_PAGE})` : ''}, from $projections-${name}-emittedstreams.` : 'Loading…'}{' '}
                <button type="button" class="link" onClick={onRefresh}>Refresh list</button>
              </p>
            </>
          )}
        {own.length ? (
          <p class="muted">The projection's own streams: {own.map((s, i) => <>{i ? ', ' : ''}<a href={href('streams', s)}>{s}</a></>)}</p>
        ) : null}
      </section>
    </>
  );
}

