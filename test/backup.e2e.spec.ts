import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it, type TestContext } from 'vitest';
import { basic, EVENTS_JSON, eventually, newEvent, startTestNode, uniq, type TestNode } from './support/node.js';
import { killAndRemove, runMain, spawnNode, type NodeProcess } from './support/process.js';
import {
  appendOk, buildDataset, CHUNK_SIZE, deleteStream, postScavenge, readStream, request, scavengeOk, setMetadata, SLOW, startScavenge,
  waitForEnd,
} from './support/scavenge.js';
import { backupOk, contentsOf, postBackup, restoreOk, tempDir } from './support/backup.js';

// Backup and restore (issue 14, docs/operations.md): a backup of a node under load restores to
// exactly what was acknowledged before it began, whole appends only; a differential backup
// after appends, deletes and a scavenge equals a fresh full one; a restore replaces what the
// path held; restore refuses a running node's path and a damaged backup; backups and scavenges
// exclude each other; a backup directory interrupted between its manifest and its renames is
// still one whole backup; a target it cannot use (a kernel view, a name too long, an immutable
// directory, a file, a full disk) is refused with a 4xx and the reason, changing nothing, and
// never stalls the node.

const BACKUP_CLI = fileURLToPath(new URL('../dist/src/cli/backup.js', import.meta.url));
const PAD = 'b'.repeat(200);

const nodes: TestNode[] = [];
const dirs: string[] = [];
afterAll(async () => {
  for (const n of nodes) await n.dispose().catch(() => undefined);
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function node(db?: string): Promise<TestNode> {
  const t = await startTestNode({ chunkSize: CHUNK_SIZE, ...(db ? { db } : {}) });
  nodes.push(t);
  return t;
}

function dir(prefix: string): string {
  const d = tempDir(prefix);
  dirs.push(d);
  return d;
}

/** `npm run backup -- ...` (the script it runs), to completion. */
function backupCli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return runMain(args, {}, BACKUP_CLI);
}

interface Ack { stream: string; ids: string[]; sentAt: number; answeredAt: number; status: number }

describe('a backup under concurrent appends', () => {
  it('restores to everything acknowledged before it began, whole appends only, and nothing sent after it answered', async () => {
    const src = await node();
    const acks: Ack[] = [];
    let stop = false;
    const writer = async (w: number) => {
      for (let i = 0; !stop; i++) {
        const stream = `load-${(w + i) % 6}`;
        const events = Array.from({ length: 1 + (i % 3) }, (_, k) => newEvent('Loaded', { w, i, k, pad: PAD }));
        const sentAt = performance.now();
        const res = await request(src, `/streams/${stream}`, { method: 'POST', headers: { 'Content-Type': EVENTS_JSON }, body: JSON.stringify(events) });
        await res.arrayBuffer();
        acks.push({ stream, ids: events.map((e) => e.eventId), sentAt, answeredAt: performance.now(), status: res.status });
      }
    };
    const writers = Array.from({ length: 8 }, (_, w) => writer(w));
    await eventually(async () => expect(acks.length).toBeGreaterThan(200), 20_000);

    const to = dir('backup-load');
    const sentAt = performance.now();
    const cli = await backupCli(['--to', to, '--url', src.url]);
    const answeredAt = performance.now();
    expect(cli.code, cli.stderr).toBe(0);
    const result = JSON.parse(cli.stdout);
    const appendsAtAnswer = acks.length;
    await eventually(async () => expect(acks.length).toBeGreaterThan(appendsAtAnswer + 100), 20_000);
    stop = true;
    await Promise.all(writers);
    expect(acks.every((a) => a.status === 201)).toBe(true);
    expect(result.chunks.length).toBeGreaterThan(10);

    const db = dir('restored-load');
    await restoreOk(to, db);
    const restored = await node(db);
    const [after, source] = await Promise.all([contentsOf(restored), contentsOf(src)]);
    // The restored log is the source's log up to the backup's position, record for record.
    expect(after.all.length).toBeGreaterThan(0);
    expect(after.all).toEqual(source.all.slice(0, after.all.length));
    expect(after.all[after.all.length - 1].position).toBeLessThan(result.position);
    expect(source.all[after.all.length].position).toBeGreaterThanOrEqual(result.position);

    const present = new Set(after.all.map((r) => r.eventId));
    const before = acks.filter((a) => a.answeredAt < sentAt);
    const later = acks.filter((a) => a.sentAt > answeredAt);
    expect(before.length).toBeGreaterThan(200);
    expect(later.length).toBeGreaterThan(50);
    expect(before.filter((a) => !a.ids.every((id) => present.has(id))), 'acknowledged before the backup began').toEqual([]);
    expect(later.filter((a) => a.ids.some((id) => present.has(id))), 'sent after the backup answered').toEqual([]);
    expect(acks.filter((a) => a.ids.some((id) => present.has(id)) && !a.ids.every((id) => present.has(id))), 'torn appends').toEqual([]);
    // Each stream reads as the source's did up to the backup: its first events, as many as the restored log holds.
    for (const [name, view] of Object.entries(after.streams)) {
      const inLog = after.all.filter((r) => r.streamId === name).length;
      expect(view.entries.length, name).toBeLessThanOrEqual(inLog);
      expect(view.entries, name).toEqual(source.streams[name].entries.slice(0, view.entries.length));
    }
    expect(after.streams['load-0'].entries.length).toBeGreaterThan(10);
  }, 120_000);
});

describe('a differential backup', () => {
  it('after appends, deletes and a scavenge, equals a fresh full backup, copying only what changed', async () => {
    const src = await node();
    const d = await buildDataset(src, { maxAge: false });
    const to = dir('backup-diff');
    const first = await backupOk(src, to);
    expect(first.copied).toBe(first.chunks.length);

    for (let i = 0; i < 30; i++) await appendOk(src, d.plain, [newEvent('More', { i, pad: PAD })]);
    await deleteStream(src, d.meta, false);
    await deleteStream(src, d.links, true);
    await setMetadata(src, d.tb, { $tb: 14 });
    await scavengeOk(src);
    for (let i = 0; i < 10; i++) await appendOk(src, uniq('after-scavenge'), [newEvent('After', { i, pad: PAD })]);

    const diff = await backupOk(src, to, true);
    const fullDir = dir('backup-full');
    const full = await backupOk(src, fullDir);
    expect(diff.position).toBe(full.position);
    expect(diff.chunks).toEqual(full.chunks);
    // Chunks the scavenge left alone were kept; its new versions were copied and the old ones removed.
    expect(diff.copied).toBeGreaterThan(0);
    expect(diff.copied).toBeLessThan(diff.chunks.length);
    expect(diff.removed).toBeGreaterThan(0);
    expect(full.chunks.filter((name) => !name.endsWith('.000000')).length).toBeGreaterThan(0);
    const manifest = (p: string) => JSON.parse(readFileSync(join(p, 'backup.json'), 'utf8'));
    const [m1, m2] = [manifest(to), manifest(fullDir)];
    expect(m1.chunks).toEqual(m2.chunks);
    expect(m1.index).toEqual(m2.index);
    expect(readdirSync(to).sort()).toEqual(['backup.json', 'index', ...full.chunks].sort());

    const [a, b] = [dir('restored-diff'), dir('restored-full')];
    await restoreOk(to, a);
    await restoreOk(fullDir, b);
    const [fromDiff, fromFull, source] = await Promise.all([contentsOf(await node(a)), contentsOf(await node(b)), contentsOf(src)]);
    expect(fromDiff).toEqual(fromFull);
    expect(fromDiff).toEqual(source);
  }, 120_000);
});

describe('restore', () => {
  it('into a path with later data ends with exactly the backup\'s data, and appends go on from there', async () => {
    const t = await node();
    const [kept, gone, hard, soft] = [uniq('kept'), uniq('gone'), uniq('hard'), uniq('soft')];
    await appendOk(t, kept, [0, 1, 2].map((i) => newEvent('Kept', { i, pad: PAD })));
    await appendOk(t, hard, [newEvent('Hard', { pad: PAD })]);
    await appendOk(t, soft, [newEvent('Soft', { pad: PAD })]);
    const before = await contentsOf(t);
    const to = dir('backup-later');
    await backupOk(t, to);
    // later data: more events, a new stream, a hard and a soft delete
    await appendOk(t, kept, [3, 4, 5].map((i) => newEvent('Later', { i, pad: PAD })));
    await appendOk(t, gone, [newEvent('Gone', { pad: PAD })]);
    await deleteStream(t, hard, true);
    await deleteStream(t, soft, false);
    await t.node.close();

    await restoreOk(to, t.dir);
    await t.restart();
    const after = await contentsOf(t);
    expect(after).toEqual(before);
    expect((await readStream(t, gone)).status).toBe(404);
    expect((await readStream(t, hard)).status).toBe(200);
    const next = await request(t, `/streams/${kept}`, {
      method: 'POST', headers: { 'Content-Type': EVENTS_JSON, 'SVC-ExpectedVersion': '2' }, body: JSON.stringify([newEvent('Next')]),
    });
    expect(next.status).toBe(201);
    expect(next.headers.get('location')).toMatch(new RegExp(`/streams/${kept}/3$`));
  }, 60_000);

  it('refuses the path of a running node, a damaged backup and a directory without one, and leaves the path as it was', async () => {
    const t = await node();
    const s = uniq('running');
    await appendOk(t, s, [newEvent('Here', { pad: PAD })]);
    const to = dir('backup-refused');
    await backupOk(t, to);

    const inUse = await runMain(['restore', '--from', to, '--db', t.dir]);
    expect(inUse.code).toBe(1);
    expect(inUse.stderr).toMatch(/is in use \(a node runs on it\?\): stop the node first/);
    expect((await readStream(t, s)).entries.length).toBe(1);

    const damaged = dir('backup-damaged');
    cpSync(to, damaged, { recursive: true });
    const chunk = readdirSync(damaged).find((f) => f.startsWith('chunk-'))!;
    const bytes = readFileSync(join(damaged, chunk));
    bytes[bytes.length - 1] ^= 0xff;
    writeFileSync(join(damaged, chunk), bytes);
    const target = join(dir('restore-target'), 'db');
    const refused = await runMain(['restore', '--from', damaged, '--db', target]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`${chunk} is missing or does not match its checksum`);
    expect(existsSync(target)).toBe(false);

    const empty = await runMain(['restore', '--from', dir('no-backup'), '--db', target]);
    expect(empty.code).toBe(1);
    expect(empty.stderr).toMatch(/holds no backup \(no backup\.json\)/);
    const usage = await runMain(['restore', '--from', to]);
    expect(usage.code).toBe(2);
  }, 60_000);
});

describe('backups and scavenges', () => {
  it('a backup is refused while a scavenge runs, naming it and how to stop it; after the stop it runs', async () => {
    const t = await node();
    await buildDataset(t, { maxAge: false });
    const id = await startScavenge(t, { throttlePercent: SLOW });
    const to = dir('backup-scavenge');
    const refused = await postBackup(t, { to });
    expect(refused.status).toBe(409);
    const text = await refused.text();
    expect(text).toContain(`A scavenge is running (${id})`);
    expect(text).toContain(`DELETE /admin/scavenge/${id}`);
    expect(existsSync(join(to, 'backup.json'))).toBe(false);
    expect((await request(t, `/admin/scavenge/${id}`, { method: 'DELETE' })).status).toBe(200);
    expect(await waitForEnd(t, id)).toBe('Stopped');
    await backupOk(t, to);
  }, 60_000);

  it('a scavenge is refused while a backup runs (400 "A backup is running"), and so is a second backup', async () => {
    const t = await node();
    await appendOk(t, uniq('s'), [newEvent('A', { pad: PAD })]);
    // Hold the backup at its start, so the requests below meet it running.
    const store = t.node.store;
    const original = store.backup.bind(store);
    let release: (() => void) | undefined;
    store.backup = (options) => new Promise<void>((resolve) => { release = resolve; }).then(() => original(options));
    const to = dir('backup-held');
    const held = postBackup(t, { to });
    await eventually(async () => expect(release).toBeDefined());

    const scavenge = await postScavenge(t);
    expect(scavenge.status).toBe(400);
    expect(await scavenge.text()).toBe('A backup is running');
    const second = await postBackup(t, { to: dir('backup-second') });
    expect(second.status).toBe(409);
    expect(await second.text()).toContain(`A backup is already running (to ${to})`);

    release!();
    expect((await held).status).toBe(200);
    await scavengeOk(t);
  }, 60_000);
});

describe('POST /admin/backup refuses', () => {
  it('bad bodies and targets with a 400 and a message; users not in $ops or $admins with a 401', async () => {
    const t = await node();
    const file = join(dir('backup-file'), 'a-file');
    writeFileSync(file, 'x');
    const cases: [unknown, RegExp][] = [
      ['not json', /must be a JSON object/],
      [{}, /to is required/],
      [{ to: 'relative/dir' }, /to must be an absolute path/],
      [{ to: 5 }, /to must be an absolute path/],
      [{ to: '/tmp/x', differential: 'yes' }, /differential must be true or false/],
      [{ to: '/tmp/x', differentail: true }, /takes only "to" and "differential"/],
      [{ to: file }, /exists and is not a directory/],
      [{ to: join(t.dir, 'inside') }, /is inside the database directory/],
    ];
    for (const [body, message] of cases) {
      const res = await postBackup(t, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(await res.text(), JSON.stringify(body)).toMatch(message);
    }
    expect(existsSync(join(t.dir, 'inside'))).toBe(false);
    expect((await postBackup(t, { to: dir('backup-anon') }, '')).status).toBe(401);
    expect((await postBackup(t, { to: dir('backup-wrong') }, basic('admin', 'wrong'))).status).toBe(401);
    const cli = await backupCli(['--to', dir('backup-cli'), '--url', t.url, '--password', 'wrong']);
    expect(cli.code).toBe(1);
    expect(cli.stderr).toMatch(/The backup failed: 401/);
  });
});

/** Skips the test, saying why in the output (a skip the log does not explain looks like a pass). */
function skipBecause(ctx: TestContext, reason: string): never {
  console.warn(`skipped "${ctx.task.name}": ${reason}`);
  ctx.skip(reason);
  throw new Error('unreachable');
}

/** A refusal: the status, and a body matching `message`. */
async function expectRefused(t: { url: string }, to: string, status: number, message: RegExp): Promise<string> {
  const res = await postBackup(t, { to });
  const text = await res.text();
  expect(res.status, `${to}: ${text}`).toBe(status);
  expect(text, to).toMatch(message);
  return text;
}

describe('a backup to a place it cannot use', () => {
  it('under /proc, /sys or through a link to them is refused at once with a 400, and the node keeps answering', async () => {
    // Its own process: a node frozen by a recursive mkdir under /proc would freeze this test with it.
    const base = dir('backup-proc');
    let proc: NodeProcess | undefined;
    try {
      proc = await spawnNode(['--db', join(base, 'db')]);
      symlinkSync('/proc', join(base, 'to-proc'));
      const cases: [string, RegExp][] = [
        ['/proc/svc-backup', /\/proc\/svc-backup is under \/proc, a view of the kernel/],
        ['/proc/self/cwd/svc-backup', /under \/proc/],
        ['/sys/fs/cgroup/cpu/svc-backup', /under \/sys/],
        ['/dev/svc-backup', /under \/dev/],
        [join(base, 'to-proc', 'svc-backup'), /to-proc\/svc-backup \(that is \/proc\/svc-backup\) is under \/proc, a view of the kernel/],
      ];
      for (const [to, message] of cases) {
        const started = performance.now();
        const res = await request(proc, '/admin/backup', {
          method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ to }), signal: AbortSignal.timeout(5000),
        }).then(async (r) => ({ status: r.status, text: await r.text() }));
        expect(res.status, `${to}: ${res.text}`).toBe(400);
        expect(res.text, to).toMatch(message);
        expect(performance.now() - started, to).toBeLessThan(2000);
        const info = await fetch(`${proc.url}/info`, { signal: AbortSignal.timeout(2000) });
        expect(info.status).toBe(200);
      }
      expect(existsSync('/proc/svc-backup') || existsSync('/sys/fs/cgroup/cpu/svc-backup') || existsSync('/dev/svc-backup')).toBe(false);
      const cli = await backupCli(['--to', '/proc/svc-backup', '--url', proc.url]);
      expect(cli.code).toBe(1);
      expect(cli.stderr).toMatch(/The backup failed: 400 \/proc\/svc-backup is under \/proc/);
      await backupOk(proc, join(base, 'good'));
    } finally {
      await killAndRemove(proc, []);
    }
  }, 60_000);

  it('on a proc file system mounted anywhere else is refused by its type, read from /proc/self/mountinfo', async (ctx) => {
    const base = dir('backup-proc-mount');
    const elsewhere = join(base, 'kernel');
    mkdirSync(elsewhere);
    const mount = spawnSync('mount', ['-t', 'proc', 'proc', elsewhere], { encoding: 'utf8' });
    if (mount.error || mount.status !== 0) skipBecause(ctx, `cannot mount proc here: ${mount.error?.message ?? mount.stderr.trim()}`);
    let proc: NodeProcess | undefined;
    try {
      proc = await spawnNode(['--db', join(base, 'db')]); // its own process, as above
      const res = await request(proc, '/admin/backup', {
        method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ to: join(elsewhere, 'svc-backup') }),
        signal: AbortSignal.timeout(5000),
      });
      expect(res.status).toBe(400);
      expect(await res.text()).toMatch(/svc-backup is on .*\/kernel, a proc file system \(a view of the kernel, not storage\)/);
      expect((await fetch(`${proc.url}/info`, { signal: AbortSignal.timeout(2000) })).status).toBe(200);
    } finally {
      await killAndRemove(proc, []);
      spawnSync('umount', [elsewhere]);
    }
  }, 60_000);

  it('with a name over NAME_MAX, a path over PATH_MAX, a "..", a file, a FIFO, a link loop or a damaged manifest: a 400 naming it, nothing changed', async () => {
    const t = await node();
    const base = dir('backup-bad-paths');
    writeFileSync(join(base, 'a-file'), 'x');
    spawnSync('mkfifo', [join(base, 'a-fifo')]);
    symlinkSync(join(base, 'loop-b'), join(base, 'loop-a'));
    symlinkSync(join(base, 'loop-a'), join(base, 'loop-b'));
    symlinkSync(join(base, 'nowhere', 'x'), join(base, 'dangling'));
    mkdirSync(join(base, 'garbled'));
    writeFileSync(join(base, 'garbled', 'backup.json'), '{ not json');
    mkdirSync(join(base, 'piped'));
    spawnSync('mkfifo', [join(base, 'piped', 'backup.json')]); // reading it would wait for a writer forever
    const before = readdirSync(base).sort();
    const cases: [string, RegExp][] = [
      [join(base, 'a'.repeat(300)), /has a name of 300 bytes \("a{24}\.\.\."\): a file system takes at most 255 \(NAME_MAX\)/],
      [join(base, 'é'.repeat(128), 'x'), /has a name of 256 bytes/],
      [base + '/x'.repeat(2100), /bytes long: a backup directory takes at most 4031 \(PATH_MAX 4096/],
      [`${base}/new/../elsewhere`, /has a "\." or "\.\." in it/],
      [join(base, 'a-file'), /exists and is not a directory/],
      [join(base, 'a-file', 'sub'), /Cannot write the backup to .*a-file\/sub: ENOTDIR: not a directory/],
      [join(base, 'a-fifo'), /exists and is not a directory/],
      [join(base, 'loop-a', 'sub'), /Cannot write the backup to .*loop-a\/sub: ELOOP/],
      [join(base, 'dangling', 'sub'), /dangling exists and is not a directory \(a dangling symbolic link\?\)/],
      [join(base, 'garbled'), /garbled\/backup\.json is not JSON: .*; remove it or back up elsewhere/],
      [join(base, 'piped'), /piped\/backup\.json is not a regular file; remove it or back up elsewhere/],
    ];
    for (const [to, message] of cases) await expectRefused(t, to, 400, message);
    expect(readdirSync(base).sort()).toEqual(before);
    expect(readdirSync(join(base, 'garbled'))).toEqual(['backup.json']);
    expect(readdirSync(join(base, 'piped'))).toEqual(['backup.json']);
  });

  it('into an immutable directory (chattr +i) is a 403 naming the errno and the path, and changes nothing', async (ctx) => {
    const t = await node();
    const base = dir('backup-immutable');
    const locked = join(base, 'locked');
    mkdirSync(locked);
    const chattr = spawnSync('chattr', ['+i', locked], { encoding: 'utf8' });
    if (chattr.error || chattr.status !== 0) skipBecause(ctx, `chattr +i does not work here: ${chattr.error?.message ?? chattr.stderr.trim()}`);
    try {
      let writable = true;
      try { mkdirSync(join(locked, 'probe')); } catch { writable = false; }
      if (writable) skipBecause(ctx, 'chattr +i took, but this process may still write the directory (not root, or no such attribute here)');
      await appendOk(t, uniq('s'), [newEvent('A', { pad: PAD })]);
      await expectRefused(t, locked, 403, /Cannot write the backup to .*locked: EPERM: operation not permitted, open '.*locked\/index\.pending'/);
      await expectRefused(t, join(locked, 'sub', 'deeper'), 403, /EPERM: operation not permitted, mkdir '.*locked\/sub'/);
      expect(readdirSync(locked)).toEqual([]);
    } finally {
      spawnSync('chattr', ['-i', locked]);
    }
    // The same directory once writable takes the backup.
    await backupOk(t, join(locked, 'sub', 'deeper'));
  });

  it('onto a full file system is a 507 with ENOSPC, leaving no files behind', async (ctx) => {
    const t = await node();
    const base = dir('backup-full-disk');
    const small = join(base, 'small');
    mkdirSync(small);
    const mount = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', small], { encoding: 'utf8' });
    if (mount.error || mount.status !== 0) skipBecause(ctx, `cannot mount a small tmpfs: ${mount.error?.message ?? mount.stderr.trim()}`);
    try {
      for (let i = 0; i < 40; i++) await appendOk(t, uniq('big'), [newEvent('Big', { i, pad: 'f'.repeat(8000) })]);
      await expectRefused(t, join(small, 'backup'), 507, /Cannot write the backup to .*small\/backup: ENOSPC: no space left on device/);
      expect(readdirSync(small)).toEqual([]);
    } finally {
      spawnSync('umount', [small]);
    }
  });

  it('to a new directory several levels deep, or through a link to a real directory, still works', async () => {
    const t = await node();
    const base = dir('backup-good');
    await appendOk(t, uniq('s'), [newEvent('A', { pad: PAD })]);
    const deep = join(base, 'a', 'b', 'c');
    const result = await backupOk(t, deep);
    expect(readdirSync(deep).sort()).toEqual(['backup.json', 'index', ...result.chunks].sort());
    mkdirSync(join(base, 'real'));
    symlinkSync(join(base, 'real'), join(base, 'link'));
    await backupOk(t, join(base, 'link', 'backup'));
    expect(existsSync(join(base, 'real', 'backup', 'backup.json'))).toBe(true);
  });
});

describe('a backup directory interrupted between its manifest and its renames', () => {
  it('restores from the pending files, and the next backup finishes the renames and drops stale files', async () => {
    const t = await node();
    await buildDataset(t, { maxAge: false });
    const to = dir('backup-crash');
    const result = await backupOk(t, to);
    const source = await contentsOf(t);
    // As a crash leaves it: the new index and open chunk still under their pending names, stale
    // files under their own names; and a pending file of a backup that never committed.
    const last = result.chunks[result.chunks.length - 1];
    for (const name of ['index', last]) {
      cpSync(join(to, name), join(to, `${name}.pending`));
      writeFileSync(join(to, name), readFileSync(join(to, name)).subarray(0, 100));
    }
    writeFileSync(join(to, 'chunk-999999.000000.pending'), 'never committed');

    const db = dir('restored-crash');
    await restoreOk(to, db);
    expect(await contentsOf(await node(db))).toEqual(source);

    const again = await backupOk(t, to, true);
    expect(again.chunks).toEqual(result.chunks);
    expect(readdirSync(to).sort()).toEqual(['backup.json', 'index', ...result.chunks].sort());
    const db2 = dir('restored-crash-2');
    await restoreOk(to, db2);
    expect(await contentsOf(await node(db2))).toEqual(source);
  }, 60_000);
});
