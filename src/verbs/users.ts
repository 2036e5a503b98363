import type { NewUser, Principal, UserAccount, UserStore } from '../auth/index.js';
import { InvalidRequestError } from './errors.js';
import { demand, demandSelf } from './rights.js';

// The user verbs: what a client can do to accounts, whichever door it comes through (the HTTP
// users API, gRPC's Users service). Managing accounts takes $admins; an account's own user may
// read it and change its password. What a name, a group or a password may hold is said once here
// (USER_RULES): the HTTP door's body schemas are built from it, the verbs check it for the others.
// Not found and conflicts are outcomes, not errors: each door answers them in its own shape.

/** A rule on a value: a pattern it must match (ajv's syntax and JavaScript's alike), and what is said when it does not. */
export interface ValueRule {
  readonly pattern: string;
  readonly message: string;
}

export const USER_RULES = {
  loginName: { pattern: '^[^\\s/:]+$', message: 'LoginName must not contain spaces, slashes or colons.' },
  group: { pattern: '^[^\\s,:]+$', message: 'Groups must be an array of group names without spaces, commas or colons.' },
  /** A password to set: no NUL, which the hash could not tell from its absence (see auth/password.ts). */
  password: (name: string): ValueRule => ({ pattern: '^[^\\u0000]*$', message: `${name} must not contain NUL characters.` }),
  required: (name: string) => `${name} is required.`,
} as const;

export type UserChange = 'done' | 'notFound';

export class UserVerbs {
  constructor(private readonly users: UserStore) {}

  /** Every account, by login name. */
  list(who: Principal): UserAccount[] {
    demand(who, 'admin', 'users');
    return this.users.list().sort((a, b) => a.loginName.localeCompare(b.loginName));
  }

  /** One account: an admin reads any, a user its own. */
  details(who: Principal, login: string): UserAccount | undefined {
    demandSelf(who, login, 'users', true);
    return this.users.get(login);
  }

  /** A retry of a create (same name, groups and password) is 'unchanged'; anything else about an existing login a conflict. */
  create(who: Principal, user: NewUser): Promise<'created' | 'unchanged' | 'conflict'> {
    demand(who, 'admin', 'users');
    checkRequired(user.loginName, 'LoginName');
    checkPattern(user.loginName, USER_RULES.loginName);
    checkPassword(user.password, 'Password');
    for (const group of user.groups) checkPattern(group, USER_RULES.group);
    return this.users.create(user);
  }

  async update(who: Principal, login: string, changes: { fullName?: string; groups?: string[] }): Promise<UserChange> {
    demand(who, 'admin', 'users');
    for (const group of changes.groups ?? []) checkPattern(group, USER_RULES.group);
    return outcome(await this.users.update(login, changes));
  }

  async delete(who: Principal, login: string): Promise<UserChange> {
    demand(who, 'admin', 'users');
    return outcome(await this.users.delete(login));
  }

  async setDisabled(who: Principal, login: string, disabled: boolean): Promise<UserChange> {
    demand(who, 'admin', 'users');
    return outcome(await this.users.setDisabled(login, disabled));
  }

  async resetPassword(who: Principal, login: string, newPassword: string): Promise<UserChange> {
    demand(who, 'admin', 'users');
    checkPassword(newPassword, 'NewPassword');
    return outcome(await this.users.resetPassword(login, newPassword));
  }

  /** The account's own user, who must know the current password ('wrongPassword' when not). */
  async changePassword(who: Principal, login: string, currentPassword: string, newPassword: string): Promise<UserChange | 'wrongPassword'> {
    demandSelf(who, login, 'users');
    checkRequired(currentPassword, 'CurrentPassword');
    checkPassword(newPassword, 'NewPassword');
    const changed = await this.users.changePassword(login, currentPassword, newPassword);
    return changed === 'changed' ? 'done' : changed === 'denied' ? 'wrongPassword' : 'notFound';
  }
}

function outcome(found: boolean): UserChange {
  return found ? 'done' : 'notFound';
}

function checkRequired(value: string, name: string): void {
  if (!value) throw new InvalidRequestError(USER_RULES.required(name));
}

function checkPattern(value: string, rule: ValueRule): void {
  if (!new RegExp(rule.pattern, 'u').test(value)) throw new InvalidRequestError(rule.message);
}

function checkPassword(value: string, name: string): void {
  checkRequired(value, name);
  checkPattern(value, USER_RULES.password(name));
}
