import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { X509Certificate } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { MAIN, spawnNode, type NodeProcess } from './support/process.js';

// TLS and live certificate reload (issue 3; subscriptions-and-maintenance.md §5; seed spec
// "Certificate renewal procedure"). The certificates are made here with openssl in a temp dir
// (a CA, node certificates A and B signed by it, and broken material); no key is ever committed.
// Every request that must see a certificate opens its own TLS connection (agent: false), so
// each one is a fresh handshake. These tests run dist/src/main.js: build first.

const CN = 'node.svc.test';
// (Not imported from support/node.ts: that module loads the server in-process, which these tests do not need.)
const ADMIN = 'Basic ' + Buffer.from('admin:changeit').toString('base64');
const OPS = 'Basic ' + Buffer.from('ops:changeit').toString('base64');

interface Material { dir: string; ca: Buffer; files: Record<string, string>; fingerprint: Record<string, string> }

function openssl(cwd: string, args: string[]): void {
  execFileSync('openssl', args, { cwd, stdio: 'pipe' });
}

/** A CA, node certs A and B (same CN, different keys), C (other CN), D (rogue CA), a stray key. */
function makeMaterial(): Material {
  const dir = mkdtempSync(join(tmpdir(), 'svc-tls-'));
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  const ca = (name: string, subject: string) => openssl(dir, ['req', '-x509', ...ec, '-keyout', `${name}.key`, '-out', `${name}.crt`,
    '-days', '2', '-subj', `/CN=${subject}`, '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
  ca('ca', 'SVC Test Root CA');
  ca('rogue', 'SVC Rogue Root CA');
  writeFileSync(join(dir, 'ext.cnf'), [
    'basicConstraints=CA:FALSE', 'keyUsage=critical,digitalSignature,keyEncipherment', 'extendedKeyUsage=serverAuth,clientAuth',
    `subjectAltName=DNS:${CN},DNS:localhost,IP:127.0.0.1`, '',
  ].join('\n'));
  const leaf = (name: string, subject: string, issuer: string, serial: number) => {
    openssl(dir, ['req', ...ec, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${subject}`]);
    openssl(dir, ['x509', '-req', '-in', `${name}.csr`, '-CA', `${issuer}.crt`, '-CAkey', `${issuer}.key`, '-set_serial', String(serial),
      '-days', '2', '-out', `${name}.crt`, '-extfile', 'ext.cnf']);
  };
  leaf('a', CN, 'ca', 1001);
  leaf('b', CN, 'ca', 1002);
  leaf('c', 'intruder.svc.test', 'ca', 1003);
  leaf('d', CN, 'rogue', 1004);
  openssl(dir, ['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-out', 'stray.key']);
  const files: Record<string, string> = {};
  for (const n of ['ca', 'rogue', 'a', 'b', 'c', 'd', 'stray']) {
    if (n !== 'stray') files[`${n}.crt`] = join(dir, `${n}.crt`);
    files[`${n}.key`] = join(dir, `${n}.key`);
  }
  const fingerprint: Record<string, string> = {};
  for (const n of ['a', 'b', 'c', 'd']) fingerprint[n] = new X509Certificate(readFileSync(files[`${n}.crt`])).fingerprint256;
  return { dir, ca: readFileSync(files['ca.crt']), files, fingerprint };
}

interface Reply { status: number; body: string; fingerprint: string; reused: boolean }

/** One HTTPS request; a new connection unless a keep-alive agent is given. */
function request(url: string, ca: Buffer, options: { method?: string; auth?: string; agent?: https.Agent; timeoutMs?: number; json?: unknown } = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = https.request(url, {
      method: options.method ?? 'GET', ca, agent: options.agent ?? false,
      headers: {
        ...(options.auth ? { Authorization: options.auth } : {}), Accept: 'application/json',
        ...(options.json !== undefined ? { 'Content-Type': 'application/json' } : {}),
      },
    }, (res) => {
      const fingerprint = (res.socket as TLSSocket).getPeerCertificate().fingerprint256;
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8'), fingerprint, reused: req.reusedSocket }));
      res.on('error', reject);
    });
    req.setTimeout(options.timeoutMs ?? 10_000, () => req.destroy(new Error('request timed out')));
    req.on('error', reject);
    req.end(options.json !== undefined ? JSON.stringify(options.json) : undefined);
  });
}

/** Puts a certificate and key at the node's configured paths, each by an atomic rename. */
function install(live: string, m: Material, cert: string | undefined, key: string | undefined): void {
  if (cert) {
    copyFileSync(m.files[cert], join(live, 'node.crt.tmp'));
    renameSync(join(live, 'node.crt.tmp'), join(live, 'node.crt'));
  }
  if (key) {
    copyFileSync(m.files[key], join(live, 'node.key.tmp'));
    renameSync(join(live, 'node.key.tmp'), join(live, 'node.key'));
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Polls until fresh connections present `fingerprint`; throws after `timeoutMs`. */
async function waitForCertificate(url: string, ca: Buffer, fingerprint: string, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    const r = await request(`${url}/ping`, ca);
    last = r.fingerprint;
    if (last === fingerprint) return;
    await sleep(50);
  }
  throw new Error(`new connections still present ${last}, not ${fingerprint}`);
}

/** pino lines (JSON) written since `from` characters of output. */
function logLines(output: string, from = 0): any[] {
  return output.slice(from).split('\n').filter((l) => l.startsWith('{')).map((l) => {
    try {
      return JSON.parse(l);
    } catch {
      return {};
    }
  });
}

/** Waits until an error-level (>= 50) log line appears after `from`. */
async function waitForErrorLog(node: NodeProcess, from: number, timeoutMs = 5000): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const line = logLines(node.output(), from).find((l) => typeof l.level === 'number' && l.level >= 50);
    if (line) return line;
    await sleep(50);
  }
  throw new Error(`no error logged after the reload:\n${node.output().slice(from)}`);
}

describe('TLS and live certificate reload', () => {
  let m: Material;
  const dirs: string[] = [];
  const procs: NodeProcess[] = [];

  beforeAll(() => { m = makeMaterial(); });
  afterAll(() => { if (m) rmSync(m.dir, { recursive: true, force: true }); });
  afterEach(async () => {
    for (const p of procs.splice(0)) {
      if (p.child.exitCode === null && p.child.signalCode === null) {
        p.child.kill('SIGKILL');
        await p.exited;
      }
    }
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  /** A node data dir, a live cert dir holding `cert`/`key`, and a CA dir with the trusted root. */
  function layout(cert: string, key: string) {
    const dir = mkdtempSync(join(tmpdir(), 'svc-tlsnode-'));
    dirs.push(dir);
    const live = join(dir, 'live');
    const roots = join(dir, 'ca');
    mkdirSync(live);
    mkdirSync(roots);
    copyFileSync(m.files['ca.crt'], join(roots, 'ca.crt'));
    install(live, m, cert, key);
    return { dir, live, roots, certFile: join(live, 'node.crt'), keyFile: join(live, 'node.key') };
  }

  async function secureNode(cert: string, key: string, extra: string[] = []) {
    const l = layout(cert, key);
    const node = await spawnNode(['--db', join(l.dir, 'db'), '--insecure', 'false', '--certificate-file', l.certFile,
      '--certificate-private-key-file', l.keyFile, '--trusted-root-certificates-path', l.roots, ...extra]);
    procs.push(node);
    expect(node.url).toMatch(/^https:\/\//);
    return { ...l, node };
  }

  async function reload(url: string, auth = ADMIN): Promise<Reply> {
    const r = await request(`${url}/admin/reloadconfig`, m.ca, { method: 'POST', auth });
    expect(r.status, r.body).toBe(200);
    return r;
  }

  /** A failed reload: error logged, the reload answer (if it says anything) is not a success, B kept. */
  async function expectFailedReloadKeeps(node: NodeProcess, url: string, fingerprint: string): Promise<void> {
    const from = node.output().length;
    const r = await reload(url);
    const error = await waitForErrorLog(node, from);
    expect(error.level).toBeGreaterThanOrEqual(50);
    expect(r.body).not.toMatch(/"Reloaded"/);
    for (let i = 0; i < 5; i++) {
      const after = await request(`${url}/ping`, m.ca);
      expect(after.status).toBe(200);
      expect(after.fingerprint, 'the previous certificate stays in force').toBe(fingerprint);
    }
  }

  it('serves HTTPS with certificate A, verifiable against the test CA; plain HTTP is not served', async () => {
    const { node } = await secureNode('a.crt', 'a.key');
    const r = await request(`${node.url}/ping`, m.ca);
    expect(r.status).toBe(200);
    expect(JSON.parse(r.body)).toEqual({ text: 'Ping request successfully handled' });
    expect(r.fingerprint).toBe(m.fingerprint.a);
    // The certificate does not verify without the CA.
    await expect(new Promise((resolve, reject) => {
      const req = https.request(`${node.url}/ping`, { agent: false }, resolve);
      req.on('error', reject);
      req.end();
    })).rejects.toThrow();
    // Plain HTTP on the TLS port gets no HTTP answer.
    const plain = node.url.replace(/^https:/, 'http:');
    const outcome = await fetch(`${plain}/ping`, { signal: AbortSignal.timeout(5000) }).then((res) => res.status, () => 'failed');
    expect(outcome).not.toBe(200);
  });

  it('a reload switches new connections from A to B with zero failed requests; an open keep-alive connection keeps working', async () => {
    const { node, live } = await secureNode('a.crt', 'a.key');
    expect((await request(`${node.url}/ping`, m.ca)).fingerprint).toBe(m.fingerprint.a);

    // A keep-alive connection opened before the swap.
    const keepAlive = new https.Agent({ keepAlive: true, maxSockets: 1, ca: m.ca });
    const first = await request(`${node.url}/ping`, m.ca, { agent: keepAlive });
    expect(first.status).toBe(200);
    expect(first.fingerprint).toBe(m.fingerprint.a);

    // Continuous fresh-connection requests across the swap.
    const results: Array<{ at: number; ok: boolean; fingerprint?: string; error?: string }> = [];
    let stop = false;
    const loop = async () => {
      while (!stop) {
        const at = Date.now();
        try {
          const r = await request(`${node.url}/ping`, m.ca);
          results.push({ at, ok: r.status === 200, fingerprint: r.fingerprint, error: r.status === 200 ? undefined : `status ${r.status}` });
        } catch (err) {
          results.push({ at, ok: false, error: (err as Error).message });
        }
      }
    };
    const loops = [loop(), loop(), loop()];
    await sleep(300);
    install(live, m, 'b.crt', 'b.key');
    const reloadAnswer = await reload(node.url, OPS);
    expect(reloadAnswer.body).not.toMatch(/"Failed"/);
    await waitForCertificate(node.url, m.ca, m.fingerprint.b);
    const switchedAt = Date.now();
    await sleep(400);
    stop = true;
    await Promise.all(loops);

    const failures = results.filter((r) => !r.ok);
    expect(failures, JSON.stringify(failures.slice(0, 5))).toEqual([]);
    expect(results.length).toBeGreaterThan(20);
    expect(results.some((r) => r.fingerprint === m.fingerprint.a), 'A served before the swap').toBe(true);
    const late = results.filter((r) => r.at > switchedAt);
    expect(late.length).toBeGreaterThan(0);
    expect(late.every((r) => r.fingerprint === m.fingerprint.b), 'every connection after the switch presents B').toBe(true);
    expect(results.every((r) => r.fingerprint === m.fingerprint.a || r.fingerprint === m.fingerprint.b)).toBe(true);

    // The keep-alive connection is the same socket, still on A, and still answers.
    const again = await request(`${node.url}/ping`, m.ca, { agent: keepAlive });
    expect(again.status).toBe(200);
    expect(again.reused, 'the open connection was reused, not reopened').toBe(true);
    expect(again.fingerprint).toBe(m.fingerprint.a);
    keepAlive.destroy();

    expect((await request(`${node.url}/ping`, m.ca)).fingerprint).toBe(m.fingerprint.b);
  });

  it('a reload with a private key that does not match the certificate fails, is logged, and B stays', async () => {
    const { node, live } = await secureNode('b.crt', 'b.key');
    expect((await request(`${node.url}/ping`, m.ca)).fingerprint).toBe(m.fingerprint.b);
    install(live, m, 'a.crt', 'stray.key');
    await expectFailedReloadKeeps(node, node.url, m.fingerprint.b);
    // The key alone replaced (certificate unchanged) is just as broken.
    install(live, m, 'b.crt', 'a.key');
    await expectFailedReloadKeeps(node, node.url, m.fingerprint.b);
  });

  it('a reload with an unparsable key file fails and B stays', async () => {
    const { node, live } = await secureNode('b.crt', 'b.key');
    install(live, m, 'a.crt', undefined);
    writeFileSync(join(live, 'node.key'), '-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n');
    await expectFailedReloadKeeps(node, node.url, m.fingerprint.b);
  });

  it('a reload with a missing certificate or key file fails and B stays', async () => {
    const { node, live, certFile, keyFile } = await secureNode('b.crt', 'b.key');
    unlinkSync(certFile);
    await expectFailedReloadKeeps(node, node.url, m.fingerprint.b);
    install(live, m, 'a.crt', undefined);
    unlinkSync(keyFile);
    await expectFailedReloadKeeps(node, node.url, m.fingerprint.b);
  });

  it('a reload with a certificate whose chain does not verify against the trusted roots fails and B stays', async () => {
    const { node, live } = await secureNode('b.crt', 'b.key');
    install(live, m, 'd.crt', 'd.key');
    await expectFailedReloadKeeps(node, node.url, m.fingerprint.b);
  });

  it('a reload with a certificate whose common name does not match the reserved node common name fails and B stays', async () => {
    const { node, live } = await secureNode('b.crt', 'b.key', ['--certificate-reserved-node-common-name', CN]);
    install(live, m, 'c.crt', 'c.key');
    await expectFailedReloadKeeps(node, node.url, m.fingerprint.b);
    // A certificate that carries the reserved name is accepted.
    install(live, m, 'a.crt', 'a.key');
    await reload(node.url);
    await waitForCertificate(node.url, m.ca, m.fingerprint.a);
  });

  it('after failed reloads a good reload still applies (nothing was left half-swapped)', async () => {
    const { node, live } = await secureNode('b.crt', 'b.key');
    install(live, m, 'a.crt', 'stray.key');
    await expectFailedReloadKeeps(node, node.url, m.fingerprint.b);
    install(live, m, 'a.crt', 'a.key');
    await reload(node.url);
    await waitForCertificate(node.url, m.ca, m.fingerprint.a);
    for (let i = 0; i < 3; i++) expect((await request(`${node.url}/ping`, m.ca)).fingerprint).toBe(m.fingerprint.a);
  });

  it('SIGHUP reloads the certificate without a restart', async () => {
    const { node, live } = await secureNode('a.crt', 'a.key');
    expect((await request(`${node.url}/ping`, m.ca)).fingerprint).toBe(m.fingerprint.a);
    install(live, m, 'b.crt', 'b.key');
    node.child.kill('SIGHUP');
    await waitForCertificate(node.url, m.ca, m.fingerprint.b);
    expect(node.child.exitCode, 'SIGHUP does not stop the node').toBeNull();
    const r = await request(`${node.url}/ping`, m.ca);
    expect(r.status).toBe(200);
    // A failed SIGHUP reload keeps B too.
    const from = node.output().length;
    install(live, m, 'a.crt', 'stray.key');
    node.child.kill('SIGHUP');
    await waitForErrorLog(node, from);
    expect((await request(`${node.url}/ping`, m.ca)).fingerprint).toBe(m.fingerprint.b);
    expect(node.child.exitCode).toBeNull();
  });

  it('reloadconfig is refused (401) to anonymous and plain users and changes nothing', async () => {
    const { node, live } = await secureNode('a.crt', 'a.key');
    const created = await request(`${node.url}/users/`, m.ca, {
      method: 'POST', auth: ADMIN, json: { loginName: 'pat', fullName: 'Pat', groups: [], password: 'pw' },
    });
    expect(created.status, created.body).toBe(201);
    install(live, m, 'b.crt', 'b.key');
    const anonymous = await request(`${node.url}/admin/reloadconfig`, m.ca, { method: 'POST' });
    expect(anonymous.status).toBe(401);
    const plain = await request(`${node.url}/admin/reloadconfig`, m.ca, { method: 'POST', auth: 'Basic ' + Buffer.from('pat:pw').toString('base64') });
    expect(plain.status).toBe(401);
    await sleep(300);
    expect((await request(`${node.url}/ping`, m.ca)).fingerprint).toBe(m.fingerprint.a);
  });

  /** A node configured by a YAML file alone (spawnNode always adds --log-level, which would override the YAML). */
  async function yamlNode(cert: string, key: string, level: string) {
    const l = layout(cert, key);
    const yamlPath = join(l.dir, 'node.yaml');
    const yaml = (certFile: string, keyFile: string, logLevel: string) => [
      `Db: ${join(l.dir, 'db')}`, 'HttpPort: 0', 'Insecure: false', `CertificateFile: ${certFile}`, `CertificatePrivateKeyFile: ${keyFile}`,
      `TrustedRootCertificatesPath: ${l.roots}`, `LogLevel: ${logLevel}`, '',
    ].join('\n');
    writeFileSync(yamlPath, yaml(l.certFile, l.keyFile, level));
    const child = spawn(process.execPath, [MAIN, '--config', yamlPath], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout!.on('data', (d) => { out += d; });
    child.stderr!.on('data', (d) => { out += d; });
    const exited = once(child, 'exit').then(([code]) => code as number | null);
    const node: NodeProcess = { child, url: '', output: () => out, exited };
    procs.push(node);
    const deadline = Date.now() + 20_000;
    let url = '';
    while (!url && Date.now() < deadline && child.exitCode === null) {
      url = /"url":"(https?[^"]+)"/.exec(out)?.[1] ?? '';
      if (!url) await sleep(50);
    }
    expect(url, out).toMatch(/^https:\/\//);
    return { ...l, yamlPath, yaml, node, url };
  }

  async function optionsOf(url: string): Promise<Map<string, any>> {
    const r = await request(`${url}/info/options`, m.ca, { auth: ADMIN });
    expect(r.status).toBe(200);
    return new Map((JSON.parse(r.body) as any[]).map((o) => [o.name.toLowerCase(), o]));
  }

  it('a reload re-reads the YAML configuration: new certificate paths and the log level', async () => {
    const { dir, yamlPath, yaml, node, url } = await yamlNode('a.crt', 'a.key', 'info');
    const bCert = join(dir, 'b-node.crt');
    const bKey = join(dir, 'b-node.key');
    copyFileSync(m.files['b.crt'], bCert);
    copyFileSync(m.files['b.key'], bKey);
    expect((await request(`${url}/ping`, m.ca)).fingerprint).toBe(m.fingerprint.a);

    // Point the YAML at B and lower the log level to warn.
    writeFileSync(yamlPath, yaml(bCert, bKey, 'warn'));
    await reload(url);
    await waitForCertificate(url, m.ca, m.fingerprint.b);
    const byName = await optionsOf(url);
    expect(byName.get('loglevel')).toMatchObject({ value: 'warn', configurationSource: 'yaml' });
    expect(byName.get('certificatefile')).toMatchObject({ value: bCert, configurationSource: 'yaml' });

    // Under warn a successful reload logs nothing at info level...
    const quietFrom = node.output().length;
    await reload(url);
    await sleep(500);
    expect(logLines(node.output(), quietFrom).filter((l) => l.level === 30), node.output().slice(quietFrom)).toEqual([]);
    // ...and back at info it does.
    writeFileSync(yamlPath, yaml(bCert, bKey, 'info'));
    const loudFrom = node.output().length;
    await reload(url);
    const loudDeadline = Date.now() + 5000;
    while (logLines(node.output(), loudFrom).filter((l) => l.level === 30).length === 0 && Date.now() < loudDeadline) await sleep(50);
    expect(logLines(node.output(), loudFrom).filter((l) => l.level === 30).length, node.output().slice(loudFrom)).toBeGreaterThan(0);
    expect((await request(`${url}/ping`, m.ca)).fingerprint).toBe(m.fingerprint.b);
  });

  it('a failed reload leaves the whole previous configuration in force: certificate, paths and log level', async () => {
    const { dir, yamlPath, yaml, node, url } = await yamlNode('b.crt', 'b.key', 'info');
    const before = await optionsOf(url);
    // The YAML now asks for a quieter log and a certificate file that does not exist.
    writeFileSync(yamlPath, yaml(join(dir, 'missing.crt'), join(dir, 'missing.key'), 'error'));
    const from = node.output().length;
    await reload(url);
    await waitForErrorLog(node, from);
    expect((await request(`${url}/ping`, m.ca)).fingerprint).toBe(m.fingerprint.b);
    const after = await optionsOf(url);
    for (const name of ['loglevel', 'certificatefile', 'certificateprivatekeyfile']) {
      expect(after.get(name), name).toEqual(before.get(name));
    }
    // Still logging at info: the SIGHUP notice (info) is written.
    const hupFrom = node.output().length;
    node.child.kill('SIGHUP');
    await waitForErrorLog(node, hupFrom); // the SIGHUP reload fails the same way
    expect(logLines(node.output(), hupFrom).filter((l) => l.level === 30).length, node.output().slice(hupFrom)).toBeGreaterThan(0);
    expect((await request(`${url}/ping`, m.ca)).fingerprint).toBe(m.fingerprint.b);
  });

  it('a reload whose YAML file became invalid fails, is logged, and changes nothing', async () => {
    const { yamlPath, node, url } = await yamlNode('b.crt', 'b.key', 'info');
    const before = await optionsOf(url);
    writeFileSync(yamlPath, 'LogLevel: [not, a, level\nCertificateFile: 42: x\n');
    await expectFailedReloadKeeps(node, url, m.fingerprint.b);
    writeFileSync(yamlPath, 'NoSuchOption: true\n');
    await expectFailedReloadKeeps(node, url, m.fingerprint.b);
    const after = await optionsOf(url);
    expect([...after.values()]).toEqual([...before.values()]);
    expect(node.child.exitCode).toBeNull();
  });

  it('concurrent reload triggers (HTTP and SIGHUP) are all answered and leave one consistent certificate', async () => {
    const { node, live } = await secureNode('a.crt', 'a.key');
    install(live, m, 'b.crt', 'b.key');
    const from = node.output().length;
    const answers = await Promise.all([
      ...Array.from({ length: 6 }, () => request(`${node.url}/admin/reloadconfig`, m.ca, { method: 'POST', auth: ADMIN })),
      (async () => { node.child.kill('SIGHUP'); return { status: 200, body: '', fingerprint: '', reused: false }; })(),
    ]);
    for (const a of answers) expect(a.status, a.body).toBe(200);
    await waitForCertificate(node.url, m.ca, m.fingerprint.b);
    await sleep(300);
    expect(logLines(node.output(), from).filter((l) => l.level >= 50), node.output().slice(from)).toEqual([]);
    for (let i = 0; i < 3; i++) expect((await request(`${node.url}/ping`, m.ca)).fingerprint).toBe(m.fingerprint.b);
    expect(node.child.exitCode).toBeNull();
  });

  it('with --insecure left at its default (true) the node serves plain HTTP even when certificates are configured', async () => {
    const l = layout('a.crt', 'a.key');
    const node = await spawnNode(['--db', join(l.dir, 'db'), '--certificate-file', l.certFile, '--certificate-private-key-file', l.keyFile]);
    procs.push(node);
    expect(node.url).toMatch(/^http:\/\//);
    const res = await fetch(`${node.url}/ping`);
    expect(res.status).toBe(200);
  });

  it('a secure start with broken material refuses to start (non-zero exit) instead of serving', async () => {
    const run = async (args: string[]) => {
      const child = spawn(process.execPath, [MAIN, '--http-port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      child.stdout.on('data', (d) => { out += d; });
      child.stderr.on('data', (d) => { out += d; });
      const code = await Promise.race([once(child, 'exit').then(([c]) => c), sleep(8_000).then(() => 'still running')]);
      if (code === 'still running') child.kill('SIGKILL');
      return { code, out };
    };
    const l = layout('a.crt', 'stray.key');
    const noCerts = await run(['--db', join(l.dir, 'db1'), '--insecure', 'false']);
    expect(noCerts.code, noCerts.out).not.toBe(0);
    expect(noCerts.code).not.toBe('still running');
    const mismatched = await run(['--db', join(l.dir, 'db2'), '--insecure', 'false', '--certificate-file', l.certFile,
      '--certificate-private-key-file', l.keyFile]);
    expect(mismatched.code, mismatched.out).not.toBe(0);
    expect(mismatched.code).not.toBe('still running');
    install(l.live, m, 'c.crt', 'c.key');
    const wrongName = await run(['--db', join(l.dir, 'db3'), '--insecure', 'false', '--certificate-file', l.certFile,
      '--certificate-private-key-file', l.keyFile, '--certificate-reserved-node-common-name', CN]);
    expect(wrongName.code, wrongName.out).not.toBe(0);
    expect(wrongName.code).not.toBe('still running');
  });
});
