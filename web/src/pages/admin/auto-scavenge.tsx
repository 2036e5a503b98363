import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiFailure, getJson, request } from '../../api';
import { Field, Notice, useAction, useInterval } from '../../components';
import { formatDuration, Failure, nodeMessage, timeSpanSeconds } from './shared';

// Auto-scavenge: whether the node runs it (GET /auto-scavenge/enabled, asked once: a node without
// it answers 503 to everything else, so nothing else is asked), then its status every two
// seconds, the schedule (a five-field cron in the node's local time), and pause / resume.

const REFRESH_MS = 2000;

interface Status {
  state: string;
  schedule: string | null;
  timeUntilNextCycle: string | null;
}

type Loaded =
  | { kind: 'enabled'; status: Status }
  | { kind: 'disabled'; message: string };

const NOT_ENABLED = 'it takes a license key entitled to AUTO_SCAVENGE, and is off in dev mode, with an in-memory database and with'
  + ' --auto-scavenge-enabled false (the node\'s start-up log says which).';

const STATES: Record<string, string> = {
  NotConfigured: 'Not configured', Waiting: 'Waiting for the next cycle', InProgress: 'In progress', Pausing: 'Pausing', Paused: 'Paused',
};

/** The status, once /enabled said yes (`known`); a node that says no is not asked again. */
async function load(known: Loaded | undefined): Promise<Loaded> {
  if (known?.kind === 'disabled') return known;
  if (known === undefined) {
    const { enabled } = await getJson<{ enabled: boolean }>('/auto-scavenge/enabled');
    if (!enabled) return { kind: 'disabled', message: NOT_ENABLED };
  }
  try {
    return { kind: 'enabled', status: await getJson<Status>('/auto-scavenge/status') };
  } catch (err) {
    // Turned off since (a license that expired): the node's 503 says why.
    if (err instanceof ApiFailure && err.status === 503) return { kind: 'disabled', message: nodeMessage(err) };
    throw err;
  }
}

export function AutoScavengeSection({ live }: { live: boolean }) {
  const [loaded, setLoaded] = useState<Loaded>();
  const [error, setError] = useState<unknown>();
  const [schedule, setSchedule] = useState('');
  const [scheduleTouched, setScheduleTouched] = useState(false);
  const { busy, error: actionError, done, run } = useAction();
  const polling = useRef(false);
  const loadedNow = useRef<Loaded | undefined>(undefined);

  const refresh = async () => {
    if (polling.current) return;
    polling.current = true;
    try {
      const next = await load(loadedNow.current);
      loadedNow.current = next;
      setLoaded(next);
      setError(undefined);
    } catch (err) {
      setError(err);
    } finally {
      polling.current = false;
    }
  };
  useEffect(() => { void refresh(); }, []);
  useInterval(() => { if (live && loadedNow.current?.kind !== 'disabled') void refresh(); }, REFRESH_MS);

  // The schedule field starts with the node's schedule until the user edits it.
  const nodeSchedule = loaded?.kind === 'enabled' ? loaded.status.schedule ?? '' : '';
  useEffect(() => { if (!scheduleTouched) setSchedule(nodeSchedule); }, [nodeSchedule, scheduleTouched]);

  const act = (what: () => Promise<string>) => run(async () => {
    const said = await what();
    await refresh();
    return said;
  });

  const configure = (e: Event) => {
    e.preventDefault();
    void act(async () => {
      await request('/auto-scavenge/configure', { method: 'POST', body: { schedule: schedule.trim() } });
      setScheduleTouched(false);
      return `Schedule set to ${schedule.trim()}.`;
    });
  };
  const pause = () => act(async () => {
    const answer = await request('/auto-scavenge/pause', { method: 'POST' });
    return answer.status === 202 ? 'Pausing: the node scavenge it started is being stopped.' : 'Auto-scavenge paused.';
  });
  const resume = () => act(async () => {
    await request('/auto-scavenge/resume', { method: 'POST' });
    return 'Auto-scavenge resumed.';
  });

  const status = loaded?.kind === 'enabled' ? loaded.status : undefined;
  const paused = status?.state === 'Paused' || status?.state === 'Pausing';
  return (
    <section aria-labelledby="auto-scavenge-title">
      <h2 id="auto-scavenge-title">Auto-scavenge</h2>
      <Failure error={error} />
      {loaded === undefined ? <p class="muted">Loading…</p> : loaded.kind === 'disabled' ? (
        <p class="warning" role="status">Auto-scavenge is not enabled on this node: {loaded.message}</p>
      ) : (
        <>
          <dl class="cards" aria-label="Auto-scavenge status">
            <div><dt>State</dt><dd data-figure="auto-state">{STATES[status!.state] ?? status!.state}</dd></div>
            <div><dt>Schedule</dt><dd data-figure="auto-schedule"><code>{status!.schedule ?? 'none'}</code></dd></div>
            <div>
              <dt>Next cycle in</dt>
              <dd data-figure="auto-next" title={status!.timeUntilNextCycle ?? undefined}>
                {status!.timeUntilNextCycle === null ? '–' : formatDuration(timeSpanSeconds(status!.timeUntilNextCycle))}
              </dd>
            </div>
          </dl>
          <form aria-label="Auto-scavenge schedule" onSubmit={configure}>
            <Field label="Schedule" hint="Five cron fields: minute hour day-of-month month day-of-week, in the node's local time (e.g. 0 2 * * 6: Saturdays at 02:00)">
              <input name="schedule" required value={schedule} placeholder="0 2 * * 6" spellcheck={false}
                onInput={(e) => { setSchedule(e.currentTarget.value); setScheduleTouched(true); }} />
            </Field>
            <div class="row">
              <button type="submit" disabled={busy}>Save schedule</button>
              <button type="button" class="secondary" disabled={busy || paused} onClick={pause}>Pause</button>
              <button type="button" class="secondary" disabled={busy || !paused} onClick={resume}>Resume</button>
            </div>
          </form>
          <Failure error={actionError} />
          {done ? <Notice>{done}</Notice> : null}
        </>
      )}
    </section>
  );
}
