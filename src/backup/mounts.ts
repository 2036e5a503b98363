import { readFile } from 'node:fs/promises';

// Which mount holds a path, and whether its file system keeps files at all. A backup directory on
// a kernel's pseudo file system is a mistake whatever the path says: procfs answers mkdir with
// ENOENT (Node 20's recursive mkdir then retries forever on the event loop), sysfs with EPERM,
// a cgroup file system creates a control group, devtmpfs keeps the files in memory. Linux lists
// its mounts in /proc/self/mountinfo (proc(5)); elsewhere there is no such file and no answer.

/** File system types that are views of the kernel, not storage (proc(5), the kernel's Documentation/filesystems). */
export const PSEUDO_FILE_SYSTEMS: ReadonlySet<string> = new Set([
  'proc', 'sysfs', 'devtmpfs', 'devpts', 'cgroup', 'cgroup2', 'securityfs', 'debugfs', 'tracefs', 'configfs', 'fusectl',
  'pstore', 'bpf', 'binfmt_misc', 'mqueue', 'hugetlbfs', 'autofs', 'efivarfs', 'selinuxfs', 'nsfs', 'rpc_pipefs', 'nfsd',
]);

export interface Mount {
  /** Where it is mounted, as this process sees its root. */
  readonly point: string;
  readonly fsType: string;
}

/** `\040` and its kind: mountinfo escapes space, tab, newline and backslash in paths as three octal digits. */
function unescapeOctal(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}

/**
 * The mounts of a mountinfo text, in its order (a later mount on the same point hides an earlier).
 * A line: `id parent major:minor root mount-point options [optional fields...] - fs-type source super-options`.
 */
export function parseMountInfo(text: string): Mount[] {
  const mounts: Mount[] = [];
  for (const line of text.split('\n')) {
    const fields = line.split(' ');
    const separator = fields.indexOf('-', 6);
    if (fields.length < 5 || separator < 0 || separator + 1 >= fields.length) continue;
    mounts.push({ point: unescapeOctal(fields[4]), fsType: fields[separator + 1] });
  }
  return mounts;
}

/** The mount holding `path` (absolute, symbolic links resolved): the deepest mount point above it, the last one mounted there. */
export function mountOf(path: string, mounts: readonly Mount[]): Mount | undefined {
  let found: Mount | undefined;
  for (const mount of mounts) {
    const holds = mount.point === '/' || path === mount.point || path.startsWith(mount.point + '/');
    if (holds && (!found || mount.point.length >= found.point.length)) found = mount;
  }
  return found;
}

/** This process's mounts; undefined where the system does not list them (not Linux). */
export async function readMounts(): Promise<Mount[] | undefined> {
  try {
    return parseMountInfo(await readFile('/proc/self/mountinfo', 'utf8'));
  } catch {
    return undefined;
  }
}
