import { useState } from 'preact/hooks';
import { isOps, request, type Session } from '../../api';
import { ErrorBox, Field, useAction } from '../../components';
import { href, navigate } from '../../router';
import { QueryEditor } from './editor';
import { Debugger } from './debugger';
import { detailRoute, MODES, syntaxErrorOf } from './model';

// A new projection: POST /projections/{mode}?name=&emit=&checkpoints=&trackemittedstreams=&enabled=
// with the query as the body. A syntax error (the node's 400) is shown at its line in the editor.
// "Debug" runs the query as it stands, with the mode and emit chosen, before anything is created.

const EXAMPLE = `fromAll()
  .when({
    $init: function () {
      return { count: 0 };
    },
    $any: function (state, event) {
      state.count += 1;
    }
  });
`;

export function CreateProjection({ session }: { session: Session }) {
  // Continuous and one-time projections are the operators'; anyone may run a transient query.
  const ops = isOps(session);
  const modes = ops ? MODES : MODES.filter((m) => m.path === 'transient');
  const [name, setName] = useState('');
  const [mode, setMode] = useState<(typeof MODES)[number]['path']>(modes[0].path);
  const [query, setQuery] = useState(EXAMPLE);
  const [emit, setEmit] = useState(false);
  const [track, setTrack] = useState(false);
  const [checkpoints, setCheckpoints] = useState(false);
  const [enabled, setEnabled] = useState(true);
  const [debugging, setDebugging] = useState(false);
  const { busy, error, run } = useAction();
  const syntax = syntaxErrorOf(error);

  const submit = (e: Event) => {
    e.preventDefault();
    const params = new URLSearchParams();
    if (name.trim()) params.set('name', name.trim());
    params.set('enabled', enabled ? 'yes' : 'no');
    if (mode !== 'transient') {
      params.set('emit', emit ? 'yes' : 'no');
      if (emit) params.set('trackemittedstreams', track ? 'yes' : 'no');
    }
    if (mode === 'onetime') params.set('checkpoints', checkpoints ? 'yes' : 'no');
    void run(async () => {
      const answer = await request(`/projections/${mode}?${params}`, { method: 'POST', body: query, contentType: 'application/javascript' });
      const created = answer.json<{ name: string }>()?.name ?? name.trim();
      navigate(...detailRoute(created));
    });
  };

  return (
    <section aria-labelledby="new-projection-title">
      <p><a href={href('projections')}>← Projections</a></p>
      <h1 id="new-projection-title">New projection</h1>
      <form aria-label="New projection" onSubmit={submit}>
        <div class="form-grid">
          <Field label="Name" hint={mode === 'continuous' ? 'Required for a continuous projection.' : 'Optional: the node picks one when empty.'}>
            <input name="name" value={name} required={mode === 'continuous'} onInput={(e) => setName(e.currentTarget.value)} />
          </Field>
          <Field label="Mode">
            <select name="mode" value={mode} onChange={(e) => setMode(e.currentTarget.value as typeof mode)}>
              {modes.map((m) => <option value={m.path}>{m.title}</option>)}
            </select>
          </Field>
        </div>
        <fieldset class="options">
          <legend>Options</legend>
          <label class="inline"><input type="checkbox" checked={enabled} onChange={(e) => setEnabled(e.currentTarget.checked)} /> Start it now (enabled)</label>
          {mode !== 'transient' ? (
            <label class="inline"><input type="checkbox" checked={emit} onChange={(e) => setEmit(e.currentTarget.checked)} /> Allow emitting events (emit, linkTo)</label>
          ) : null}
          {mode !== 'transient' && emit ? (
            <label class="inline"><input type="checkbox" checked={track} onChange={(e) => setTrack(e.currentTarget.checked)} /> Track emitted streams</label>
          ) : null}
          {mode === 'onetime' ? (
            <label class="inline"><input type="checkbox" checked={checkpoints} onChange={(e) => setCheckpoints(e.currentTarget.checked)} /> Write checkpoints</label>
          ) : null}
        </fieldset>
        <QueryEditor id="new-query" label="Query" value={query} onInput={(t) => { setQuery(t); }} error={syntax} rows={16} />
        {!syntax ? <ErrorBox error={error} /> : null}
        <div class="row">
          <button type="submit" disabled={busy}>Create</button>
          <button type="button" class="secondary" aria-expanded={debugging} onClick={() => setDebugging(!debugging)}>Debug</button>
          <a href={href('projections')}>Cancel</a>
        </div>
      </form>
      {debugging ? (
        <Debugger target={{ query, emit: mode !== 'transient' && emit, mode: MODES.find((m) => m.path === mode)?.mode }} />
      ) : null}
    </section>
  );
}
