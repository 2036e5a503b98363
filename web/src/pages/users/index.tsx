import { useState } from 'preact/hooks';
import { ApiFailure, getJson, isAdmin, logOut, request, seg, type Session } from '../../api';
import { ConfirmButton, ErrorBox, Field, Notice, When, errorText, useAction, useAsync } from '../../components';
import { href, navigate } from '../../router';
import type { ViewProps } from '../../view';
import './users.css';

// User accounts. Admins: every account (GET /users), a form to create one, and each account's
// page to edit its name and groups, enable or disable it, reset its password or delete it.
// Everyone: their own account and a form to change their own password; the session holds the
// old password, so a changed password ends the session and asks to log in again.
// Routes: #/users, #/users/{login}.

interface Account {
  loginName: string;
  fullName: string;
  groups: string[];
  dateLastUpdated?: string;
  disabled: boolean;
}

const userPath = (login: string) => `/users/${seg(login)}`;

/** "$admins, ops-team reporting" → ['$admins', 'ops-team', 'reporting']. */
const parseGroups = (text: string) => text.split(/[\s,]+/).filter(Boolean);

/** What the node said: its typed answers ({error, message}) or its plain-text validation messages. */
function failureText(error: unknown): string {
  if (!(error instanceof ApiFailure)) return errorText(error);
  let said = error.body.trim();
  try {
    const body = JSON.parse(said);
    if (body && typeof body === 'object') {
      said = body.message || ({ NotFound: 'There is no such user.', Conflict: 'A different user with that login name exists.' } as Record<string, string>)[body.error] || body.error || said;
    }
  } catch {
    // plain text: shown as sent
  }
  return `${error.status} ${error.statusText}${said ? `: ${said}` : ''}`;
}

function Failure({ error }: { error: unknown }) {
  if (!error) return null;
  return <p class="error" role="alert">{failureText(error)}</p>;
}

export default function Users({ path, session }: ViewProps) {
  if (!isAdmin(session)) return <Account login={session.user} session={session} />;
  if (path.length > 0) return <Account login={path[0]} session={session} />;
  return <List session={session} />;
}

function List({ session }: { session: Session }) {
  const users = useAsync(async (signal) => (await getJson<{ data: Account[] }>('/users', { signal })).data ?? [], []);
  return (
    <section aria-labelledby="users-title">
      <h1 id="users-title">Users</h1>
      <ErrorBox error={users.error} />
      <table aria-label="Users">
        <thead><tr><th>Login name</th><th>Full name</th><th>Groups</th><th>State</th><th>Last updated</th></tr></thead>
        <tbody>
          {(users.data ?? []).map((u) => (
            <tr key={u.loginName}>
              <td><a href={href('users', u.loginName)}>{u.loginName}</a>{u.loginName === session.user ? ' (you)' : ''}</td>
              <td>{u.fullName}</td>
              <td>{u.groups.join(', ')}</td>
              <td>{u.disabled ? 'Disabled' : 'Enabled'}</td>
              <td><When iso={u.dateLastUpdated} /></td>
            </tr>
          ))}
        </tbody>
      </table>
      <CreateUser onCreated={(login) => navigate('users', login)} />
    </section>
  );
}

function CreateUser({ onCreated }: { onCreated: (login: string) => void }) {
  const [loginName, setLoginName] = useState('');
  const [fullName, setFullName] = useState('');
  const [password, setPassword] = useState('');
  const [groups, setGroups] = useState('');
  const action = useAction();
  return (
    <form aria-label="New user" class="users-form" onSubmit={(e) => {
      e.preventDefault();
      void action.run(async () => {
        await request('/users/', { method: 'POST', body: { loginName, fullName, password, groups: parseGroups(groups) } });
        onCreated(loginName);
      });
    }}>
      <h2>New user</h2>
      <Field label="Login name"><input name="loginName" required autocomplete="off" value={loginName} onInput={(e) => setLoginName(e.currentTarget.value)} /></Field>
      <Field label="Full name"><input name="fullName" autocomplete="off" value={fullName} onInput={(e) => setFullName(e.currentTarget.value)} /></Field>
      <Field label="Password"><input name="password" type="password" required autocomplete="new-password" value={password} onInput={(e) => setPassword(e.currentTarget.value)} /></Field>
      <Field label="Groups" hint="Separated by commas or spaces, e.g. $admins, $ops">
        <input name="groups" autocomplete="off" value={groups} onInput={(e) => setGroups(e.currentTarget.value)} />
      </Field>
      <Failure error={action.error} />
      <button type="submit" disabled={action.busy}>Create user</button>
    </form>
  );
}

function Account({ login, session }: { login: string; session: Session }) {
  const admin = isAdmin(session);
  const self = login === session.user;
  const account = useAsync(async (signal) => (await getJson<{ data: Account }>(userPath(login), { signal })).data, [login]);
  const u = account.data;
  const missing = (account.error as any)?.status === 404;
  return (
    <section aria-labelledby="user-title">
      {admin ? <p><a href={href('users')}>All users</a></p> : null}
      <h1 id="user-title">{self && !admin ? 'Your account' : `User ${login}`}</h1>
      {missing ? <p class="error" role="alert">There is no user {login}.</p> : <ErrorBox error={account.error} />}
      {u ? (
        <>
          <dl class="users-facts" aria-label="Account">
            <div><dt>Login name</dt><dd>{u.loginName}</dd></div>
            <div><dt>Full name</dt><dd data-fact="full-name">{u.fullName || '–'}</dd></div>
            <div><dt>Groups</dt><dd data-fact="groups">{u.groups.length ? u.groups.join(', ') : 'none'}</dd></div>
            <div><dt>State</dt><dd data-fact="state">{u.disabled ? 'Disabled' : 'Enabled'}</dd></div>
            <div><dt>Last updated</dt><dd><When iso={u.dateLastUpdated} /></dd></div>
          </dl>
          {admin ? (
            <>
              <EditUser key={u.loginName} account={u} self={self} onSaved={account.reload} />
              <EnableDisable account={u} self={self} onChanged={account.reload} />
              <ResetPassword login={u.loginName} self={self} />
            </>
          ) : null}
          {self ? <ChangePassword login={u.loginName} /> : null}
          {admin ? (
            <>
              <h2>Delete</h2>
              <ConfirmButton label="Delete user" danger confirmLabel="Delete" question={`Delete the user ${u.loginName}? This cannot be undone.`}
                onConfirm={async () => {
                  await request(userPath(u.loginName), { method: 'DELETE' });
                  navigate('users');
                }} />
            </>
          ) : null}
        </>
      ) : null}
    </section>
  );
}

function EditUser({ account, self, onSaved }: { account: Account; self: boolean; onSaved: () => void }) {
  const [fullName, setFullName] = useState(account.fullName);
  const [groups, setGroups] = useState(account.groups.join(', '));
  const action = useAction();
  return (
    <form aria-label="Edit user" class="users-form" onSubmit={(e) => {
      e.preventDefault();
      void action.run(async () => {
        await request(userPath(account.loginName), { method: 'PUT', body: { fullName, groups: parseGroups(groups) } });
        onSaved();
        // The console chose its views from the groups the session started with.
        return self ? 'Saved. Log in again for the console to offer the views of your new groups.' : 'Saved.';
      });
    }}>
      <h2>Name and groups</h2>
      <Field label="Full name"><input name="fullName" autocomplete="off" value={fullName} onInput={(e) => setFullName(e.currentTarget.value)} /></Field>
      <Field label="Groups" hint="Separated by commas or spaces; $admins are administrators, $ops operators">
        <input name="groups" autocomplete="off" value={groups} onInput={(e) => setGroups(e.currentTarget.value)} />
      </Field>
      <Failure error={action.error} />
      {action.done ? <Notice>{action.done}</Notice> : null}
      <button type="submit" disabled={action.busy}>Save</button>
    </form>
  );
}

function EnableDisable({ account, self, onChanged }: { account: Account; self: boolean; onChanged: () => void }) {
  const action = useAction();
  const command = async (name: 'enable' | 'disable') => {
    await request(`${userPath(account.loginName)}/command/${name}`, { method: 'POST' });
    onChanged();
  };
  return (
    <div class="users-form">
      <h2>Access</h2>
      {account.disabled ? (
        <>
          <p>This account is disabled: it cannot log in or use the API.</p>
          <button type="button" disabled={action.busy} onClick={() => void action.run(async () => { await command('enable'); return 'Enabled.'; })}>Enable user</button>
        </>
      ) : (
        <>
          <p>{self ? 'Disabling your own account ends your access at once.' : 'A disabled account cannot log in or use the API.'}</p>
          <ConfirmButton label="Disable user" danger confirmLabel="Disable"
            question={`Disable ${account.loginName}? The account can no longer log in or use the API until it is enabled again.`}
            onConfirm={() => command('disable')} />
        </>
      )}
      <Failure error={action.error} />
      {action.done ? <Notice>{action.done}</Notice> : null}
    </div>
  );
}

function ResetPassword({ login, self }: { login: string; self: boolean }) {
  const [password, setPassword] = useState('');
  const action = useAction();
  return (
    <form aria-label="Reset password" class="users-form" onSubmit={(e) => {
      e.preventDefault();
      void action.run(async () => {
        await request(`${userPath(login)}/command/reset-password`, { method: 'POST', body: { newPassword: password } });
        setPassword('');
        return self ? 'Password reset. Your session used the old one: log in again with the new password.' : `Password reset: ${login} logs in with the new password.`;
      });
    }}>
      <h2>Reset password</h2>
      <Field label="New password for the user"><input name="newPassword" type="password" required autocomplete="new-password" value={password} onInput={(e) => setPassword(e.currentTarget.value)} /></Field>
      <Failure error={action.error} />
      {action.done ? <Notice>{action.done}</Notice> : null}
      {action.done && self ? <button type="button" onClick={() => logOut()}>Log in again</button> : null}
      <button type="submit" disabled={action.busy}>Reset password</button>
    </form>
  );
}

/**
 * Changes one's own password. Sent with fetch rather than request(): a wrong current password is
 * a 401 from the node, which request() would take for an expired session and log out.
 */
function ChangePassword({ login }: { login: string }) {
  const [current, setCurrent] = useState('');
  const [next, setNext] = useState('');
  const [repeat, setRepeat] = useState('');
  const [problem, setProblem] = useState<string>();
  const action = useAction();
  if (action.done) {
    return (
      <div class="users-form">
        <h2>Change password</h2>
        <Notice>{action.done}</Notice>
        <button type="button" onClick={() => logOut()}>Log in again</button>
      </div>
    );
  }
  return (
    <form aria-label="Change password" class="users-form" onSubmit={(e) => {
      e.preventDefault();
      setProblem(undefined);
      if (next !== repeat) {
        setProblem('The new passwords differ.');
        return;
      }
      void action.run(async () => {
        try {
          await request(`${userPath(login)}/command/change-password`, { method: 'POST', body: { currentPassword: current, newPassword: next } });
        } catch (err) {
          if (err instanceof ApiFailure && err.status === 401) throw new Error('The current password is wrong.');
          throw err;
        }
        return 'Password changed. Your session used the old password: log in again with the new one.';
      });
    }}>
      <h2>Change password</h2>
      <Field label="Current password"><input name="currentPassword" type="password" required autocomplete="current-password" value={current} onInput={(e) => setCurrent(e.currentTarget.value)} /></Field>
      <Field label="New password"><input name="newPassword" type="password" required autocomplete="new-password" value={next} onInput={(e) => setNext(e.currentTarget.value)} /></Field>
      <Field label="Repeat new password"><input name="repeatPassword" type="password" required autocomplete="new-password" value={repeat} onInput={(e) => setRepeat(e.currentTarget.value)} /></Field>
      {problem ? <p class="error" role="alert">{problem}</p> : null}
      <Failure error={action.error} />
      <button type="submit" disabled={action.busy}>Change password</button>
    </form>
  );
}
