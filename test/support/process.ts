import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const MAIN = fileURLToPath(new URL('../../dist/src/main.js', import.meta.url));
/** `npm start`'s launcher (jemalloc when installed, then the same main.js). */
export const START_SH = fileURLToPath(new URL('../../bin/start.sh', import.meta.url));

export interface NodeProcess {
  child: ChildProcess;
  url: string;
  output: () => string;
  exited: Promise<number | null>;
}

/** The end of a test that kills nodes: the one still running is killed, and every data directory removed. */
export async function killAndRemove(proc: NodeProcess | undefined, dirs: readonly string[]): Promise<void> {
  if (proc && proc.child.exitCode === null && proc.child.signalCode === null) {
    proc.child.kill('SIGKILL');
    await proc.exited;
  }
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
}

/**
 * Starts `node dist/src/main.js` (built by `npm test`; through bin/start.sh with `launcher`; `main`
 * another build of it, as the benches pass theirs) and waits for its start line.
 */
export async function spawnNode(args: string[], env: NodeJS.ProcessEnv = {},
  { launcher = false, main = MAIN }: { launcher?: boolean; main?: string } = {}): Promise<NodeProcess> {
  const [command, entry] = launcher ? ['sh', START_SH] : [process.execPath, main];
  const child = spawn(command, [entry, '--http-port', '0', '--log-level', 'info', '--start-standard-projections', 'false', ...args], {
    env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d) => { out += d; });
  child.stderr!.on('data', (d) => { out += d; });
  const exited = once(child, 'exit').then(([code]) => code as number | null);
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no start line:\n${out}`)), 20_000);
    const onData = () => {
      const m = /"url":"(http[^"]+)"/.exec(out);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    };
    child.stdout!.on('data', onData);
    void exited.then(() => { clearTimeout(timer); reject(new Error(`exited before starting:\n${out}`)); });
  });
  return { child, url, output: () => out, exited };
}

/** Runs main.js (or another compiled `script`: a command-line tool) to completion (for --help, --version, bad options). */
export async function runMain(args: string[], env: NodeJS.ProcessEnv = {}, script = MAIN): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [script, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => { stdout += d; });
  child.stderr.on('data', (d) => { stderr += d; });
  const [code] = await once(child, 'exit');
  return { code: code as number | null, stdout, stderr };
}

/**
 * Kills the node with SIGKILL the moment its output shows `line` (from the output's current end
 * on), from the pipe's data handler, so nothing the node does after writing the line has more
 * than that handler's latency to happen first. Resolves once it has exited.
 */
export async function killOnOutput(proc: NodeProcess, line: string, timeoutMs = 30_000): Promise<void> {
  const from = proc.output().length;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.child.stdout!.off('data', onData);
      reject(new Error(`no "${line}" within ${timeoutMs} ms:\n${proc.output().slice(from).slice(-4000)}`));
    }, timeoutMs);
    const onData = () => {
      // the output handler registered by spawnNode ran first: output() already holds this chunk
      if (!proc.output().includes(line, from)) return;
      proc.child.kill('SIGKILL');
      clearTimeout(timer);
      proc.child.stdout!.off('data', onData);
      resolve();
    };
    proc.child.stdout!.on('data', onData);
    onData();
  });
  await proc.exited;
}
