import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { constants } from 'node:http2';
import { ADMIN, basic, EVENTS_JSON, eventually, http, newEvent, OPS, startTestNode, uniq, type TestNode } from './support/node.js';
import { call, frame, openSession, startCall, STREAMS, streamId } from './support/grpc.js';
import { methodOf } from '../src/api/grpc/codecs.js';
import { GrpcStatus } from '../src/api/grpc/status.js';
import type { Config } from '../src/config/index.js';

// Who may do what (issue 14), generated from the node's route table: every route the API
// registers must have cases here (a new route without one fails the first test), and every case
// runs as six principals: no credentials, a wrong password, a disabled user, an ordinary user in no
// group, ops ($ops) and admin ($admins). Stream routes, subscription feeds and read-events run once
// per kind of stream ACL. Bad credentials are 401 everywhere, every refusal is 401 (never 403),
// and a refused call that could write leaves the log as it was ($all's head, read as admin).
// Statuses: the seed where it names them, http-wire.md §5.3 for the roles it leaves open.
//
// The gRPC door (issue 32) is held to the same table: every method the node serves (its server
// features) has cases, each naming the HTTP route whose rights it shares (the route's cases, read
// as gRPC answers: accepted is OK, 401 is PERMISSION_DENIED, 404 NOT_FOUND; bad credentials are
// UNAUTHENTICATED) or, for the few without one, its own statuses. The node treats a call without
// credentials as anonymous (--insecure-grpc-user anonymous), as a TLS node does.

type Who = 'anonymous' | 'wrong password' | 'disabled user' | 'user' | 'ops' | 'admin';
const PRINCIPALS: readonly Who[] = ['anonymous', 'wrong password', 'disabled user', 'user', 'ops', 'admin'];
/** What the four principals with valid (or no) credentials get; bad credentials always get 401. */
type Statuses = Record<'anonymous' | 'user' | 'ops' | 'admin', number>;

const everyone = (s: number): Statuses => ({ anonymous: s, user: s, ops: s, admin: s });
const authenticated = (s: number): Statuses => ({ anonymous: 401, user: s, ops: s, admin: s });
const opsOrAdmin = (s: number): Statuses => ({ anonymous: 401, user: 401, ops: s, admin: s });
const adminOnly = (s: number): Statuses => ({ anonymous: 401, user: 401, ops: 401, admin: s });
const userAndAdmin = (s: number): Statuses => ({ anonymous: 401, user: s, ops: 401, admin: s });
const nobody: Statuses = everyone(401);

interface Call {
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: string;
}

/** The cases of an HTTP route (`C`: its request), or of a gRPC method (`C`: a GrpcCall, `expect` read from its HTTP route). */
interface Case<C = Call> {
  name: string;
  expect: Statuses;
  /** The request `who` sends (it may first create, as admin, the fresh thing it acts on). */
  call: (who: Who) => Promise<C> | C;
  /** After an accepted call: waits for the work it started to finish, so later checks see a quiet log. */
  settle?: (call: C) => Promise<void>;
  /** Accepted calls go to a node of their own (the call stops the node). */
  ownNode?: boolean;
}

const enc = encodeURIComponent;
const ATOM_JSON = 'application/vnd.eventstore.atom+json';
const COMPETING_JSON = 'application/vnd.eventstore.competingatom+json';
const JSON_TYPE = 'application/json';
const QUIET_QUERY = (stream: string) => `fromStream('${stream}').when({ $any: function (s, e) { return s; } })`;

let t: TestNode;
/** Where the accepted backups go (each replaces the last). */
const backupDir = join(tmpdir(), `svc-auth-matrix-backup-${randomUUID()}`);
const USER = uniq('reader');
const USER_PASSWORD = 'reader-pw';
const DISABLED = uniq('gone');
/** An account no principal of the matrix is. */
const OTHER = uniq('other');
const PASSWORD = { user: USER_PASSWORD, ops: 'changeit', admin: 'changeit' };

function authorization(who: Who): string {
  switch (who) {
    case 'anonymous': return '';
    case 'wrong password': return basic(USER, 'not-the-password');
    case 'disabled user': return basic(DISABLED, 'gone-pw');
    case 'user': return basic(USER, USER_PASSWORD);
    case 'ops': return OPS;
    case 'admin': return ADMIN;
  }
}

function loginOf(who: Who): string {
  return who === 'ops' || who === 'admin' ? who : who === 'disabled user' ? DISABLED : USER;
}

function send(node: TestNode, who: Who, c: Call): Promise<Response> {
  return http(node, c.path, { method: c.method, authorization: authorization(who), headers: c.headers, body: c.body });
}

async function asAdmin(c: Call, expected: number): Promise<Response> {
  const res = await send(t, 'admin', c);
  expect(res.status, `setup ${c.method} ${c.path}: ${await res.clone().text()}`).toBe(expected);
  return res;
}

const jsonPost = (path: string, doc: unknown, method = 'POST'): Call =>
  ({ method, path, headers: { 'Content-Type': JSON_TYPE }, body: JSON.stringify(doc) });
const appendCall = (stream: string, events: unknown[]): Call =>
  ({ method: 'POST', path: `/streams/${enc(stream)}`, headers: { 'Content-Type': EVENTS_JSON }, body: JSON.stringify(events) });

/** The log's head position, read from $all as admin. */
async function allHead(): Promise<string> {
  const res = await http(t, '/streams/%24all/head/backward/1', { headers: { Accept: ATOM_JSON } });
  expect(res.status).toBe(200);
  const feed = await res.json();
  return feed.links.find((l: { relation: string }) => l.relation === 'previous').uri;
}

// ---- Fixtures: streams by ACL kind, users, projections, subscription groups. ----

type AclKind = 'open' | 'admins only' | 'granted to the user' | 'system stream';
const ACL_KINDS: readonly AclKind[] = ['open', 'admins only', 'granted to the user', 'system stream'];
const ACL_STATUSES: Record<AclKind, (s: number) => Statuses> = {
  open: authenticated, 'admins only': adminOnly, 'granted to the user': userAndAdmin, 'system stream': adminOnly,
};

function metadataOf(kind: AclKind): Record<string, unknown> {
  const roles = kind === 'admins only' ? '$admins' : kind === 'granted to the user' ? [USER] : undefined;
  return roles ? { $acl: { $r: roles, $w: roles, $d: roles, $mr: roles, $mw: roles } } : { note: kind };
}

/** A new stream of that kind with one event and one metadata event. */
async function newStream(kind: AclKind): Promise<string> {
  const stream = uniq(kind === 'system stream' ? '$matrix' : 'matrix');
  await asAdmin(appendCall(stream, [newEvent('Created')]), 201);
  await asAdmin(appendCall(`$$${stream}`, [newEvent('$metadata', metadataOf(kind))]), 201);
  return stream;
}

/** The shared stream of each kind, and a subscription group on an event-less stream of each kind. */
const streams = {} as Record<AclKind, string>;
const groups = {} as Record<AclKind, { stream: string; group: string }>;
let continuous: string;
let transient: string;

async function newUser(): Promise<string> {
  const login = uniq('spare');
  await asAdmin(jsonPost('/users/', { loginName: login, password: 'spare-pw', groups: [] }), 201);
  return login;
}

async function newProjection(mode: 'continuous' | 'transient'): Promise<string> {
  const name = uniq(`matrix-${mode}`);
  await asAdmin({ method: 'POST', path: `/projections/${mode}?name=${name}&enabled=no`, headers: { 'Content-Type': JSON_TYPE }, body: QUIET_QUERY(uniq('none')) }, 201);
  return name;
}

async function newGroup(stream: string): Promise<string> {
  const group = uniq('g');
  await asAdmin({ method: 'PUT', path: `/subscriptions/${enc(stream)}/${group}` }, 200);
  return group;
}

async function setUp(): Promise<void> {
  await asAdmin(jsonPost('/users/', { loginName: USER, password: USER_PASSWORD, groups: [] }), 201);
  await asAdmin(jsonPost('/users/', { loginName: DISABLED, password: 'gone-pw', groups: [] }), 201);
  await asAdmin({ method: 'POST', path: `/users/${DISABLED}/command/disable` }, 200);
  await asAdmin(jsonPost('/users/', { loginName: OTHER, password: 'other-pw', groups: [] }), 201);
  for (const kind of ACL_KINDS) {
    streams[kind] = await newStream(kind);
    const stream = uniq(kind === 'system stream' ? '$sub' : 'sub');
    await asAdmin(appendCall(`$$${stream}`, [newEvent('$metadata', metadataOf(kind))]), 201);
    groups[kind] = { stream, group: await newGroup(stream) };
  }
  continuous = await newProjection('continuous');
  transient = await newProjection('transient');
}

// ---- The cases, by route. ----

/** One case per ACL kind, `path` built from that kind's shared stream (or a fresh one with `fresh`). */
function byAcl(success: number, call: (stream: string, kind: AclKind) => Call, fresh = false): Case[] {
  return ACL_KINDS.map((kind) => ({
    name: `${kind} stream`,
    expect: ACL_STATUSES[kind](success),
    call: async () => call(fresh ? await newStream(kind) : streams[kind], kind),
  }));
}

/** The same on subscription groups, whose stream carries the ACL. */
function byGroupAcl(success: number, call: (base: string) => Call): Case[] {
  return ACL_KINDS.map((kind) => ({
    name: `group on a ${kind} stream`,
    expect: ACL_STATUSES[kind](success),
    call: () => call(`/subscriptions/${enc(groups[kind].stream)}/${groups[kind].group}`),
  }));
}

const one = (name: string, expected: Statuses, call: Case['call'], more: Partial<Case> = {}): Case[] =>
  [{ name, expect: expected, call, ...more }];
const get = (path: string, accept = JSON_TYPE): Call => ({ method: 'GET', path, headers: { Accept: accept } });
const feed = (path: string) => get(path, ATOM_JSON);
const messageId = () => randomUUID();

/** Waits until a scavenge started by the call has finished (it writes its history meanwhile). */
async function scavengeFinished(): Promise<void> {
  await eventually(async () => {
    const res = await http(t, '/admin/scavenge/current');
    expect((await res.json()).scavengeId).toBe('');
  }, 20_000);
}

/** Disables (as admin) a projection a call enabled, so it writes nothing more. */
async function disableAgain(call: Call): Promise<void> {
  const base = call.path.replace(/\/command\/enable.*$/, '');
  await asAdmin({ method: 'POST', path: `${base}/command/disable` }, 200);
  await eventually(async () => expect((await (await http(t, base)).json()).status).toMatch(/^(Stopped|Completed)/));
}

function projectionCommand(command: string): Case[] {
  const settle = command === 'enable' ? disableAgain : undefined;
  return [
    { name: 'continuous projection', expect: opsOrAdmin(200), settle,
      call: async () => ({ method: 'POST', path: `/projection/${await newProjection('continuous')}/command/${command}` }) },
    { name: 'transient projection', expect: authenticated(200), settle,
      call: async () => ({ method: 'POST', path: `/projection/${await newProjection('transient')}/command/${command}` }) },
  ];
}

const MATRIX: Record<string, Case[]> = {
  'OPTIONS *': one('any path', everyone(200), () => ({ method: 'OPTIONS', path: `/streams/${streams.open}` })),

  // Streams (seed: Streams; http-wire §3, §4.2).
  'POST /streams/:stream': [
    ...byAcl(201, (s) => appendCall(s, [newEvent('Appended')])),
    ...one('$all', nobody, () => appendCall('$all', [newEvent('Appended')])),
  ],
  'POST /streams/:stream/incoming/:guid': byAcl(200, (s) => ({
    method: 'POST', path: `/streams/${enc(s)}/incoming/${randomUUID()}`,
    headers: { 'Content-Type': JSON_TYPE, 'ES-EventType': 'Appended' }, body: '{"by":"incoming"}',
  })),
  'POST /streams/:stream/metadata': byAcl(201, (s, kind) => ({
    method: 'POST', path: `/streams/${enc(s)}/metadata`, headers: { 'Content-Type': EVENTS_JSON },
    body: JSON.stringify([newEvent('$metadata', { ...metadataOf(kind), touched: true })]),
  })),
  'DELETE /streams/:stream': [
    ...byAcl(204, (s) => ({ method: 'DELETE', path: `/streams/${enc(s)}` }), true),
    ...one('$all', nobody, () => ({ method: 'DELETE', path: '/streams/%24all' })),
  ],
  'GET /streams/:stream/': one('trailing slash', everyone(307), () => get(`/streams/${streams.open}/`)),
  'POST /streams/:stream/': one('trailing slash', everyone(307), () => ({ ...appendCall(streams.open, [newEvent('Appended')]), path: `/streams/${streams.open}/` })),
  'DELETE /streams/:stream/': one('trailing slash', everyone(307), () => ({ method: 'DELETE', path: `/streams/${streams.open}/` })),
  'GET /streams/:stream/metadata/': one('trailing slash', everyone(307), () => get(`/streams/${streams.open}/metadata/`)),
  'POST /streams/:stream/metadata/': one('trailing slash', everyone(307), () => ({
    method: 'POST', path: `/streams/${streams.open}/metadata/`, headers: { 'Content-Type': EVENTS_JSON },
    body: JSON.stringify([newEvent('$metadata', { note: 'redirected' })]),
  })),
  'GET /streams/:stream': [
    ...byAcl(200, (s) => feed(`/streams/${enc(s)}`)),
    ...one('$all', adminOnly(200), () => feed('/streams/%24all')),
  ],
  'GET /streams/:stream/metadata': byAcl(200, (s) => get(`/streams/${enc(s)}/metadata`)),
  // Metastreams keep their latest event only: the cases above have written more than one.
  'GET /streams/:stream/metadata/:event': byAcl(200, (s) => get(`/streams/${enc(s)}/metadata/head`)),
  'GET /streams/:stream/:event': [
    ...byAcl(200, (s) => feed(`/streams/${enc(s)}/0`)),
    // $all has no single events: 404 before any check (http-wire §3.11 gives no status for it).
    ...one('$all', everyone(404), () => feed('/streams/%24all/0')),
  ],
  'GET /streams/:stream/:event/:count': [
    ...byAcl(200, (s) => feed(`/streams/${enc(s)}/0/20`)),
    ...one('$all', adminOnly(200), () => feed('/streams/%24all/head/20')),
  ],
  'GET /streams/:stream/:event/backward/:count': [
    ...byAcl(200, (s) => feed(`/streams/${enc(s)}/head/backward/20`)),
    ...one('$all', adminOnly(200), () => feed('/streams/%24all/head/backward/20')),
  ],
  'GET /streams/:stream/:event/forward/:count': [
    ...byAcl(200, (s) => feed(`/streams/${enc(s)}/0/forward/20`)),
    ...one('$all', adminOnly(200), () => feed(`/streams/%24all/${'0'.repeat(32)}/forward/20`)),
  ],

  // Users (seed: Users, Authentication 7; http-wire §5.3, §5.5).
  'GET /users': one('list', adminOnly(200), () => get('/users')),
  'GET /users/': one('list', adminOnly(200), () => get('/users/')),
  'POST /users': one('create', adminOnly(201), () => jsonPost('/users', { loginName: uniq('new'), password: 'pw', groups: [] })),
  'POST /users/': one('create', adminOnly(201), () => jsonPost('/users/', { loginName: uniq('new'), password: 'pw', groups: [] })),
  'GET /users/:login': [
    ...one('another account', adminOnly(200), () => get(`/users/${OTHER}`)),
    ...one('own account', authenticated(200), (who) => get(`/users/${loginOf(who)}`)),
    ...one('$current', authenticated(200), () => get('/users/%24current')),
  ],
  'PUT /users/:login': one('another account', adminOnly(200), async () => jsonPost(`/users/${await newUser()}`, { fullName: 'Renamed' }, 'PUT')),
  'DELETE /users/:login': one('another account', adminOnly(204), async () => ({ method: 'DELETE', path: `/users/${await newUser()}` })),
  'PUT /users/:login/command/enable': one('another account', adminOnly(200), async () => ({ method: 'PUT', path: `/users/${await newUser()}/command/enable` })),
  'POST /users/:login/command/enable': one('another account', adminOnly(200), async () => ({ method: 'POST', path: `/users/${await newUser()}/command/enable` })),
  'PUT /users/:login/command/disable': one('another account', adminOnly(200), async () => ({ method: 'PUT', path: `/users/${await newUser()}/command/disable` })),
  'POST /users/:login/command/disable': one('another account', adminOnly(200), async () => ({ method: 'POST', path: `/users/${await newUser()}/command/disable` })),
  'POST /users/:login/command/reset-password': one('another account', adminOnly(200), async () =>
    jsonPost(`/users/${await newUser()}/command/reset-password`, { newPassword: 'reset-pw' })),
  'POST /users/:login/command/change-password': [
    // Changed to the same password, so the principal's credentials stay valid for the next cases.
    ...one('own account', authenticated(200), (who) => jsonPost(`/users/${loginOf(who)}/command/change-password`,
      { currentPassword: PASSWORD[who as keyof typeof PASSWORD] ?? 'unknown', newPassword: PASSWORD[who as keyof typeof PASSWORD] ?? 'unknown' })),
    ...one('another account', nobody, async () => jsonPost(`/users/${await newUser()}/command/change-password`,
      { currentPassword: 'spare-pw', newPassword: 'taken-over' })),
  ],

  // Node (seed: Admin and node; http-wire §5.3, §6).
  'GET /info': one('info', everyone(200), () => get('/info')),
  'GET /info/options': one('options', opsOrAdmin(200), () => get('/info/options')),
  'GET /ping': one('ping', everyone(200), () => get('/ping')),
  'GET /stats': one('stats', authenticated(200), () => get('/stats')),
  'GET /stats/*': one('a subtree', authenticated(200), () => get('/stats/proc')),
  'GET /metrics': one('metrics', authenticated(200), () => get('/metrics', 'text/plain')),
  'GET /gossip': one('gossip', everyone(200), () => get('/gossip')),
  // Gossip comes only from the node's own kind ($ops/$admins here); a single node then refuses it
  // as a node that takes gossip from no one (403), not as an authorization refusal.
  'POST /gossip': one('gossip', opsOrAdmin(403), () => jsonPost('/gossip', { members: [] })),
  'POST /admin/shutdown': one('shutdown', opsOrAdmin(200), () => ({ method: 'POST', path: '/admin/shutdown' }), { ownNode: true }),
  'POST /admin/reloadconfig': one('reload', opsOrAdmin(200), () => ({ method: 'POST', path: '/admin/reloadconfig' })),
  'POST /admin/node/resign': one('resign', opsOrAdmin(200), () => ({ method: 'POST', path: '/admin/node/resign' })),
  // 0, the priority the node has, so that an accepted call changes nothing the other cases see.
  'POST /admin/node/priority/:priority': one('set', opsOrAdmin(200), () => ({ method: 'POST', path: '/admin/node/priority/0' })),

  // The Admin UI (issue 16): its files are public, the data it shows comes through the routes above.
  'GET /': one('root', everyone(302), () => get('/', 'text/html')),
  'GET /web': one('console', everyone(302), () => get('/web', 'text/html')),
  'GET /web/*': one('console page', everyone(200), () => get('/web/', 'text/html')),
  'GET /favicon.ico': one('icon', everyone(200), () => get('/favicon.ico', 'image/x-icon')),

  // Scavenge (seed: Authentication 4).
  'POST /admin/scavenge': one('start', opsOrAdmin(200), () => jsonPost('/admin/scavenge', {}), { settle: scavengeFinished }),
  'GET /admin/scavenge/current': one('current', opsOrAdmin(200), () => get('/admin/scavenge/current')),
  'GET /admin/scavenge/last': one('last', opsOrAdmin(200), () => get('/admin/scavenge/last')),
  'GET /admin/scavenge/history': one('history', opsOrAdmin(200), () => get('/admin/scavenge/history')),
  'DELETE /admin/scavenge/:scavengeId': one('none running', opsOrAdmin(404), () => ({ method: 'DELETE', path: `/admin/scavenge/${randomUUID()}` })),
  'POST /admin/mergeindexes': one('merge', opsOrAdmin(200), () => jsonPost('/admin/mergeindexes', {})),
  // Backup (docs/operations.md): as the scavenge routes.
  'POST /admin/backup': one('backup', opsOrAdmin(200), () => jsonPost('/admin/backup', { to: backupDir })),

  // Auto-scavenge (seed: Authentication 2, 3). The matrix node runs without a license: past the
  // role check, every route but /enabled answers 503 (test/auto-scavenge.e2e.spec.ts covers it on).
  'GET /auto-scavenge/enabled': one('enabled', authenticated(200), () => get('/auto-scavenge/enabled')),
  'GET /auto-scavenge/status': one('status', authenticated(503), () => get('/auto-scavenge/status')),
  'POST /auto-scavenge/configure': one('configure', opsOrAdmin(503), () => jsonPost('/auto-scavenge/configure', { schedule: '0 3 * * *' })),
  'POST /auto-scavenge/pause': one('pause', opsOrAdmin(503), () => ({ method: 'POST', path: '/auto-scavenge/pause' })),
  'POST /auto-scavenge/resume': one('resume', opsOrAdmin(503), () => ({ method: 'POST', path: '/auto-scavenge/resume' })),

  // Projections (http-wire §8: non-transient writes need $ops or $admins).
  'GET /projections/any': one('list', authenticated(200), () => get('/projections/any')),
  'GET /projections/all-non-transient': one('list', authenticated(200), () => get('/projections/all-non-transient')),
  'GET /projections/continuous': one('list', authenticated(200), () => get('/projections/continuous')),
  'GET /projections/onetime': one('list', authenticated(200), () => get('/projections/onetime')),
  'GET /projections/transient': one('list', authenticated(200), () => get('/projections/transient')),
  'POST /projections/continuous': one('create', opsOrAdmin(201), () => ({
    method: 'POST', path: `/projections/continuous?name=${uniq('c')}&enabled=no`, headers: { 'Content-Type': JSON_TYPE }, body: QUIET_QUERY('nothing'),
  })),
  'POST /projections/onetime': one('create', opsOrAdmin(201), () => ({
    method: 'POST', path: `/projections/onetime?name=${uniq('o')}&enabled=no`, headers: { 'Content-Type': JSON_TYPE }, body: QUIET_QUERY('nothing'),
  })),
  'POST /projections/transient': one('create', authenticated(201), () => ({
    method: 'POST', path: `/projections/transient?name=${uniq('t')}&enabled=no`, headers: { 'Content-Type': JSON_TYPE }, body: QUIET_QUERY('nothing'),
  })),
  'POST /projections/read-events': byAcl(200, (s) => jsonPost('/projections/read-events', { query: { streams: [s] }, maxEvents: 1 })),
  // Debugging reads the query's source as the caller: the rights of a read of its stream.
  'POST /projections/debug': byAcl(200, (s) => jsonPost('/projections/debug', { query: QUIET_QUERY(s), events: { first: 1 } })),
  'GET /projection/:name': one('continuous', authenticated(200), () => get(`/projection/${continuous}`)),
  'GET /projection/:name/statistics': one('continuous', authenticated(200), () => get(`/projection/${continuous}/statistics`)),
  'GET /projection/:name/state': one('continuous', authenticated(200), () => get(`/projection/${continuous}/state`)),
  'GET /projection/:name/result': one('continuous', authenticated(200), () => get(`/projection/${continuous}/result`)),
  'GET /projection/:name/query': one('continuous', authenticated(200), () => get(`/projection/${continuous}/query?config=yes`)),
  'PUT /projection/:name/query': [
    ...one('continuous', opsOrAdmin(200), () => ({ method: 'PUT', path: `/projection/${continuous}/query`, headers: { 'Content-Type': JSON_TYPE }, body: QUIET_QUERY('other') })),
    ...one('transient', authenticated(200), () => ({ method: 'PUT', path: `/projection/${transient}/query`, headers: { 'Content-Type': JSON_TYPE }, body: QUIET_QUERY('other') })),
  ],
  'GET /projection/:name/config': one('continuous', opsOrAdmin(200), () => get(`/projection/${continuous}/config`)),
  'PUT /projection/:name/config': one('continuous', opsOrAdmin(200), () => jsonPost(`/projection/${continuous}/config`, { checkpointAfterMs: 500 }, 'PUT')),
  'POST /projection/:name/command/enable': projectionCommand('enable'),
  'POST /projection/:name/command/disable': projectionCommand('disable'),
  'POST /projection/:name/command/reset': projectionCommand('reset'),
  'POST /projection/:name/command/abort': projectionCommand('abort'),
  'DELETE /projection/:name': one('continuous', opsOrAdmin(204), async () => ({ method: 'DELETE', path: `/projection/${await newProjection('continuous')}` })),

  // Persistent subscriptions (http-wire §5.3, §7; the seed's 200 for create).
  'GET /subscriptions': one('list', authenticated(200), () => get('/subscriptions')),
  'GET /subscriptions/:stream': one('a stream', authenticated(200), () => get(`/subscriptions/${groups.open.stream}`)),
  'GET /subscriptions/:stream/:group/info': one('a group', authenticated(200), () => get(`/subscriptions/${groups.open.stream}/${groups.open.group}/info`)),
  'PUT /subscriptions/:stream/:group': one('create', opsOrAdmin(200), () => jsonPost(`/subscriptions/${groups.open.stream}/${uniq('g')}`, {}, 'PUT')),
  'POST /subscriptions/:stream/:group': one('update', opsOrAdmin(200), async () =>
    jsonPost(`/subscriptions/${groups.open.stream}/${await newGroup(groups.open.stream)}`, { messageTimeoutMilliseconds: 5000 })),
  'DELETE /subscriptions/:stream/:group': one('delete', opsOrAdmin(200), async () =>
    ({ method: 'DELETE', path: `/subscriptions/${groups.open.stream}/${await newGroup(groups.open.stream)}` })),
  'GET /subscriptions/:stream/:group': byGroupAcl(200, (base) => get(base, COMPETING_JSON)),
  'GET /subscriptions/:stream/:group/:count': byGroupAcl(200, (base) => get(`${base}/5`, COMPETING_JSON)),
  'POST /subscriptions/:stream/:group/ack/:messageid': byGroupAcl(200, (base) => ({ method: 'POST', path: `${base}/ack/${messageId()}` })),
  'POST /subscriptions/:stream/:group/ack': byGroupAcl(200, (base) => ({ method: 'POST', path: `${base}/ack?ids=${messageId()},${messageId()}` })),
  'POST /subscriptions/:stream/:group/nack/:messageid': byGroupAcl(200, (base) => ({ method: 'POST', path: `${base}/nack/${messageId()}?action=park` })),
  'POST /subscriptions/:stream/:group/nack': byGroupAcl(200, (base) => ({ method: 'POST', path: `${base}/nack?ids=${messageId()}&action=retry` })),
  'POST /subscriptions/restart': one('the subsystem', opsOrAdmin(200), () => ({ method: 'POST', path: '/subscriptions/restart' })),
  'POST /subscriptions/:stream/:group/replayParked': one('a group', opsOrAdmin(200), () =>
    ({ method: 'POST', path: `/subscriptions/${groups.open.stream}/${groups.open.group}/replayParked` })),
};

// ---- The gRPC door: its methods, held to the rights of the HTTP routes above. ----

const NODE_OPTIONS = { insecureGrpcUser: 'anonymous' } as Partial<Config>;
const PROJECTIONS = 'event_store.client.projections.Projections';
const USERS = 'event_store.client.users.Users';
const OPERATIONS = 'event_store.client.operations.Operations';
const PERSISTENT = 'event_store.client.persistent_subscriptions.PersistentSubscriptions';

/** A gRPC answer as the matrix compares it: the status, or for BatchAppend the status of its in-band result. */
type GrpcCode = number;
const GRPC_OK = 0;
const PERMISSION_DENIED = 7;
const UNAUTHENTICATED = 16;

interface GrpcCall {
  service: string;
  method: string;
  request: Record<string, unknown>;
}

type GrpcCase = Case<GrpcCall>;

/** The answer an HTTP status stands for over gRPC. */
function grpcOf(status: number): GrpcCode {
  if (status < 400) return GRPC_OK;
  const codes: Record<number, GrpcCode> = { 401: PERMISSION_DENIED, 404: 5 };
  if (!(status in codes)) throw new Error(`no gRPC answer for HTTP ${status}`);
  return codes[status];
}

/** The cases of an HTTP route, each with the gRPC call that does the same (by the HTTP case's name). */
function sameAs(route: string, calls: Record<string, GrpcCase['call']>, more: Partial<GrpcCase> = {}): GrpcCase[] {
  const cases = MATRIX[route];
  if (!cases) throw new Error(`no HTTP route ${route}`);
  return Object.entries(calls).map(([name, grpcCall]) => {
    const c = cases.find((x) => x.name === name);
    if (!c) throw new Error(`${route} has no case '${name}'`);
    return { name: `as ${route} [${name}]`, expect: c.expect, call: grpcCall, ...more };
  });
}

/** One call per ACL kind, paired with the HTTP route's case for that kind. */
function sameAsByAcl(route: string, request: (stream: string) => GrpcCall, fresh = false): GrpcCase[] {
  return sameAs(route, Object.fromEntries(ACL_KINDS.map((kind) =>
    [`${kind} stream`, async () => request(fresh ? await newStream(kind) : streams[kind])])));
}

const grpc = (service: string, method: string, request: Record<string, unknown>): GrpcCall => ({ service, method, request });
const options = (service: string, method: string, o: Record<string, unknown>) => grpc(service, method, { options: o });
const proposed = () => ({ id: { string: randomUUID() }, metadata: { type: 'Appended', 'content-type': 'application/json' }, data: Buffer.from('{}') });
const loginOptions = (method: string, more: Record<string, unknown> = {}) => async () =>
  options(USERS, method, { login_name: await newUser(), ...more });
const projection = (method: string, more: Record<string, unknown> = {}) => (mode: 'continuous' | 'transient') => async () =>
  options(PROJECTIONS, method, { name: await newProjection(mode), ...more });
async function disableProjection(c: GrpcCall): Promise<void> {
  const name = (c.request.options as { name?: string; continuous?: { name: string }; transient?: { name: string } });
  const named = name.name ?? name.continuous?.name ?? name.transient?.name;
  if (named) await asAdmin({ method: 'POST', path: `/projection/${named}/command/disable` }, 200);
}

/** A group's settings as the clients send their defaults. */
const GROUP_SETTINGS = {
  message_timeout_ms: 30_000, max_retry_count: 10, checkpoint_after_ms: 2_000, min_checkpoint_count: 10, max_checkpoint_count: 1_000,
  max_subscriber_count: 0, live_buffer_size: 500, read_batch_size: 20, history_buffer_size: 500, consumer_strategy: 'RoundRobin',
};
const openGroup = () => ({ stream_identifier: streamId(groups.open.stream), group_name: groups.open.group });

const GRPC_MATRIX: Record<string, GrpcCase[]> = {
  'event_store.client.server_features.ServerFeatures/GetSupportedMethods': [
    // Asked by every client on connect, before anything else: answered whoever asks, bad credentials too (they are checked on the call that needs them).
    { name: 'features', expect: everyone(200), call: () => grpc('event_store.client.server_features.ServerFeatures', 'GetSupportedMethods', {}) },
  ],
  [`${STREAMS}/Read`]: [
    ...sameAsByAcl('GET /streams/:stream/:event/:count', (s) => options(STREAMS, 'Read', {
      stream: { stream_identifier: streamId(s), start: {} }, count: '20', uuid_option: { string: {} }, no_filter: {},
    })),
    ...sameAs('GET /streams/:stream/:event/:count', {
      $all: () => options(STREAMS, 'Read', { all: { start: {} }, count: '20', uuid_option: { string: {} }, no_filter: {} }),
    }),
  ],
  [`${STREAMS}/Append`]: sameAsByAcl('POST /streams/:stream', (s) => options(STREAMS, 'Append', { stream_identifier: streamId(s), any: {} })),
  [`${STREAMS}/BatchAppend`]: sameAsByAcl('POST /streams/:stream', (s) => grpc(STREAMS, 'BatchAppend', {
    correlation_id: { string: randomUUID() }, options: { stream_identifier: streamId(s), any: {} }, proposed_messages: [proposed()], is_final: true,
  })),
  [`${STREAMS}/Delete`]: sameAsByAcl('DELETE /streams/:stream', (s) => options(STREAMS, 'Delete', { stream_identifier: streamId(s), any: {} }), true),
  [`${STREAMS}/Tombstone`]: sameAsByAcl('DELETE /streams/:stream', (s) => options(STREAMS, 'Tombstone', { stream_identifier: streamId(s), any: {} }), true),

  [`${PROJECTIONS}/Create`]: [
    ...sameAs('POST /projections/continuous', { create: () => options(PROJECTIONS, 'Create', { continuous: { name: uniq('gc') }, query: QUIET_QUERY('nothing') }) },
      { settle: disableProjection }),
    ...sameAs('POST /projections/onetime', { create: () => options(PROJECTIONS, 'Create', { one_time: {}, query: QUIET_QUERY('nothing') }) }),
    ...sameAs('POST /projections/transient', { create: () => options(PROJECTIONS, 'Create', { transient: { name: uniq('gt') }, query: QUIET_QUERY('nothing') }) },
      { settle: disableProjection }),
  ],
  [`${PROJECTIONS}/Update`]: sameAs('PUT /projection/:name/query', {
    continuous: async () => options(PROJECTIONS, 'Update', { name: await newProjection('continuous'), query: QUIET_QUERY('other'), no_emit_options: {} }),
    transient: async () => options(PROJECTIONS, 'Update', { name: await newProjection('transient'), query: QUIET_QUERY('other'), no_emit_options: {} }),
  }),
  [`${PROJECTIONS}/Delete`]: sameAs('DELETE /projection/:name', { continuous: projection('Delete')('continuous') }),
  [`${PROJECTIONS}/Statistics`]: [
    ...sameAs('GET /projection/:name/statistics', { continuous: () => options(PROJECTIONS, 'Statistics', { name: continuous }) }),
    ...sameAs('GET /projections/any', { list: () => options(PROJECTIONS, 'Statistics', { all: {} }) }),
  ],
  [`${PROJECTIONS}/Enable`]: sameAs('POST /projection/:name/command/enable', {
    'continuous projection': projection('Enable')('continuous'), 'transient projection': projection('Enable')('transient'),
  }, { settle: disableProjection }),
  [`${PROJECTIONS}/Disable`]: [
    ...sameAs('POST /projection/:name/command/disable', {
      'continuous projection': projection('Disable', { write_checkpoint: true })('continuous'),
      'transient projection': projection('Disable', { write_checkpoint: true })('transient'),
    }),
    ...sameAs('POST /projection/:name/command/abort', {
      'continuous projection': projection('Disable', { write_checkpoint: false })('continuous'),
      'transient projection': projection('Disable', { write_checkpoint: false })('transient'),
    }),
  ],
  [`${PROJECTIONS}/Reset`]: sameAs('POST /projection/:name/command/reset', {
    'continuous projection': projection('Reset')('continuous'), 'transient projection': projection('Reset')('transient'),
  }),
  [`${PROJECTIONS}/State`]: sameAs('GET /projection/:name/state', { continuous: () => options(PROJECTIONS, 'State', { name: continuous }) }),
  [`${PROJECTIONS}/Result`]: sameAs('GET /projection/:name/result', { continuous: () => options(PROJECTIONS, 'Result', { name: continuous }) }),

  [`${USERS}/Create`]: sameAs('POST /users', { create: () => options(USERS, 'Create', { login_name: uniq('gnew'), password: 'pw' }) }),
  [`${USERS}/Update`]: sameAs('PUT /users/:login', { 'another account': loginOptions('Update', { full_name: 'Renamed' }) }),
  [`${USERS}/Delete`]: sameAs('DELETE /users/:login', { 'another account': loginOptions('Delete') }),
  [`${USERS}/Disable`]: sameAs('POST /users/:login/command/disable', { 'another account': loginOptions('Disable') }),
  [`${USERS}/Enable`]: sameAs('POST /users/:login/command/enable', { 'another account': loginOptions('Enable') }),
  [`${USERS}/ResetPassword`]: sameAs('POST /users/:login/command/reset-password', { 'another account': loginOptions('ResetPassword', { new_password: 'reset-pw' }) }),
  [`${USERS}/ChangePassword`]: sameAs('POST /users/:login/command/change-password', {
    'own account': (who) => options(USERS, 'ChangePassword', {
      login_name: loginOf(who), current_password: PASSWORD[who as keyof typeof PASSWORD] ?? 'unknown', new_password: PASSWORD[who as keyof typeof PASSWORD] ?? 'unknown',
    }),
    'another account': loginOptions('ChangePassword', { current_password: 'spare-pw', new_password: 'taken-over' }),
  }),
  [`${USERS}/Details`]: [
    ...sameAs('GET /users', { list: () => options(USERS, 'Details', {}) }),
    ...sameAs('GET /users/:login', {
      'another account': () => options(USERS, 'Details', { login_name: OTHER }),
      'own account': (who) => options(USERS, 'Details', { login_name: loginOf(who) }),
    }),
  ],

  [`${OPERATIONS}/StartScavenge`]: sameAs('POST /admin/scavenge', { start: () => options(OPERATIONS, 'StartScavenge', { thread_count: 1 }) },
    { settle: () => scavengeFinished() }),
  [`${OPERATIONS}/StopScavenge`]: sameAs('DELETE /admin/scavenge/:scavengeId', { 'none running': () => options(OPERATIONS, 'StopScavenge', { scavenge_id: randomUUID() }) }),
  [`${OPERATIONS}/MergeIndexes`]: sameAs('POST /admin/mergeindexes', { merge: () => grpc(OPERATIONS, 'MergeIndexes', {}) }),
  [`${OPERATIONS}/ResignNode`]: sameAs('POST /admin/node/resign', { resign: () => grpc(OPERATIONS, 'ResignNode', {}) }),
  [`${OPERATIONS}/SetNodePriority`]: sameAs('POST /admin/node/priority/:priority', { set: () => grpc(OPERATIONS, 'SetNodePriority', { priority: 0 }) }),
  [`${OPERATIONS}/Shutdown`]: sameAs('POST /admin/shutdown', { shutdown: () => grpc(OPERATIONS, 'Shutdown', {}) }, { ownNode: true }),
  'event_store.client.gossip.Gossip/Read': sameAs('GET /gossip', { gossip: () => grpc('event_store.client.gossip.Gossip', 'Read', {}) }),
  'event_store.client.monitoring.Monitoring/Stats': sameAs('GET /stats', { stats: () => grpc('event_store.client.monitoring.Monitoring', 'Stats', { refresh_time_period_in_ms: '1000' }) }),

  [`${PERSISTENT}/Create`]: sameAs('PUT /subscriptions/:stream/:group', {
    create: () => options(PERSISTENT, 'Create', {
      stream: { stream_identifier: streamId(groups.open.stream), start: {} }, group_name: uniq('gg'), settings: GROUP_SETTINGS,
    }),
  }),
  [`${PERSISTENT}/Update`]: sameAs('POST /subscriptions/:stream/:group', {
    update: async () => options(PERSISTENT, 'Update', {
      stream: { stream_identifier: streamId(groups.open.stream), start: {} }, group_name: await newGroup(groups.open.stream),
      settings: { ...GROUP_SETTINGS, message_timeout_ms: 5_000 },
    }),
  }),
  [`${PERSISTENT}/Delete`]: sameAs('DELETE /subscriptions/:stream/:group', {
    delete: async () => options(PERSISTENT, 'Delete', { stream_identifier: streamId(groups.open.stream), group_name: await newGroup(groups.open.stream) }),
  }),
  [`${PERSISTENT}/Read`]: sameAs('GET /subscriptions/:stream/:group/:count', Object.fromEntries(ACL_KINDS.map((kind) => [`group on a ${kind} stream`,
    () => options(PERSISTENT, 'Read', {
      stream_identifier: streamId(groups[kind].stream), group_name: groups[kind].group, buffer_size: 10, uuid_option: { string: {} },
    })]))),
  [`${PERSISTENT}/GetInfo`]: sameAs('GET /subscriptions/:stream/:group/info', { 'a group': () => options(PERSISTENT, 'GetInfo', openGroup()) }),
  [`${PERSISTENT}/List`]: [
    ...sameAs('GET /subscriptions', { list: () => options(PERSISTENT, 'List', { list_all_subscriptions: {} }) }),
    ...sameAs('GET /subscriptions/:stream', {
      'a stream': () => options(PERSISTENT, 'List', { list_for_stream: { stream: streamId(groups.open.stream) } }),
    }),
  ],
  [`${PERSISTENT}/ReplayParked`]: sameAs('POST /subscriptions/:stream/:group/replayParked', {
    'a group': () => options(PERSISTENT, 'ReplayParked', { ...openGroup(), no_limit: {} }),
  }),
  [`${PERSISTENT}/RestartSubsystem`]: sameAs('POST /subscriptions/restart', { 'the subsystem': () => grpc(PERSISTENT, 'RestartSubsystem', {}) }),
  [`${OPERATIONS}/RestartPersistentSubscriptions`]: sameAs('POST /subscriptions/restart', {
    'the subsystem': () => grpc(OPERATIONS, 'RestartPersistentSubscriptions', {}),
  }),
  // No HTTP route restarts the subsystem; it takes $ops as the projection commands do. Last: it forgets the transient projections.
  [`${PROJECTIONS}/RestartSubsystem`]: [{ name: 'restart', expect: opsOrAdmin(200), call: () => grpc(PROJECTIONS, 'RestartSubsystem', {}) }],
};

/** A call's answer: its status, or its first message's in-band status (BatchAppend); a stream still open after one message is cancelled. */
async function sendGrpc(url: string, who: Who, c: GrpcCall): Promise<{ code: GrpcCode; message: string }> {
  const auth = authorization(who);
  const codec = methodOf(c.service, c.method);
  const session = openSession(url);
  try {
    const stream = startCall(session, `/${c.service}/${c.method}`, auth ? { authorization: auth } : {});
    const bidi = c.method === 'BatchAppend';
    if (bidi) stream.write(frame(codec.requestSerialize(c.request)));
    else stream.end(frame(codec.requestSerialize(c.request)));
    return await new Promise((resolve, reject) => {
      let pending = Buffer.alloc(0);
      const statusOf = (h: Record<string, unknown>) => ({ code: Number(h['grpc-status']), message: decodeURIComponent(String(h['grpc-message'] ?? '')) });
      stream.on('response', (h) => { if (h['grpc-status'] !== undefined) resolve(statusOf(h)); });
      stream.on('trailers', (h) => resolve(statusOf(h)));
      stream.on('data', (chunk: Buffer) => {
        pending = Buffer.concat([pending, chunk]);
        if (pending.length < 5 || pending.length < 5 + pending.readUInt32BE(1)) return;
        // The first answer of an endless stream (Monitoring, a persistent subscription's confirmation) or of an open BatchAppend is its answer: the call is ended here.
        if (!bidi && !c.service.endsWith('Monitoring') && !(c.service === PERSISTENT && c.method === 'Read')) return;
        const first = codec.responseDeserialize(Buffer.from(pending.subarray(5, 5 + pending.readUInt32BE(1))));
        // The in-band status's code is a google.rpc.Code, decoded by its name.
        const inBand = first.error as { code?: keyof typeof GrpcStatus; message?: string } | undefined;
        stream.close(constants.NGHTTP2_CANCEL);
        resolve({ code: inBand?.code === undefined ? GRPC_OK : GrpcStatus[inBand.code], message: inBand?.message ?? '' });
      });
      stream.on('error', reject);
      stream.on('close', () => resolve({ code: -1, message: 'closed without a status' }));
    });
  } finally {
    session.close();
  }
}

function expectedGrpc(c: GrpcCase, who: Who): GrpcCode {
  if (who === 'wrong password' || who === 'disabled user') return c.name === 'features' ? GRPC_OK : UNAUTHENTICATED;
  return grpcOf(c.expect[who]);
}

function expectedFor(c: Case, who: Who): number {
  return who === 'wrong password' || who === 'disabled user' ? 401 : c.expect[who];
}

/** Sends an accepted shutdown (through either door: `shutDown` checks its answer) to a node of its own, and sees the node stop answering. */
async function onOwnNode(shutDown: (own: TestNode) => Promise<void>): Promise<void> {
  const own = await startTestNode(NODE_OPTIONS);
  try {
    await shutDown(own);
    await eventually(async () => { await expect(fetch(`${own.url}/ping`)).rejects.toThrow(); }, 10_000);
  } finally {
    await own.dispose();
  }
}

describe('auth matrix', () => {
  beforeAll(async () => {
    t = await startTestNode(NODE_OPTIONS);
    await setUp();
  }, 30_000);
  afterAll(async () => {
    await t?.dispose();
    rmSync(backupDir, { recursive: true, force: true });
  });

  it('has cases for every route the node registers, and for no other', () => {
    const registered = t.node.routes.map((r) => `${r.method} ${r.url}`);
    expect(registered.length).toBeGreaterThan(70);
    expect(registered.filter((key) => !(key in MATRIX)), 'routes without cases').toEqual([]);
    expect(Object.keys(MATRIX).filter((key) => !registered.includes(key)), 'cases for no route').toEqual([]);
  });

  it('answers each principal on each route as the seed and the reference say', async () => {
    let combinations = 0;
    const failures: string[] = [];
    for (const [route, cases] of Object.entries(MATRIX)) {
      const writes = !route.startsWith('GET ') && !route.startsWith('OPTIONS ');
      for (const c of cases) {
        for (const who of PRINCIPALS) {
          const expected = expectedFor(c, who);
          const label = `${route} [${c.name}] as ${who}`;
          combinations++;
          if (c.ownNode && expected < 400) {
            await onOwnNode(async (own) => {
              const res = await send(own, who, await c.call(who));
              expect(res.status, `${who}: ${await res.clone().text()}`).toBe(expected);
            });
            continue;
          }
          const call = await c.call(who);
          const before = writes && expected >= 400 ? await allHead() : undefined;
          const res = await send(t, who, call);
          const body = await res.text();
          if (res.status !== expected) {
            failures.push(`${label}: expected ${expected}, got ${res.status} ${body.slice(0, 120)}`);
            continue;
          }
          if (expected === 401 && (who === 'wrong password' || who === 'disabled user')) {
            expect(res.headers.get('www-authenticate'), `${label}: challenge`).toMatch(/Basic/);
          }
          if (before !== undefined) expect(await allHead(), `${label}: a refused call wrote to the log`).toBe(before);
          if (expected < 400 && c.settle) await c.settle(call);
        }
      }
    }
    process.stdout.write(`auth matrix: ${combinations} combinations over ${Object.keys(MATRIX).length} routes\n`);
    expect(failures).toEqual([]);
    expect((await http(t, '/ping')).status, 'the node still answers').toBe(200);
  }, 120_000);
  it('has gRPC cases for every method the node serves, and for no other', async () => {
    const { responses } = await call(t.url, 'event_store.client.server_features.ServerFeatures', 'GetSupportedMethods', [{}]);
    const served = (responses[0].methods as { service_name: string; method_name: string }[]).map((m) => `${m.service_name}/${m.method_name}`);
    const cased = Object.keys(GRPC_MATRIX).map((key) => key.toLowerCase());
    expect(served.length).toBeGreaterThan(30);
    expect(served.filter((m) => !cased.includes(m)), 'methods without cases').toEqual([]);
    expect(cased.filter((m) => !served.includes(m)), 'cases for no method').toEqual([]);
  });

  it('answers each principal on each gRPC method with the rights of its HTTP route', async () => {
    let combinations = 0;
    const failures: string[] = [];
    for (const [method, cases] of Object.entries(GRPC_MATRIX)) {
      const writes = !/\/(Read|Statistics|State|Result|Details|Stats|GetSupportedMethods|GetInfo|List)$/.test(method);
      for (const c of cases) {
        for (const who of PRINCIPALS) {
          const expected = expectedGrpc(c, who);
          const label = `${method} [${c.name}] as ${who}`;
          combinations++;
          if (c.ownNode && expected === GRPC_OK) {
            await onOwnNode(async (own) => {
              const answer = await sendGrpc(own.url, who, await c.call(who));
              expect(answer.code, `${who}: ${answer.message}`).toBe(expected);
            });
            continue;
          }
          const request = await c.call(who);
          const before = writes && expected !== GRPC_OK ? await allHead() : undefined;
          const answer = await sendGrpc(t.url, who, request);
          if (answer.code !== expected) {
            failures.push(`${label}: expected ${expected}, got ${answer.code} ${answer.message.slice(0, 120)}`);
            continue;
          }
          if (before !== undefined) expect(await allHead(), `${label}: a refused call wrote to the log`).toBe(before);
          if (expected === GRPC_OK && c.settle) await c.settle(request);
        }
      }
    }
    process.stdout.write(`gRPC auth matrix: ${combinations} combinations over ${Object.keys(GRPC_MATRIX).length} methods\n`);
    expect(failures).toEqual([]);
    expect((await http(t, '/ping')).status, 'the node still answers').toBe(200);
  }, 180_000);
});
