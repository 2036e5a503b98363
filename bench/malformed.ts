import { request as httpRequest, Agent } from 'node:http';
import { connect } from 'node:net';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { loadConfig } from '../src/config/index.js';
import { startNode } from '../src/node.js';
import type { Route } from '../src/api/app.js';
import { NODE_MAIN, startServer } from './processes.js';

// The malformed-input soak (issue 14): SOAK_REQUESTS requests (default 10,000), spread over every
// route of the node's route table, each broken in at least one way the API must refuse: bad
// JSON, wrong member types, oversized bodies, bad headers and numbers (ES-ExpectedVersion: abc),
// unicode edge cases (lone surrogates, NUL, overlong UTF-8), path traversal in stream,
// projection, user and group names, bad credentials, and raw HTTP the parser rejects. Holds
// when: the node never dies, nothing answers 5xx, every answer is a 4xx with a message (a body or
// a reason phrase), and the log's head ($all, read as admin) is where the script's own
// legitimate setup left it. A route with no malformed cases of its own counts as a failure.
// Run: npm run build && node dist/bench/malformed.js   (SOAK_REQUESTS, SOAK_SEED, SOAK_CONCURRENCY)

export interface SoakOptions {
  url: string;
  routes: readonly Route[];
  requests: number;
  seed?: number;
  concurrency?: number;
}

export interface SoakSummary {
  requests: number;
  byStatus: Record<string, number>;
  failures: string[];
  routes: number;
  headBefore: string;
  headAfter: string;
}

const ADMIN = 'Basic ' + Buffer.from('admin:changeit').toString('base64');
const EVENTS_JSON = 'application/vnd.eventstore.events+json';
const JSON_TYPE = 'application/json';
const MAX_EVENT = 4 * 1024 * 1024;

interface Req {
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** Bytes written as they are, for what no HTTP client would send. */
  raw?: string;
}

interface Answer { status: number; message: string }

/** What the soak's own setup writes (legitimately): the things routes act on. */
interface Fixtures { stream: string; user: string; projection: string; group: string }

// ---- Deterministic choice, so a failure can be replayed with its seed. ----

function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Pick = <T>(items: readonly T[]) => T;

// ---- The ingredients. ----

/** Path segments, already percent-encoded as sent: traversal, NUL, lone surrogates, invalid UTF-8, length. */
const ODD_NAMES = [
  '..', '.', '..%2F..%2Fetc%2Fpasswd', '%2E%2E%2F%2E%2E%2F', '....%2F%2F', '..%5C..%5Cwindows', '%00', 'a%00b', '%ED%A0%80',
  '%ED%B0%80x', '%C0%AE%C0%AE', '%FF%FE', '%F4%90%80%80', '%EF%BF%BF', '%E2%80%AE', '%25', '%', '%zz', 'x%', '%20', '%09',
  '%24%24%24', '%F0%9F%92%A9%00', 'a'.repeat(3000), '%E0%80%80', '%C3%28', 'nul%00%00',
];
/** An odd name no fixture has (a random tail keeps it absent). */
const oddName = (pick: Pick) => `${pick(ODD_NAMES)}${pick(['', `-${randomUUID().slice(0, 6)}`])}`;
const BAD_NUMBERS = ['abc', '-1', '-5', '1.5', '1e3', '0x10', '99999999999999999999', '%00', '%ED%A0%80', '+1', '%201', '%D9%A1', '%EF%BC%91', '', 'NaN', 'Infinity'];
const BAD_COUNTS = ['0', '-1', 'abc', '4097', '99999999', '1.5', '%00', '1e2', 'head'];
const BAD_GUIDS = ['not-a-guid', '1234', '%00', 'zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz', '%ED%A0%80', '{}', '00000000-0000-0000-0000-00000000000'];
const BAD_EXPECTED = ['abc', '-5', '1.5', '', ' ', '0x10', '9223372036854775808', '¹', '1 2', '--1', 'null'];
const BAD_BOOLEANS = ['maybe', 'yes', '1', '', 'tru', 'falsch', 'true false'];
const BAD_FLAGS = ['maybe', '2', 'tru', '%00', '%ED%A0%80'];
const BAD_CONTENT_TYPES = ['text/html', 'application/json; charset', 'application/json; charset=latin1', 'application/json;charset=utf-16',
  'application/vnd.eventstore.events+json; charset=', 'image/png', ';', 'application/', '/json'];
const BAD_ACCEPTS = ['image/png', 'application/x-nonsense', 'text/csv; q=1', 'application/json; q=0'];

const BAD_AUTH = [
  'Basic !!!', 'Basic ' + b64('nocolon'), 'Basic ' + b64('admin:wrong'), 'Bearer abc', 'Basic', 'Basic ' + b64('\u0000:\u0000'),
  'Basic ' + b64('admin\ud800:changeit'), 'Basic ' + b64(`${'a'.repeat(4000)}:x`), 'Basic ' + b64('ghost:changeit'), 'basic ' + b64('admin:changeit'),
  'Basic ' + b64(':changeit'), 'Basic ' + b64('admin:changeit').slice(0, -2), 'Digest username="admin"', 'Basic ' + b64('admin:changeit\u0000'),
];

function b64(text: string): string {
  return Buffer.from(text).toString('base64');
}

/** JSON-ish bodies that are not what any route takes: broken JSON, invalid UTF-8, NUL, lone surrogates. */
const BAD_JSON: readonly (string | Buffer)[] = [
  '{', '[{"eventId":', 'nul\u0000l', Buffer.from([0xff, 0xfe, 0x7b, 0x7d]), Buffer.from([0xc0, 0xaf]), '{"a":1}}', '[1,]', "{'a':1}",
  '\u0000', '"\\ud800', '{"a":"\\u00"}', '{"a":NaN}', '['.repeat(200) + ']'.repeat(200), '\ufeff{', '{"__proto__":',
];

const events = (...items: unknown[]) => JSON.stringify(items);
const event = (extra: Record<string, unknown> = {}) => ({ eventId: randomUUID(), eventType: 'Soaked', data: { a: 1 }, ...extra });

/** Event arrays a write must refuse: wrong shapes and types, bad ids and types, NUL and lone surrogates in ids. */
const BAD_EVENT_ARRAYS = [
  () => '[]', () => '{}', () => '[1,2]', () => '[null]', () => '"events"', () => events(event({ eventId: 'not-a-guid' })),
  () => events(event({ eventType: '' })), () => events(event({ eventType: 5 })), () => events(event({ eventId: 123 })),
  () => events(event({ eventId: '' })), () => events({ eventType: 'NoId', data: {} }), () => events(event({ eventId: '\u0000' })),
  () => events(event({ eventId: '\ud800\udc00-not-a-guid' })), () => events(event(), event({ eventType: null })), () => events(event({ eventType: ['a'] })),
];

// ---- Malformed requests, by route: each one is refused on its own merits. ----

type Gen = (pick: Pick, f: Fixtures) => Req;

const enc = encodeURIComponent;
const withType = (type: string, body: string | Buffer, headers: Record<string, string> = {}) => ({ headers: { 'Content-Type': type, ...headers }, body });
/** An oversized event: its data alone is over the 4 MiB limit. */
const oversized = () => events(event({ data: { pad: 'x'.repeat(MAX_EVENT + 1024) } }));

/** Bad bodies and headers of an array write to `path`. */
function arrayWrite(path: (pick: Pick, f: Fixtures) => string): Gen[] {
  return [
    (pick, f) => ({ method: 'POST', path: path(pick, f), ...withType(EVENTS_JSON, pick(BAD_JSON)) }),
    (pick, f) => ({ method: 'POST', path: path(pick, f), ...withType(EVENTS_JSON, pick(BAD_EVENT_ARRAYS)()) }),
    (pick, f) => ({ method: 'POST', path: path(pick, f), ...withType(EVENTS_JSON, events(event({ eventType: '\ud800\u0000' })), { 'ES-ExpectedVersion': pick(BAD_EXPECTED) }) }),
    (pick, f) => ({ method: 'POST', path: path(pick, f), ...withType(EVENTS_JSON, events(event()), { 'ES-RequireMaster': pick(BAD_BOOLEANS), 'ES-ExpectedVersion': 'x' }) }),
    (pick, f) => ({ method: 'POST', path: path(pick, f), ...withType(pick(BAD_CONTENT_TYPES), events(event())) }),
    (pick, f) => ({ method: 'POST', path: path(pick, f), body: events(event()) }),
    (pick, f) => ({ method: 'POST', path: path(pick, f), ...withType(EVENTS_JSON, oversized()) }),
  ];
}

const streamPath = (pick: Pick, f: Fixtures) => `/streams/${pick([f.stream, oddName(pick), enc('$all')])}`;
const missingStream = (pick: Pick) => `/streams/${oddName(pick)}`;
const feed = (path: string, extra: Record<string, string> = {}): Req => ({ method: 'GET', path, headers: { Accept: 'application/vnd.eventstore.atom+json', ...extra } });
const json = (method: string, path: string, body: string | Buffer, extra: Record<string, string> = {}): Req => ({ method, path, ...withType(JSON_TYPE, body, extra) });

/** Reads of a stream: bad numbers, counts, names, Accept and header values. */
function streamRead(suffix: (pick: Pick) => string): Gen[] {
  return [
    (pick, f) => feed(`/streams/${f.stream}${suffix(pick)}`, { 'ES-ResolveLinkTos': pick(BAD_BOOLEANS) }),
    (pick, f) => ({ ...feed(`/streams/${f.stream}${suffix(pick)}`), headers: { Accept: pick(BAD_ACCEPTS) } }),
    (pick) => feed(`${missingStream(pick)}${suffix(pick)}`),
  ];
}

const projectionPath = (pick: Pick) => `/projection/${oddName(pick)}`;
const groupPath = (pick: Pick, f: Fixtures) => pick([`/subscriptions/${oddName(pick)}/${f.group}`, `/subscriptions/${f.stream}/${oddName(pick)}`]);
const userPath = (pick: Pick) => `/users/${oddName(pick)}`;
const SOURCE = "fromStream('nothing').when({ $any: function (s, e) { return s; } })";
const BAD_SOURCES = ['fromStream(', 'function () { ', '\u0000', '\ud800', 'fromAll().when({ $any: 5 }', ')'];

const GENERATORS: Record<string, Gen[]> = {
  'OPTIONS *': [],
  'POST /streams/:stream': [
    ...arrayWrite(streamPath),
    (pick, f) => ({ method: 'POST', path: streamPath(pick, f), ...withType(JSON_TYPE, '{"a":1}') }), // no event type
    (pick, f) => ({ method: 'POST', path: streamPath(pick, f), ...withType(JSON_TYPE, '{"a":1}', { 'ES-EventType': 'T', 'ES-EventId': pick(BAD_GUIDS.filter(Boolean)) }) }),
  ],
  'POST /streams/:stream/incoming/:guid': [
    (pick, f) => json('POST', `/streams/${f.stream}/incoming/${pick(BAD_GUIDS)}`, '{"a":1}', { 'ES-EventType': 'T' }),
    (pick, f) => ({ method: 'POST', path: `/streams/${f.stream}/incoming/${randomUUID()}`, ...withType(EVENTS_JSON, events(event())) }),
    (pick) => json('POST', `${missingStream(pick)}/incoming/${randomUUID()}`, pick(BAD_JSON)), // no event type
    (pick, f) => json('POST', `/streams/${f.stream}/incoming/${randomUUID()}`, '{}', { 'ES-EventType': 'T', 'ES-ExpectedVersion': pick(BAD_EXPECTED) }),
  ],
  'POST /streams/:stream/metadata': [
    ...arrayWrite((pick, f) => `${streamPath(pick, f)}/metadata`),
    (pick, f) => json('POST', `/streams/${f.stream}/metadata`, '{"$maxCount":1}'), // no event id
    (pick, f) => json('POST', `/streams/${f.stream}/metadata`, '{}', { 'ES-EventId': randomUUID(), 'ES-EventType': pick(['other', '\u00e9', '']) || 'x' }),
    (pick, f) => ({ method: 'POST', path: `/streams/${f.stream}/metadata`, ...withType(EVENTS_JSON, events(event({ data: pick([
      { $maxCount: 'abc' }, { $maxAge: -1.5 }, { $acl: 5 }, { $acl: { $r: 7 } }, { $tb: 'x' }, { $cacheControl: {} }, 'text', [1],
    ]) }))) }),
  ],
  'DELETE /streams/:stream': [
    (pick, f) => ({ method: 'DELETE', path: `/streams/${f.stream}`, headers: { 'ES-ExpectedVersion': pick(BAD_EXPECTED) } }),
    (pick, f) => ({ method: 'DELETE', path: `/streams/${f.stream}`, headers: { 'ES-HardDelete': pick(BAD_BOOLEANS) } }),
    (pick) => ({ method: 'DELETE', path: missingStream(pick), headers: { 'ES-RequireLeader': pick(BAD_BOOLEANS) } }),
    () => ({ method: 'DELETE', path: '/streams/%24all' }),
  ],
  'GET /streams/:stream/': [],
  'POST /streams/:stream/': [],
  'DELETE /streams/:stream/': [],
  'GET /streams/:stream/metadata/': [],
  'POST /streams/:stream/metadata/': [],
  'GET /streams/:stream': [...streamRead(() => ''), (pick) => feed('/streams/%24all', { 'ES-ResolveLinkTos': pick(BAD_BOOLEANS) })],
  'GET /streams/:stream/metadata': [
    (pick) => ({ method: 'GET', path: `${missingStream(pick)}/metadata`, headers: { Accept: JSON_TYPE } }),
    (pick) => ({ method: 'GET', path: `/streams/%24%24${oddName(pick)}/metadata`, headers: { Accept: JSON_TYPE } }),
    (pick, f) => ({ method: 'GET', path: `/streams/${f.stream}/metadata`, headers: { Accept: pick(BAD_ACCEPTS) } }),
  ],
  'GET /streams/:stream/metadata/:event': [
    (pick, f) => ({ method: 'GET', path: `/streams/${f.stream}/metadata/${pick(BAD_NUMBERS.filter(Boolean))}`, headers: { Accept: JSON_TYPE } }),
    (pick) => ({ method: 'GET', path: `${missingStream(pick)}/metadata/0`, headers: { Accept: JSON_TYPE } }),
  ],
  'GET /streams/:stream/:event': streamRead((pick) => `/${pick(BAD_NUMBERS.filter(Boolean))}`),
  'GET /streams/:stream/:event/:count': [
    ...streamRead((pick) => `/${pick(['0', 'head', ...BAD_NUMBERS.filter(Boolean)])}/${pick(BAD_COUNTS)}`),
    (pick) => feed(`/streams/%24all/${pick(['zz', '0', 'F'.repeat(33), '%00'.repeat(16)])}/20`),
  ],
  'GET /streams/:stream/:event/backward/:count': [
    ...streamRead((pick) => `/${pick(BAD_NUMBERS.filter(Boolean))}/backward/${pick(['1', ...BAD_COUNTS])}`),
    (pick) => feed(`/streams/%24all/head/backward/${pick(BAD_COUNTS)}`),
  ],
  'GET /streams/:stream/:event/forward/:count': [
    ...streamRead((pick) => `/${pick(['head', ...BAD_NUMBERS.filter(Boolean)])}/forward/${pick(['5', ...BAD_COUNTS])}`),
    (pick, f) => feed(`/streams/${f.stream}/0/forward/5`, { 'ES-LongPoll': pick(['abc', '1.5', '%00', '99999999999999999999', '1e3']) }),
    (pick) => feed(`/streams/%24all/${pick(['x', '0'.repeat(31), '-'.repeat(32)])}/forward/5`),
  ],

  'GET /users': [() => ({ method: 'GET', path: '/users', headers: { Accept: 'image/png' } })],
  'GET /users/': [() => ({ method: 'GET', path: '/users/', headers: { Accept: 'application/x-nonsense' } })],
  'POST /users': userCreate('/users'),
  'POST /users/': userCreate('/users/'),
  'GET /users/:login': [(pick) => ({ method: 'GET', path: userPath(pick) })],
  'PUT /users/:login': [
    (pick) => json('PUT', userPath(pick), '{"fullName":"x"}'),
    (pick, f) => json('PUT', `/users/${f.user}`, pick([...BAD_JSON, '{"groups":"x"}', '{"groups":[5]}', '{"fullName":7}', '{"groups":["a b"]}', '[]'])),
  ],
  'DELETE /users/:login': [(pick) => ({ method: 'DELETE', path: userPath(pick) })],
  'PUT /users/:login/command/enable': [(pick) => ({ method: 'PUT', path: `${userPath(pick)}/command/enable` })],
  'POST /users/:login/command/enable': [(pick) => ({ method: 'POST', path: `${userPath(pick)}/command/enable` })],
  'PUT /users/:login/command/disable': [(pick) => ({ method: 'PUT', path: `${userPath(pick)}/command/disable` })],
  'POST /users/:login/command/disable': [(pick) => ({ method: 'POST', path: `${userPath(pick)}/command/disable` })],
  'POST /users/:login/command/reset-password': [
    (pick) => json('POST', `${userPath(pick)}/command/reset-password`, '{"newPassword":"p"}'),
    (pick, f) => json('POST', `/users/${f.user}/command/reset-password`, pick([...BAD_JSON, '{}', '{"newPassword":""}', '{"newPassword":5}', '{"newPassword":null}'])),
    (pick, f) => ({ method: 'POST', path: `/users/${f.user}/command/reset-password`, ...withType(pick(BAD_CONTENT_TYPES), '{"newPassword":"p"}') }),
  ],
  'POST /users/:login/command/change-password': [
    (pick, f) => json('POST', `/users/${pick([f.user, oddName(pick)])}/command/change-password`, '{"currentPassword":"a","newPassword":"b"}'),
  ],

  'GET /info': [(pick) => ({ method: 'GET', path: pick(['/info', '/info?format=bogus']), headers: { Accept: pick(BAD_ACCEPTS) } })],
  'GET /info/options': [(pick) => ({ method: 'GET', path: '/info/options', headers: { Accept: pick(BAD_ACCEPTS) } })],
  'GET /ping': [(pick) => ({ method: 'GET', path: pick(['/ping?format=%00', '/ping?format=bogus', '/ping?format=a&format=b']) })],
  'GET /stats': [(pick) => ({ method: 'GET', path: '/stats', headers: { Accept: pick(BAD_ACCEPTS) } })],
  'GET /metrics': [
    (pick) => ({ method: 'GET', path: '/metrics', headers: { Accept: pick(BAD_ACCEPTS) } }),
    (pick) => ({ method: 'GET', path: pick(['/metrics?format=json', '/metrics?format=xml', '/metrics?format=%00', '/metrics?format=text&format=text']) }),
  ],
  'GET /stats/*': [(pick) => ({ method: 'GET', path: pick([`/stats/${oddName(pick)}`, '/stats/proc?group=false', '/stats/proc/cpu/deeper', '/stats/__proto__', '/stats/constructor']) })],
  'GET /gossip': [(pick) => ({ method: 'GET', path: '/gossip', headers: { Accept: pick(BAD_ACCEPTS) } })],
  'POST /gossip': [(pick) => json('POST', '/gossip', pick(BAD_JSON))],
  'POST /admin/shutdown': [],
  'POST /admin/reloadconfig': [],
  'POST /admin/node/resign': [],
  // A small signed integer is a priority the node takes (-1, +1): not malformed.
  'POST /admin/node/priority/:priority': [(pick) => ({ method: 'POST', path: `/admin/node/priority/${pick([
    ...BAD_NUMBERS.filter((n) => !/^[+-]?\d{1,9}$/.test(n)), '2147483648', '-2147483649', '--1', '+', oddName(pick),
  ])}` })],

  'GET /': [],
  'GET /favicon.ico': [],
  'GET /web': [],
  'GET /web/*': [(pick) => ({ method: 'GET', path: pick(['/web/%00', '/web/..%2F..%2Fpackage.json', '/web/%ED%A0%80', '/web/assets/missing.js', '/web/../../package.json', '/web/%2e%2e/%2e%2e/package.json']) })],

  'POST /admin/scavenge': [(pick) => ({ method: 'POST', path: `/admin/scavenge?${pick([
    'threads=abc', 'threads=0', 'threads=5', 'throttlePercent=0', 'throttlePercent=101', 'threads=2&throttlePercent=50', 'syncOnly=maybe',
    'startFromChunk=-1', 'threshold=1.5', 'threads=%00', 'THREADS=%ED%A0%80', 'threads=1&threads=2', 'threshold=99999999999999999999',
  ])}`, ...withType(JSON_TYPE, '{}') })],
  'GET /admin/scavenge/current': [],
  'GET /admin/scavenge/last': [],
  'GET /admin/scavenge/history': [(pick) => ({ method: 'GET', path: `/admin/scavenge/history?count=${pick(['0', '1001', '-1', 'abc', '1.5', '%00', '1&count=2', '1e3', '0x10', '99999999999999999999', 'NaN', 'Infinity', '%ED%A0%80'])}` })],
  'DELETE /admin/scavenge/:scavengeId': [(pick) => ({ method: 'DELETE', path: `/admin/scavenge/${pick([oddName(pick), ...BAD_GUIDS.filter(Boolean)])}` })],
  'POST /admin/mergeindexes': [],
  'GET /auto-scavenge/enabled': [],
  'GET /auto-scavenge/status': [],
  'POST /auto-scavenge/configure': [(pick) => json('POST', '/auto-scavenge/configure', pick([
    ...BAD_JSON, '{"schedule": 5}', '{"schedule": "* * * *"}', '{"schedule": "0 0 * * * *"}', '{"schedule": "61 * * * *"}', '{"schedule": "@daily"}', '[]', 'null',
  ]))],
  'POST /auto-scavenge/pause': [],
  'POST /auto-scavenge/resume': [],
  // Refused before anything is written: bad JSON and shapes, relative paths, a file, NUL, unknown members.
  'POST /admin/backup': [
    (pick) => json('POST', '/admin/backup', pick(BAD_JSON)),
    (pick) => json('POST', '/admin/backup', pick([
      '{}', '[]', '"/tmp"', 'null', '{"to":5}', '{"to":""}', '{"to":"relative/dir"}', '{"to":"../../etc"}', '{"to":"/tmp/a\\u0000b"}',
      '{"to":"/dev/null"}', '{"to":"/tmp/x","differential":"yes"}', '{"to":"/tmp/x","differential":1}', '{"to":"/tmp/x","extra":true}',
      '{"to":["/tmp/x"]}', '{"To":"/tmp/x"}',
    ]))],

  'GET /projections/any': [],
  'GET /projections/all-non-transient': [],
  'GET /projections/continuous': [],
  'GET /projections/onetime': [],
  'GET /projections/transient': [],
  'POST /projections/continuous': projectionCreate('continuous'),
  'POST /projections/onetime': projectionCreate('onetime'),
  'POST /projections/transient': projectionCreate('transient'),
  'POST /projections/read-events': [(pick) => json('POST', '/projections/read-events', pick([
    ...BAD_JSON, '5', '[]', '{"query":5}', '{"query":{"streams":[5]}}', '{"query":{"categories":"x"}}', '{"query":{},"position":"x"}',
    '{"query":{},"position":{"$c":-1}}', '{"query":{"allEvents":true,"events":["a"]}}', '{"query":{},"position":{"$s":{"a":"x"}}}',
  ]))],
  'POST /projections/debug': [(pick) => json('POST', '/projections/debug', pick([
    ...BAD_JSON, '5', '[]', 'null', '{}', '{"query":5}', '{"query":"fromAll(","events":{"first":1}}', '{"name":5}', '{"query":"fromAll()","events":{"first":0}}',
    '{"query":"fromAll()","events":{"first":1001}}', '{"query":"fromAll()","events":{"first":"x"}}', '{"query":"fromAll()","events":{"stream":5,"from":0,"count":1}}',
    '{"query":"fromAll()","events":{"stream":"s","from":-1,"count":1}}', '{"query":"fromAll()","mode":"Bogus"}', '{"query":"fromAll()","emit":"yes"}',
    '{"query":"fromAll()","extra":true}', '{"query":"fromAll()","events":{"first":1,"stream":"s"}}',
  ]))],
  'GET /projection/:name': [(pick) => ({ method: 'GET', path: projectionPath(pick) })],
  'GET /projection/:name/statistics': [(pick) => ({ method: 'GET', path: `${projectionPath(pick)}/statistics` })],
  'GET /projection/:name/state': [(pick) => ({ method: 'GET', path: `${projectionPath(pick)}/state?partition=${oddName(pick)}` })],
  'GET /projection/:name/result': [(pick) => ({ method: 'GET', path: `${projectionPath(pick)}/result` })],
  'GET /projection/:name/query': [
    (pick) => ({ method: 'GET', path: `${projectionPath(pick)}/query` }),
    (pick, f) => ({ method: 'GET', path: `/projection/${f.projection}/query?config=${pick(BAD_FLAGS)}` }),
  ],
  'PUT /projection/:name/query': [
    (pick) => json('PUT', `${projectionPath(pick)}/query`, SOURCE),
    (pick, f) => json('PUT', `/projection/${f.projection}/query?emit=${pick(BAD_FLAGS)}`, SOURCE),
    (pick, f) => json('PUT', `/projection/${f.projection}/query`, pick(BAD_SOURCES)),
  ],
  'GET /projection/:name/config': [(pick) => ({ method: 'GET', path: `${projectionPath(pick)}/config` })],
  'PUT /projection/:name/config': [
    (pick) => json('PUT', `${projectionPath(pick)}/config`, '{}'),
    (pick, f) => json('PUT', `/projection/${f.projection}/config`, pick([
      ...BAD_JSON, '[]', '5', '{"projectionExecutionTimeout":0}', '{"checkpointAfterMs":-1}', '{"emitEnabled":"yes"}', '{"maxWriteBatchLength":1.5}',
      '{"checkpointHandledThreshold":10,"checkpointUnhandledBytesThreshold":5}', '{"pendingEventsThreshold":"x"}',
    ])),
  ],
  'POST /projection/:name/command/enable': [
    (pick) => ({ method: 'POST', path: `${projectionPath(pick)}/command/enable` }),
    (pick, f) => ({ method: 'POST', path: `/projection/${f.projection}/command/enable?enableRunAs=${pick(BAD_FLAGS)}` }),
  ],
  'POST /projection/:name/command/disable': [(pick) => ({ method: 'POST', path: `${projectionPath(pick)}/command/disable` })],
  'POST /projection/:name/command/reset': [(pick) => ({ method: 'POST', path: `${projectionPath(pick)}/command/reset` })],
  'POST /projection/:name/command/abort': [(pick) => ({ method: 'POST', path: `${projectionPath(pick)}/command/abort` })],
  'DELETE /projection/:name': [
    (pick) => ({ method: 'DELETE', path: projectionPath(pick) }),
    (pick, f) => ({ method: 'DELETE', path: `/projection/${f.projection}?deleteStateStream=${pick(BAD_FLAGS)}` }),
  ],

  'GET /subscriptions': [(pick) => ({ method: 'GET', path: `/subscriptions?${pick(['offset=-1', 'count=0', 'count=abc', 'offset=1.5', 'count=%00', 'offset=1e999'])}` })],
  'GET /subscriptions/:stream': [(pick) => ({ method: 'GET', path: `/subscriptions/${oddName(pick)}` })],
  'GET /subscriptions/:stream/:group/info': [(pick, f) => ({ method: 'GET', path: `${groupPath(pick, f)}/info` })],
  'PUT /subscriptions/:stream/:group': subscriptionWrite('PUT'),
  'POST /subscriptions/:stream/:group': [...subscriptionWrite('POST'), (pick, f) => json('POST', groupPath(pick, f), '{}')],
  'DELETE /subscriptions/:stream/:group': [(pick, f) => ({ method: 'DELETE', path: groupPath(pick, f) })],
  'GET /subscriptions/:stream/:group': [
    (pick, f) => ({ method: 'GET', path: groupPath(pick, f), headers: { Accept: 'application/vnd.eventstore.competingatom+json' } }),
    (pick, f) => ({ method: 'GET', path: `/subscriptions/${f.stream}/${f.group}`, headers: { Accept: pick([JSON_TYPE, ...BAD_ACCEPTS]) } }),
  ],
  'GET /subscriptions/:stream/:group/:count': [
    (pick, f) => ({ method: 'GET', path: `/subscriptions/${f.stream}/${f.group}/${pick(['0', '101', 'abc', '-1', '1.5', '%00', '99999'])}`,
      headers: { Accept: 'application/vnd.eventstore.competingatom+json' } }),
  ],
  'POST /subscriptions/:stream/:group/ack/:messageid': settle('ack', true),
  'POST /subscriptions/:stream/:group/ack': settle('ack', false),
  'POST /subscriptions/:stream/:group/nack/:messageid': settle('nack', true),
  'POST /subscriptions/:stream/:group/nack': settle('nack', false),
  // Takes no input: nothing of it can be malformed.
  'POST /subscriptions/restart': [],
  'POST /subscriptions/:stream/:group/replayParked': [
    (pick, f) => ({ method: 'POST', path: `/subscriptions/${f.stream}/${f.group}/replayParked?stopAt=${pick(['abc', '-1', '1.5', '%00', '99999999999999999'])}` }),
    (pick, f) => ({ method: 'POST', path: `${groupPath(pick, f)}/replayParked` }),
  ],
};

function userCreate(path: string): Gen[] {
  return [
    (pick) => json('POST', path, pick([
      ...BAD_JSON, '[]', '5', '{}', '{"loginName":"a/b","password":"p"}', '{"loginName":"a b","password":"p"}', '{"loginName":5,"password":"p"}',
      '{"loginName":"x"}', '{"loginName":"\\ud800\\u0000","password":""}', '{"loginName":"y","password":"p","groups":"g"}',
      '{"loginName":"z","password":"p","groups":["a,b"]}', '{"loginName":"w","password":"p","fullName":{}}', '{"loginName":"..","password":null}',
    ])),
    (pick) => ({ method: 'POST', path, ...withType(pick(['text/xml', 'application/xml']), pick(['<user><loginName>', '<a>', '<!DOCTYPE x [<!ENTITY e "e">]><user>&e;</user>', '\u0000'])) }),
    (pick) => ({ method: 'POST', path, ...withType(pick(BAD_CONTENT_TYPES), '{"loginName":"ct","password":"p"}') }),
  ];
}

function projectionCreate(mode: string): Gen[] {
  const path = (pick: Pick, query: string) => `/projections/${mode}?name=${oddName(pick)}&${query}`;
  return [
    (pick) => json('POST', path(pick, `enabled=${pick(BAD_FLAGS)}`), SOURCE),
    (pick) => json('POST', path(pick, `emit=${pick(BAD_FLAGS)}`), SOURCE),
    (pick) => json('POST', path(pick, `type=${pick(['python', '', '%00', 'JSX'])}`), SOURCE),
    (pick) => json('POST', path(pick, 'enabled=no'), pick(BAD_SOURCES)),
  ];
}

function subscriptionWrite(method: string): Gen[] {
  return [
    (pick, f) => json(method, `/subscriptions/${pick([f.stream, oddName(pick)])}/${oddName(pick)}`, pick([
      ...BAD_JSON, '[]', '5', '{"bufferSize":-1}', '{"readBatchSize":0}', '{"liveBufferSize":"x"}', '{"bufferSize":10,"readBatchSize":20}',
      '{"namedConsumerStrategy":"Bogus"}', '{"startFrom":"abc"}', '{"maxRetryCount":-5}', '{"messageTimeoutMilliseconds":1e999}',
    ])),
    (pick) => json(method, `/subscriptions/%24all/${oddName(pick)}`, '{}'),
    (pick, f) => ({ method, path: `/subscriptions/${f.stream}/${oddName(pick)}`, ...withType(pick(BAD_CONTENT_TYPES), '{"bufferSize":-1}') }),
  ];
}

function settle(verb: string, one: boolean): Gen[] {
  const base = (f: Fixtures) => `/subscriptions/${f.stream}/${f.group}/${verb}`;
  const bad = (pick: Pick) => pick(BAD_GUIDS.filter(Boolean));
  return [
    one
      ? (pick, f) => ({ method: 'POST', path: `${base(f)}/${bad(pick)}` })
      : (pick, f) => ({ method: 'POST', path: `${base(f)}?ids=${pick([bad(pick), `${randomUUID()},${bad(pick)}`])}` }),
    (pick, f) => ({ method: 'POST', path: `${groupPath(pick, f)}/${verb}${one ? `/${randomUUID()}` : `?ids=${randomUUID()}`}` }),
  ];
}

/** What any route refuses: credentials that name nobody. */
const badCredentials: Gen = (pick) => ({ method: 'GET', path: '/', headers: { Authorization: pick(BAD_AUTH) } });

/** Raw bytes Node's HTTP parser refuses (it answers them 400, the API never sees them). */
const RAW = [
  (path: string) => `GET ${path} HTTP/1.1\r\nHost: x\r\nX-Bad: a\u0000b\r\n\r\n`,
  (path: string) => `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n`,
  (path: string) => `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n`,
  (path: string) => `POST ${path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n`,
  (path: string) => `GET ${path} HTTP/1.1\r\nHost: x\r\nNo colon here\r\n\r\n`,
  (path: string) => `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab`,
  (path: string) => `GET ${path} HTTP/1.1\r\nHost: x\r\nES-ExpectedVersion: \u00ff\u0001\r\n\r\n`,
];

/** A query parameter given twice: handlers read one value, never an array. */
const REPEATED = ['format=json&format=xml', 'embed=body&embed=rich', 'partition=a&partition=b', 'action=park&action=skip', 'name=a&name=b',
  'ids=x&ids=y', 'enabled=no&enabled=no', 'threads=1&threads=1', 'stopAt=1&stopAt=2', 'group=false&group=true', 'a=%00&a=%ED%A0%80'];

/** One malformed request for `route`: its own cases, or bad credentials, raw bytes or a repeated query parameter on its path. */
function generate(route: Route, pick: Pick, f: Fixtures, rand: () => number): Req {
  const own = GENERATORS[`${route.method} ${route.url}`] ?? [];
  const path = samplePath(route.url, f);
  const roll = rand();
  if (own.length === 0 || roll < 0.15) return { ...badCredentials(pick, f), method: route.method, path };
  if (roll < 0.2) return { method: route.method, path, raw: pick(RAW)(path) };
  if (roll < 0.25) return { method: route.method, path: `${path}?${pick(REPEATED)}` };
  return pick(own)(pick, f);
}

/** The route's URL with its parameters filled from the fixtures. */
function samplePath(url: string, f: Fixtures): string {
  const values: Record<string, string> = {
    stream: f.stream, guid: randomUUID(), event: '0', count: '5', login: f.user, name: f.projection, group: f.group,
    messageid: randomUUID(), scavengeId: 'current', '*': 'proc',
  };
  return url === '*' ? `/streams/${f.stream}` : url.replace(/:(\w+)|\*/g, (m, name: string | undefined) => values[name ?? '*']);
}

// ---- Sending. ----

const agent = new Agent({ keepAlive: true, maxSockets: 16 });

function send(base: URL, r: Req): Promise<Answer> {
  if (r.raw !== undefined) return sendRaw(base, r.raw);
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { Authorization: ADMIN, ...r.headers };
    const req = httpRequest({ host: base.hostname, port: base.port, method: r.method, path: r.path, headers, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, message: Buffer.concat(chunks).toString('utf8').trim() || (res.statusMessage ?? '').trim() }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(r.body);
  });
}

function sendRaw(base: URL, bytes: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const socket = connect(Number(base.port), base.hostname);
    const chunks: Buffer[] = [];
    socket.setTimeout(5000, () => socket.destroy(new Error('no answer within 5 s')));
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('latin1');
      const m = /^HTTP\/1\.[01] (\d{3}) ?([^\r\n]*)\r\n[\s\S]*?\r\n\r\n([\s\S]*)$/.exec(text);
      if (!m) return reject(new Error(`no HTTP answer (${JSON.stringify(text.slice(0, 80))})`));
      resolve({ status: Number(m[1]), message: m[3].trim() || m[2].trim() });
    });
    socket.end(Buffer.from(bytes, 'latin1'));
  });
}

async function asAdmin(base: URL, r: Req, expected: number): Promise<string> {
  const answer = await send(base, r);
  if (answer.status !== expected) throw new Error(`setup ${r.method} ${r.path}: ${answer.status} ${answer.message}`);
  return answer.message;
}

/** The log's head position, from $all read as admin. */
async function allHead(base: URL): Promise<string> {
  const body = await asAdmin(base, { method: 'GET', path: '/streams/%24all/head/backward/1', headers: { Accept: 'application/vnd.eventstore.atom+json' } }, 200);
  return (JSON.parse(body) as { links: { relation: string; uri: string }[] }).links.find((l) => l.relation === 'previous')!.uri;
}

async function setUp(base: URL): Promise<Fixtures> {
  const tag = randomUUID().slice(0, 8);
  const f: Fixtures = { stream: `soak-${tag}`, user: `soak-user-${tag}`, projection: `soak-projection-${tag}`, group: `soak-group-${tag}` };
  await asAdmin(base, { method: 'POST', path: `/streams/${f.stream}`, ...withType(EVENTS_JSON, events(event(), event(), event())) }, 201);
  await asAdmin(base, json('POST', '/users/', JSON.stringify({ loginName: f.user, password: 'soak-pw', groups: [] })), 201);
  await asAdmin(base, json('POST', `/projections/continuous?name=${f.projection}&enabled=no`, SOURCE), 201);
  await asAdmin(base, json('PUT', `/subscriptions/${f.stream}/${f.group}`, '{}'), 200);
  return f;
}

/** Fires the soak at a running node; the caller checks that the node survived. */
export async function runSoak(options: SoakOptions): Promise<SoakSummary> {
  const base = new URL(options.url);
  const rand = rng(options.seed ?? 14);
  const pick: Pick = (items) => items[Math.floor(rand() * items.length)];
  const f = await setUp(base);
  const headBefore = await allHead(base);
  const byStatus: Record<string, number> = {};
  const failures: string[] = [];
  for (const route of options.routes) {
    if (!(`${route.method} ${route.url}` in GENERATORS)) failures.push(`${route.method} ${route.url}: no malformed cases (add them to bench/malformed.ts)`);
  }
  // Built up front so the choice (and thus a replay from the seed) does not depend on answer timing.
  const plan = Array.from({ length: options.requests }, (_, i) => {
    const route = options.routes[i % options.routes.length];
    return { route, req: generate(route, pick, f, rand) };
  });
  let next = 0;
  const worker = async () => {
    while (next < plan.length) {
      const { route, req } = plan[next++];
      const label = `${route.method} ${route.url} as ${req.method} ${req.path.slice(0, 100)}${req.raw ? ' (raw)' : ''}`;
      try {
        const answer = await send(base, req);
        byStatus[answer.status] = (byStatus[answer.status] ?? 0) + 1;
        if (answer.status < 400 || answer.status > 499) failures.push(`${label}: ${answer.status} ${answer.message.slice(0, 120)}`);
        else if (!answer.message) failures.push(`${label}: ${answer.status} without a message`);
      } catch (err) {
        byStatus.error = (byStatus.error ?? 0) + 1;
        failures.push(`${label}: ${(err as Error).message}`);
      }
    }
  };
  await Promise.all(Array.from({ length: options.concurrency ?? 8 }, worker));
  const headAfter = await allHead(base);
  if (headAfter !== headBefore) failures.push(`the log moved: $all head ${headBefore} → ${headAfter}`);
  return { requests: plan.length, byStatus, failures, routes: options.routes.length, headBefore, headAfter };
}

/** The node's route table, from a node started in memory for the purpose. */
export async function routeTable(): Promise<readonly Route[]> {
  const dir = mkdtempSync(join(tmpdir(), 'soak-routes-'));
  const node = await startNode({ ...loadConfig([]).config, db: dir, memDb: true, httpIp: '127.0.0.1', httpPort: 0, logLevel: 'silent', startStandardProjections: false });
  const routes = node.routes;
  await node.close();
  rmSync(dir, { recursive: true, force: true });
  return routes;
}

async function main(): Promise<void> {
  const requests = Number(process.env.SOAK_REQUESTS ?? 10_000);
  const seed = Number(process.env.SOAK_SEED ?? 14);
  const concurrency = Number(process.env.SOAK_CONCURRENCY ?? 8);
  const routes = await routeTable();
  const dir = mkdtempSync(join(tmpdir(), 'soak-'));
  const server = await startServer('node', NODE_MAIN, ['--db', dir, '--log-level', 'warn', '--start-standard-projections', 'false']);
  const started = Date.now();
  let summary: SoakSummary;
  try {
    summary = await runSoak({ url: server.url, routes, requests, seed, concurrency });
    const alive = await send(new URL(server.url), { method: 'GET', path: '/ping' }).then((a) => a.status === 200, () => false);
    if (!alive) summary.failures.push('the node does not answer /ping after the soak');
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  const seconds = (Date.now() - started) / 1000;
  const statuses = Object.entries(summary.byStatus).sort().map(([s, n]) => `${s}: ${n}`).join(', ');
  process.stdout.write(`malformed soak: ${summary.requests} requests over ${summary.routes} routes in ${seconds.toFixed(1)} s (seed ${seed})\n`);
  process.stdout.write(`  by status: ${statuses}\n  $all head unchanged: ${summary.headBefore === summary.headAfter}\n`);
  process.stdout.write(`  failures: ${summary.failures.length}\n`);
  for (const f of summary.failures.slice(0, 50)) process.stdout.write(`    ${f}\n`);
  process.exitCode = summary.failures.length === 0 ? 0 : 1;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main().catch((err) => {
    process.stderr.write(`${(err as Error).stack}\n`);
    process.exitCode = 1;
  }).finally(() => agent.destroy());
}
