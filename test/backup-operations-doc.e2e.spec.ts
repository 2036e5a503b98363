import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { X509Certificate } from 'node:crypto';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { connect } from 'node:tls';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { withReference } from '../src/config/reference.js';
import { tempDir } from './support/backup.js';
import { freePort } from '../bench/processes.js';

// docs/operations.md is run, not just read: every ```sh block, in order, against a real node
// started by the guide's own `npm start` lines (the paths and port replaced by temp ones, as
// the guide says), each command expected to exit 0; then what the commands were for is checked
// (the backup restored the data; the renewed certificate is the one served). And its
// configuration reference is the option table's.

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DOC_PATH = join(ROOT, 'docs', 'operations.md');
const doc = readFileSync(DOC_PATH, 'utf8');
const base = tempDir('ops-doc');
let node: { shell: ChildProcess; pid: number; output: () => string } | undefined;

afterAll(async () => {
  await stopNode();
  rmSync(base, { recursive: true, force: true });
});

function localize(line: string, port: number): string {
  return line.replaceAll('/var/lib/svc', join(base, 'lib')).replaceAll('/var/backups/svc', join(base, 'backups'))
    .replaceAll('/etc/svc/certs', join(base, 'certs')).replaceAll('127.0.0.1:2113', `127.0.0.1:${port}`);
}

async function run(line: string): Promise<void> {
  const child = spawn('sh', ['-c', line], { cwd: ROOT, env: { ...process.env, SVC_PID: String(node?.pid ?? '') }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  child.stderr.on('data', (d) => { out += d; });
  const [code] = await once(child, 'exit');
  expect(code, `${line}\n${out}`).toBe(0);
}

async function startNode(line: string, port: number): Promise<void> {
  const shell = spawn('sh', ['-c', `${line} --http-port ${port}`], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  shell.stdout!.on('data', (d) => { out += d; });
  shell.stderr!.on('data', (d) => { out += d; });
  const pid = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${line}: no start line\n${out}`)), 30_000);
    const check = () => {
      const started = /"pid":(\d+)[^\n]*"url":"http/.exec(out);
      if (started) { clearTimeout(timer); resolve(Number(started[1])); }
    };
    shell.stdout!.on('data', check);
    shell.once('exit', () => { clearTimeout(timer); reject(new Error(`${line}: exited\n${out}`)); });
  });
  node = { shell, pid, output: () => out };
}

async function stopNode(): Promise<void> {
  if (!node) return;
  const { shell, pid } = node;
  node = undefined;
  if (shell.exitCode !== null) return;
  process.kill(pid, 'SIGTERM');
  await once(shell, 'exit');
}

/** The node's certificate as a client sees it in a new handshake. */
async function servedFingerprint(port: number, ca: Buffer): Promise<string> {
  const socket = connect({ host: '127.0.0.1', port, ca, servername: 'localhost' });
  await once(socket, 'secureConnect');
  const fingerprint = socket.getPeerCertificate().fingerprint256;
  socket.destroy();
  return fingerprint;
}

describe('docs/operations.md', () => {
  it('its configuration reference is the option table\'s', () => {
    expect(doc).toBe(withReference(doc));
  });

  it('every command it gives runs, in order, and does what it says', async () => {
    const blocks = [...doc.matchAll(/```sh doc-test:(start|running|stopped)\n([\s\S]*?)```/g)]
      .map((m) => ({ kind: m[1], lines: m[2].trim().split('\n') }));
    expect(blocks.length, 'every sh block is run').toBe((doc.match(/```sh/g) ?? []).length);
    const port = await freePort();
    const stream = `ops-doc-${Date.now()}`;
    let starts = 0;
    for (const block of blocks) {
      if (block.kind !== 'running') await stopNode();
      else expect(node, 'a running block needs a started node').toBeDefined();
      for (const line of block.lines.map((l) => localize(l, port))) {
        if (block.kind === 'start') await startNode(line, port);
        else await run(line);
      }
      if (block.kind === 'start' && ++starts === 1) {
        // Something for the backup to hold.
        const res = await fetch(`http://127.0.0.1:${port}/streams/${stream}`, {
          method: 'POST', body: JSON.stringify([{ eventId: crypto.randomUUID(), eventType: 'Documented', data: { n: 1 } }]),
          headers: { Authorization: 'Basic ' + Buffer.from('admin:changeit').toString('base64'), 'Content-Type': 'application/vnd.eventstore.events+json' },
        });
        expect(res.status).toBe(201);
      }
    }
    expect(starts).toBe(3);
    expect(existsSync(join(base, 'backups', 'backup.json'))).toBe(true);
    // The node now runs on the restored data, over TLS, with the renewed certificate.
    const ca = readFileSync(join(base, 'certs', 'ca.crt'));
    const renewed = new X509Certificate(readFileSync(join(base, 'certs', 'new.crt'))).fingerprint256;
    expect(await servedFingerprint(port, ca)).toBe(renewed);
    expect(node!.output()).toMatch(/certificate reloaded/);
    expect(node!.output()).toMatch(/SIGHUP received/);
    const res = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpsRequest(`https://127.0.0.1:${port}/streams/${stream}/0`, {
        ca, headers: { Authorization: 'Basic ' + Buffer.from('admin:changeit').toString('base64'), Accept: 'application/json' },
      }, (r) => {
        let body = '';
        r.on('data', (d) => { body += d; });
        r.on('end', () => resolve({ status: r.statusCode ?? 0, body }));
      });
      req.on('error', reject);
      req.end();
    });
    expect(res).toEqual({ status: 200, body: '{"n":1}' });
  }, 120_000);
});
