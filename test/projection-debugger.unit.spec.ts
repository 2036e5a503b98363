import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ProjectionDebugger, type DebugReport } from '../src/projections/debugger.js';
import type { ProjectionMode, RuntimeLimits } from '../src/projections/model.js';
import { Store } from '../src/store/index.js';
import { runProjection, writeEvents, type InputSpec } from './support/projection-harness.js';

// The debugger (src/projections/debugger.ts) against the projection language's own harness: the
// same query over the same events, once run as a projection (test/support/projection-harness.ts)
// and once stepped by the debugger, must end every partition in the same state and result and
// emit the same events in the same order, across the language's corners ($created, $deleted, the
// no-handler rule, bi-state, transforms, a state that becomes null). Then its own bounds.

const LIMITS: RuntimeLimits = { memoryLimitMb: 64, executionTimeoutMs: 1000, maxStateBytes: 0, partitionCache: 0, maxEmitsPerEvent: 0 };

async function storeWith(specs: InputSpec[]): Promise<Store> {
  const store = await Store.open({ dir: '', inMemory: true, chunkSize: 256 * 1024 * 1024, logCacheBytes: 1 << 20 });
  await writeEvents(store, specs);
  return store;
}

async function debugRun(store: Store, query: string, limits = LIMITS, emitEnabled = true, mode: ProjectionMode = 'OneTime'): Promise<DebugReport> {
  const run = await new ProjectionDebugger(store, limits).prepare({ query, name: 'under-test', emitEnabled, mode, executionTimeoutMs: null });
  try {
    return await run.run(await run.sourceEvents(1000));
  } finally {
    run.dispose();
  }
}

/** Each partition's last state (and result) in the steps; a bi-state query's shared state is partition ''. */
function finalOf(report: DebugReport): { states: Record<string, string | null>; results: Record<string, string | null> } {
  const states: Record<string, string | null> = {};
  const results: Record<string, string | null> = {};
  for (const s of report.steps) {
    if (s.partition === null) continue;
    states[s.partition] = s.stateAfter ?? null;
    if (report.producesResults) results[s.partition] = s.result ?? null;
    if (report.biState) states[''] = s.sharedStateAfter ?? null;
  }
  return { states, results };
}

/**
 * `mode`: the run's (default OneTime). A bi-state result depends on the shared state when it is
 * computed: a continuous projection computes it at each change, as the debugger shows it at each step.
 */
const CASES: { title: string; query: string; specs: InputSpec[]; mode?: ProjectionMode }[] = [
  {
    title: 'foreachStream with $created emitting and $deleted',
    query: `fromAll().foreachStream().when({
      $init: function () { return { a: 0 }; },
      $created: function (s, e) { s.a++; emit('created-log', 'Created', { p: e.partition }); },
      $any: function (s, e) { s.a++; linkTo('all-links', e); },
      $deleted: function (s, e, p) { s.deleted = p; }
    })`,
    specs: [{ stream: 'stream-1' }, { stream: 'stream-2' }, { stream: 'stream-1', data: { x: 1 } }, { deleted: 'stream-1' }],
  },
  {
    title: 'no handlers: the state is the last event\'s raw data, JSON or not',
    query: `fromStream('stream-1').partitionBy(function (e) { return e.metadata.k; })`,
    specs: [{ data: { n: 1 }, metadata: { k: 'a' } }, { raw: 'plain text', isJson: false, metadata: { k: 'b' } }, { raw: '{"n": 2.50}', metadata: { k: 'a' } }],
  },
  {
    title: 'bi-state with a transform of the pair',
    query: `fromStream('stream-1').partitionBy(function (e) { return e.body.k; }).when({
      $init: function () { return { n: 0 }; },
      $initShared: function () { return { total: 0 }; },
      $any: function (s, e) { s[0].n++; s[1].total += e.body.v; return s; }
    }).transformBy(function (s) { return { n: s[0].n, of: s[1].total }; })`,
    specs: [{ data: { k: 'a', v: 1 } }, { data: { k: 'b', v: 2 } }, { data: { k: 'a', v: 3 } }],
    mode: 'Continuous',
  },
  {
    title: 'filterBy: a result only while the count is even',
    query: `fromStream('stream-1').when({ $init: function () { return { n: 0 }; }, $any: function (s) { s.n++; } })
      .filterBy(function (s) { return s.n % 2 === 0; })`,
    specs: [{}, {}, {}],
  },
  {
    title: 'a state that becomes null, and is initialised again after another partition',
    query: `fromStream('stream-1').partitionBy(function (e) { return e.body.k; }).when({
      $init: function () { return { c: 0 }; },
      $any: function (s, e) { if (e.body.drop) return null; s.c++; }
    })`,
    specs: [{ data: { k: 'a' } }, { data: { k: 'a', drop: true } }, { data: { k: 'b' } }, { data: { k: 'a' } }],
  },
];

describe('the debugger and the projection agree', () => {
  for (const { title, query, specs, mode = 'OneTime' } of CASES) {
    it(title, async () => {
      const real = await runProjection(query, specs, { emitEnabled: true, checkpoints: mode === 'Continuous', mode });
      expect(real.error).toBeUndefined();
      const store = await storeWith(specs);
      try {
        const report = await debugRun(store, query, LIMITS, true, mode);
        expect(report.fault).toBeUndefined();
        const { states, results } = finalOf(report);
        expect(states).toEqual(real.states);
        // The results of the partitions the steps handled (a bi-state query's shared partition has none of its own).
        for (const [partition, result] of Object.entries(results)) expect(result, partition).toEqual(real.results[partition]);
        if (report.producesResults) expect(Object.keys(results).length).toBeGreaterThan(0);
        const emitted = report.steps.flatMap((s) => s.emits).map(({ streamId, eventType, data, isJson }) => ({ streamId, eventType, data, isJson }));
        expect(emitted).toEqual(real.emitted.map(({ streamId, eventType, data, isJson }) => ({ streamId, eventType, data, isJson })));
        expect(report.steps).toHaveLength(real.delivered.length);
      } finally {
        await store.close();
      }
    });
  }
});

describe('the debugger\'s own bounds', () => {
  let store: Store;
  const query = `fromStream('stream-1').when({ $any: function (s, e) { s.text = 'x'.repeat(100); } })`;
  beforeAll(async () => { store = await storeWith([{}, {}]); });
  afterAll(async () => { await store.close(); });

  it('takes two runs at a time; a run that fails to start, or is disposed, gives its place back', async () => {
    const debuggerOf = new ProjectionDebugger(store, LIMITS);
    for (const bad of ['throw 1;', 'fromAll(', 'fromStream("a"); fromCategory("b");']) {
      await expect(debuggerOf.prepare({ query: bad, name: 'x', emitEnabled: false, mode: 'OneTime', executionTimeoutMs: null })).rejects.toThrow();
    }
    const settings = { query, name: 'x', emitEnabled: false, mode: 'OneTime' as const, executionTimeoutMs: null };
    const [one, two] = [await debuggerOf.prepare(settings), await debuggerOf.prepare(settings)];
    await expect(debuggerOf.prepare(settings)).rejects.toMatchObject({ code: 'PROJECTION_BUSY' });
    one.dispose();
    one.dispose(); // once only
    const three = await debuggerOf.prepare(settings);
    await expect(debuggerOf.prepare(settings)).rejects.toMatchObject({ code: 'PROJECTION_BUSY' });
    two.dispose();
    three.dispose();
  });

  it('a state over MaxProjectionStateSize stops the run with the projection\'s reason', async () => {
    const report = await debugRun(store, query, { ...LIMITS, maxStateBytes: 50 });
    expect(report.steps).toHaveLength(1);
    expect(report.steps[0].error).toMatch(/^The state size of projection 'under-test' is \d+ bytes which exceeds the configured MaxProjectionStateSize of 50 bytes\.$/);
  });

  it('an emit without emit enabled, or beyond MaxProjectionEmitsPerEvent, stops the run', async () => {
    const emitting = `fromStream('stream-1').when({ $any: function (s, e) { emit('a', 'A', {}); emit('a', 'A', {}); } })`;
    expect((await debugRun(store, emitting, LIMITS, false)).steps[0].error).toBe("'emit' is not allowed by the projection/configuration/mode");
    expect((await debugRun(store, emitting, { ...LIMITS, maxEmitsPerEvent: 1 })).steps[0].error).toMatch(/MaxProjectionEmitsPerEvent of 1/);
  });
});
