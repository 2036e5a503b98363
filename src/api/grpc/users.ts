import type { UserAccount } from '../../auth/index.js';
import type { UserChange } from '../../verbs/index.js';
import { methodOf } from './codecs.js';
import type { ServiceDoor } from './door.js';
import { accessDenied, fail, userConflict, userNotFound } from './errors.js';
import { optionsOf, ticksSinceEpoch } from './messages.js';
import type { CallContext, GrpcServer } from './server.js';

// The Users service (event_store.client.users.Users): accounts through the same verbs as the HTTP
// users API (src/verbs/users.ts), with the established server's errors: user-not-found and
// user-conflict with the login name, a wrong current password access-denied. Changes go to a
// cluster's leader; Details is served by any node (each keeps the accounts from its log).

type Message = Record<string, unknown>;

const SERVICE = 'event_store.client.users.Users';

const text = (value: unknown): string => (typeof value === 'string' ? value : '');

export function registerUsers(server: GrpcServer, door: ServiceDoor): void {
  const users = door.verbs.users;
  const change = (name: string, run: (o: Message, call: CallContext) => Promise<UserChange>) =>
    server.add(methodOf(SERVICE, name), {
      kind: 'unary',
      handle: async (request, call) => {
        const o = optionsOf(request);
        if ((await run(o, call)) === 'notFound') fail(userNotFound(text(o.login_name)));
        return {};
      },
    });
  const caller = (call: CallContext) => door.callerOf(call, 'leader');

  change('Create', async (o, call) => {
    const loginName = text(o.login_name);
    const created = await users.create(await caller(call), {
      loginName, password: text(o.password), fullName: text(o.full_name), groups: (o.groups ?? []) as string[],
    });
    if (created === 'conflict') fail(userConflict(loginName));
    return 'done';
  });
  // The established server ignores Update's password; the .NET client always sends one, so a
  // given one is set (as ResetPassword would) rather than dropped.
  change('Update', async (o, call) => {
    const who = await caller(call);
    const login = text(o.login_name);
    const updated = await users.update(who, login, { fullName: text(o.full_name), groups: (o.groups ?? []) as string[] });
    return updated === 'done' && text(o.password) ? users.resetPassword(who, login, text(o.password)) : updated;
  });
  change('Delete', async (o, call) => users.delete(await caller(call), text(o.login_name)));
  change('Disable', async (o, call) => users.setDisabled(await caller(call), text(o.login_name), true));
  change('Enable', async (o, call) => users.setDisabled(await caller(call), text(o.login_name), false));
  change('ResetPassword', async (o, call) => users.resetPassword(await caller(call), text(o.login_name), text(o.new_password)));
  change('ChangePassword', async (o, call) => {
    const changed = await users.changePassword(await caller(call), text(o.login_name), text(o.current_password), text(o.new_password));
    return changed === 'wrongPassword' ? fail(accessDenied()) : changed;
  });

  server.add(methodOf(SERVICE, 'Details'), {
    kind: 'serverStream',
    handle: async (request, call, out) => {
      const login = text(((request as Message).options as Message | undefined)?.login_name);
      const who = await door.callerOf(call, 'leaderIfAsked');
      const accounts = login === '' ? users.list(who) : [users.details(who, login) ?? fail(userNotFound(login))];
      for (const account of accounts) {
        if (!out.write({ user_details: userDetails(account) })) await out.drained();
      }
    },
  });
}

function userDetails(a: UserAccount): Message {
  return {
    login_name: a.loginName, full_name: a.fullName, groups: a.groups, disabled: a.disabled,
    ...(a.dateLastUpdated ? { last_updated: { ticks_since_epoch: ticksSinceEpoch(a.dateLastUpdated) } } : {}),
  };
}
