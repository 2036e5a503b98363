// The console's one door to the node: every request carries the Basic credentials of the
// session. They live in sessionStorage (gone when the tab closes), never in localStorage or a
// cookie. A 401 for wrong credentials ends the session: the app shows the login form again.

const KEY = 'svc-console-session';

export interface Session {
  user: string;
  /** The Authorization header value. */
  authorization: string;
  /** The user's groups when the session started ($admins, $ops, ...): which views to offer. */
  groups: string[];
}

export const isAdmin = (s: Session | undefined) => !!s && (s.user === 'admin' || s.groups.includes('$admins'));
export const isOps = (s: Session | undefined) => isAdmin(s) || (!!s && s.groups.includes('$ops'));

let listeners: Array<(s: Session | undefined) => void> = [];

export function currentSession(): Session | undefined {
  const raw = sessionStorage.getItem(KEY);
  if (!raw) return undefined;
  try {
    const parsed = JSON.parse(raw) as Session;
    return typeof parsed.user === 'string' && typeof parsed.authorization === 'string' && Array.isArray(parsed.groups) ? parsed : undefined;
  } catch {
    return undefined;
  }
}

export function onSessionChange(listener: (s: Session | undefined) => void): () => void {
  listeners.push(listener);
  return () => { listeners = listeners.filter((l) => l !== listener); };
}

function setSession(session: Session | undefined): void {
  if (session) sessionStorage.setItem(KEY, JSON.stringify(session));
  else sessionStorage.removeItem(KEY);
  for (const l of listeners) l(session);
}

export function basicAuthorization(user: string, password: string): string {
  const bytes = new TextEncoder().encode(`${user}:${password}`);
  let binary = '';
  for (const b of bytes) binary += String.fromCharCode(b);
  return 'Basic ' + btoa(binary);
}

/** Checks the credentials against the node (GET /users/$current) and starts the session; resolves an error message on failure. */
export async function logIn(user: string, password: string): Promise<string | undefined> {
  const authorization = basicAuthorization(user, password);
  let res: Response;
  try {
    res = await fetch('/users/$current', { headers: { Authorization: authorization, Accept: 'application/json' } });
  } catch {
    return 'The node cannot be reached.';
  }
  if (res.status === 401) return 'Wrong user name or password.';
  if (!res.ok) return `The node answered ${res.status} ${res.statusText}.`;
  const body = await res.json().catch(() => undefined);
  const groups = Array.isArray(body?.data?.groups) ? body.data.groups.filter((g: unknown) => typeof g === 'string') : [];
  setSession({ user: body?.data?.loginName ?? user, authorization, groups });
  return undefined;
}

export function logOut(): void {
  setSession(undefined);
}

export class ApiFailure extends Error {
  constructor(readonly status: number, readonly statusText: string, readonly body: string) {
    super(body.trim() || `${status} ${statusText}`);
  }
}

export interface RequestOptions {
  method?: string;
  /** A string is sent as is; anything else as JSON. */
  body?: unknown;
  contentType?: string;
  accept?: string;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

export interface Answer {
  status: number;
  headers: Headers;
  text: string;
  json<T = any>(): T;
}

/** One request with the session's credentials; 4xx/5xx become ApiFailure (a 401 for wrong credentials also ends the session). */
export async function request(path: string, options: RequestOptions = {}): Promise<Answer> {
  const session = currentSession();
  const headers: Record<string, string> = { Accept: options.accept ?? 'application/json', ...options.headers };
  if (session) headers.Authorization = session.authorization;
  let body: string | undefined;
  if (options.body !== undefined) {
    body = typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
    headers['Content-Type'] = options.contentType ?? 'application/json';
  }
  // Never from the HTTP cache: a console shows what the node holds now.
  const res = await fetch(path, { method: options.method ?? 'GET', headers, body, signal: options.signal, cache: 'no-store' });
  const text = await res.text();
  // Wrong credentials (an `X-Basic` challenge: the password changed, the user was disabled) end
  // the session; a refusal of this one request (an ACL, a role) is only this request's error.
  if (res.status === 401 && session && (res.headers.get('WWW-Authenticate') ?? '').startsWith('X-Basic')) setSession(undefined);
  if (res.status >= 400) {
    // Explanations the node gives in headers or only by status become the error's text.
    let message = text.trim();
    const current = res.headers.get('SVC-CurrentVersion');
    if (!message && current !== null) message = `The stream's current version is ${current}.`;
    if (!message && res.status === 401) message = session ? 'Access denied: your user may not do this.' : 'Log in first.';
    throw new ApiFailure(res.status, res.statusText, message);
  }
  return { status: res.status, headers: res.headers, text, json: () => (text ? JSON.parse(text) : undefined) };
}

/** GET and parse JSON. */
export async function getJson<T = any>(path: string, options: RequestOptions = {}): Promise<T> {
  return (await request(path, options)).json<T>();
}

/** A path segment, encoded. */
export const seg = (s: string) => encodeURIComponent(s);
