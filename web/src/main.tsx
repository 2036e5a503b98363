import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { currentSession, isAdmin, isOps, logIn, logOut, onSessionChange, type Session } from './api';
import { href, useRoute } from './router';
import { ErrorBox, Field } from './components';
import Dashboard from './pages/dashboard';
import Streams from './pages/streams';
import Projections from './pages/projections';
import Subscriptions from './pages/subscriptions';
import Admin from './pages/admin';
import Users from './pages/users';
import Cluster from './pages/cluster';
import type { ViewProps } from './view';
import './style.css';

// The console's shell: the login form until a session exists, then the navigation and the view
// the hash route names. Each view gets the route's segments after its own name.


interface Area {
  name: string;
  title: string;
  view: (props: ViewProps) => any;
  /** Who sees it in the navigation (the node still checks every request). */
  shown: (s: Session) => boolean;
  /** What the route's segments after the area's name show, for the tab title (none: the area itself). */
  subject?: (path: string[]) => string | undefined;
}

const AREAS: Area[] = [
  { name: '', title: 'Dashboard', view: Dashboard, shown: () => true },
  {
    name: 'streams', title: 'Streams', view: Streams, shown: () => true,
    subject: ([stream, ...rest]) => (rest.length === 1 && /^\d+$/.test(rest[0]) ? `Event ${rest[0]}@${stream}` : stream),
  },
  {
    name: 'projections', title: 'Projections', view: Projections, shown: () => true,
    subject: ([name, what]) => (name === 'new' && what === undefined ? 'New projection' : what === 'debug' ? `Debug ${name}` : name),
  },
  {
    name: 'subscriptions', title: 'Subscriptions', view: Subscriptions, shown: () => true,
    subject: ([stream, group]) => (group !== undefined ? `${group} on ${stream}` : stream),
  },
  // GET /gossip is everyone's (clients discover a cluster before logging in): so is this page.
  { name: 'cluster', title: 'Cluster', view: Cluster, shown: () => true },
  {
    name: 'admin', title: 'Admin', view: Admin, shown: (s) => isOps(s),
    subject: ([what, id]) => (what === 'scavenges' && id ? `Scavenge ${id}` : undefined),
  },
  { name: 'users', title: 'Users', view: Users, shown: () => true, subject: ([login]) => login },
];

/** The tab's title: what the view shows, its area and the node (`orders-1 — Streams — db1:2113`), so tabs can be told apart. */
function useTitle(...parts: Array<string | undefined>): void {
  const title = [...parts.filter((p): p is string => !!p), location.host].join(' — ');
  useEffect(() => { document.title = title; }, [title]);
}

function Login() {
  useTitle('Log in');
  const [user, setUser] = useState('');
  const [password, setPassword] = useState('');
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  return (
    <main class="login">
      <h1>SVC Event Store</h1>
      <form aria-label="Log in" onSubmit={async (e) => {
        e.preventDefault();
        setBusy(true);
        setError(await logIn(user, password));
        setBusy(false);
      }}>
        <Field label="User name">
          <input name="user" autocomplete="username" required value={user} onInput={(e) => setUser(e.currentTarget.value)} />
        </Field>
        <Field label="Password">
          <input name="password" type="password" autocomplete="current-password" required value={password}
            onInput={(e) => setPassword(e.currentTarget.value)} />
        </Field>
        <ErrorBox error={error ? new Error(error) : undefined} />
        <button type="submit" disabled={busy}>Log in</button>
      </form>
    </main>
  );
}

function App() {
  const [session, setSession] = useState<Session | undefined>(currentSession());
  useEffect(() => onSessionChange(setSession), []);
  const route = useRoute();
  if (!session) return <Login />;
  const area = AREAS.find((a) => a.name !== '' && a.name === route[0]) ?? AREAS[0];
  return <Shell session={session} area={area} path={area.name ? route.slice(1) : route} />;
}

function Shell({ session, area, path }: { session: Session; area: Area; path: string[] }) {
  useTitle(area.subject?.(path), area.title);
  const View = area.view;
  return (
    <>
      <header>
        <a class="brand" href={href()}>SVC Event Store</a>
        <nav aria-label="Main">
          {AREAS.filter((a) => a.shown(session)).map((a) => (
            <a href={href(...(a.name ? [a.name] : []))} aria-current={a === area ? 'page' : undefined}>{a.title}</a>
          ))}
        </nav>
        <span class="who">
          {session.user}{isAdmin(session) ? ' (admin)' : ''}
          <button type="button" class="link" onClick={() => { logOut(); location.hash = ''; }}>Log out</button>
        </span>
      </header>
      <main>
        <View path={path} session={session} />
      </main>
    </>
  );
}

render(<App />, document.getElementById('app')!);
