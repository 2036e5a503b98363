import type { Logger } from 'pino';

// The node's services as one ordered list (src/node.ts): started one after another, and stopped
// by the same list in reverse, whether the node shuts down or a start fails half way. A failed
// start stops exactly the services that had started, then rethrows its own error: the caller sees
// why the start failed, not what went wrong while cleaning up. Each stop runs on its own: one that
// throws is logged with the service's name and the ones below it still stop, so a port or the
// data directory's lock is not left held because something above it failed to stop.

/** Undoes what a service's start did. */
export type Stop = () => void | Promise<void>;

export interface Service {
  /** Names the service in the log line of a stop that fails. */
  readonly name: string;
  /** Starts the service and gives back what stops it (nothing: a step another entry's stop undoes). */
  start(): void | Stop | Promise<void | Stop>;
}

export class ServiceList {
  /** What started, in start order. */
  private readonly started: { name: string; stop: Stop }[] = [];
  private stopping: Promise<void> | undefined;

  constructor(private readonly log: Logger) {}

  /**
   * Starts `services` in order; `false` is an entry this node leaves out (a cluster's, on a single
   * node). A stop() while a service starts lets that start finish, stops the service at once and
   * starts no more: a cluster node told to restart while it joins does not go on starting.
   */
  async start(services: readonly (Service | false)[]): Promise<void> {
    for (const service of services) {
      if (!service) continue;
      if (this.stopping) return;
      let stop: void | Stop;
      try {
        stop = await service.start();
      } catch (err) {
        await this.stop().catch(() => undefined); // each failed stop is logged where it fails
        throw err;
      }
      if (!stop) continue;
      if (this.stopping) {
        await this.stopOne(service.name, stop);
        return;
      }
      this.started.push({ name: service.name, stop });
    }
  }

  /**
   * Stops every service started, the last started first; once, however often it is called. Every
   * stop runs; it rejects afterwards (an AggregateError) if any of them threw.
   */
  stop(): Promise<void> {
    this.stopping ??= this.stopAll();
    return this.stopping;
  }

  private async stopAll(): Promise<void> {
    const failed: { name: string; err: unknown }[] = [];
    for (const { name, stop } of this.started.splice(0).reverse()) {
      const err = await this.stopOne(name, stop);
      if (err !== undefined) failed.push({ name, err });
    }
    if (failed.length > 0) {
      throw new AggregateError(failed.map((f) => f.err), `${failed.map((f) => f.name).join(', ')} did not stop cleanly`);
    }
  }

  /** Runs one stop; resolves what it threw (undefined: it stopped). */
  private async stopOne(name: string, stop: Stop): Promise<unknown> {
    try {
      await stop();
      return undefined;
    } catch (err) {
      this.log.error({ err, service: name }, `stopping ${name} failed; the other services still stop`);
      return err ?? new Error(`stopping ${name} failed`);
    }
  }
}
