import type { Logger } from 'pino';
import {
  ExpectedVersion, isMetastream, jsonEvent, metastreamOf, proposedEvent, WrongExpectedVersionError, type Store, type EventRecord,
} from '../store/index.js';
import { hashPassword, verifyPassword, type PasswordHash } from './password.js';
import { ADMINS, OPS, userPrincipal, type Principal } from './principal.js';

// User accounts are events: the latest `$user` event of `$user-<login>` is the account, and
// `$users` lists every login ever created. The in-memory view is rebuilt from those streams on
// start and follows the commit bus, so an account written by any path takes effect at once.

export const USERS_STREAM = '$users';
export const USER_STREAM_PREFIX = '$user-';
export const USER_EVENT_TYPE = '$user';
export const USER_CREATED_EVENT_TYPE = '$User';

export interface UserAccount {
  loginName: string;
  fullName: string;
  groups: string[];
  disabled: boolean;
  password: PasswordHash;
  dateLastUpdated: string;
}

const MAX_VERIFIED = 10_000;

export interface NewUser { loginName: string; fullName: string; groups: string[]; password: string }

export function userStream(login: string): string {
  return `${USER_STREAM_PREFIX}${login}`;
}

function sameGroups(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && [...a].sort().every((g, i) => g === [...b].sort()[i]);
}

export type AuthResult = { ok: true; principal: Principal } | { ok: false };

export class UserStore {
  private readonly accounts = new Map<string, UserAccount>();
  /** Verified `Authorization` header values: scrypt runs once per credential, not per request. */
  private readonly verified = new Map<string, Principal>();
  private readonly verifying = new Map<string, Promise<AuthResult>>();
  /** Logins already in `$users`. */
  private readonly listed = new Set<string>();
  private unsubscribe: () => void = () => {};

  constructor(private readonly store: Store, private readonly log: Logger) {}

  /** Loads every account; on a new database creates admin and ops with the configured passwords. */
  async start(defaults: { adminPassword: string; opsPassword: string } | undefined): Promise<void> {
    this.unsubscribe = this.store.bus.subscribe((commit) => this.follow(commit.records), 'users');
    const logins = this.readLogins();
    for (const login of logins) this.reload(login);
    if (defaults) await this.createDefaults(defaults);
  }

  /** On a new database (no `$users`), creates admin and ops (a cluster's leader does, once it leads). */
  async createDefaults(defaults: { adminPassword: string; opsPassword: string }): Promise<void> {
    if (!this.store.streamInfo(USERS_STREAM)) {
      await this.create({ loginName: 'admin', fullName: 'Administrator', groups: [ADMINS], password: defaults.adminPassword });
      await this.create({ loginName: 'ops', fullName: 'Operations', groups: [OPS], password: defaults.opsPassword });
      this.log.info('created the default users admin and ops');
    }
  }

  stop(): void {
    this.unsubscribe();
  }

  get(login: string): UserAccount | undefined {
    return this.accounts.get(login);
  }

  list(): UserAccount[] {
    return [...this.accounts.values()];
  }

  /**
   * Creates an account. Creating one that exists with the same name, groups and password is
   * accepted as a retry; anything else about an existing login is a conflict.
   */
  async create(input: NewUser): Promise<'created' | 'unchanged' | 'conflict'> {
    const existing = this.accounts.get(input.loginName);
    if (existing) {
      const same = existing.fullName === input.fullName && sameGroups(existing.groups, input.groups)
        && !existing.disabled && await verifyPassword(input.password, existing.password);
      return same ? 'unchanged' : 'conflict';
    }
    const account: UserAccount = {
      loginName: input.loginName, fullName: input.fullName, groups: input.groups, disabled: false,
      password: await hashPassword(input.password), dateLastUpdated: new Date().toISOString(),
    };
    try {
      await this.store.append(userStream(input.loginName), ExpectedVersion.noStream, [userEvent(account)]);
    } catch (err) {
      if (err instanceof WrongExpectedVersionError) return 'conflict';
      throw err;
    }
    if (!this.listed.has(input.loginName)) {
      const listed = proposedEvent({ eventType: USER_CREATED_EVENT_TYPE, data: input.loginName, isJson: false });
      await this.store.append(USERS_STREAM, ExpectedVersion.any, [listed]);
      this.listed.add(input.loginName);
    }
    return 'created';
  }

  update(login: string, changes: { fullName?: string; groups?: string[] }): Promise<boolean> {
    return this.rewrite(login, (a) => ({ ...a, ...changes }));
  }

  setDisabled(login: string, disabled: boolean): Promise<boolean> {
    return this.rewrite(login, (a) => ({ ...a, disabled }));
  }

  async resetPassword(login: string, newPassword: string): Promise<boolean> {
    if (!this.accounts.has(login)) return false;
    const password = await hashPassword(newPassword);
    return this.rewrite(login, (a) => ({ ...a, password }));
  }

  /** 'denied' when the current password is wrong. */
  async changePassword(login: string, currentPassword: string, newPassword: string): Promise<'changed' | 'notFound' | 'denied'> {
    const account = this.accounts.get(login);
    if (!account) return 'notFound';
    if (!(await verifyPassword(currentPassword, account.password))) return 'denied';
    const password = await hashPassword(newPassword);
    return (await this.rewrite(login, (a) => ({ ...a, password }))) ? 'changed' : 'notFound';
  }

  async delete(login: string): Promise<boolean> {
    if (!this.accounts.has(login)) return false;
    await this.store.deleteStream(userStream(login), ExpectedVersion.any, false);
    return true;
  }

  /** Writes a new version of an account, expecting the version it was read at. */
  private async rewrite(login: string, change: (a: UserAccount) => UserAccount): Promise<boolean> {
    for (;;) {
      const found = this.store.readEvent(userStream(login), -1);
      const account = this.accounts.get(login);
      if (found.status !== 'ok' || !account) return false;
      const next = { ...change(account), dateLastUpdated: new Date().toISOString() };
      try {
        await this.store.append(userStream(login), ExpectedVersion.exact(found.lastEventNumber), [userEvent(next)]);
        return true;
      } catch (err) {
        if (!(err instanceof WrongExpectedVersionError)) throw err; // changed meanwhile: apply to the new version
      }
    }
  }

  /** The principal of an `Authorization` header value already verified (and still valid), without waiting. */
  verifiedPrincipal(header: string): Principal | undefined {
    return this.verified.get(header);
  }

  /** Checks an `Authorization: Basic` header value; concurrent checks of one value share one scrypt run. */
  authenticate(header: string): Promise<AuthResult> {
    const known = this.verified.get(header);
    if (known) return Promise.resolve({ ok: true, principal: known });
    let running = this.verifying.get(header);
    if (!running) {
      running = this.verify(header).finally(() => this.verifying.delete(header));
      this.verifying.set(header, running);
    }
    return running;
  }

  private async verify(header: string): Promise<AuthResult> {
    const credentials = parseBasic(header);
    if (!credentials) return { ok: false };
    const account = this.accounts.get(credentials.login);
    if (!account || account.disabled) return { ok: false };
    if (!(await verifyPassword(credentials.password, account.password))) return { ok: false };
    // The account may have changed while scrypt ran.
    const current = this.accounts.get(credentials.login);
    if (current !== account) return this.verify(header);
    const principal = userPrincipal(account.loginName, account.groups);
    if (this.verified.size >= MAX_VERIFIED) this.verified.clear();
    this.verified.set(header, principal);
    return { ok: true, principal };
  }

  private readLogins(): Set<string> {
    const logins = this.listed;
    for (const record of this.store.streamRecords(USERS_STREAM)) logins.add(record.data.toString('utf8'));
    return logins;
  }

  private follow(records: readonly EventRecord[]): void {
    for (const r of records) {
      if (r.streamId.startsWith(USER_STREAM_PREFIX)) this.reload(r.streamId.slice(USER_STREAM_PREFIX.length));
      else if (isMetastream(r.streamId) && r.streamId.startsWith(metastreamOf(USER_STREAM_PREFIX))) {
        this.reload(r.streamId.slice(2 + USER_STREAM_PREFIX.length)); // a deleted account
      }
    }
  }

  private reload(login: string): void {
    const found = this.store.readEvent(userStream(login), -1);
    const account = found.status === 'ok' && found.event.event?.eventType === USER_EVENT_TYPE
      ? parseAccount(found.event.event.data) : undefined;
    if (account) this.accounts.set(login, account);
    else this.accounts.delete(login);
    this.verified.clear();
  }
}

export function userEvent(account: UserAccount) {
  return jsonEvent(USER_EVENT_TYPE, account);
}

function parseAccount(data: Buffer): UserAccount | undefined {
  try {
    const a = JSON.parse(data.toString('utf8')) as UserAccount;
    return typeof a.loginName === 'string' && a.password ? a : undefined;
  } catch {
    return undefined;
  }
}

function parseBasic(header: string): { login: string; password: string } | undefined {
  const match = /^Basic ([A-Za-z0-9+/=]+)$/.exec(header.trim());
  if (!match) return undefined;
  const decoded = Buffer.from(match[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon <= 0) return undefined;
  return { login: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}
