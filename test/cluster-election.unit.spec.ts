import { describe, expect, it } from 'vitest';
import { preferred } from '../src/cluster/cluster-node.js';
import { memberOf, type MemberRecord } from '../src/cluster/membership.js';

// Which of the candidates of a leader election campaigns: the up-to-date rule first (no
// acknowledged write is given up), then a resign, then the node priority, then the name.

function member(name: string, fields: Partial<MemberRecord> = {}): MemberRecord {
  return {
    name, instanceId: `${name}-run`, state: 'DiscoverLeader', httpUrl: `http://${name}:2113`, intHost: name, intPort: 1112,
    epochTerm: 3, epochPosition: 100, logEnd: 500, term: 0, priority: 0, timeStamp: '2024-01-01T00:00:00.000Z', ...fields,
  };
}

const none = new Set<string>();
/** The candidate the election picks, as ClusterNode.elect reduces them. */
const best = (candidates: MemberRecord[], resigned: ReadonlySet<string> = none) =>
  candidates.reduce((a, b) => (preferred(b, a, resigned) ? b : a)).name;

describe('the election order', () => {
  it('among equally up-to-date logs the higher priority leads, whatever the names', () => {
    expect(best([member('n1'), member('n2', { priority: 5 }), member('n3')])).toBe('n2');
    expect(best([member('n1', { priority: -1 }), member('n2', { priority: -1 }), member('n3')])).toBe('n3');
    expect(best([member('n3', { priority: 2 }), member('n1', { priority: 7 }), member('n2', { priority: 7 })])).toBe('n1');
  });

  it('a priority never outweighs a more up-to-date log', () => {
    expect(best([member('n1', { priority: 100 }), member('n2', { logEnd: 501 })])).toBe('n2');
    expect(best([member('n1', { priority: 100, epochTerm: 4, logEnd: 10 }), member('n2', { epochTerm: 5, logEnd: 5 })])).toBe('n2');
  });

  it('a node that just resigned yields even with the highest priority, unless its log is more up to date', () => {
    const resigned = new Set(['n1']);
    expect(best([member('n1', { priority: 100 }), member('n2'), member('n3', { priority: 1 })], resigned)).toBe('n3');
    expect(best([member('n1', { priority: 100, logEnd: 600 }), member('n2')], resigned)).toBe('n1');
  });

  it('equal priorities fall back to the lower name', () => {
    expect(best([member('n3', { priority: 4 }), member('n2', { priority: 4 })])).toBe('n2');
  });

  it('a record published by a node from before priorities counts as priority 0', () => {
    const { priority: _, ...old } = member('n1');
    expect(memberOf(old as unknown as Record<string, unknown>).priority).toBe(0);
    expect(memberOf({ ...member('n2', { priority: 9 }) }).priority).toBe(9);
    expect(best([memberOf(old as unknown as Record<string, unknown>), member('n2', { priority: 1 })])).toBe('n2');
    expect(best([memberOf(old as unknown as Record<string, unknown>), member('n2', { priority: -1 })])).toBe('n1');
  });
});
