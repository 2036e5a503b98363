import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN, append, basic, EVENTS_JSON, http, newEvent, OPS, startTestNode, type TestNode } from './support/node.js';

// End-to-end access control over real HTTP: stream ACLs from metadata $acl ($r $w $d $mr $mw),
// the $settings defaults ($userStreamAcl / $systemStreamAcl), $-streams admin-only, admins
// bypassing ACLs, and authentication failures. Every refusal is 401 with WWW-Authenticate.
// "ops" (group $ops) is the ordinary, non-admin user. (http-wire.md §4.2, §5.1–§5.4)

const ATOM_JSON = 'application/vnd.eventstore.atom+json';

let counter = 0;
function unique(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${++counter}`;
}

const enc = encodeURIComponent;

function expectDenied(res: Response): void {
  expect(res.status).toBe(401);
  expect(res.headers.get('www-authenticate') ?? '', 'WWW-Authenticate').not.toBe('');
}

/** The five operations an ACL governs, as HTTP calls made by `auth` ('' = anonymous). */
function operations(t: TestNode) {
  return {
    r: (s: string, auth: string) => http(t, `/streams/${enc(s)}`, { authorization: auth, headers: { Accept: ATOM_JSON } }),
    w: (s: string, auth: string) => http(t, `/streams/${enc(s)}`, {
      authorization: auth, method: 'POST', headers: { 'Content-Type': EVENTS_JSON },
      body: JSON.stringify([newEvent('Written', { by: auth })]),
    }),
    d: (s: string, auth: string) => http(t, `/streams/${enc(s)}`, { authorization: auth, method: 'DELETE' }),
    mr: (s: string, auth: string) => http(t, `/streams/${enc(s)}/metadata`, { authorization: auth, headers: { Accept: 'application/json' } }),
    mw: (s: string, auth: string, doc: unknown = { touched: true }) => http(t, `/streams/${enc(s)}/metadata`, {
      authorization: auth, method: 'POST', headers: { 'Content-Type': EVENTS_JSON },
      body: JSON.stringify([newEvent('$metadata', doc)]),
    }),
  };
}

type Op = 'r' | 'w' | 'd' | 'mr' | 'mw';
const SUCCESS: Record<Op, number> = { r: 200, w: 201, d: 204, mr: 200, mw: 201 };

/** Appends events (array form) as `auth`; the support `append` always runs as admin. */
function appendAs(t: TestNode, stream: string, events: unknown[], auth: string): Promise<Response> {
  return http(t, `/streams/${enc(stream)}`, {
    authorization: auth, method: 'POST', headers: { 'Content-Type': EVENTS_JSON }, body: JSON.stringify(events),
  });
}

async function setMetadata(t: TestNode, stream: string, doc: unknown): Promise<void> {
  const res = await operations(t).mw(stream, ADMIN, doc);
  expect(res.status, `metadata of ${stream}`).toBe(201);
}

async function createStream(t: TestNode, stream: string, acl?: Record<string, unknown>): Promise<void> {
  const res = await append(t, stream, [newEvent('Created', { n: 0 })]);
  expect(res.status, `create ${stream}`).toBe(201);
  if (acl) await setMetadata(t, stream, { $acl: acl });
}

async function eventCount(t: TestNode, stream: string): Promise<number> {
  const res = await http(t, `/streams/${enc(stream)}`, { headers: { Accept: ATOM_JSON } });
  expect(res.status).toBe(200);
  return (await res.json()).entries.length;
}

async function metadataOf(t: TestNode, stream: string): Promise<any> {
  const res = await operations(t).mr(stream, ADMIN);
  expect(res.status).toBe(200);
  return res.json();
}

describe('stream ACLs', () => {
  let t: TestNode;
  let op: ReturnType<typeof operations>;
  beforeAll(async () => {
    t = await startTestNode();
    op = operations(t);
  });
  afterAll(async () => { await t?.dispose(); });

  /** What must hold after a refused attempt: nothing changed. */
  async function unchanged(which: Op, s: string, acl: Record<string, unknown>): Promise<void> {
    if (which === 'w') expect(await eventCount(t, s)).toBe(1);
    if (which === 'd') expect((await op.r(s, ADMIN)).status).toBe(200);
    if (which === 'mw') expect(await metadataOf(t, s)).toEqual({ $acl: acl });
  }

  describe.each(['r', 'w', 'd', 'mr', 'mw'] as const)('$%s', (which) => {
    const key = `$${which}`;

    it.each([
      ['the group $ops as a string', '$ops'],
      ['the group $ops in an array', ['someone-else', '$ops']],
      ['the user name ops', ['ops']],
      ['$all', '$all'],
    ])(`granted to %s: ops may`, async (_name, roles) => {
      const s = unique(`allow-${which}`);
      await createStream(t, s, { [key]: roles });
      expect((await op[which](s, OPS)).status).toBe(SUCCESS[which]);
    });

    it.each([
      ['$admins', '$admins'],
      ['another user', ['someone-else']],
      ['an empty role list', []],
    ])(`granted to %s only: ops gets 401 with a challenge and nothing changes`, async (_name, roles) => {
      const s = unique(`deny-${which}`);
      const acl = { [key]: roles };
      await createStream(t, s, acl);
      expectDenied(await op[which](s, OPS));
      await unchanged(which, s, acl);
    });

    it('denying it leaves the other operations open', async () => {
      const s = unique(`only-${which}`);
      await createStream(t, s, { [key]: '$admins' });
      for (const other of ['r', 'mr', 'w'] as const) {
        if (other === which) continue;
        expect((await op[other](s, OPS)).status, `${other} while ${key} is denied`).toBe(SUCCESS[other]);
      }
    });

    it('anonymous gets 401 with a challenge even when the ACL grants $all', async () => {
      const s = unique(`anon-${which}`);
      const acl = { [key]: '$all' };
      await createStream(t, s, acl);
      expectDenied(await op[which](s, ''));
      await unchanged(which, s, acl);
    });
  });

  it('without $acl ops may do everything on a user stream', async () => {
    const s = unique('open');
    await createStream(t, s);
    expect((await op.r(s, OPS)).status).toBe(200);
    expect((await op.w(s, OPS)).status).toBe(201);
    expect((await op.mr(s, OPS)).status).toBe(200);
    expect((await op.mw(s, OPS)).status).toBe(201);
    expect((await op.d(s, OPS)).status).toBe(204);
  });

  it('a read ACL guards single events and pages as well as the head', async () => {
    const s = unique('deny-pages');
    await createStream(t, s, { $r: '$admins' });
    for (const path of [`/streams/${s}/0`, `/streams/${s}/head`, `/streams/${s}/0/forward/20`, `/streams/${s}/head/backward/20`]) {
      expectDenied(await http(t, path, { authorization: OPS, headers: { Accept: ATOM_JSON } }));
      expect((await http(t, path, { headers: { Accept: ATOM_JSON } })).status, `admin ${path}`).toBe(200);
    }
  });

  it('the metastream $$s itself is guarded by $mr and $mw', async () => {
    const closed = unique('meta-closed');
    await createStream(t, closed, { $mr: '$admins', $mw: '$admins' });
    expectDenied(await http(t, `/streams/%24%24${closed}`, { authorization: OPS, headers: { Accept: ATOM_JSON } }));
    expectDenied(await appendAs(t, `$$${closed}`, [newEvent('$metadata', { sneaky: true })], OPS));
    expect(await metadataOf(t, closed)).toEqual({ $acl: { $mr: '$admins', $mw: '$admins' } });

    const open = unique('meta-open');
    await createStream(t, open, { $mr: '$ops', $mw: '$ops' });
    expect((await http(t, `/streams/%24%24${open}`, { authorization: OPS, headers: { Accept: ATOM_JSON } })).status).toBe(200);
    const doc = { $acl: { $mr: '$ops', $mw: '$ops' }, direct: true };
    expect((await appendAs(t, `$$${open}`, [newEvent('$metadata', doc)], OPS)).status).toBe(201);
    expect(await metadataOf(t, open)).toEqual(doc);
  });

  it('$admins bypass every stream ACL', async () => {
    const s = unique('admins');
    const nobody = ['nobody'];
    const acl = { $r: nobody, $w: nobody, $d: nobody, $mr: nobody, $mw: nobody };
    await createStream(t, s, acl);
    for (const which of ['r', 'w', 'mr'] as const) expectDenied(await op[which](s, OPS));
    expect((await op.r(s, ADMIN)).status).toBe(200);
    expect((await op.w(s, ADMIN)).status).toBe(201);
    expect((await op.mr(s, ADMIN)).status).toBe(200);
    expect((await op.mw(s, ADMIN, { $acl: acl, more: 1 })).status).toBe(201);
    expect((await op.d(s, ADMIN)).status).toBe(204);
    expect((await op.r(s, ADMIN)).status).toBe(404);
  });

  describe('$-streams', () => {
    it('are admin-only by default', async () => {
      const s = unique('$system');
      await createStream(t, s);
      expect((await op.r(s, ADMIN)).status).toBe(200);
      for (const which of ['r', 'w', 'mr', 'mw', 'd'] as const) {
        expectDenied(await op[which](s, OPS));
      }
      expect(await eventCount(t, s)).toBe(1);
      expect(await metadataOf(t, s)).toEqual({});
      expect((await op.r(s, ADMIN)).status).toBe(200);
    });

    it('their own $acl can open them', async () => {
      const s = unique('$opened');
      await createStream(t, s, { $r: '$ops' });
      expect((await op.r(s, OPS)).status).toBe(200);
      expectDenied(await op.w(s, OPS));
    });

    it('$settings is admin-only', async () => {
      const snapshot = async () => {
        const res = await http(t, '/streams/%24settings', { headers: { Accept: ATOM_JSON } });
        return res.status === 200 ? (await res.json()).entries.map((e: any) => e.title) : res.status;
      };
      const before = await snapshot();
      expectDenied(await http(t, '/streams/%24settings', { authorization: OPS, headers: { Accept: ATOM_JSON } }));
      expectDenied(await appendAs(t, '$settings', [newEvent('update', { $userStreamAcl: { $r: '$all' } })], OPS));
      expect(await snapshot()).toEqual(before);
    });
  });

  describe('authentication', () => {
    it('a bad password gets 401 with WWW-Authenticate, on an open stream too', async () => {
      const s = unique('badpass');
      await createStream(t, s);
      expectDenied(await op.r(s, basic('ops', 'wrong')));
      expectDenied(await op.r(s, basic('admin', 'wrong')));
      expectDenied(await op.w(s, basic('admin', 'nope')));
      expect(await eventCount(t, s)).toBe(1);
    });

    it('an unknown user gets 401 with WWW-Authenticate', async () => {
      const s = unique('unknown');
      await createStream(t, s);
      expectDenied(await op.r(s, basic('mallory', 'changeit')));
    });

    it('anonymous (no credentials) gets 401 with WWW-Authenticate for every stream operation', async () => {
      const s = unique('anonymous');
      await createStream(t, s);
      for (const which of ['r', 'w', 'mr', 'mw', 'd'] as const) {
        expectDenied(await op[which](s, ''));
      }
      expectDenied(await http(t, `/streams/${s}/0`, { authorization: '', headers: { Accept: ATOM_JSON } }));
      expect(await eventCount(t, s)).toBe(1);
      expect(await metadataOf(t, s)).toEqual({});
    });

    it('anonymous reading a missing stream is 401, not 404', async () => {
      expectDenied(await op.r(unique('nothing'), ''));
    });
  });
});

describe('$settings defaults', () => {
  let t: TestNode;
  let op: ReturnType<typeof operations>;
  let before: string;
  beforeAll(async () => {
    t = await startTestNode();
    op = operations(t);
    before = unique('before-settings');
    await createStream(t, before);
  });
  afterAll(async () => { await t?.dispose(); });

  async function writeSettings(doc: unknown): Promise<void> {
    const res = await append(t, '$settings', [newEvent('update-default-acl', doc)]);
    expect(res.status).toBe(201);
  }

  it('before any settings a user stream is open to ops', async () => {
    expect((await op.r(before, OPS)).status).toBe(200);
  });

  it('$userStreamAcl becomes the default of every user stream without its own $acl', async () => {
    const admins = '$admins';
    await writeSettings({
      $userStreamAcl: { $r: admins, $w: admins, $d: admins, $mr: admins, $mw: admins },
      $systemStreamAcl: { $r: ['$admins', '$ops'], $w: admins, $d: admins, $mr: admins, $mw: admins },
    });
    for (const which of ['r', 'w', 'mr', 'mw', 'd'] as const) {
      expectDenied(await op[which](before, OPS));
    }
    expect(await eventCount(t, before)).toBe(1);
    expect((await op.r(before, ADMIN)).status).toBe(200);
  });

  it('applies to streams created afterwards', async () => {
    const s = unique('after-settings');
    await createStream(t, s);
    expectDenied(await op.r(s, OPS));
    expectDenied(await op.w(s, OPS));
  });

  it("a stream's own $acl wins over the default, per operation", async () => {
    const s = unique('own-acl');
    await createStream(t, s, { $r: '$ops', $w: ['ops'] });
    expect((await op.r(s, OPS)).status).toBe(200);
    expect((await op.w(s, OPS)).status).toBe(201);
    expectDenied(await op.d(s, OPS)); // $d not in its $acl: the $settings default applies
    expectDenied(await op.mr(s, OPS));
  });

  it('$systemStreamAcl is the default of $-streams', async () => {
    const s = unique('$sys');
    await createStream(t, s);
    expect((await op.r(s, OPS)).status).toBe(200);
    expectDenied(await op.w(s, OPS));
  });

  it('the latest $settings event is the one in force', async () => {
    await writeSettings({ $userStreamAcl: { $r: '$ops' } });
    expect((await op.r(before, OPS)).status).toBe(200);
    // Operations the new default leaves out fall back to the built-in default (everyone).
    expect((await op.w(before, OPS)).status).toBe(201);
    const sys = unique('$sys-later');
    await createStream(t, sys);
    expectDenied(await op.r(sys, OPS)); // no $systemStreamAcl any more: admins only
  });
});
