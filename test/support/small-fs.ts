import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, statfsSync, statSync, truncateSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// A small file system made by the test (a size-limited tmpfs, as root), to run the node out of
// space for real. Where mounting is not permitted (not root, no CAP_SYS_ADMIN), `mountSmallFs`
// says why and the tests that need one are skipped with that reason.

export interface SmallFs {
  readonly dir: string;
  /** Leaves about `bytes` free by filling the rest with a file of its own (grown, or shrunk to give space back). */
  fill(bytes: number): void;
  /** Removes the filling. */
  free(): void;
  freeBytes(): number;
  unmount(): void;
}

export function mountSmallFs(megabytes: number): SmallFs | string {
  const dir = mkdtempSync(join(tmpdir(), 'svc-small-fs-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${megabytes}m`, 'tmpfs', dir], { stdio: 'pipe' });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    return `cannot mount a small file system here (${String((err as { stderr?: Buffer }).stderr ?? err).trim()})`;
  }
  const filler = join(dir, 'filler');
  const freeBytes = () => {
    const s = statfsSync(dir);
    return s.bavail * s.bsize;
  };
  return {
    dir,
    freeBytes,
    fill(bytes) {
      let filled = 0;
      try {
        filled = statSync(filler).size;
      } catch {
        // no filler yet
      }
      const size = Math.max(0, Math.floor((filled + freeBytes() - bytes) / 1024) * 1024);
      if (size > filled) execFileSync('fallocate', ['-l', `${size / 1024}k`, filler]);
      else if (size < filled) truncateSync(filler, size); // gives the pages back at once (tmpfs)
    },
    free() {
      rmSync(filler, { force: true });
    },
    unmount() {
      execFileSync('umount', ['-l', dir], { stdio: 'pipe' });
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
