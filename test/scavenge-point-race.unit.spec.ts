import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ExpectedVersion, jsonEvent, SCAVENGE_POINT_EVENT_TYPE, SCAVENGE_POINTS_STREAM, Store } from '../src/store/index.js';
import { begin } from '../src/scavenge/run.js';
import { ScavengeState } from '../src/scavenge/state.js';
import type { LogAppend } from '../src/scavenge/history.js';

// A scavenge's beginning when several nodes of a cluster start one at once: each asks the leader
// to write the next scavenge point, and all but the first are refused (wrong expected version).
// A refused run uses the point the other node wrote once it is replicated here, rather than
// ending Errored (seen in the cluster e2e test: a follower's run failed so, now and then).

let dir: string;
let store: Store;
let state: ScavengeState;
const log = pino({ level: 'silent' });
const request = { threads: 1, threshold: 0, throttlePercent: 100, syncOnly: false };

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'svc-point-race-'));
  store = await Store.open({ dir: join(dir, 'db'), inMemory: false, chunkSize: 64 * 1024 });
  state = await ScavengeState.open(join(dir, 'state'), { pageSize: 4096, cacheSize: 1024 * 1024, streamCacheCapacity: 100 });
});
afterEach(async () => {
  await state.close();
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

const otherNodesPoint = () => store.append(SCAVENGE_POINTS_STREAM, ExpectedVersion.noStream, [jsonEvent(SCAVENGE_POINT_EVENT_TYPE, {})]);
const refused = new Error('the leader refused the write to $scavengePoints: Wrong expected version for stream $scavengePoints: current version is 0');

describe('the scavenge point of a run that another node beat to it', () => {
  it('uses the point the other node wrote when it arrives after the refusal', async () => {
    const append: LogAppend = async () => {
      setTimeout(() => void otherNodesPoint(), 50);
      throw refused;
    };
    const beginning = await begin(store, append, state, request, log);
    expect(beginning).toMatchObject({ kind: 'start', point: { eventNumber: 0 } });
    expect(store.readEvent(SCAVENGE_POINTS_STREAM, -1)).toMatchObject({ status: 'ok', lastEventNumber: 0 });
  });

  it('uses the point already here when the refusal comes after it was replicated', async () => {
    const append: LogAppend = async () => {
      await otherNodesPoint();
      throw refused;
    };
    expect(await begin(store, append, state, request, log)).toMatchObject({ kind: 'start', point: { eventNumber: 0 } });
  });

  it('fails with the refusal when no other point comes', async () => {
    const append: LogAppend = async () => {
      throw refused;
    };
    await expect(begin(store, append, state, request, log)).rejects.toBe(refused);
    expect(store.readEvent(SCAVENGE_POINTS_STREAM, -1).status).not.toBe('ok');
  }, 15_000);
});
