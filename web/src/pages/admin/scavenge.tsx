import { useEffect, useRef, useState } from 'preact/hooks';
import { getJson, request, seg } from '../../api';
import { Field, formatBytes, formatNumber, Notice, useAction, useInterval, usePoll, When } from '../../components';
import { href } from '../../router';
import { Duration, Failure, readBackward, type FeedEvent } from './shared';
import type { ScavengeProgress } from '../../../../src/scavenge/types';

// Scavenging: the form that starts one (the node checks the parameters and answers 400 with its
// reason), the running one's progress (GET /admin/scavenge/current and its history stream
// $scavenges-{id}, every second, once the history lists the run: before, the stream has no
// events) with a stop button, and the history of the runs (GET /admin/scavenge/history, from
// $scavenges: an empty list before the first scavenge, where the stream itself is a 404).

const REFRESH_MS = 1000;
/** How many runs the history shows. */
const HISTORY_RUNS = 50;

/** GET /admin/scavenge/current (the node's own types: src/scavenge/types.ts). */
interface Current {
  scavengeId: string;
  scavengeLink: string;
  progress?: ScavengeProgress;
}

/** One run of GET /admin/scavenge/history (from $scavenges; null until its events say). */
export interface ScavengeRun {
  scavengeId: string;
  started: string | null;
  completed: string | null;
  result: string | null;
  timeTaken: string | null;
  spaceSaved: number | null;
  error: string | null;
}

const PHASES: Record<string, string> = {
  Beginning: 'Beginning', Accumulation: 'Accumulation', Calculation: 'Calculation', ChunkExecution: 'Chunk execution',
  ChunkMerging: 'Chunk merging', IndexExecution: 'Index execution', Cleaning: 'Cleaning', Done: 'Done',
};

const EVENT_NAMES: Record<string, string> = {
  $scavengeStarted: 'Started', $scavengeChunksCompleted: 'Chunks done', $scavengeMergeCompleted: 'Chunks merged',
  $scavengeIndexCompleted: 'Index table done', $scavengeCompleted: 'Completed',
};

export const scavengeStream = (id: string) => `$scavenges-${id}`;

function resultOf(run: ScavengeRun, runningId: string): string {
  if (run.completed) return run.result ?? 'Unknown';
  return run.scavengeId === runningId ? 'Running' : 'Not completed';
}

function chunksOf(data: any): string {
  if (typeof data?.chunkStartNumber !== 'number') return '';
  return data.chunkStartNumber === data.chunkEndNumber ? String(data.chunkStartNumber) : `${data.chunkStartNumber}–${data.chunkEndNumber}`;
}

function outcomeOf(e: FeedEvent): string {
  const d = e.data ?? {};
  if (e.eventType === '$scavengeCompleted') return String(d.result ?? '');
  if (e.eventType === '$scavengeMergeCompleted') return d.wasMerged ? 'merged' : 'not merged';
  if (typeof d.wasScavenged === 'boolean') return d.wasScavenged ? 'scavenged' : 'skipped';
  return '';
}

/** The events of one scavenge's history stream, oldest first. */
export function ProgressEvents({ events, label }: { events: FeedEvent[]; label: string }) {
  return (
    <table aria-label={label}>
      <thead><tr><th>#</th><th>Event</th><th>At</th><th>Chunks</th><th>Outcome</th><th>Time taken</th><th>Space saved</th><th>Error</th></tr></thead>
      <tbody>
        {events.map((e) => (
          <tr key={e.eventNumber}>
            <td>{e.eventNumber}</td>
            <td>{EVENT_NAMES[e.eventType] ?? e.eventType}</td>
            <td><When iso={e.updated} /></td>
            <td>{chunksOf(e.data)}</td>
            <td>{outcomeOf(e)}</td>
            <td><Duration value={e.data?.timeTaken} /></td>
            <td>{typeof e.data?.spaceSaved === 'number' ? formatBytes(e.data.spaceSaved) : ''}</td>
            <td>{e.data?.errorMessage ?? e.data?.error ?? ''}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function StartForm({ onStarted }: { onStarted: (id: string) => void }) {
  const [threads, setThreads] = useState('1');
  const [threshold, setThreshold] = useState('0');
  const [throttle, setThrottle] = useState('100');
  const [startFromChunk, setStartFromChunk] = useState('0');
  const [syncOnly, setSyncOnly] = useState(false);
  const { busy, error, done, run } = useAction();

  const submit = (e: Event) => {
    e.preventDefault();
    const query = new URLSearchParams();
    const put = (name: string, value: string) => { if (value.trim() !== '') query.set(name, value.trim()); };
    put('threads', threads);
    put('threshold', threshold);
    put('throttlePercent', throttle);
    put('startFromChunk', startFromChunk);
    query.set('syncOnly', String(syncOnly));
    void run(async () => {
      const { scavengeId } = (await request(`/admin/scavenge?${query}`, { method: 'POST' })).json<{ scavengeId: string }>();
      onStarted(scavengeId);
      return `Scavenge ${scavengeId} started.`;
    });
  };

  // noValidate: the node is the judge of the values, and its answer is shown here.
  return (
    <form aria-label="Start a scavenge" class="scavenge-form" noValidate onSubmit={submit}>
      <div class="admin-fields">
        <Field label="Threads" hint="1 to 4 chunks executed at once (default 1); above 1 needs throttle 100">
          <input name="threads" type="number" min={1} max={4} step={1} value={threads} onInput={(e) => setThreads(e.currentTarget.value)} />
        </Field>
        <Field label="Threshold" hint="-1: every chunk; 0 (default): chunks with anything to remove; above 0: only chunks weighing more (2 per removable event)">
          <input name="threshold" type="number" step={1} value={threshold} onInput={(e) => setThreshold(e.currentTarget.value)} />
        </Field>
        <Field label="Throttle percent" hint="1 to 100: the share of time spent working (default 100, full speed)">
          <input name="throttlePercent" type="number" min={1} max={100} step={1} value={throttle} onInput={(e) => setThrottle(e.currentTarget.value)} />
        </Field>
        <Field label="Start from chunk" hint="0 or above (default 0); checked, then ignored, as the established servers do">
          <input name="startFromChunk" type="number" min={0} step={1} value={startFromChunk} onInput={(e) => setStartFromChunk(e.currentTarget.value)} />
        </Field>
      </div>
      <label class="check">
        <input name="syncOnly" type="checkbox" checked={syncOnly} onChange={(e) => setSyncOnly(e.currentTarget.checked)} />
        <span>Sync only</span>
        <small>only run up to an existing scavenge point no scavenge has reached; never write a new one</small>
      </label>
      <div class="row">
        <button type="submit" disabled={busy}>Start scavenge</button>
      </div>
      <Failure error={error} />
      {done ? <Notice>{done}</Notice> : null}
    </form>
  );
}

function RunningScavenge({ current, events, onStopped }: { current: Current; events: FeedEvent[]; onStopped: () => void }) {
  const { busy: stopping, error, run, setError } = useAction();
  const p = current.progress;
  const id = current.scavengeId;
  useEffect(() => { setError(undefined); }, [id]);
  const stop = () => run(async () => {
    await request(`/admin/scavenge/${seg(id)}`, { method: 'DELETE', accept: 'text/plain' });
    onStopped();
  });
  const counted = p && p.chunksTotal > 0 && (p.phase === 'Accumulation' || p.phase === 'ChunkExecution');
  return (
    <div aria-label="Running scavenge" role="region">
      <dl class="cards">
        <div><dt>Scavenge</dt><dd class="id"><a href={href('admin', 'scavenges', id)}>{id}</a></dd></div>
        <div><dt>Phase</dt><dd data-figure="phase">{p ? PHASES[p.phase] ?? p.phase : '–'}</dd></div>
        <div>
          <dt>Chunks of the phase</dt>
          <dd>
            <span data-figure="chunks">{counted ? `${formatNumber(p!.chunksDone)} of ${formatNumber(p!.chunksTotal)}` : '–'}</span>
            {/* Inside the dd: a <dl>'s groups may hold only <dt> and <dd> (axe: definition-list). */}
            {counted ? <progress aria-label="Chunks of the phase done" value={p!.chunksDone} max={p!.chunksTotal} /> : null}
          </dd>
        </div>
        <div><dt>Events examined</dt><dd>{formatNumber(p?.eventsExamined ?? NaN)}</dd></div>
        <div><dt>Events removed</dt><dd>{formatNumber(p?.eventsRemoved ?? NaN)}</dd></div>
        <div><dt>Space saved</dt><dd>{formatBytes(p?.spaceSaved ?? NaN)}</dd></div>
        <div><dt>Scavenge point</dt><dd>{p && p.scavengePoint >= 0 ? p.scavengePoint : '–'}</dd></div>
      </dl>
      <div class="row">
        <button type="button" class="danger" disabled={stopping} onClick={stop}>{stopping ? 'Stopping…' : 'Stop scavenge'}</button>
        <span class="muted">A stopped scavenge keeps its place: the next one continues from there.</span>
      </div>
      <Failure error={error} />
      <h4>Latest progress events</h4>
      {events.length === 0 ? <p class="muted">No progress recorded yet.</p> : <ProgressEvents events={events} label="Latest progress events" />}
    </div>
  );
}

export function ScavengeSection({ live }: { live: boolean }) {
  const [current, setCurrent] = useState<Current>();
  const [last, setLast] = useState<{ scavengeId: string; scavengeResult: string }>();
  const [recent, setRecent] = useState<{ id: string; events: FeedEvent[] }>({ id: '', events: [] });
  const [history, setHistory] = useState<ScavengeRun[]>();
  const [stopped, setStopped] = useState<string>();
  const seenId = useRef<string | undefined>(undefined);

  const { error, refresh } = usePoll(async () => {
    const [c, l] = await Promise.all([getJson<Current>('/admin/scavenge/current'), getJson('/admin/scavenge/last')]);
    setCurrent(c);
    setLast(l);
    // The history changes when a scavenge starts or ends (and while one runs, its progress).
    const changed = seenId.current !== c.scavengeId || history === undefined;
    seenId.current = c.scavengeId;
    const runs = changed || c.scavengeId ? await getJson<ScavengeRun[]>(`/admin/scavenge/history?count=${HISTORY_RUNS}`) : history ?? [];
    setHistory(runs);
    if (c.scavengeId && runs.some((r) => r.scavengeId === c.scavengeId)) {
      setRecent({ id: c.scavengeId, events: (await readBackward(scavengeStream(c.scavengeId), 8)).reverse() });
    }
  }, REFRESH_MS, live);

  const runningId = current?.scavengeId ?? '';
  return (
    <section aria-labelledby="scavenge-title">
      <h2 id="scavenge-title">Scavenge</h2>
      <p class="muted">A scavenge removes what deletes, truncations, $maxCount and $maxAge left behind, chunk by chunk.</p>
      <StartForm onStarted={() => { setStopped(undefined); void refresh(); }} />
      <h3>Running scavenge</h3>
      <Failure error={error} />
      {stopped ? <Notice>Scavenge {stopped} stopped.</Notice> : null}
      {current === undefined ? <p class="muted">Loading…</p>
        : runningId ? <RunningScavenge current={current} events={recent.id === runningId ? recent.events : []} onStopped={() => { setStopped(runningId); void refresh(); }} />
        : (
          <p data-testid="idle">
            No scavenge is running.
            {last && last.scavengeResult !== 'Unknown' ? <> The last one since the node started: <strong>{last.scavengeResult}</strong>.</> : null}
          </p>
        )}
      <h3 id="history-title">Scavenge history</h3>
      {history === undefined ? <p class="muted">Loading…</p> : history.length === 0 ? <p>No scavenge has run on this node.</p> : (
        <table aria-labelledby="history-title">
          <thead><tr><th>Scavenge</th><th>Started</th><th>Result</th><th>Time taken</th><th>Space saved</th><th>Error</th></tr></thead>
          <tbody>
            {history.map((run) => (
              <tr key={run.scavengeId}>
                <td class="id"><a href={href('admin', 'scavenges', run.scavengeId)}>{run.scavengeId}</a></td>
                <td><When iso={run.started} /></td>
                <td>{resultOf(run, runningId)}</td>
                <td>{run.completed ? <Duration value={run.timeTaken} /> : '–'}</td>
                <td>{run.spaceSaved !== null ? formatBytes(run.spaceSaved) : '–'}</td>
                <td>{run.error ?? ''}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

/** One scavenge's history stream: every event, live while it has not completed. */
export function ScavengeDetail({ id }: { id: string }) {
  const [events, setEvents] = useState<FeedEvent[]>();
  const [error, setError] = useState<unknown>();
  const busy = useRef(false);
  const refresh = async () => {
    if (busy.current) return;
    busy.current = true;
    try {
      setEvents((await readBackward(scavengeStream(id), 2000)).reverse());
      setError(undefined);
    } catch (err) {
      setError(err);
    } finally {
      busy.current = false;
    }
  };
  useEffect(() => { setEvents(undefined); void refresh(); }, [id]);
  const completed = events?.find((e) => e.eventType === '$scavengeCompleted');
  useInterval(() => { if (!completed) void refresh(); }, REFRESH_MS * 2);
  const d = completed?.data ?? {};
  return (
    <section aria-labelledby="scavenge-detail-title">
      <p><a href={href('admin')}>← Admin</a></p>
      <h1 id="scavenge-detail-title">Scavenge {id}</h1>
      <Failure error={error} />
      {events === undefined ? <p class="muted">Loading…</p> : events.length === 0 ? <p>No history is recorded for this scavenge (it may have expired).</p> : (
        <>
          <dl class="cards" aria-label="Outcome">
            <div><dt>Result</dt><dd data-figure="result">{completed ? String(d.result) : 'Running'}</dd></div>
            <div><dt>Started</dt><dd><When iso={events[0]?.updated} /></dd></div>
            <div><dt>Time taken</dt><dd>{completed ? <Duration value={d.timeTaken} /> : '–'}</dd></div>
            <div><dt>Space saved</dt><dd>{typeof d.spaceSaved === 'number' ? formatBytes(d.spaceSaved) : '–'}</dd></div>
            <div><dt>Node</dt><dd>{events[0]?.data?.nodeEndpoint ?? '–'}</dd></div>
          </dl>
          {d.error ? <p class="error">{d.error}</p> : null}
          <h2>Events</h2>
          <ProgressEvents events={events} label="Scavenge events" />
        </>
      )}
    </section>
  );
}
