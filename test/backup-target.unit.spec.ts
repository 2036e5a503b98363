import { describe, expect, it } from 'vitest';
import { mountOf, parseMountInfo, PSEUDO_FILE_SYSTEMS } from '../src/backup/mounts.js';
import { targetPathProblem } from '../src/backup/target.js';

// Where a backup may go (src/backup/target.ts, mounts.ts): the checks made on the text of a
// target before any file system call, and the mount that holds a path, read from mountinfo.
// The e2e side (real /proc, chattr, a full tmpfs) is in backup.e2e.spec.ts.

const MOUNTINFO = [
  '21 26 0:20 / /proc rw,relatime - proc proc rw',
  '26 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard',
  '23 26 0:6 / /dev rw,relatime - devtmpfs devtmpfs rw,size=12334416k',
  '24 23 0:22 / /dev/shm rw,relatime - tmpfs tmpfs rw',
  '31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime shared:12 master:3 - cgroup cgroup rw,cpu',
  '50 26 0:40 / /mnt/my\\040backups rw,relatime - ext4 /dev/vdb rw',
  '51 26 0:41 / /srv/kernel rw,relatime - proc proc rw',
  '52 26 0:42 / /srv/kernel rw,relatime - xfs /dev/vdc rw',
  '',
].join('\n');

describe('mountinfo', () => {
  const mounts = parseMountInfo(MOUNTINFO);

  it('names each mount point, unescaped, and its file system type, optional fields or not', () => {
    expect(mounts).toContainEqual({ point: '/mnt/my backups', fsType: 'ext4' });
    expect(mounts).toContainEqual({ point: '/sys/fs/cgroup/cpu', fsType: 'cgroup' });
    expect(mounts).toHaveLength(8);
  });

  it('finds the deepest mount above a path, the last one mounted on a point, and / for the rest', () => {
    expect(mountOf('/proc/svc-backup', mounts)?.fsType).toBe('proc');
    expect(mountOf('/dev/shm/x', mounts)?.fsType).toBe('tmpfs');
    expect(mountOf('/dev/x', mounts)?.fsType).toBe('devtmpfs');
    expect(mountOf('/mnt/my backups/svc', mounts)?.point).toBe('/mnt/my backups');
    expect(mountOf('/srv/kernel/x', mounts)?.fsType).toBe('xfs');
    expect(mountOf('/procedures', mounts)?.fsType).toBe('ext4');
    expect(mountOf('/', mounts)?.fsType).toBe('ext4');
  });

  it('counts the kernel views as pseudo file systems and storage as not', () => {
    for (const type of ['proc', 'sysfs', 'devtmpfs', 'devpts', 'cgroup', 'cgroup2']) expect(PSEUDO_FILE_SYSTEMS.has(type), type).toBe(true);
    for (const type of ['ext4', 'xfs', 'btrfs', 'tmpfs', 'overlay', 'nfs4', 'zfs']) expect(PSEUDO_FILE_SYSTEMS.has(type), type).toBe(false);
  });
});

describe('the text of a backup target', () => {
  it('takes an absolute path of plain names within NAME_MAX and PATH_MAX', () => {
    expect(targetPathProblem('/var/backups/svc')).toBeUndefined();
    expect(targetPathProblem('/var//backups/svc/')).toBeUndefined();
    expect(targetPathProblem(`/var/${'a'.repeat(255)}`)).toBeUndefined();
    expect(targetPathProblem(`/var/${'é'.repeat(127)}`)).toBeUndefined();
    expect(targetPathProblem('/'.concat('x/'.repeat(2015)))).toBeUndefined();
    expect(targetPathProblem('/procedures/svc')).toBeUndefined();
  });

  it('refuses NUL, relative paths, "." and "..", long names and paths, and /proc, /sys, /dev', () => {
    expect(targetPathProblem('/tmp/a\0b')).toMatch(/NUL/);
    expect(targetPathProblem('tmp/x')).toMatch(/absolute path/);
    expect(targetPathProblem('/tmp/x/../../proc/x')).toMatch(/has a "\." or "\.\."/);
    expect(targetPathProblem('/tmp/./x')).toMatch(/has a "\." or "\.\."/);
    expect(targetPathProblem(`/tmp/${'a'.repeat(256)}`)).toMatch(/name of 256 bytes .* at most 255 \(NAME_MAX\)/);
    expect(targetPathProblem(`/tmp/${'é'.repeat(128)}`)).toMatch(/name of 256 bytes/);
    expect(targetPathProblem('/'.concat('x/'.repeat(2016)))).toMatch(/4032 bytes long: a backup directory takes at most 4031/);
    for (const root of ['/proc', '/proc/self/cwd/x', '/sys/fs/cgroup/cpu/x', '/dev/shm/x', '//proc/x']) {
      expect(targetPathProblem(root), root).toMatch(/a view of the kernel and not storage/);
    }
  });
});
