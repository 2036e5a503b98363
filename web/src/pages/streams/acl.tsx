import { useState } from 'preact/hooks';
import { ErrorBox, Field, Notice, useAction } from '../../components';
import { call, EVENTS, eventNumberOf, streamPath } from './client';
import { withMember, type Metadata } from './metadata-text';
import './acl.css';

// A stream's access control list as a form: who may read, write, delete, read the metadata and
// write it ($r, $w, $d, $mr, $mw of the metadata's `$acl`). Saving writes a new metadata
// document: the current one with only `$acl` changed (metadata-text.ts keeps every other member
// as written). An empty list leaves the operation to the defaults ($settings, else everyone for
// a user stream and $admins for a system stream); the node applies them (src/auth/access.ts).

export const OPERATIONS = [
  { key: '$r', title: 'Read', field: 'Readers' },
  { key: '$w', title: 'Write', field: 'Writers' },
  { key: '$d', title: 'Delete', field: 'Deleters' },
  { key: '$mr', title: 'Read metadata', field: 'Metadata readers' },
  { key: '$mw', title: 'Write metadata', field: 'Metadata writers' },
] as const;

type Operation = (typeof OPERATIONS)[number]['key'];
type Roles = Record<Operation, string[]>;

/** The roles of each operation in a metadata document ($acl values are a role or a list of roles). */
export function rolesOf(doc: unknown): Roles {
  const acl = typeof doc === 'object' && doc !== null ? (doc as Record<string, unknown>).$acl : undefined;
  const entry = (op: Operation): string[] => {
    const v = typeof acl === 'object' && acl !== null ? (acl as Record<string, unknown>)[op] : undefined;
    if (typeof v === 'string') return [v];
    return Array.isArray(v) ? v.filter((r): r is string => typeof r === 'string') : [];
  };
  return Object.fromEntries(OPERATIONS.map(({ key }) => [key, entry(key)])) as Roles;
}

const parseRoles = (text: string) => text.split(',').map((r) => r.trim()).filter(Boolean);

/** The `$acl` member's JSON, or undefined when no operation has roles (the member is removed). */
export function aclJson(roles: Roles): string | undefined {
  const set = OPERATIONS.filter(({ key }) => roles[key].length > 0);
  return set.length ? JSON.stringify(Object.fromEntries(set.map(({ key }) => [key, roles[key]]))) : undefined;
}

export function AclForm({ stream, meta, onSaved }: { stream: string; meta: Metadata | undefined; onSaved: () => void }) {
  const [editing, setEditing] = useState<Record<Operation, string>>();
  const { busy, error, done, run, setError, setDone } = useAction();
  if (meta === undefined || meta.status === 'error') return null; // the metadata section shows the error
  const text = meta.status === 'ok' ? meta.text : '{}';
  const roles = rolesOf(meta.status === 'ok' ? meta.doc : {});

  const save = (e: Event) => {
    e.preventDefault();
    if (!editing) return;
    void run(async () => {
      const next = Object.fromEntries(OPERATIONS.map(({ key }) => [key, parseRoles(editing[key])])) as Roles;
      const document = withMember(text, '$acl', aclJson(next));
      const res = await call(`${streamPath(stream)}/metadata`, {
        method: 'POST', contentType: EVENTS, body: [{ eventId: crypto.randomUUID(), eventType: '$metadata', data: document }],
      });
      setEditing(undefined);
      onSaved();
      return `Access control saved (event ${eventNumberOf(res.headers.get('Location')) ?? '?'} of $$${stream}).`;
    });
  };

  return (
    <section aria-labelledby="acl-title">
      <h2 id="acl-title">Access control</h2>
      {editing === undefined ? (
        <>
          <table class="acl" aria-labelledby="acl-title">
            <thead><tr><th scope="col">Operation</th><th scope="col">Roles</th></tr></thead>
            <tbody>
              {OPERATIONS.map(({ key, title }) => (
                <tr key={key} data-acl={key}>
                  <th scope="row">{title} <code class="muted">{key}</code></th>
                  <td>{roles[key].length ? roles[key].join(', ') : <span class="muted">default</span>}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {done ? <Notice>{done}</Notice> : null}
          <button type="button" class="secondary" onClick={() => {
            setDone(undefined);
            setError(undefined);
            setEditing(Object.fromEntries(OPERATIONS.map(({ key }) => [key, roles[key].join(', ')])) as Record<Operation, string>);
          }}>Edit access control</button>
        </>
      ) : (
        <form aria-labelledby="acl-title" onSubmit={save}>
          <p class="muted">
            User names or groups, separated by commas; <code>$all</code> is everyone. An empty list leaves the operation to the
            defaults (<code>$settings</code>, else everyone for a user stream and <code>$admins</code> for a system stream). Members
            of <code>$admins</code> may do everything whatever the list says.
          </p>
          <div class="acl-fields">
            {OPERATIONS.map(({ key, title, field }) => (
              <Field key={key} label={field} hint={`${title} (${key})`}>
                <input name={key} autocomplete="off" spellcheck={false} value={editing[key]}
                  onInput={(e) => setEditing({ ...editing, [key]: e.currentTarget.value })} />
              </Field>
            ))}
          </div>
          <ErrorBox error={error} />
          <div class="row">
            <button type="submit" disabled={busy}>Save access control</button>
            <button type="button" class="secondary" onClick={() => { setEditing(undefined); setError(undefined); }}>Cancel</button>
          </div>
        </form>
      )}
    </section>
  );
}
