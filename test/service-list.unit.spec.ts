import { describe, expect, it } from 'vitest';
import pino from 'pino';
import { ServiceList, type Service } from '../src/service-list.js';

// The runner behind startNode (src/node.ts): start order, stop order, and what a failed start or a
// failing stop leaves behind. Each service writes what happens to it into one journal.

interface Logged { service: string; msg: string }

function harness() {
  const journal: string[] = [];
  const logged: Logged[] = [];
  const log = pino({ level: 'error' }, { write: (line: string) => { logged.push(JSON.parse(line) as Logged); } });
  const service = (name: string, behaviour: { failStart?: Error; failStop?: Error; noStop?: boolean } = {}): Service => ({
    name,
    start: async () => {
      journal.push(`start ${name}`);
      await Promise.resolve();
      if (behaviour.failStart) throw behaviour.failStart;
      if (behaviour.noStop) return undefined;
      return async () => {
        journal.push(`stop ${name}`);
        if (behaviour.failStop) throw behaviour.failStop;
      };
    },
  });
  return { journal, logged, list: new ServiceList(log), service };
}

describe('ServiceList', () => {
  it('starts in order and stops the same list in reverse; entries left out (false) neither start nor stop', async () => {
    const { journal, list, service } = harness();
    await list.start([service('store'), false, service('users'), service('listener')]);
    expect(journal).toEqual(['start store', 'start users', 'start listener']);
    await list.stop();
    expect(journal.slice(3)).toEqual(['stop listener', 'stop users', 'stop store']);
  });

  it('a start that fails stops only the services that started, in reverse, and rejects with the start\'s own error', async () => {
    const { journal, list, service } = harness();
    const inUse = Object.assign(new Error('listen EADDRINUSE: address already in use'), { code: 'EADDRINUSE' });
    const started = list.start([service('store'), service('users'), service('listener', { failStart: inUse }), service('cluster')]);
    await expect(started).rejects.toBe(inUse);
    expect(journal).toEqual(['start store', 'start users', 'start listener', 'stop users', 'stop store']);
  });

  it('a failing stop is logged with its service, and the services below it still stop', async () => {
    const { journal, logged, list, service } = harness();
    const broken = new Error('cannot stop the coordinator');
    await list.start([service('store'), service('coordinator', { failStop: broken }), service('listener')]);
    const stopped = list.stop();
    await expect(stopped).rejects.toBeInstanceOf(AggregateError);
    await expect(stopped).rejects.toMatchObject({ errors: [broken], message: 'coordinator did not stop cleanly' });
    expect(journal.slice(3)).toEqual(['stop listener', 'stop coordinator', 'stop store']);
    expect(logged).toEqual([expect.objectContaining({ service: 'coordinator', msg: 'stopping coordinator failed; the other services still stop' })]);
  });

  it('a failed start still rejects with its own error when a stop on the way back fails too', async () => {
    const { journal, logged, list, service } = harness();
    const startFailure = new Error('invalid option found late');
    const started = list.start([service('store'), service('users', { failStop: new Error('users stuck') }), service('listener', { failStart: startFailure })]);
    await expect(started).rejects.toBe(startFailure);
    expect(journal).toEqual(['start store', 'start users', 'start listener', 'stop users', 'stop store']);
    expect(logged.map((l) => l.service)).toEqual(['users']);
  });

  it('a step with nothing to stop is started and skipped on the way back', async () => {
    const { journal, list, service } = harness();
    await list.start([service('scavenger'), service('scavenge history', { noStop: true }), service('requests')]);
    await list.stop();
    expect(journal).toEqual(['start scavenger', 'start scavenge history', 'start requests', 'stop requests', 'stop scavenger']);
  });

  it('stops once however often it is asked', async () => {
    const { journal, list, service } = harness();
    await list.start([service('store')]);
    await Promise.all([list.stop(), list.stop()]);
    await list.stop();
    expect(journal).toEqual(['start store', 'stop store']);
  });

  it('a stop while a service starts stops what started, then that service once it has started, and starts no more', async () => {
    const { journal, list, service } = harness();
    let joined!: () => void;
    const join: Service = {
      name: 'cluster membership',
      start: async () => {
        journal.push('start cluster membership');
        await new Promise<void>((resolve) => { joined = resolve; });
        return () => { journal.push('stop cluster membership'); };
      },
    };
    const started = list.start([service('store'), join, service('requests')]);
    while (!joined) await Promise.resolve();
    await list.stop(); // a cluster node told to restart while it joins
    expect(journal).toEqual(['start store', 'start cluster membership', 'stop store']);
    joined();
    await started;
    expect(journal.slice(3)).toEqual(['stop cluster membership']);
  });
});
