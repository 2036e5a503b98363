import type { Logger } from 'pino';
import { ExpectedVersion, newUuid, type Store, type EventRecord } from '../store/index.js';
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

export type AuthResult = { ok: true; principal: Principal } | { ok: false };

export class UserStore {
  private readonly accounts = new Map<string, UserAccount>();
  /** Verified `Authorization` header values: scrypt runs once per credential, not per request. */
  private readonly verified = new Map<string, Principal>();
  private readonly verifying = new Map<string, Promise<AuthResult>>();
  private unsubscribe: () => void = () => {};

  constructor(private readonly store: Store, private readonly log: Logger) {}

  /** Loads every account; on a new database creates admin and ops with the configured passwords. */
  async start(defaults: { adminPassword: string; opsPassword: string }): Promise<void> {
    this.unsubscribe = this.store.bus.subscribe((commit) => this.follow(commit.records));
    const logins = this.readLogins();
    for (const login of logins) this.reload(login);
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

  async create(input: { loginName: string; fullName: string; groups: string[]; password: string }): Promise<void> {
    const password = await hashPassword(input.password);
    const account: UserAccount = {
      loginName: input.loginName, fullName: input.fullName, groups: input.groups, disabled: false, password,
      dateLastUpdated: new Date().toISOString(),
    };
    await this.store.append(`${USER_STREAM_PREFIX}${input.loginName}`, ExpectedVersion.noStream, [userEvent(account)]);
    await this.store.append(USERS_STREAM, ExpectedVersion.any, [{
      eventId: newUuid(), eventType: USER_CREATED_EVENT_TYPE, isJson: false,
      data: Buffer.from(input.loginName, 'utf8'), metadata: Buffer.alloc(0),
    }]);
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
    const logins = new Set<string>();
    for (let from = 0; ;) {
      const page = this.store.readStreamForward(USERS_STREAM, from, 1000);
      if (page.status !== 'ok') break;
      for (const e of page.events) if (e.event) logins.add(e.event.data.toString('utf8'));
      if (page.isEndOfStream) break;
      from += 1000;
    }
    return logins;
  }

  private follow(records: readonly EventRecord[]): void {
    for (const r of records) {
      if (r.streamId.startsWith(USER_STREAM_PREFIX)) this.reload(r.streamId.slice(USER_STREAM_PREFIX.length));
    }
  }

  private reload(login: string): void {
    const found = this.store.readEvent(`${USER_STREAM_PREFIX}${login}`, -1);
    const account = found.status === 'ok' && found.event.event?.eventType === USER_EVENT_TYPE
      ? parseAccount(found.event.event.data) : undefined;
    if (account) this.accounts.set(login, account);
    else this.accounts.delete(login);
    this.verified.clear();
  }
}

export function userEvent(account: UserAccount) {
  return {
    eventId: newUuid(), eventType: USER_EVENT_TYPE, isJson: true,
    data: Buffer.from(JSON.stringify(account), 'utf8'), metadata: Buffer.alloc(0),
  };
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
