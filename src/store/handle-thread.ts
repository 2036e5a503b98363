import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { packageRoot } from '../version.js';

// A thread that works on the store's open RocksDB handle (the log-read thread, the write thread):
// started on first use, its requests numbered and answered by number, stopped before the
// database closes. It never opens nor closes the database itself. When it cannot run (no built
// script: a test run from the TypeScript sources before a build) or fails, every request in
// flight is handed back (`lost`) and the owner does the work on the event loop from then on.

/** What a handle thread is told when it is to end: it closes its port and ends once idle. */
export const STOP = { stop: true } as const;
const STOP_WAIT_MS = 10_000;

/**
 * Ends a thread that works on the store's handle: `ask` tells it to stop, and it is waited for
 * (it ends after the call into RocksDB it is in, if any). Never terminated mid-call: a thread
 * terminated inside a synchronous read of the binding crashed the process (SIGSEGV in
 * `Iterator::nextv`, the event-id filter's thread in ~3% of stops under load). One still busy
 * after STOP_WAIT_MS is stuck, and terminated.
 */
export async function stopThread(worker: Worker, ask: () => void): Promise<void> {
  const ended = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
  ask();
  const stuck = setTimeout(() => void worker.terminate(), STOP_WAIT_MS);
  await ended;
  clearTimeout(stuck);
}

/** Whether a message to a handle thread is STOP. */
export function isStop(message: unknown): boolean {
  return typeof message === 'object' && message !== null && (message as { stop?: unknown }).stop === true;
}

export class HandleThread<Answer extends { id: number }, Waiter> {
  private worker: Worker | undefined;
  private broken = false;
  private closed = false;
  private nextId = 0;
  private readonly waiting = new Map<number, Waiter>();

  /**
   * `script`: the thread's module next to this one (`name.js`); `answered` settles a waiter with
   * its answer, `lost` one whose thread failed or stopped first.
   */
  constructor(private readonly script: string, private readonly workerData: () => unknown,
    private readonly answered: (waiter: Waiter, answer: Answer) => void, private readonly lost: (waiter: Waiter) => void) {}

  /** Requests in flight. */
  get inFlight(): number {
    return this.waiting.size;
  }

  /** The running thread, started now if need be; undefined once it is stopped or cannot run. */
  usable(): Worker | undefined {
    if (this.closed || this.broken) return undefined;
    return this.worker ?? this.start();
  }

  /** Whether `worker` is still the thread (it did not fail since it was handed out). */
  current(worker: Worker): boolean {
    return this.worker === worker;
  }

  /** Numbers a request whose answer `waiter` awaits. */
  register(waiter: Waiter): number {
    const id = this.nextId++;
    this.waiting.set(id, waiter);
    return id;
  }

  /** Stops the thread (told STOP and waited for: stopThread); requests in flight are lost. */
  async close(): Promise<void> {
    this.closed = true;
    this.loseAll();
    const worker = this.worker;
    this.worker = undefined;
    if (worker) await stopThread(worker, () => worker.postMessage(STOP));
  }

  private start(): Worker | undefined {
    const script = threadScript(this.script);
    if (!script) {
      this.broken = true;
      return undefined;
    }
    const worker = new Worker(script, { workerData: this.workerData() });
    worker.unref();
    worker.on('message', (answer: Answer) => {
      const waiter = this.waiting.get(answer.id);
      if (waiter === undefined) return;
      this.waiting.delete(answer.id);
      this.answered(waiter, answer);
    });
    const fail = () => {
      this.broken = true;
      this.worker = undefined;
      this.loseAll();
    };
    worker.on('error', fail);
    worker.on('exit', fail);
    this.worker = worker;
    return worker;
  }

  private loseAll(): void {
    const waiters = [...this.waiting.values()];
    this.waiting.clear();
    for (const w of waiters) this.lost(w);
  }
}

/** The thread's compiled script (from the TypeScript sources, the built one next to dist/src). */
export function threadScript(name: string): URL | undefined {
  const here = new URL(`./${name}.js`, import.meta.url);
  if (existsSync(fileURLToPath(here))) return here;
  const built = join(packageRoot(), 'dist', 'src', 'store', `${name}.js`);
  return existsSync(built) ? new URL(`file://${built}`) : undefined;
}
