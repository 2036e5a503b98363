import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { Scavenger, type CurrentScavenge } from '../src/scavenge/scavenger.js';
import { ScavengeAlreadyRunningError, type LastScavengeResult, type ScavengeRequest } from '../src/scavenge/types.js';
import { http, sleep, startTestNode, type TestNode } from './support/node.js';

// The scavenge routes of a real node whose scavenger is replaced by one that records what it is
// asked (the real one is followed end to end in scavenge-api.e2e.spec.ts): what a valid query
// becomes, and what the routes make of the scavenger's answers, including that DELETE answers
// only once the stop has finished.

class RecordingScavenger {
  readonly requests: ScavengeRequest[] = [];
  readonly stopsAsked: string[] = [];
  running: CurrentScavenge | undefined;
  lastRun: { scavengeId: string; result: LastScavengeResult } | undefined;
  /** What stop() resolves to, once `finishStop` is called. */
  stopFound = true;
  finishStop: () => void = () => {};

  start(request: ScavengeRequest): string {
    if (this.running) throw new ScavengeAlreadyRunningError(this.running.scavengeId);
    this.requests.push(request);
    return `scavenge-${this.requests.length}`;
  }

  stop(id: string): Promise<boolean> {
    this.stopsAsked.push(id);
    return new Promise((resolve) => { this.finishStop = () => resolve(this.stopFound); });
  }
}

const RUNNING: CurrentScavenge = {
  scavengeId: 'run-1',
  progress: { phase: 'ChunkExecution', scavengePoint: 0, chunksDone: 2, chunksTotal: 5, eventsExamined: 40, eventsRemoved: 30, spaceSaved: 3000 },
};

describe('scavenge routes over a recording scavenger', () => {
  let t: TestNode;
  let scavenger: RecordingScavenger;
  beforeAll(async () => {
    t = await startTestNode();
    vi.spyOn(Scavenger.prototype, 'start').mockImplementation((request) => scavenger.start(request));
    vi.spyOn(Scavenger.prototype, 'current').mockImplementation(() => scavenger.running);
    vi.spyOn(Scavenger.prototype, 'last').mockImplementation(() => scavenger.lastRun);
    vi.spyOn(Scavenger.prototype, 'stop').mockImplementation((id) => scavenger.stop(id));
  });
  afterAll(async () => {
    vi.restoreAllMocks();
    await t.dispose();
  });
  beforeEach(() => { scavenger = new RecordingScavenger(); });

  const post = (query: string) => http(t, `/admin/scavenge${query}`, { method: 'POST' });

  it('starts with the defaults when the query says nothing, with no body or {}', async () => {
    const res = await post('');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await res.text()).toBe('{\n  "scavengeId": "scavenge-1"\n}');
    const withBody = await http(t, '/admin/scavenge', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}' });
    expect(await withBody.json()).toEqual({ scavengeId: 'scavenge-2' });
    const defaults = { threads: 1, threshold: 0, throttlePercent: 100, syncOnly: false, startFromChunk: 0 };
    expect(scavenger.requests).toEqual([defaults, defaults]);
  });

  it('passes the values of the query, whatever the case of their names', async () => {
    for (const query of ['?threads=4&threshold=-1&throttlePercent=100&syncOnly=TRUE&startFromChunk=0', '?THRESHOLD=%2B12&throttlepercent=1&synconly=False']) {
      const res = await post(query);
      expect(res.status, await res.text()).toBe(200);
    }
    expect(scavenger.requests).toEqual([
      { threads: 4, threshold: -1, throttlePercent: 100, syncOnly: true, startFromChunk: 0 },
      { threads: 1, threshold: 12, throttlePercent: 1, syncOnly: false, startFromChunk: 0 },
    ]);
  });

  it('passes a start chunk (the engine executes chunks from it: scavenge-threshold.e2e)', async () => {
    const res = await post('?startFromChunk=7');
    expect(res.status, await res.text()).toBe(200);
    expect(scavenger.requests.at(-1)).toEqual({ threads: 1, threshold: 0, throttlePercent: 100, syncOnly: false, startFromChunk: 7 });
  });

  it('answers 400 "Scavenge is already running" while one runs', async () => {
    scavenger.running = RUNNING;
    const res = await post('?threshold=5');
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(await res.text()).toBe('Scavenge is already running');
  });

  it('asks the scavenger nothing when the query is refused', async () => {
    const res = await post('?threads=2&throttlePercent=50');
    expect(res.status).toBe(400);
    await res.arrayBuffer();
    expect(scavenger.requests).toEqual([]);
  });

  it('shows the running scavenge with its link and progress, and the last one with its result', async () => {
    scavenger.running = RUNNING;
    scavenger.lastRun = { scavengeId: 'run-1', result: 'InProgress' };
    const current = await http(t, '/admin/scavenge/current');
    expect(await current.json()).toEqual({ scavengeId: 'run-1', scavengeLink: '/admin/scavenge/run-1', progress: RUNNING.progress });
    const last = await http(t, '/admin/scavenge/last');
    expect(await last.json()).toEqual({ scavengeId: 'run-1', scavengeLink: '/admin/scavenge/run-1', scavengeResult: 'InProgress' });
  });

  it('DELETE current stops the running scavenge by its id and answers only once it has stopped', async () => {
    scavenger.running = RUNNING;
    let answered = false;
    const deleting = http(t, '/admin/scavenge/current', { method: 'DELETE' }).then((res) => {
      answered = true;
      return res;
    });
    await sleep(100);
    expect(scavenger.stopsAsked).toEqual(['run-1']);
    expect(answered).toBe(false);
    scavenger.finishStop();
    const res = await deleting;
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(await res.text()).toBe('run-1');
  });

  it('DELETE answers 404 when the scavenger finds no such scavenge running', async () => {
    scavenger.stopFound = false;
    const deleting = http(t, '/admin/scavenge/other-id', { method: 'DELETE' });
    await sleep(50);
    scavenger.finishStop();
    const res = await deleting;
    expect(res.status).toBe(404);
    expect(await res.text()).toBe('Scavenge Id does not exist');
    expect(scavenger.stopsAsked).toEqual(['other-id']);
  });

  it('DELETE current when none runs answers 404 without asking the scavenger to stop', async () => {
    const res = await http(t, '/admin/scavenge/current', { method: 'DELETE' });
    expect(res.status).toBe(404);
    await res.arrayBuffer();
    expect(scavenger.stopsAsked).toEqual([]);
  });
});
