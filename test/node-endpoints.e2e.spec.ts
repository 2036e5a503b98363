import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { XMLParser } from 'fast-xml-parser';
import { ADMIN, append, basic, eventually, EVENTS_JSON, http, newEvent, OPS, startTestNode, type TestNode } from './support/node.js';
import { spawnNode, type NodeProcess } from './support/process.js';

// End-to-end tests of the node endpoints (issue 3; http-wire.md §6; seed spec "Statistics",
// "Admin and node"): /info, /info/options, /ping, /stats (JSON and XML, root key svc, real
// measurements that move under load), /gossip (GET; POST 401 unless $ops/$admins, then refused on a single node), and
// POST /admin/shutdown (200, clean exit 0, acknowledged writes durable).
// The process tests run dist/src/main.js: build first with `npx tsc -p tsconfig.json`.

const JSON_TYPE = 'application/json';
const ATOM_JSON = 'application/vnd.eventstore.atom+json';
const GUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

let counter = 0;
function unique(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${++counter}`;
}

async function createUser(t: TestNode, loginName: string, password: string, groups: string[] = []): Promise<void> {
  const res = await http(t, '/users/', {
    method: 'POST', headers: { 'Content-Type': JSON_TYPE },
    body: JSON.stringify({ loginName, fullName: loginName, groups, password }),
  });
  expect(res.status).toBe(201);
  await res.arrayBuffer();
}

async function stats(t: TestNode, path = '/stats'): Promise<any> {
  const res = await http(t, path, { headers: { Accept: JSON_TYPE } });
  expect(res.status, path).toBe(200);
  return res.json();
}

function isNumber(v: unknown): v is number {
  return typeof v === 'number' && Number.isFinite(v);
}

/** Every field the seed spec lists, with its type, present in a stats document. */
function expectSeedFields(s: any): void {
  expect(Object.keys(s).sort()).toEqual(expect.arrayContaining(['proc', 'sys', 'svc']));
  expect(s).not.toHaveProperty('es');
  const { proc, sys, svc } = s;
  expect(typeof proc.startTime).toBe('string');
  expect(Number.isNaN(Date.parse(proc.startTime))).toBe(false);
  expect(Number.isInteger(proc.id)).toBe(true);
  expect(Number.isInteger(proc.mem)).toBe(true);
  for (const k of ['cpu', 'cpuScaled', 'thrownExceptionsRate']) expect(isNumber(proc[k]), `proc.${k}`).toBe(true);
  expect(Number.isInteger(proc.threadsCount)).toBe(true);
  for (const k of ['allocationSpeed', 'gen0ItemsCount', 'gen0Size', 'gen1ItemsCount', 'gen1Size', 'gen2ItemsCount', 'gen2Size',
    'largeHeapSize', 'timeInGc', 'totalBytesInHeaps']) expect(isNumber(proc.gc[k]), `proc.gc.${k}`).toBe(true);
  for (const k of ['readBytes', 'writtenBytes', 'readOps', 'writeOps']) expect(isNumber(proc.diskIo[k]), `proc.diskIo.${k}`).toBe(true);
  expect(Number.isInteger(proc.tcp.connections)).toBe(true);
  expect(typeof proc.tcp.receivingSpeed).toBe('string');
  for (const k of ['sendingSpeed', 'pendingSend', 'receivedBytesSinceLastRun', 'receivedBytesTotal', 'sentBytesSinceLastRun', 'sentBytesTotal']) {
    expect(isNumber(proc.tcp[k]), `proc.tcp.${k}`).toBe(true);
  }
  expect(proc.tcp).toHaveProperty('measureTime');

  expect(isNumber(sys.cpu)).toBe(true);
  expect(isNumber(sys.freeMem)).toBe(true);
  expect(typeof sys.drive).toBe('object');
  const drives = Object.values(sys.drive) as any[];
  expect(drives.length).toBeGreaterThan(0);
  for (const d of drives) for (const k of ['availableBytes', 'totalBytes', 'usage', 'usedBytes']) expect(isNumber(d[k]), `drive.${k}`).toBe(true);

  expect(isNumber(svc.checksum)).toBe(true);
  expect(isNumber(svc.checksumNonFlushed)).toBe(true);
  const queues = Object.values(svc.queue) as any[];
  expect(queues.length).toBeGreaterThan(0);
  for (const q of queues) {
    expect(typeof q.queueName).toBe('string');
    expect(typeof q.groupName).toBe('string');
    expect(Number.isInteger(q.avgItemsPerSecond)).toBe(true);
    expect(isNumber(q.avgProcessingTime)).toBe(true);
    expect(typeof q.currentIdleTime).toBe('string');
    expect(typeof q.currentItemProcessingTime).toBe('string');
    expect(isNumber(q.idleTimePercent)).toBe(true);
    expect(Number.isInteger(q.length)).toBe(true);
    for (const k of ['lengthCurrentTryPeak', 'lengthLifetimePeak', 'totalItemsProcessed']) expect(isNumber(q[k]), `queue.${k}`).toBe(true);
    expect(typeof q.inProgressMessage).toBe('string');
    expect(typeof q.lastProcessedMessage).toBe('string');
  }
  for (const k of ['lastFlushSize', 'lastFlushDelayMs', 'meanFlushSize', 'meanFlushDelayMs', 'maxFlushSize', 'maxFlushDelayMs']) {
    expect(isNumber(svc.writer[k]), `svc.writer.${k}`).toBe(true);
  }
  expect(Number.isInteger(svc.writer.queuedFlushMessages)).toBe(true);
  for (const k of ['cachedRecord', 'notCachedRecord', 'cachedStreamInfo', 'notCachedStreamInfo', 'cachedTransInfo', 'notCachedTransInfo', 'hashCollisions']) {
    expect(isNumber(svc.readIndex[k]), `svc.readIndex.${k}`).toBe(true);
  }
}

describe('GET /info, /info/options, /ping', () => {
  let t: TestNode;
  beforeEach(async () => { t = await startTestNode(); });
  afterEach(async () => { await t?.dispose(); });

  it('/info answers anonymously with version, leader state, features and authentication', async () => {
    const res = await http(t, '/info', { authorization: '' });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const info = await res.json();
    expect(info.dbVersion).toMatch(/^\d+\.\d+\.\d+/);
    expect(info.esVersion).toBe(info.dbVersion);
    expect(info.state).toBe('leader');
    expect(typeof info.features).toBe('object');
    expect(info.features.userManagement).toBe(true);
    expect(typeof info.features.atomPub).toBe('boolean');
    expect(typeof info.features.projections).toBe('boolean');
    expect(info.authentication).toEqual({ type: 'internal', properties: {} });
  });

  it('/ping answers anonymously as JSON, XML and text', async () => {
    const res = await http(t, '/ping', { authorization: '' });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ text: 'Ping request successfully handled' });

    const xml = await http(t, '/ping?format=xml', { authorization: '' });
    expect(xml.status).toBe(200);
    expect(xml.headers.get('content-type')).toMatch(/xml/);
    const doc = new XMLParser().parse(await xml.text());
    expect(JSON.stringify(doc)).toContain('Ping request successfully handled');

    const text = await http(t, '/ping?format=text', { authorization: '' });
    expect(text.status).toBe(200);
    expect(text.headers.get('content-type')).toMatch(/^text\/plain/);
    expect((await text.text()).trim()).toBe('Ping request successfully handled');
  });

  it('/info/options needs $ops or $admins: anonymous and plain users 401', async () => {
    const plain = unique('plain');
    await createUser(t, plain, 'pw');
    for (const [who, auth] of [['anonymous', ''], ['plain user', basic(plain, 'pw')]] as const) {
      const res = await http(t, '/info/options', { authorization: auth });
      expect(res.status, who).toBe(401);
      await res.arrayBuffer();
    }
    for (const [who, auth] of [['ops', OPS], ['admin', ADMIN]] as const) {
      const res = await http(t, '/info/options', { authorization: auth });
      expect(res.status, who).toBe(200);
      const options = await res.json();
      expect(Array.isArray(options)).toBe(true);
      expect(options.length).toBeGreaterThan(5);
      for (const o of options) {
        expect(Object.keys(o).sort(), o.name).toEqual(
          ['configurationSource', 'deprecationMessage', 'description', 'group', 'name', 'schema', 'value'].sort());
        expect(typeof o.name).toBe('string');
        expect(typeof o.description).toBe('string');
        expect(typeof o.group).toBe('string');
      }
    }
  });
});

describe('/info/options from a real process: values, sources, secrets masked', () => {
  const dirs: string[] = [];
  let proc: NodeProcess | undefined;
  afterEach(async () => {
    if (proc && proc.child.exitCode === null) {
      proc.child.kill('SIGTERM');
      await proc.exited;
    }
    proc = undefined;
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  it('reports each value with where it came from (default, yaml, environment, command line)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-options-'));
    dirs.push(dir);
    const yamlPath = join(dir, 'config.yaml');
    writeFileSync(yamlPath, 'MaxAppendSize: 2097152\nDisableHttpCaching: true\n');
    const adminSecret = 'Sup3r-Secret-Admin';
    proc = await spawnNode(['--db', join(dir, 'db'), '--config', yamlPath, '--default-admin-password', adminSecret],
      { SVC_CHUNK_SIZE: '8388608' });
    const res = await fetch(`${proc.url}/info/options`, { headers: { Authorization: basic('admin', adminSecret) } });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text, 'a secret never appears').not.toContain(adminSecret);
    expect(text).not.toContain('changeit');
    const byName = new Map((JSON.parse(text) as any[]).map((o) => [o.name.toLowerCase(), o]));
    const option = (name: string) => {
      const o = byName.get(name.toLowerCase());
      expect(o, name).toBeDefined();
      return o;
    };
    expect(option('MaxAppendSize')).toMatchObject({ value: '2097152', configurationSource: 'yaml' });
    expect(option('DisableHttpCaching')).toMatchObject({ value: 'true', configurationSource: 'yaml' });
    expect(option('ChunkSize')).toMatchObject({ value: '8388608', configurationSource: 'environment' });
    expect(option('HttpPort')).toMatchObject({ value: '0', configurationSource: 'command line' });
    expect(option('Db')).toMatchObject({ value: join(dir, 'db'), configurationSource: 'command line' });
    expect(option('Insecure')).toMatchObject({ value: 'true', configurationSource: 'default' });
    expect(option('DefaultAdminPassword')).toMatchObject({ value: '********', configurationSource: 'command line' });
    expect(option('DefaultOpsPassword')).toMatchObject({ value: '********', configurationSource: 'default' });
  });
});

describe('GET /stats', () => {
  let t: TestNode;
  beforeEach(async () => { t = await startTestNode(); });
  afterEach(async () => { await t?.dispose(); });

  it('needs an authenticated user', async () => {
    const res = await http(t, '/stats', { authorization: '' });
    expect(res.status).toBe(401);
    const plain = unique('statsuser');
    await createUser(t, plain, 'pw');
    const ok = await http(t, '/stats', { authorization: basic(plain, 'pw'), headers: { Accept: JSON_TYPE } });
    expect(ok.status).toBe(200);
  });

  it('svc.writer.recordsWritten counts the records committed (the console derives events/s from it)', async () => {
    const before = (await (await http(t, '/stats', { headers: { Accept: JSON_TYPE } })).json()).svc.writer.recordsWritten;
    expect(Number.isInteger(before)).toBe(true);
    const stream = unique('counted');
    expect((await append(t, stream, [newEvent('a'), newEvent('b'), newEvent('c')])).status).toBe(201);
    await eventually(async () => {
      const after = (await (await http(t, '/stats', { headers: { Accept: JSON_TYPE } })).json()).svc.writer.recordsWritten;
      expect(after - before).toBeGreaterThanOrEqual(3);
    });
  });

  it('JSON has every seed field under proc, sys and svc (not es), with plausible values', async () => {
    const res = await http(t, '/stats', { headers: { Accept: JSON_TYPE } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.headers.get('cache-control')).toBe('max-age=1, public');
    const s = await res.json();
    expectSeedFields(s);
    const { proc, sys, svc } = s;
    // This process runs the node (startTestNode is in-process).
    expect(proc.id).toBe(process.pid);
    expect(proc.mem).toBeGreaterThan(10 * 1024 * 1024);
    expect(proc.mem).toBeLessThan(totalmem());
    expect(proc.threadsCount).toBeGreaterThanOrEqual(1);
    const started = Date.parse(proc.startTime);
    expect(started).toBeLessThanOrEqual(Date.now());
    expect(started).toBeGreaterThan(Date.now() - 60_000);
    expect(proc.cpu).toBeGreaterThanOrEqual(0);
    expect(proc.cpuScaled).toBeGreaterThanOrEqual(0);
    expect(proc.cpuScaled).toBeLessThanOrEqual(proc.cpu);
    expect(proc.gc.totalBytesInHeaps).toBeGreaterThan(1024 * 1024);
    expect(proc.tcp.connections).toBeGreaterThanOrEqual(1); // this request's own connection
    expect(proc.tcp.receivedBytesTotal).toBeGreaterThan(0); // at least this request
    expect(sys.cpu).toBeGreaterThanOrEqual(0);
    expect(sys.cpu).toBeLessThanOrEqual(100);
    expect(sys.freeMem).toBeGreaterThan(0);
    expect(sys.freeMem).toBeLessThanOrEqual(totalmem());
    // The drive is the data path's.
    const driveKeys = Object.keys(sys.drive);
    expect(driveKeys.some((k) => t.dir.startsWith(k) || k.startsWith(t.dir)), `drive keys ${driveKeys} for ${t.dir}`).toBe(true);
    const drive: any = Object.values(sys.drive)[0];
    expect(drive.totalBytes).toBeGreaterThan(0);
    expect(drive.usedBytes).toBeLessThanOrEqual(drive.totalBytes);
    expect(drive.availableBytes).toBeLessThanOrEqual(drive.totalBytes);
    expect(drive.usage).toBeGreaterThanOrEqual(0);
    expect(drive.usage).toBeLessThanOrEqual(100);
    // The writer has already written the default users.
    expect(svc.checksum).toBeGreaterThan(0);
    const writer: any = Object.values(svc.queue).find((q: any) => q.totalItemsProcessed > 0);
    expect(writer, 'a queue that processed the start-up writes').toBeDefined();
    expect(writer.lengthLifetimePeak).toBeGreaterThanOrEqual(1);
    expect(writer.idleTimePercent).toBeGreaterThanOrEqual(0);
    expect(writer.idleTimePercent).toBeLessThanOrEqual(100);
    expect(writer.currentIdleTime).toMatch(/^\d{2}:\d{2}:\d{2}\.\d+$/);
    expect(svc.writer.maxFlushSize).toBeGreaterThanOrEqual(1);
    expect(svc.writer.meanFlushSize).toBeGreaterThan(0);
  });

  it('XML parses with root element Stats and holds the same groups', async () => {
    const res = await http(t, '/stats', { headers: { Accept: 'text/xml' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/xml/);
    const doc = new XMLParser().parse(await res.text());
    expect(doc).toHaveProperty('Stats');
    const s = doc.Stats;
    expect(s).not.toHaveProperty('es');
    expect(isNumber(s.proc.mem)).toBe(true);
    expect(s.proc.mem).toBeGreaterThan(0);
    expect(isNumber(s.proc.tcp.receivedBytesTotal)).toBe(true);
    expect(isNumber(s.sys.freeMem)).toBe(true);
    const drives = Object.values(s.sys.drive) as any[];
    expect(drives.length).toBeGreaterThan(0);
    expect(drives[0].totalBytes).toBeGreaterThan(0);
    const queues = Object.values(s.svc.queue) as any[];
    expect(queues.length).toBeGreaterThan(0);
    expect(typeof queues[0].queueName).toBe('string');
    for (const k of ['lastFlushSize', 'meanFlushSize', 'maxFlushSize', 'queuedFlushMessages']) expect(s.svc.writer).toHaveProperty(k);
    expect(s.svc.readIndex).toHaveProperty('notCachedRecord');

    const sub = await http(t, '/stats/svc/writer?format=xml');
    expect(sub.status).toBe(200);
    const subDoc = new XMLParser().parse(await sub.text());
    expect(subDoc).toHaveProperty('Stats');
    expect(subDoc.Stats).toHaveProperty('maxFlushSize');
  });

  it('/stats/{statPath} answers a subtree; an unknown path 404; group=false flattens', async () => {
    const proc = await stats(t, '/stats/proc');
    expect(proc).toHaveProperty('mem');
    expect(proc).toHaveProperty('tcp');
    expect(proc).not.toHaveProperty('proc');
    const tcp = await stats(t, '/stats/proc/tcp');
    expect(tcp).toHaveProperty('receivedBytesTotal');
    const writer = await stats(t, '/stats/svc/writer');
    expect(writer).toHaveProperty('meanFlushSize');
    const missing = await http(t, '/stats/nothing/here', { headers: { Accept: JSON_TYPE } });
    expect(missing.status).toBe(404);
    const es = await http(t, '/stats/es', { headers: { Accept: JSON_TYPE } });
    expect(es.status, 'the root key is svc, not es').toBe(404);

    const flat = await stats(t, '/stats?group=false');
    expect(flat).toHaveProperty('proc-mem');
    expect(flat).toHaveProperty('svc-writer-meanFlushSize');
    expect(flat).toHaveProperty('sys-freeMem');
    expect(Object.values(flat).every((v) => typeof v !== 'object' || v === null)).toBe(true);
    const bad = await http(t, '/stats/proc?group=false', { headers: { Accept: JSON_TYPE } });
    expect(bad.status).toBe(400);
  });

  it('figures are real: writer, queue, tcp, disk and read counters move under load', async () => {
    const stream = unique('load');
    const before = await stats(t);
    // Enough load for the sampled rates (one sample a second) to cover it entirely.
    const durationMs = 2300;
    const started = Date.now();
    let appends = 0;
    let bytesSent = 0;
    const worker = async () => {
      while (Date.now() - started < durationMs) {
        const body = JSON.stringify([newEvent('Loaded', { n: appends, pad: 'x'.repeat(200) })]);
        bytesSent += Buffer.byteLength(body);
        const res = await http(t, `/streams/${stream}`, { method: 'POST', headers: { 'Content-Type': EVENTS_JSON }, body });
        expect(res.status).toBe(201);
        await res.arrayBuffer();
        appends++;
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
    const during = await stats(t);
    for (let from = 0; from < appends; from += 100) {
      const res = await http(t, `/streams/${stream}/${from}/forward/100`, { headers: { Accept: ATOM_JSON } });
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    }
    const after = await stats(t);

    expect(appends).toBeGreaterThan(20);
    const queueOf = (s: any): any => Object.values(s.svc.queue).find((q: any) => q.queueName === 'writer') ?? Object.values(s.svc.queue)[0];
    // Writer queue: exactly one item per append.
    expect(queueOf(during).totalItemsProcessed - queueOf(before).totalItemsProcessed).toBe(appends);
    expect(queueOf(during).avgItemsPerSecond, 'items per second while loaded').toBeGreaterThan(0);
    expect(queueOf(during).lengthLifetimePeak).toBeGreaterThanOrEqual(1);
    expect(queueOf(during).idleTimePercent).toBeLessThan(100);
    expect(during.svc.writer.maxFlushSize).toBeGreaterThanOrEqual(1);
    expect(during.svc.writer.meanFlushSize).toBeGreaterThan(0);
    expect(during.svc.checksum).toBeGreaterThan(before.svc.checksum);
    // TCP: every request body came in over the watched connections.
    expect(during.proc.tcp.receivedBytesTotal - before.proc.tcp.receivedBytesTotal).toBeGreaterThanOrEqual(bytesSent);
    expect(during.proc.tcp.sentBytesTotal).toBeGreaterThan(before.proc.tcp.sentBytesTotal);
    expect(parseFloat(during.proc.tcp.receivingSpeed), `receivingSpeed ${during.proc.tcp.receivingSpeed}`).toBeGreaterThan(0);
    expect(during.proc.tcp.sendingSpeed).toBeGreaterThan(0);
    // Process: CPU was spent, writes were made (sockets and the database).
    expect(during.proc.cpu, 'cpu while loaded').toBeGreaterThan(0);
    expect(during.proc.diskIo.writeOps).toBeGreaterThan(before.proc.diskIo.writeOps);
    expect(during.proc.gc.totalBytesInHeaps).toBeGreaterThan(0);
    // Reads are counted by the read index.
    const reads = (s: any) => s.svc.readIndex.cachedRecord + s.svc.readIndex.notCachedRecord;
    expect(reads(after) - reads(during)).toBeGreaterThanOrEqual(appends);
  });
});

describe('GET and POST /gossip', () => {
  let t: TestNode;
  beforeEach(async () => { t = await startTestNode(); });
  afterEach(async () => { await t?.dispose(); });

  const MEMBER_FIELDS = ['instanceId', 'timeStamp', 'state', 'isAlive', 'internalTcpIp', 'internalTcpPort', 'internalSecureTcpPort',
    'externalTcpIp', 'externalTcpPort', 'externalSecureTcpPort', 'internalHttpEndPointIp', 'internalHttpEndPointPort', 'httpEndPointIp',
    'httpEndPointPort', 'lastCommitPosition', 'writerCheckpoint', 'chaserCheckpoint', 'epochPosition', 'epochNumber', 'epochId',
    'nodePriority', 'isReadOnlyReplica', 'esVersion'];

  async function gossip(): Promise<any> {
    const res = await http(t, '/gossip', { authorization: '', headers: { Accept: JSON_TYPE } });
    expect(res.status).toBe(200);
    return res.json();
  }

  function peer(overrides: Record<string, unknown> = {}): Record<string, unknown> {
    return {
      instanceId: crypto.randomUUID(), timeStamp: new Date().toISOString(), state: 'Follower', isAlive: true,
      internalTcpIp: '10.0.0.2', internalTcpPort: 0, internalSecureTcpPort: 0, externalTcpIp: '10.0.0.2', externalTcpPort: 0,
      externalSecureTcpPort: 0, internalHttpEndPointIp: '10.0.0.2', internalHttpEndPointPort: 2113, httpEndPointIp: '10.0.0.2',
      httpEndPointPort: 2113, lastCommitPosition: 0, writerCheckpoint: 0, chaserCheckpoint: 0, epochPosition: 0, epochNumber: 0,
      epochId: '00000000-0000-0000-0000-000000000000', nodePriority: 0, isReadOnlyReplica: false, esVersion: '0.1.0', ...overrides,
    };
  }

  it('answers this node anonymously as the single alive Leader with every member field', async () => {
    const res = await http(t, '/gossip', { authorization: '', headers: { Accept: JSON_TYPE } });
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control') ?? '').toMatch(/no-cache/);
    const g = await res.json();
    const port = Number(new URL(t.url).port);
    expect(g.serverPort).toBe(port);
    expect(typeof g.serverIp).toBe('string');
    expect(g.members).toHaveLength(1);
    const [m] = g.members;
    for (const f of MEMBER_FIELDS) expect(m, f).toHaveProperty(f);
    expect(m.state).toBe('Leader');
    expect(m.isAlive).toBe(true);
    expect(m.instanceId).toMatch(GUID);
    expect(m.httpEndPointPort).toBe(port);
    expect(m.httpEndPointIp).toBe(new URL(t.url).hostname);
    expect(m.isReadOnlyReplica).toBe(false);
    expect(Number.isNaN(Date.parse(m.timeStamp))).toBe(false);

    // The checkpoints follow the log.
    const res2 = await append(t, unique('gossip'), [newEvent('Moved', { x: 1 })]);
    expect(res2.status).toBe(201);
    const after = (await gossip()).members[0];
    expect(after.writerCheckpoint).toBeGreaterThan(m.writerCheckpoint);
    expect(after.instanceId).toBe(m.instanceId);

    const xml = await http(t, '/gossip', { authorization: '', headers: { Accept: 'text/xml' } });
    expect(xml.status).toBe(200);
    expect(JSON.stringify(new XMLParser().parse(await xml.text()))).toContain('Leader');
  });

  it('POST /gossip: 401 unless $ops or $admins, who get 403 and a message, valid body or not; GET /gossip still lists this node alone', async () => {
    const plain = unique('gossiper');
    await createUser(t, plain, 'pw');
    const self = (await gossip()).members[0];
    const bodies = [
      JSON.stringify({ members: [self, peer()] }),
      JSON.stringify({ members: [peer({ state: 'Leader', httpEndPointIp: '203.0.113.9' })] }),
      JSON.stringify({ members: Array.from({ length: 500 }, () => peer()) }),
      '{"members": [',
    ];
    const callers = [['anonymous', '', 401], ['wrong password', basic(plain, 'nope'), 401], ['plain user', basic(plain, 'pw'), 401],
      ['ops', OPS, 403], ['admin', ADMIN, 403]] as const;
    for (const [who, authorization, status] of callers) {
      for (const body of bodies) {
        const res = await http(t, '/gossip', { method: 'POST', authorization, headers: { 'Content-Type': JSON_TYPE }, body });
        expect(res.status, who).toBe(status);
        const text = await res.text();
        if (status === 403) expect(text).toMatch(/takes gossip from no node/);
        else expect(text, who).not.toMatch(/gossip/);
      }
    }
    const g = await gossip();
    expect(g.members).toHaveLength(1);
    expect(g.members[0].instanceId).toBe(self.instanceId);
    expect(g.members[0].state).toBe('Leader');
  });
});

describe('admin commands', () => {
  let t: TestNode;
  beforeEach(async () => { t = await startTestNode(); });
  afterEach(async () => { await t?.dispose(); });

  it('shutdown and reloadconfig refuse anonymous and plain users with 401; the node keeps running', async () => {
    const plain = unique('plainadmin');
    await createUser(t, plain, 'pw');
    for (const path of ['/admin/shutdown', '/admin/reloadconfig']) {
      for (const [who, auth] of [['anonymous', ''], ['plain user', basic(plain, 'pw')]] as const) {
        const res = await http(t, path, { method: 'POST', authorization: auth });
        expect(res.status, `${who} ${path}`).toBe(401);
        await res.arrayBuffer();
      }
    }
    const ping = await http(t, '/ping');
    expect(ping.status).toBe(200);
  });

  it('reloadconfig answers 200 for $ops and $admins', async () => {
    for (const auth of [OPS, ADMIN]) {
      const res = await http(t, '/admin/reloadconfig', { method: 'POST', authorization: auth });
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    }
  });

  it('an admin shutdown answers 200 and then the node stops listening', async () => {
    const res = await http(t, '/admin/shutdown', { method: 'POST' });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    const deadline = Date.now() + 10_000;
    let refused = false;
    while (!refused && Date.now() < deadline) {
      try {
        const r = await fetch(`${t.url}/ping`, { headers: { Connection: 'close' } });
        await r.arrayBuffer();
        await new Promise((r2) => setTimeout(r2, 50));
      } catch {
        refused = true;
      }
    }
    expect(refused, 'the port is closed after the shutdown').toBe(true);
  });
});

describe('POST /admin/node/priority/{n}', () => {
  let t: TestNode;
  beforeEach(async () => { t = await startTestNode({ nodePriority: 7 }); });
  afterEach(async () => { await t?.dispose(); });

  const priority = async () => ((await (await http(t, '/gossip', { authorization: '', headers: { Accept: JSON_TYPE } })).json()).members[0].nodePriority);
  const set = (value: string, authorization?: string) => http(t, `/admin/node/priority/${value}`, { method: 'POST', authorization });

  it('$ops and $admins set it (200, no body) and gossip shows it; a restart starts again from --node-priority', async () => {
    expect(await priority()).toBe(7);
    for (const [auth, value] of [[OPS, -3], [ADMIN, 2147483647], [OPS, -2147483648], [ADMIN, 0]] as const) {
      const res = await set(String(value), auth);
      expect(res.status, String(value)).toBe(200);
      expect(await res.text()).toBe('');
      expect(await priority()).toBe(value);
    }
    expect((await set('+12')).status).toBe(200);
    expect(await priority()).toBe(12);
    await t.restart();
    expect(await priority()).toBe(7);
  });

  it('a value that is no int32 is 400 with the reason; anonymous and plain users 401; neither changes it', async () => {
    for (const value of ['abc', '1.5', '1e3', '0x10', '%201', '2147483648', '-2147483649', '99999999999999999999', 'NaN', '%EF%BC%91']) {
      const res = await set(value);
      expect(res.status, value).toBe(400);
      expect(await res.text(), value).toMatch(/must be an integer from -2147483648 to 2147483647/);
    }
    const plain = unique('prio');
    await createUser(t, plain, 'pw');
    for (const auth of ['', basic(plain, 'pw')]) {
      const res = await set('9', auth);
      expect(res.status).toBe(401);
      await res.arrayBuffer();
    }
    expect(await priority()).toBe(7);
  });
});

describe('POST /admin/shutdown on a real process', () => {
  const dirs: string[] = [];
  const procs: NodeProcess[] = [];
  afterEach(async () => {
    for (const p of procs.splice(0)) {
      if (p.child.exitCode === null && p.child.signalCode === null) {
        p.child.kill('SIGKILL');
        await p.exited;
      }
    }
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  async function readAllEventIds(url: string, stream: string): Promise<Set<string>> {
    const ids = new Set<string>();
    for (let from = 0; ; from += 500) {
      const res = await fetch(`${url}/streams/${stream}/${from}/forward/500?embed=body`, { headers: { Authorization: ADMIN, Accept: ATOM_JSON } });
      if (res.status === 404 && from === 0) return ids;
      expect(res.status).toBe(200);
      const entries = (await res.json()).entries as any[];
      for (const e of entries) ids.add(e.eventId);
      if (entries.length < 500) return ids;
    }
  }

  it('$ops shutdown: 200, exit code 0, and every acknowledged append survives a restart on the same --db', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-shutdown-'));
    dirs.push(dir);
    const first = await spawnNode(['--db', dir]);
    procs.push(first);
    const stream = unique('durable');
    const acknowledged: string[] = [];
    let stop = false;
    const writer = async () => {
      while (!stop) {
        const eventId = crypto.randomUUID();
        try {
          const res = await fetch(`${first.url}/streams/${stream}`, {
            method: 'POST', headers: { Authorization: ADMIN, 'Content-Type': EVENTS_JSON },
            body: JSON.stringify([{ eventId, eventType: 'Kept', data: { eventId } }]),
          });
          await res.arrayBuffer();
          if (res.status === 201) acknowledged.push(eventId);
          else if (res.status !== 503) throw new Error(`append answered ${res.status}`);
          else stop = true;
        } catch (err) {
          if ((err as Error).message.startsWith('append answered')) throw err;
          stop = true; // the connection was refused or closed: the node is gone
        }
      }
    };
    const writers = Array.from({ length: 6 }, writer);
    while (acknowledged.length < 150) await new Promise((r) => setTimeout(r, 20));

    const res = await fetch(`${first.url}/admin/shutdown`, { method: 'POST', headers: { Authorization: OPS } });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    const code = await Promise.race([first.exited, new Promise((r) => setTimeout(() => r('timeout'), 15_000))]);
    expect(code).toBe(0);
    stop = true;
    await Promise.all(writers);
    expect(acknowledged.length).toBeGreaterThanOrEqual(150);

    const second = await spawnNode(['--db', dir]);
    procs.push(second);
    const stored = await readAllEventIds(second.url, stream);
    const lost = acknowledged.filter((id) => !stored.has(id));
    expect(lost, `${lost.length} of ${acknowledged.length} acknowledged appends lost`).toEqual([]);
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
  });

  it('shutdown by a plain user is refused and the process keeps running', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-shutdown-'));
    dirs.push(dir);
    const p = await spawnNode(['--db', dir]);
    procs.push(p);
    const created = await fetch(`${p.url}/users/`, {
      method: 'POST', headers: { Authorization: ADMIN, 'Content-Type': JSON_TYPE },
      body: JSON.stringify({ loginName: 'pat', fullName: 'Pat', groups: [], password: 'pw' }),
    });
    expect(created.status).toBe(201);
    const res = await fetch(`${p.url}/admin/shutdown`, { method: 'POST', headers: { Authorization: basic('pat', 'pw') } });
    expect(res.status).toBe(401);
    await new Promise((r) => setTimeout(r, 300));
    expect(p.child.exitCode).toBeNull();
    const ping = await fetch(`${p.url}/ping`);
    expect(ping.status).toBe(200);
    const byAdmin = await fetch(`${p.url}/admin/shutdown`, { method: 'POST', headers: { Authorization: ADMIN } });
    expect(byAdmin.status).toBe(200);
    expect(await p.exited).toBe(0);
  });
});
