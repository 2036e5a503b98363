import { describe, expect, it } from 'vitest';
import { CommitBus } from '../src/store/bus.js';

// The commit bus (issue 30, errors one way): a follower that throws does not stop the others,
// and its failure is reported with the name it subscribed with (the node logs it).

describe('the commit bus', () => {
  it('reports a throwing follower by name and still delivers to the others', () => {
    const bus = new CommitBus();
    const reported: [string, string][] = [];
    bus.onListenerFailure = (subscriber, err) => reported.push([subscriber, (err as Error).message]);
    const seen: number[] = [];
    bus.subscribe(() => { throw new Error('boom'); }, 'a broken follower');
    bus.subscribe((commit) => seen.push(commit.nextPosition), 'a good follower');
    bus.publish({ records: [], nextPosition: 42 });
    expect(seen).toEqual([42]);
    expect(reported).toEqual([['a broken follower', 'boom']]);
  });

  it('reports a reader waiting for a commit whose match throws under its own name', async () => {
    const bus = new CommitBus();
    const reported: string[] = [];
    bus.onListenerFailure = (subscriber) => reported.push(subscriber);
    const waiting = bus.waitFor(() => { throw new Error('a broken match'); }, 50);
    bus.publish({ records: [{} as never], nextPosition: 1 });
    expect(await waiting).toBe(false);
    expect(reported).toEqual(['a reader waiting for a commit']);
  });
});
