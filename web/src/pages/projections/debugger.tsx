import { useState } from 'preact/hooks';
import { request } from '../../api';
import { ErrorBox, Field, Notice, useAction, useAsync } from '../../components';
import { href } from '../../router';
import { indentedValue } from '../../../../src/api/json-indent';
import { LosslessNumber, parseLossless } from './lossless-json';
import { detailRoute, projectionPath, syntaxErrorOf, type QueryConfig } from './model';

// The projection debugger in the console: pick events (the first N of the query's source, or a
// range of one stream), run the query over them on the node (POST /projections/debug: a sandbox
// made as the projection's, writing nothing), and step through them: the event, the handler it
// reached and every function called, the partition's state (and the shared state, the result)
// before and after, what it would emit and link, what it logged. The answer is read without
// losing digits (lossless-json.ts). Reachable from a projection's page (#/projections/{name}/debug)
// and from the creation form, before the query is created.

const MAX_EVENTS = 1000;

interface DebugEmit { streamId: string; eventType: string; data: unknown; metadata: unknown; isLink: boolean }
interface DebugStep {
  event: {
    streamId: string; eventNumber: number | LosslessNumber; eventType: string; eventId: string; isJson: boolean;
    data: unknown; metadata?: unknown; linkMetadata?: unknown; position: number | LosslessNumber; link?: { streamId: string; eventNumber: number };
  };
  partition: string | null;
  handler: string | null;
  calls: string[];
  stateBefore?: unknown;
  stateAfter?: unknown;
  sharedStateBefore?: unknown;
  sharedStateAfter?: unknown;
  result?: unknown;
  emits: DebugEmit[];
  logs?: string[];
  skipped?: string;
  error?: string;
}
interface DebugReport { name: string; biState: boolean; producesResults: boolean; steps: DebugStep[]; truncated?: string; fault?: string }

/** What the debugger runs: a projection (its query and settings), or a new query with the settings it would be created with. */
export interface DebugTarget {
  name?: string;
  query?: string;
  emit?: boolean;
  mode?: 'Continuous' | 'OneTime' | 'Transient';
  /** The stream a range starts out with. */
  stream?: string;
}

/** The debug page of a projection: `#/projections/{name}/debug`. */
export function DebugProjection({ name }: { name: string }) {
  const config = useAsync((signal) => request(`${projectionPath(name)}/query?config=yes`, { signal }).then((a) => a.json<QueryConfig>()), [name]);
  const streams = config.data?.definition.streams;
  return (
    <section aria-labelledby="debug-title">
      <p><a href={href(...detailRoute(name))}>← {name}</a></p>
      <h1 id="debug-title">Debug {name}</h1>
      <p class="muted">Runs the query of {name} over the events you pick, with the projection's settings and the node's limits, and shows each step. Nothing is written.</p>
      <ErrorBox error={config.error} />
      {config.data ? (
        <details class="debug-query">
          <summary>Query</summary>
          <pre class="json" aria-label="Query source">{config.data.query}</pre>
        </details>
      ) : null}
      {config.loading && !config.data ? <p class="muted">Loading…</p> : (
        <Debugger target={{ name, stream: Array.isArray(streams) && typeof streams[0] === 'string' ? streams[0] : undefined }} />
      )}
    </section>
  );
}

export function Debugger({ target }: { target: DebugTarget }) {
  const [source, setSource] = useState<'first' | 'range'>('first');
  const [first, setFirst] = useState('20');
  const [stream, setStream] = useState(target.stream ?? '');
  const [from, setFrom] = useState('0');
  const [count, setCount] = useState('20');
  const [report, setReport] = useState<DebugReport>();
  const [at, setAt] = useState(0);
  const { busy, error, run } = useAction();
  const syntax = syntaxErrorOf(error);

  const submit = (e: Event) => {
    e.preventDefault();
    const events = source === 'first' ? { first: Number(first) } : { stream: stream.trim(), from: Number(from), count: Number(count) };
    const body: Record<string, unknown> = { events };
    if (target.name !== undefined) body.name = target.name;
    if (target.query !== undefined) body.query = target.query;
    if (target.emit !== undefined) body.emit = target.emit;
    if (target.mode !== undefined) body.mode = target.mode;
    void run(async () => {
      setReport(undefined);
      const answer = await request('/projections/debug', { method: 'POST', body });
      setReport(parseLossless(answer.text) as DebugReport);
      setAt(0);
    });
  };

  return (
    <div class="debugger">
      <h2 id="debug-events-title">Events to run</h2>
      <form aria-labelledby="debug-events-title" onSubmit={submit}>
        <fieldset class="options">
          <legend>Which events</legend>
          <label class="inline"><input type="radio" name="debug-source" value="first" checked={source === 'first'} onChange={() => setSource('first')} /> The first events of the query's source</label>
          <label class="inline"><input type="radio" name="debug-source" value="range" checked={source === 'range'} onChange={() => setSource('range')} /> A range of one stream</label>
        </fieldset>
        {source === 'first' ? (
          <Field label="Number of events" hint={`1 to ${MAX_EVENTS}, from the start of the source.`}>
            <input type="number" name="first" min={1} max={MAX_EVENTS} required value={first} onInput={(e) => setFirst(e.currentTarget.value)} />
          </Field>
        ) : (
          <div class="form-grid">
            <Field label="Stream"><input name="stream" required value={stream} onInput={(e) => setStream(e.currentTarget.value)} /></Field>
            <Field label="From event number"><input type="number" name="from" min={0} required value={from} onInput={(e) => setFrom(e.currentTarget.value)} /></Field>
            <Field label="Count" hint={`1 to ${MAX_EVENTS}.`}>
              <input type="number" name="count" min={1} max={MAX_EVENTS} required value={count} onInput={(e) => setCount(e.currentTarget.value)} />
            </Field>
          </div>
        )}
        <ErrorBox error={syntax ? new Error(`Syntax error at line ${syntax.line}, column ${syntax.column}: ${syntax.message}`) : error} />
        <div class="row">
          <button type="submit" disabled={busy}>{busy ? 'Running…' : 'Run'}</button>
        </div>
      </form>
      {report ? <Steps report={report} at={at} onGo={setAt} /> : null}
    </div>
  );
}

const stepName = (s: DebugStep) => `${s.event.streamId}#${s.event.eventNumber}: ${s.event.eventType}`;
const handlerText = (s: DebugStep) => (s.skipped ? 'not handled' : s.handler ?? (s.partition !== null ? 'none: the state is the event data' : 'none'));

function Steps({ report, at, onGo }: { report: DebugReport; at: number; onGo: (i: number) => void }) {
  const steps = report.steps;
  const step = steps[at];
  return (
    <>
      <h2 id="debug-steps-title">Steps</h2>
      <Notice>{steps.length} step{steps.length === 1 ? '' : 's'}{report.fault ? ', stopped at a fault' : ''}. Nothing was written.</Notice>
      {report.truncated ? <p class="muted">{report.truncated}</p> : null}
      {report.fault ? <div class="fault" aria-label="Fault"><strong>The projection would fault:</strong><pre>{report.fault}</pre></div> : null}
      {steps.length === 0 ? <p class="muted">The source has no events to run.</p> : (
        <div class="debug-layout">
          <nav aria-label="Steps">
            <ol class="step-list">
              {steps.map((s, i) => (
                <li key={i}>
                  <button type="button" class={`step-item${s.error ? ' step-error' : s.skipped ? ' step-skipped' : ''}`} aria-current={i === at ? 'step' : undefined}
                    onClick={() => onGo(i)}>
                    <span class="step-event">{stepName(s)}</span>
                    <span class="step-handler">
                      {handlerText(s)}{s.partition ? ` · ${s.partition}` : ''}{s.emits.length ? ` · ${s.emits.length} emit${s.emits.length === 1 ? '' : 's'}` : ''}{s.error ? ' · failed' : ''}
                    </span>
                  </button>
                </li>
              ))}
            </ol>
          </nav>
          <div class="step-detail">
            <div class="row">
              <button type="button" class="secondary" disabled={at === 0} onClick={() => onGo(at - 1)}>Previous</button>
              <span aria-live="polite">Step {at + 1} of {steps.length}</span>
              <button type="button" class="secondary" disabled={at >= steps.length - 1} onClick={() => onGo(at + 1)}>Next</button>
            </div>
            <StepDetail step={step} index={at} report={report} />
          </div>
        </div>
      )}
    </>
  );
}

function JsonBlock({ value, label }: { value: unknown; label: string }) {
  if (value === undefined || value === null) return <p class="muted" role="group" aria-label={label}>No state.</p>;
  return <pre class="json" role="group" aria-label={label}>{typeof value === 'string' ? value : indentedValue(value)}</pre>;
}

function StepDetail({ step, index, report }: { step: DebugStep; index: number; report: DebugReport }) {
  const e = step.event;
  return (
    <section aria-labelledby="debug-step-title">
      <h3 id="debug-step-title">Step {index + 1}: {e.eventType}</h3>
      <dl class="step-facts">
        <div><dt>Event</dt><dd data-step="event"><a href={href('streams', e.streamId, String(e.eventNumber))}>{e.eventNumber}@{e.streamId}</a></dd></div>
        {e.link ? <div><dt>Read through</dt><dd>{e.link.eventNumber}@{e.link.streamId}</dd></div> : null}
        <div><dt>Log position</dt><dd>{String(e.position)}</dd></div>
        <div><dt>Partition</dt><dd data-step="partition">{step.partition === null ? '–' : step.partition === '' ? '(root)' : step.partition}</dd></div>
        <div><dt>Handler</dt><dd data-step="handler">{handlerText(step)}</dd></div>
        <div><dt>Functions called</dt><dd data-step="calls">{step.calls.length ? step.calls.join(' → ') : '–'}</dd></div>
      </dl>
      {step.error ? <div class="fault" role="alert" aria-label="Error"><strong>The query failed here:</strong><pre>{step.error}</pre></div> : null}
      {step.skipped ? <p class="muted" data-step="skipped">{step.skipped}</p> : null}
      <h4>Event data</h4>
      <pre class="json" role="group" aria-label="Event data">{typeof e.data === 'string' ? e.data : indentedValue(e.data)}</pre>
      {e.metadata !== undefined ? <><h4>Event metadata</h4><JsonBlock value={e.metadata} label="Event metadata" /></> : null}
      {step.partition !== null ? (
        <div class="two-columns">
          <div><h4>State before</h4><JsonBlock value={step.stateBefore} label="State before" /></div>
          <div><h4>State after</h4><JsonBlock value={step.stateAfter} label="State after" /></div>
          {report.biState ? <div><h4>Shared state before</h4><JsonBlock value={step.sharedStateBefore} label="Shared state before" /></div> : null}
          {report.biState ? <div><h4>Shared state after</h4><JsonBlock value={step.sharedStateAfter} label="Shared state after" /></div> : null}
        </div>
      ) : null}
      {report.producesResults && step.partition !== null ? <><h4>Result</h4><JsonBlock value={step.result} label="Result" /></> : null}
      <h4 id="debug-emits-title">Emitted events and links</h4>
      {step.emits.length === 0 ? <p class="muted">None.</p> : (
        <table aria-labelledby="debug-emits-title">
          <thead><tr><th scope="col">Stream</th><th scope="col">Type</th><th scope="col">Data</th><th scope="col">Metadata</th></tr></thead>
          <tbody>
            {step.emits.map((m, i) => (
              <tr key={i} data-emit={m.isLink ? 'link' : 'event'}>
                <td>{m.streamId}</td>
                <td>{m.isLink ? 'link ($>)' : m.eventType}</td>
                <td><code>{typeof m.data === 'string' ? m.data : indentedValue(m.data)}</code></td>
                <td><code>{indentedValue(m.metadata)}</code></td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {step.logs?.length ? (
        <>
          <h4 id="debug-logs-title">Logged</h4>
          <ul aria-labelledby="debug-logs-title" class="debug-logs">{step.logs.map((l, i) => <li key={i}><code>{l}</code></li>)}</ul>
        </>
      ) : null}
    </section>
  );
}
