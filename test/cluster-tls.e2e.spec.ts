import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { startCluster, type ClusterMember, type TestCluster } from './support/cluster.js';
import { streamIds } from '../bench/cluster-writers.js';
import { ADMIN, OPS } from './support/node.js';

// Node-to-node TLS: the replication links and forwarded writes use the node certificates, each
// side checking the other's chain and the reserved common name. The CA and every node
// certificate are renewed on the running cluster, node by node, with POST /admin/reloadconfig;
// links are replaced every --cluster-connection-lifetime (2 s here), so the new chains take
// effect between nodes. A node that presents a chain its peers do not trust yet is refused (and
// that is logged) while the others go on. Certificates are made with openssl in a temp dir.

// The nodes' certificates are checked by the nodes; this test's own client does not check them.
process.env.NODE_TLS_REJECT_UNAUTHORIZED = '0';

const CN = 'node.svc.test';
const dir = mkdtempSync(join(tmpdir(), 'svc-cluster-tls-'));
let cluster: TestCluster | undefined;

afterAll(async () => {
  await cluster?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

function openssl(args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
}

const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

function makeCa(name: string): void {
  openssl(['req', '-x509', ...ec, '-keyout', `${name}.key`, '-out', `${name}.crt`, '-days', '2', '-subj', `/CN=${name} root`,
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
}

let serial = 1000;
function makeLeaf(name: string, ca: string, cn = CN): void {
  writeFileSync(join(dir, 'ext.cnf'), ['basicConstraints=CA:FALSE', 'keyUsage=critical,digitalSignature,keyEncipherment',
    'extendedKeyUsage=serverAuth,clientAuth', `subjectAltName=DNS:${cn},IP:127.0.0.1`, ''].join('\n'));
  openssl(['req', ...ec, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${cn}`]);
  openssl(['x509', '-req', '-in', `${name}.csr`, '-CA', `${ca}.crt`, '-CAkey', `${ca}.key`, '-set_serial', String(serial++),
    '-days', '2', '-out', `${name}.crt`, '-extfile', 'ext.cnf']);
}

/** Each node's files: node.crt, node.key and a trust directory. */
function paths(name: string) {
  return { cert: join(dir, name, 'node.crt'), key: join(dir, name, 'node.key'), trust: join(dir, name, 'trust') };
}

function install(name: string, leaf: string): void {
  copyFileSync(join(dir, `${leaf}.crt`), paths(name).cert);
  copyFileSync(join(dir, `${leaf}.key`), paths(name).key);
}

async function reload(m: ClusterMember): Promise<void> {
  const res = await fetch(`${m.url}/admin/reloadconfig`, { method: 'POST', headers: { authorization: OPS } });
  expect(res.status).toBe(200);
  expect(((await res.json()) as { result: string }).result, `${m.name} reload`).toBe('Reloaded');
}

/** An append through `via` (a follower forwards it to the leader over HTTPS), then read on every node in `on`. */
async function writeAndSee(via: ClusterMember, on: ClusterMember[]): Promise<void> {
  const stream = `tls-${randomUUID()}`;
  const id = randomUUID();
  const res = await fetch(`${via.url}/streams/${stream}`, {
    method: 'POST', headers: { authorization: ADMIN, 'content-type': 'application/vnd.eventstore.events+json' },
    body: JSON.stringify([{ eventId: id, eventType: 'tls', data: {} }]),
  });
  expect(res.status).toBe(201);
  for (const m of on) {
    const deadline = Date.now() + 15_000;
    for (;;) {
      const ids = await streamIds(m.url, stream);
      if (ids.length === 1) break;
      if (Date.now() > deadline) throw new Error(`${stream} never reached ${m.name}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

describe('TLS between cluster nodes', () => {
  it('replicates over mutual TLS, and takes a renewed CA and node certificates node by node', async () => {
    makeCa('ca1');
    makeCa('ca2');
    for (const name of ['n1', 'n2', 'n3']) {
      mkdirSync(paths(name).trust, { recursive: true });
      copyFileSync(join(dir, 'ca1.crt'), join(paths(name).trust, 'ca1.crt'));
      makeLeaf(`${name}-old`, 'ca1');
      makeLeaf(`${name}-new`, 'ca2');
      install(name, `${name}-old`);
    }
    const c = cluster = await startCluster(3, ['--insecure', 'false', '--certificate-reserved-node-common-name', CN,
      '--cluster-connection-lifetime', '2'], {
      scheme: 'https',
      nodeArgs: (name) => ['--certificate-file', paths(name).cert, '--certificate-private-key-file', paths(name).key,
        '--trusted-root-certificates-path', paths(name).trust],
    });
    const leader = await c.ready();
    const [early, late] = c.members.filter((m) => m !== leader);
    await writeAndSee(early, c.members);

    // One follower moves to the new CA before its peers trust it: the leader refuses its links
    // (logged), and the cluster goes on with the other follower.
    copyFileSync(join(dir, 'ca2.crt'), join(paths(early.name).trust, 'ca2.crt'));
    install(early.name, `${early.name}-new`);
    await reload(early);
    const refusedFrom = leader.proc!.output().length;
    // Its link is renewed with the new certificate (within 2 s), and refused.
    for (const deadline = Date.now() + 15_000; !leader.proc!.output().slice(refusedFrom).includes('failed its TLS handshake');) {
      if (Date.now() > deadline) throw new Error(`no refused handshake on the leader:\n${leader.proc!.output().slice(refusedFrom)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    await writeAndSee(leader, [leader, late]);

    // Everyone trusts both CAs: the early node reconnects and catches up.
    for (const m of [leader, late]) {
      copyFileSync(join(dir, 'ca2.crt'), join(paths(m.name).trust, 'ca2.crt'));
      await reload(m);
    }
    await writeAndSee(early, c.members);
    // The others take their new certificates, then the old CA goes, node by node.
    for (const m of [late, leader]) {
      install(m.name, `${m.name}-new`);
      await reload(m);
      await writeAndSee(late, c.members);
    }
    for (const m of c.members) {
      unlinkSync(join(paths(m.name).trust, 'ca1.crt'));
      await reload(m);
    }
    await new Promise((r) => setTimeout(r, 3000)); // every link renewed on the new chain alone
    await writeAndSee(early, c.members);
    await writeAndSee(late, c.members);
    expect(await c.ready()).toBe(leader);
  }, 120_000);

  it('a node does not take a certificate without the reserved common name, so no peer is ever shown one', async () => {
    // A certificate of the right CA but another name cannot even be loaded by a node that
    // reserves the name: the check happens on start and reload, before any peer sees it.
    makeLeaf('intruder', 'ca2', 'intruder.svc.test');
    const m = cluster!.members[2];
    install(m.name, 'intruder');
    const res = await fetch(`${m.url}/admin/reloadconfig`, { method: 'POST', headers: { authorization: OPS } });
    expect(((await res.json()) as { result: string }).result).toBe('Failed');
    install(m.name, `${m.name}-new`);
  });
});
