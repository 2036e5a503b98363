import { EPOCHS_STREAM, ExpectedVersion, jsonEvent, type Store } from '../store/index.js';
import { MAX_HELLO_EPOCHS, type EpochMark, type Hello } from './frames.js';

// Epochs: every leader writes one record into the log (stream `$epochs`) before it serves
// writes, naming its term (the etcd leader key's create revision). Every log thereby carries its
// term boundaries, and two logs can be compared the way Raft compares them: the records of one
// term are the same on every node that has them, so two logs agree up to where the older of a
// shared epoch's two continuations ends.

export const EPOCH_EVENT_TYPE = '$epoch';
/** The leader's epochs a comparison looks at (newest first): far more terms than a follower can lag behind. */
const LEADER_EPOCHS_READ = 10_000;

/** The newest epochs of the log, newest first (at most `limit`). */
export function epochHistory(store: Store, limit = MAX_HELLO_EPOCHS): EpochMark[] {
  // As written here, committed or not: logs are compared as they are (a leader's own epoch is
  // in flight until a quorum follows it).
  const out: EpochMark[] = [];
  for (const record of store.writtenRecords(EPOCHS_STREAM, limit)) {
    const term = termOf(record.data);
    if (term !== undefined) out.push({ term, position: record.position });
  }
  return out;
}

export function lastEpoch(store: Store): EpochMark {
  return epochHistory(store, 1)[0] ?? { term: 0, position: 0 };
}

function termOf(data: Buffer): number | undefined {
  try {
    const value = JSON.parse(data.toString('utf8')) as { term?: unknown };
    return Number.isSafeInteger(value.term) ? value.term as number : undefined;
  } catch {
    return undefined;
  }
}

/** Writes this leader's epoch record; resolves once a quorum holds it (the writer's gate). */
export async function writeEpoch(store: Store, term: number, leader: { name: string; instanceId: string }): Promise<EpochMark> {
  const result = await store.appendReserved(EPOCHS_STREAM, ExpectedVersion.any, [
    jsonEvent(EPOCH_EVENT_TYPE, { term, leaderName: leader.name, leaderInstanceId: leader.instanceId }),
  ]);
  return { term, position: result.position };
}

/**
 * Where the follower's log stops agreeing with the leader's (the leader's side of HELLO): the
 * newest of the follower's epochs the leader also has (same term, same position) is shared; the
 * logs agree up to the end of that term on the shorter side. The follower truncates above it.
 */
export function commonPoint(store: Store, hello: Pick<Hello, 'epochs' | 'logEnd'>): number {
  const leaderEpochs = epochHistory(store, LEADER_EPOCHS_READ); // newest first
  const index = new Map(leaderEpochs.map((e, i) => [e.term, i]));
  for (const theirs of hello.epochs) {
    const i = index.get(theirs.term);
    if (i === undefined || leaderEpochs[i].position !== theirs.position) continue;
    const leaderEnd = i > 0 ? leaderEpochs[i - 1].position : store.logEnd;
    return Math.min(hello.logEnd, leaderEnd);
  }
  if (hello.epochs.length > 0) return 0; // no term in common: nothing can be trusted
  // A log from before any epoch (a node that ran alone, or an empty one): it is the leader's
  // prefix at most up to the first epoch. (A cluster is formed from one node's data; see README.)
  const first = leaderEpochs[leaderEpochs.length - 1];
  return Math.min(hello.logEnd, first ? first.position : store.logEnd);
}
