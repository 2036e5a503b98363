import { useRef, useState } from 'preact/hooks';
import { isOps, type Session } from '../../api';
import { ErrorBox, formatBytes, formatNumber, usePoll } from '../../components';
import { href } from '../../router';
import { BulkCommands } from './bulk';
import { detailRoute, lagOf, listProjections, logHead, modeTitle, type ProjectionStats } from './model';
import { ProjectionRates, RATE_WINDOW_MS } from './rates';
import './list.css';

// Every projection with its status (and a faulted one's reason), mode, progress, events per
// second and lag behind the log's head, refreshed every two seconds while the tab is visible;
// for operators, Enable all and Disable all.

export const REFRESH_MS = 2000;

export function StatusBadge({ status }: { status: string }) {
  const kind = /^Running/.test(status) ? 'running' : /^Faulted/.test(status) ? 'faulted' : /^(Completed)/.test(status) ? 'done' : 'stopped';
  return <span class={`status status-${kind}`}>{status}</span>;
}

export function ProjectionList({ session }: { session: Session }) {
  const [projections, setProjections] = useState<ProjectionStats[]>();
  const rates = useRef(new ProjectionRates());
  const [head, setHead] = useState<number>();
  const [showSystem, setShowSystem] = useState(true);
  const { error, refresh } = usePoll(async () => {
    const [list, h] = await Promise.all([listProjections(), logHead().catch(() => undefined)]);
    rates.current.record(list, performance.now());
    setProjections(list);
    setHead(h);
  }, REFRESH_MS);

  const shown = (projections ?? []).filter((p) => showSystem || !p.name.startsWith('$'));
  return (
    <section aria-labelledby="projections-title">
      <div class="row spread">
        <h1 id="projections-title">Projections</h1>
        <a class="button" href={href('projections', 'new')}>New projection</a>
      </div>
      <ErrorBox error={error} />
      <div class="row">
        <label class="inline">
          <input type="checkbox" checked={showSystem} onChange={(e) => setShowSystem(e.currentTarget.checked)} /> Show system projections
        </label>
        <span class="muted">Log head: {head === undefined ? '–' : formatNumber(head)} · refreshed every {REFRESH_MS / 1000} s</span>
      </div>
      {projections !== undefined && isOps(session) ? <BulkCommands projections={shown} onDone={refresh} /> : null}
      {projections === undefined && !error ? <p class="muted">Loading…</p> : null}
      {projections !== undefined ? (
        <table aria-label="Projections">
          <thead>
            <tr>
              <th scope="col">Name</th><th scope="col">Mode</th><th scope="col">Status</th><th scope="col">Progress</th>
              <th scope="col">Position</th><th scope="col">Lag</th>
              <th scope="col"><abbr title={`Events processed per second over the last ${RATE_WINDOW_MS / 1000} s`}>Events/s</abbr></th>
              <th scope="col">Events processed</th><th scope="col">Buffered</th>
            </tr>
          </thead>
          <tbody>
            {shown.length === 0 ? <tr><td colSpan={9} class="muted">No projections yet.</td></tr> : null}
            {shown.map((p) => {
              const lag = lagOf(p, head);
              return (
                <tr key={p.name} data-projection={p.name}>
                  <td><a href={href(...detailRoute(p.name))}>{p.name}</a></td>
                  <td>{modeTitle(p.mode)}</td>
                  <td>
                    <StatusBadge status={p.status} />
                    {/^Faulted/.test(p.status) && p.stateReason ? <div class="reason" data-cell="reason">{p.stateReason}</div> : null}
                  </td>
                  <td>
                    <progress max={100} value={Math.max(0, p.progress)} aria-label={`${p.name} progress`} />{' '}
                    {p.progress < 0 ? 'unknown' : `${formatNumber(p.progress, 1)} %`}
                  </td>
                  <td class="num">{p.position}</td>
                  <td class="num" data-cell="lag" title={Number.isFinite(lag) ? `${formatNumber(lag)} bytes of log still to read` : undefined}>{Number.isFinite(lag) ? formatBytes(lag) : '–'}</td>
                  <td class="num" data-cell="rate">{formatNumber(rates.current.perSecond(p.name), 1)}</td>
                  <td class="num">{formatNumber(p.eventsProcessedAfterRestart)}</td>
                  <td class="num">{formatNumber(p.bufferedEvents)}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      ) : null}
    </section>
  );
}
