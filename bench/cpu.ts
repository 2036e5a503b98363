import { readFileSync } from 'node:fs';

// CPU time a process has used, from /proc (Linux). On a machine shared with other work, the
// server's CPU per request moves much less than its requests per second: the bench reports both.

/** Clock ticks per second of /proc/<pid>/stat's times (USER_HZ: 100 on every Linux build that matters). */
const TICKS_PER_SECOND = 100;

/** User + system CPU milliseconds of the process so far, or undefined where /proc cannot say. */
export function cpuMs(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces) start after its closing parenthesis.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14 and 15 of the line)
    return Number.isFinite(ticks) ? (ticks * 1000) / TICKS_PER_SECOND : undefined;
  } catch {
    return undefined;
  }
}
