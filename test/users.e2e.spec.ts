import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { XMLParser } from 'fast-xml-parser';
import { ADMIN, basic, http, OPS, startTestNode, type TestNode } from './support/node.js';

// End-to-end tests of the users API (issue 3; http-wire.md §5, seed spec "Users"): every route,
// the answer shapes, Location header and status codes, authentication effects (disabled,
// deleted, reset and changed passwords), bad input that changes nothing, users stored as
// events in $user-{login} and $users, and the in-memory view rebuilt on restart.

const ATOM_JSON = 'application/vnd.eventstore.atom+json';
const JSON_TYPE = 'application/json';

let counter = 0;
function login(prefix = 'user'): string {
  return `${prefix}${Date.now().toString(36)}${++counter}`;
}

interface NewUser { loginName?: unknown; fullName?: unknown; groups?: unknown; password?: unknown }

function post(t: TestNode, path: string, body: unknown, auth: string = ADMIN, contentType = JSON_TYPE): Promise<Response> {
  return http(t, path, {
    method: 'POST', authorization: auth, headers: { 'Content-Type': contentType },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

function put(t: TestNode, path: string, body: unknown, auth: string = ADMIN): Promise<Response> {
  return http(t, path, {
    method: 'PUT', authorization: auth, headers: { 'Content-Type': JSON_TYPE },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

function createUser(t: TestNode, user: NewUser, auth: string = ADMIN): Promise<Response> {
  return post(t, '/users/', user, auth);
}

async function mustCreate(t: TestNode, user: { loginName: string; password: string; fullName?: string; groups?: string[] }): Promise<void> {
  const res = await createUser(t, { fullName: `Full ${user.loginName}`, groups: [], ...user });
  expect(res.status, `create ${user.loginName}: ${await res.clone().text()}`).toBe(201);
  await res.arrayBuffer();
}

/** GET /users/{login} as admin; the parsed body and status. */
async function getUser(t: TestNode, name: string, auth: string = ADMIN): Promise<{ status: number; body: any }> {
  const res = await http(t, `/users/${encodeURIComponent(name)}`, { authorization: auth, headers: { Accept: JSON_TYPE } });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

async function listUsers(t: TestNode): Promise<any[]> {
  const res = await http(t, '/users/', { headers: { Accept: JSON_TYPE } });
  expect(res.status).toBe(200);
  const body = await res.json();
  return body.data;
}

/** Status of an authenticated request made with these credentials. */
async function authStatus(t: TestNode, user: string, password: string): Promise<number> {
  const res = await http(t, '/users/$current', { authorization: basic(user, password), headers: { Accept: JSON_TYPE } });
  await res.arrayBuffer();
  return res.status;
}

async function expectUnauthorized(res: Response): Promise<void> {
  expect(res.status, await res.clone().text()).toBe(401);
  await res.arrayBuffer();
}

/** The user's account as stored, without the timestamp that every write changes. */
function snapshot(data: any): unknown {
  const { dateLastUpdated: _ignored, ...rest } = data;
  return rest;
}

describe('users API', () => {
  let t: TestNode;
  beforeEach(async () => { t = await startTestNode(); });
  afterEach(async () => { await t?.dispose(); });

  it('GET /users/ and /users list the default admin and ops accounts with links and no password', async () => {
    for (const path of ['/users/', '/users']) {
      const res = await http(t, path, { headers: { Accept: JSON_TYPE } });
      expect(res.status, path).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      const body = await res.json();
      expect(body.success).toBe(true);
      expect(body.error).toBe('Success');
      expect(Array.isArray(body.data)).toBe(true);
      const byName = new Map(body.data.map((u: any) => [u.loginName, u]));
      const admin: any = byName.get('admin');
      const ops: any = byName.get('ops');
      expect(admin, 'admin listed').toBeDefined();
      expect(ops, 'ops listed').toBeDefined();
      expect(admin.groups).toContain('$admins');
      expect(ops.groups).toContain('$ops');
      expect(admin.disabled).toBe(false);
      expect(typeof admin.fullName).toBe('string');
      for (const u of body.data) {
        expect(Object.keys(u).filter((k) => /password|hash|salt/i.test(k)), `${u.loginName} carries no password`).toEqual([]);
        const rels = u.links.map((l: any) => l.rel).sort();
        expect(rels).toEqual(['change-password', 'delete', 'disable', 'edit', 'reset-password']);
        for (const l of u.links) expect(l.href).toMatch(new RegExp(`^${t.url}/users/${u.loginName}(/command/[a-z-]+)?$`));
      }
    }
  });

  it('POST /users/ creates a user: 201, absolute Location, typed answer; the user can authenticate', async () => {
    const name = login('amy');
    const res = await createUser(t, { loginName: name, fullName: 'Amy Pond', groups: ['crew', 'leads'], password: 'p@ss word:1' });
    expect(res.status).toBe(201);
    expect(res.headers.get('location')).toBe(`${t.url}/users/${name}`);
    const body = await res.json();
    expect(body).toMatchObject({ loginName: name, success: true, error: 'Success' });

    const got = await getUser(t, name);
    expect(got.status).toBe(200);
    expect(got.body.success).toBe(true);
    expect(got.body.error).toBe('Success');
    expect(got.body.data).toMatchObject({ loginName: name, fullName: 'Amy Pond', groups: ['crew', 'leads'], disabled: false });
    expect(got.body.data).toHaveProperty('dateLastUpdated');
    expect(got.body.data).not.toHaveProperty('password');
    const links = Object.fromEntries(got.body.data.links.map((l: any) => [l.rel, l.href]));
    expect(links).toEqual({
      'reset-password': `${t.url}/users/${name}/command/reset-password`,
      'change-password': `${t.url}/users/${name}/command/change-password`,
      edit: `${t.url}/users/${name}`,
      delete: `${t.url}/users/${name}`,
      disable: `${t.url}/users/${name}/command/disable`,
    });

    expect(await authStatus(t, name, 'p@ss word:1')).toBe(200);
    expect(await authStatus(t, name, 'wrong')).toBe(401);
    expect((await listUsers(t)).map((u) => u.loginName)).toContain(name);
  });

  it('POST /users (no trailing slash) and a text/xml body both create users', async () => {
    const a = login('noslash');
    const res = await post(t, '/users', { loginName: a, fullName: 'No Slash', groups: [], password: 'pw-a' });
    expect(res.status).toBe(201);
    expect(res.headers.get('location')).toBe(`${t.url}/users/${a}`);

    const b = login('xml');
    const xml = `<UserItem><LoginName>${b}</LoginName><FullName>Xml User</FullName>`
      + `<Groups>team</Groups><Password>pw-b</Password></UserItem>`;
    const xres = await post(t, '/users/', xml, ADMIN, 'text/xml');
    expect(xres.status, await xres.clone().text()).toBe(201);
    expect(xres.headers.get('location')).toBe(`${t.url}/users/${b}`);
    const got = await getUser(t, b);
    expect(got.body.data).toMatchObject({ loginName: b, fullName: 'Xml User', groups: ['team'] });
    expect(await authStatus(t, a, 'pw-a')).toBe(200);
    expect(await authStatus(t, b, 'pw-b')).toBe(200);
  });

  it('a text/xml body with an XML declaration (as XML serializers write it) creates the user', async () => {
    const name = login('xmldecl');
    const xml = `<?xml version="1.0" encoding="utf-8"?>\n<UserItem><LoginName>${name}</LoginName><FullName>Decl User</FullName>`
      + `<Groups>team</Groups><Groups>crew</Groups><Password>pw-d</Password></UserItem>`;
    const res = await post(t, '/users/', xml, ADMIN, 'text/xml');
    expect(res.status, await res.clone().text()).toBe(201);
    expect(res.headers.get('location')).toBe(`${t.url}/users/${name}`);
    expect((await getUser(t, name)).body.data).toMatchObject({ loginName: name, fullName: 'Decl User', groups: ['team', 'crew'] });
    expect(await authStatus(t, name, 'pw-d')).toBe(200);
  });

  it('a malformed XML body is 400 with a message and creates nothing', async () => {
    const name = login('badxml');
    for (const [what, xml] of [
      ['unclosed root element', `<UserItem><LoginName>${name}</LoginName><Password>pw</Password>`],
      ['mismatched tags', `<UserItem><LoginName>${name}</Login><Password>pw</Password></UserItem>`],
    ] as const) {
      const res = await post(t, '/users/', xml, ADMIN, 'text/xml');
      expect(res.status, what).toBe(400);
      expect((await res.text()).trim().length, `${what}: message`).toBeGreaterThan(0);
    }
    expect((await getUser(t, name)).status).toBe(404);
    expect(await authStatus(t, name, 'pw')).toBe(401);
  });

  it('answers as text/xml when asked', async () => {
    const name = login('xmlout');
    await mustCreate(t, { loginName: name, password: 'pw', fullName: 'Xml Out' });
    const res = await http(t, `/users/${name}`, { headers: { Accept: 'text/xml' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/xml/);
    const doc = new XMLParser().parse(await res.text());
    const root = Object.values(doc).find((v) => typeof v === 'object') as any;
    expect(root, 'an XML document element').toBeDefined();
    expect(JSON.stringify(root)).toContain(name);
    expect(JSON.stringify(root)).toContain('Xml Out');
  });

  it('re-creating a user with identical data is 201; with different data 409 and nothing changes', async () => {
    const name = login('dup');
    const user = { loginName: name, fullName: 'Dup', groups: ['g1'], password: 'pw1' };
    expect((await createUser(t, user)).status).toBe(201);
    const again = await createUser(t, user);
    expect(again.status).toBe(201);
    await again.arrayBuffer();
    const before = (await getUser(t, name)).body.data;

    const conflict = await createUser(t, { ...user, fullName: 'Someone Else', password: 'pw2' });
    expect(conflict.status).toBe(409);
    expect(await conflict.json()).toMatchObject({ loginName: name, success: false, error: 'Conflict' });
    const after = (await getUser(t, name)).body.data;
    expect(snapshot(after)).toEqual(snapshot(before));
    expect(await authStatus(t, name, 'pw1')).toBe(200);
    expect(await authStatus(t, name, 'pw2')).toBe(401);
  });

  it('bad create input answers 400 with a message and creates nothing', async () => {
    const usersBefore = (await listUsers(t)).map((u) => u.loginName).sort();
    const name = login('bad');
    const cases: Array<[string, string, string?]> = [
      ['missing login name', JSON.stringify({ fullName: 'No Login', groups: [], password: 'pw' })],
      ['empty login name', JSON.stringify({ loginName: '', fullName: 'x', groups: [], password: 'pw' })],
      ['missing password', JSON.stringify({ loginName: name, fullName: 'x', groups: [] })],
      ['empty password', JSON.stringify({ loginName: name, fullName: 'x', groups: [], password: '' })],
      ['groups not an array', JSON.stringify({ loginName: name, fullName: 'x', groups: '$admins', password: 'pw' })],
      ['group not a string', JSON.stringify({ loginName: name, fullName: 'x', groups: [42], password: 'pw' })],
      ['group with a space', JSON.stringify({ loginName: name, fullName: 'x', groups: ['bad group'], password: 'pw' })],
      ['group with a comma', JSON.stringify({ loginName: name, fullName: 'x', groups: ['a,b'], password: 'pw' })],
      ['password not a string', JSON.stringify({ loginName: name, fullName: 'x', groups: [], password: 12345 })],
      ['malformed JSON', `{"loginName": "${name}", "password": "pw"`],
      ['a JSON array', JSON.stringify([{ loginName: name, password: 'pw' }])],
      ['XML without a login name', `<UserItem><FullName>x</FullName><Password>pw</Password></UserItem>`, 'text/xml'],
      ['XML with an empty password', `<UserItem><LoginName>${name}</LoginName><Password></Password></UserItem>`, 'text/xml'],
    ];
    for (const [what, body, type] of cases) {
      const res = await post(t, '/users/', body, ADMIN, type ?? JSON_TYPE);
      expect(res.status, what).toBe(400);
      expect((await res.text()).trim().length, `${what}: message`).toBeGreaterThan(0);
    }
    expect((await getUser(t, name)).status).toBe(404);
    expect((await listUsers(t)).map((u) => u.loginName).sort()).toEqual(usersBefore);
    expect(await authStatus(t, name, 'pw')).toBe(401);
  });

  it('a body without Content-Type is refused (415) and creates nothing', async () => {
    const name = login('notype');
    const res = await http(t, '/users/', { method: 'POST', body: JSON.stringify({ loginName: name, password: 'pw' }) });
    expect(res.status).toBe(415);
    expect((await getUser(t, name)).status).toBe(404);
  });

  it('GET /users/{login}: admin or self 200, another plain user 401, unknown 404 with a typed body', async () => {
    const a = login('self');
    const b = login('other');
    await mustCreate(t, { loginName: a, password: 'pa' });
    await mustCreate(t, { loginName: b, password: 'pb' });

    const self = await getUser(t, a, basic(a, 'pa'));
    expect(self.status).toBe(200);
    expect(self.body.data.loginName).toBe(a);
    const other = await http(t, `/users/${b}`, { authorization: basic(a, 'pa'), headers: { Accept: JSON_TYPE } });
    await expectUnauthorized(other);
    const anonymous = await http(t, `/users/${a}`, { authorization: '', headers: { Accept: JSON_TYPE } });
    await expectUnauthorized(anonymous);

    const missing = await getUser(t, login('ghost'));
    expect(missing.status).toBe(404);
    expect(missing.body).toEqual({ success: false, error: 'NotFound', data: null });
  });

  it('GET /users/$current answers the authenticated user without links', async () => {
    const a = login('cur');
    await mustCreate(t, { loginName: a, password: 'pc', fullName: 'Current One', groups: ['g'] });
    const res = await http(t, '/users/$current', { authorization: basic(a, 'pc'), headers: { Accept: JSON_TYPE } });
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body.success).toBe(true);
    expect(body.data).toMatchObject({ loginName: a, fullName: 'Current One', groups: ['g'], disabled: false });
    expect(body.data).not.toHaveProperty('links');
    expect(body.data).not.toHaveProperty('password');
    const anonymous = await http(t, '/users/$current', { authorization: '', headers: { Accept: JSON_TYPE } });
    await expectUnauthorized(anonymous);
  });

  it('PUT /users/{login} updates full name and groups (the new groups take effect); unknown 404', async () => {
    const a = login('upd');
    await mustCreate(t, { loginName: a, password: 'pu', fullName: 'Before', groups: ['old'] });
    // Not an admin yet.
    await expectUnauthorized(await http(t, '/users/', { authorization: basic(a, 'pu'), headers: { Accept: JSON_TYPE } }));

    const res = await put(t, `/users/${a}`, { fullName: 'After', groups: ['$admins', 'new'] });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ loginName: a, success: true, error: 'Success' });
    const got = await getUser(t, a);
    expect(got.body.data).toMatchObject({ loginName: a, fullName: 'After', groups: ['$admins', 'new'], disabled: false });
    expect(await authStatus(t, a, 'pu'), 'password unchanged by an update').toBe(200);

    // A member of $admins (not the admin login) manages other users.
    const listed = await http(t, '/users/', { authorization: basic(a, 'pu'), headers: { Accept: JSON_TYPE } });
    expect(listed.status).toBe(200);
    const c = login('bycustomadmin');
    const created = await createUser(t, { loginName: c, fullName: 'C', groups: [], password: 'pcc' }, basic(a, 'pu'));
    expect(created.status).toBe(201);

    // Only the full name: the groups stay.
    const partial = await put(t, `/users/${a}`, { fullName: 'Only Name' });
    expect(partial.status).toBe(200);
    expect((await getUser(t, a)).body.data).toMatchObject({ fullName: 'Only Name', groups: ['$admins', 'new'] });

    const ghost = login('ghost');
    const missing = await put(t, `/users/${ghost}`, { fullName: 'Nobody' });
    expect(missing.status).toBe(404);
    expect(await missing.json()).toMatchObject({ loginName: ghost, success: false, error: 'NotFound' });
    expect((await getUser(t, ghost)).status).toBe(404);
  });

  it('bad update input answers 400 with a message and changes nothing', async () => {
    const a = login('badupd');
    await mustCreate(t, { loginName: a, password: 'pw', fullName: 'Keep', groups: ['keep'] });
    const before = (await getUser(t, a)).body.data;
    for (const [what, body] of [
      ['groups not an array', JSON.stringify({ fullName: 'Changed', groups: 'x' })],
      ['group with a space', JSON.stringify({ fullName: 'Changed', groups: ['a b'] })],
      ['full name not a string', JSON.stringify({ fullName: ['Changed'] })],
      ['malformed JSON', '{"fullName": "Changed"'],
    ] as const) {
      const res = await put(t, `/users/${a}`, body);
      expect(res.status, what).toBe(400);
      expect((await res.text()).trim().length, `${what}: message`).toBeGreaterThan(0);
    }
    expect((await getUser(t, a)).body.data).toEqual(before);
  });

  it('DELETE /users/{login}: 204; the user is gone and can no longer authenticate; again 404', async () => {
    const a = login('del');
    await mustCreate(t, { loginName: a, password: 'pd' });
    expect(await authStatus(t, a, 'pd')).toBe(200); // now a known, verified credential

    const res = await http(t, `/users/${a}`, { method: 'DELETE' });
    expect(res.status).toBe(204);
    expect(await res.text()).toBe('');
    expect((await getUser(t, a)).status).toBe(404);
    expect(await authStatus(t, a, 'pd')).toBe(401);
    expect((await listUsers(t)).map((u) => u.loginName)).not.toContain(a);

    const again = await http(t, `/users/${a}`, { method: 'DELETE', headers: { Accept: JSON_TYPE } });
    expect(again.status).toBe(404);
    expect(await again.json()).toMatchObject({ loginName: a, success: false, error: 'NotFound' });
  });

  it('a deleted login can be created again, with the new password only', async () => {
    const a = login('recreate');
    await mustCreate(t, { loginName: a, password: 'first' });
    expect((await http(t, `/users/${a}`, { method: 'DELETE' })).status).toBe(204);
    const res = await createUser(t, { loginName: a, fullName: 'Second', groups: [], password: 'second' });
    expect(res.status, await res.clone().text()).toBe(201);
    expect((await getUser(t, a)).body.data).toMatchObject({ loginName: a, fullName: 'Second', disabled: false });
    expect(await authStatus(t, a, 'second')).toBe(200);
    expect(await authStatus(t, a, 'first')).toBe(401);
  });

  it('disable (PUT or POST) makes a user get 401, enable restores it; links follow the state', async () => {
    const a = login('dis');
    await mustCreate(t, { loginName: a, password: 'px' });
    expect(await authStatus(t, a, 'px')).toBe(200);

    const disabled = await http(t, `/users/${a}/command/disable`, { method: 'PUT', headers: { Accept: JSON_TYPE } });
    expect(disabled.status).toBe(200);
    expect(await disabled.json()).toMatchObject({ loginName: a, success: true, error: 'Success' });
    expect(await authStatus(t, a, 'px')).toBe(401);
    const denied = await http(t, '/users/$current', { authorization: basic(a, 'px') });
    expect(denied.status).toBe(401);
    expect(denied.headers.get('www-authenticate') ?? '').not.toBe('');
    const data = (await getUser(t, a)).body.data;
    expect(data.disabled).toBe(true);
    const rels = data.links.map((l: any) => l.rel);
    expect(rels).toContain('enable');
    expect(rels).not.toContain('disable');
    expect(data.links.find((l: any) => l.rel === 'enable').href).toBe(`${t.url}/users/${a}/command/enable`);

    const enabled = await http(t, `/users/${a}/command/enable`, { method: 'PUT' });
    expect(enabled.status).toBe(200);
    expect(await authStatus(t, a, 'px')).toBe(200);
    expect((await getUser(t, a)).body.data.disabled).toBe(false);

    // The server also accepts POST for both commands.
    expect((await http(t, `/users/${a}/command/disable`, { method: 'POST' })).status).toBe(200);
    expect(await authStatus(t, a, 'px')).toBe(401);
    expect((await http(t, `/users/${a}/command/enable`, { method: 'POST' })).status).toBe(200);
    expect(await authStatus(t, a, 'px')).toBe(200);

    const ghost = login('ghost');
    for (const command of ['enable', 'disable']) {
      const res = await http(t, `/users/${ghost}/command/${command}`, { method: 'PUT', headers: { Accept: JSON_TYPE } });
      expect(res.status, command).toBe(404);
      expect(await res.json()).toMatchObject({ loginName: ghost, success: false, error: 'NotFound' });
    }
  });

  it('reset-password takes effect on the next request: the old password 401, the new one works', async () => {
    const a = login('reset');
    await mustCreate(t, { loginName: a, password: 'old-pw' });
    expect(await authStatus(t, a, 'old-pw')).toBe(200);

    const res = await post(t, `/users/${a}/command/reset-password`, { newPassword: 'new-pw' });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ loginName: a, success: true, error: 'Success' });
    expect(await authStatus(t, a, 'old-pw')).toBe(401);
    expect(await authStatus(t, a, 'new-pw')).toBe(200);

    const ghost = login('ghost');
    const missing = await post(t, `/users/${ghost}/command/reset-password`, { newPassword: 'x' });
    expect(missing.status).toBe(404);
    expect(await missing.json()).toMatchObject({ loginName: ghost, success: false, error: 'NotFound' });
  });

  it('reset-password with an empty, missing or malformed password item is 400 and changes nothing', async () => {
    const a = login('badreset');
    await mustCreate(t, { loginName: a, password: 'keep-me' });
    for (const [what, body] of [
      ['empty', JSON.stringify({ newPassword: '' })],
      ['missing', JSON.stringify({})],
      ['not a string', JSON.stringify({ newPassword: 7 })],
      ['malformed JSON', '{"newPassword": '],
    ] as const) {
      const res = await post(t, `/users/${a}/command/reset-password`, body);
      expect(res.status, what).toBe(400);
      expect((await res.text()).trim().length, `${what}: message`).toBeGreaterThan(0);
    }
    expect(await authStatus(t, a, 'keep-me')).toBe(200);
  });

  it('change-password needs the current password; takes effect on the next request', async () => {
    const a = login('chg');
    await mustCreate(t, { loginName: a, password: 'one' });
    expect(await authStatus(t, a, 'one')).toBe(200);

    const wrong = await post(t, `/users/${a}/command/change-password`, { currentPassword: 'not-one', newPassword: 'two' }, basic(a, 'one'));
    expect(wrong.status).toBe(401);
    await wrong.arrayBuffer();
    expect(await authStatus(t, a, 'one'), 'a refused change leaves the password').toBe(200);
    expect(await authStatus(t, a, 'two')).toBe(401);

    const res = await post(t, `/users/${a}/command/change-password`, { currentPassword: 'one', newPassword: 'two' }, basic(a, 'one'));
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ loginName: a, success: true, error: 'Success' });
    expect(await authStatus(t, a, 'one'), 'the old password no longer works').toBe(401);
    expect(await authStatus(t, a, 'two')).toBe(200);
  });

  it('change-password with missing or empty fields is 400 and changes nothing', async () => {
    const a = login('badchg');
    await mustCreate(t, { loginName: a, password: 'same' });
    for (const [what, body] of [
      ['empty new password', JSON.stringify({ currentPassword: 'same', newPassword: '' })],
      ['missing new password', JSON.stringify({ currentPassword: 'same' })],
      ['missing current password', JSON.stringify({ newPassword: 'other' })],
      ['malformed JSON', '{"currentPassword": "same", '],
    ] as const) {
      const res = await post(t, `/users/${a}/command/change-password`, body, basic(a, 'same'));
      expect(res.status, what).toBe(400);
      expect((await res.text()).trim().length, `${what}: message`).toBeGreaterThan(0);
    }
    expect(await authStatus(t, a, 'same')).toBe(200);
    expect(await authStatus(t, a, 'other')).toBe(401);
  });

  it("a user cannot change another user's password, even knowing it", async () => {
    const a = login('victim');
    const b = login('intruder');
    await mustCreate(t, { loginName: a, password: 'pa' });
    await mustCreate(t, { loginName: b, password: 'pb' });
    const res = await post(t, `/users/${a}/command/change-password`, { currentPassword: 'pa', newPassword: 'owned' }, basic(b, 'pb'));
    expect(res.status).toBe(401);
    await res.arrayBuffer();
    expect(await authStatus(t, a, 'pa')).toBe(200);
    expect(await authStatus(t, a, 'owned')).toBe(401);
  });

  it('only $admins manage users: anonymous, plain users and ops get 401 and nothing changes', async () => {
    const victim = login('managed');
    const plain = login('plain');
    await mustCreate(t, { loginName: victim, password: 'pv', fullName: 'Victim', groups: ['v'] });
    await mustCreate(t, { loginName: plain, password: 'pp' });
    const before = (await getUser(t, victim)).body.data;
    const newcomer = login('newcomer');

    for (const [who, auth] of [['anonymous', ''], ['plain user', basic(plain, 'pp')], ['ops', OPS]] as const) {
      const calls: Array<[string, () => Promise<Response>]> = [
        ['list', () => http(t, '/users/', { authorization: auth })],
        ['create', () => createUser(t, { loginName: newcomer, fullName: 'N', groups: [], password: 'pn' }, auth)],
        ['update', () => http(t, `/users/${victim}`, {
          method: 'PUT', authorization: auth, headers: { 'Content-Type': JSON_TYPE }, body: JSON.stringify({ fullName: 'Hacked', groups: ['$admins'] }),
        })],
        ['disable', () => http(t, `/users/${victim}/command/disable`, { method: 'PUT', authorization: auth })],
        ['enable', () => http(t, `/users/${victim}/command/enable`, { method: 'PUT', authorization: auth })],
        ['reset-password', () => post(t, `/users/${victim}/command/reset-password`, { newPassword: 'hacked' }, auth)],
        ['delete', () => http(t, `/users/${victim}`, { method: 'DELETE', authorization: auth })],
      ];
      for (const [what, call] of calls) {
        const res = await call();
        expect(res.status, `${who}: ${what}`).toBe(401);
        await res.arrayBuffer();
      }
    }
    expect((await getUser(t, victim)).body.data).toEqual(before);
    expect((await getUser(t, newcomer)).status).toBe(404);
    expect(await authStatus(t, victim, 'pv')).toBe(200);
    expect(await authStatus(t, victim, 'hacked')).toBe(401);
  });

  it('bad credentials answer 401 with a WWW-Authenticate challenge', async () => {
    const res = await http(t, '/users/', { authorization: basic('admin', 'not-changeit') });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate') ?? '').toMatch(/Basic/);
    const unknown = await http(t, '/users/', { authorization: basic(login('nobody'), 'x') });
    expect(unknown.status).toBe(401);
  });

  it('a user created over HTTP is stored as events in $user-{login} and listed in $users', async () => {
    const a = login('stored');
    await mustCreate(t, { loginName: a, password: 'secret-pw', fullName: 'Stored User', groups: ['s1'] });

    const feed = await http(t, `/streams/${encodeURIComponent('$user-' + a)}?embed=body`, { headers: { Accept: ATOM_JSON } });
    expect(feed.status).toBe(200);
    const entries = (await feed.json()).entries;
    expect(entries.length).toBe(1);
    expect(entries[0].eventType).toBe('$user');
    expect(entries[0].streamId).toBe(`$user-${a}`);
    const data = JSON.parse(entries[0].data);
    expect(data).toMatchObject({ loginName: a, fullName: 'Stored User', groups: ['s1'], disabled: false });
    expect(JSON.stringify(data), 'the password is not stored in clear').not.toContain('secret-pw');

    // Every change is one more event in the account stream.
    expect((await http(t, `/users/${a}/command/disable`, { method: 'PUT' })).status).toBe(200);
    const after = await http(t, `/streams/${encodeURIComponent('$user-' + a)}?embed=body`, { headers: { Accept: ATOM_JSON } });
    const newest = (await after.json()).entries;
    expect(newest.length).toBe(2);
    expect(JSON.parse(newest[0].data).disabled).toBe(true);

    const users = await http(t, `/streams/${encodeURIComponent('$users')}/0/forward/100?embed=tryharder`, { headers: { Accept: ATOM_JSON } });
    expect(users.status).toBe(200);
    const listed = (await users.json()).entries.filter((e: any) => e.eventType === '$User').map((e: any) => e.data);
    expect(listed).toEqual(expect.arrayContaining(['admin', 'ops', a]));
    expect(listed.filter((d: string) => d === a)).toHaveLength(1);

    // $user- streams are not readable by plain users.
    const peek = await http(t, `/streams/${encodeURIComponent('$user-' + a)}`, { authorization: basic(a, 'secret-pw'), headers: { Accept: ATOM_JSON } });
    expect(peek.status).toBe(401);
  });

  it('users survive a restart: created, updated, disabled, deleted and password changes are rebuilt', async () => {
    const kept = login('kept');
    const disabled = login('off');
    const deleted = login('gone');
    const changed = login('chgd');
    await mustCreate(t, { loginName: kept, password: 'pk', fullName: 'Kept', groups: ['a'] });
    await mustCreate(t, { loginName: disabled, password: 'po' });
    await mustCreate(t, { loginName: deleted, password: 'pg' });
    await mustCreate(t, { loginName: changed, password: 'before' });
    expect((await put(t, `/users/${kept}`, { fullName: 'Kept Updated', groups: ['a', 'b'] })).status).toBe(200);
    expect((await http(t, `/users/${disabled}/command/disable`, { method: 'PUT' })).status).toBe(200);
    expect((await http(t, `/users/${deleted}`, { method: 'DELETE' })).status).toBe(204);
    expect((await post(t, `/users/${changed}/command/change-password`, { currentPassword: 'before', newPassword: 'after' },
      basic(changed, 'before'))).status).toBe(200);
    const before = (await listUsers(t)).map(snapshot);

    await t.restart();

    const after = (await listUsers(t)).map(snapshot);
    const byLogin = (xs: any[]) => [...xs].sort((x, y) => x.loginName.localeCompare(y.loginName));
    expect(byLogin(after).map((u: any) => ({ ...u, links: u.links.map((l: any) => l.rel) })))
      .toEqual(byLogin(before).map((u: any) => ({ ...u, links: u.links.map((l: any) => l.rel) })));
    expect((await getUser(t, kept)).body.data).toMatchObject({ fullName: 'Kept Updated', groups: ['a', 'b'], disabled: false });
    expect(await authStatus(t, kept, 'pk')).toBe(200);
    expect((await getUser(t, disabled)).body.data.disabled).toBe(true);
    expect(await authStatus(t, disabled, 'po')).toBe(401);
    expect((await getUser(t, deleted)).status).toBe(404);
    expect(await authStatus(t, deleted, 'pg')).toBe(401);
    expect(await authStatus(t, changed, 'before')).toBe(401);
    expect(await authStatus(t, changed, 'after')).toBe(200);
    expect(await authStatus(t, 'admin', 'changeit')).toBe(200);
    expect(await authStatus(t, 'ops', 'changeit')).toBe(200);
  });

  it('the default admin password set on a new database is the one that works; restarts do not reset it', async () => {
    const n = await startTestNode({ defaultAdminPassword: 'first-admin-pw' });
    try {
      expect(await authStatus(n, 'admin', 'first-admin-pw')).toBe(200);
      expect(await authStatus(n, 'admin', 'changeit')).toBe(401);
      const res = await post(n, '/users/admin/command/reset-password', { newPassword: 'rotated' }, basic('admin', 'first-admin-pw'));
      expect(res.status).toBe(200);
      await n.restart();
      expect(await authStatus(n, 'admin', 'rotated')).toBe(200);
      expect(await authStatus(n, 'admin', 'first-admin-pw')).toBe(401);
    } finally {
      await n.dispose();
    }
  });
});
