// Every projection fixture (fixtures/projections/) run in memory through the production path
// (test/support/projection-harness.ts): the events written to a store, the projection run in the
// fixture's mode over them, then its partitions' final states and results, its result and emitted
// streams as the store holds them, and, for continuous fixtures, states and results after the
// events the fixture names. The same fixtures run over HTTP in projection-fixtures.e2e.spec.ts.

import { describe, expect, it } from 'vitest';
import type { ProjectionMode } from '../src/projections/model.js';
import { PROJECTION_NAME, runProjection, type EventSpec, type RunResult } from './support/projection-harness.js';
import {
  categoryOf, comparable, eventNumbers, expectedStreams, instantiate, loadFixtures, type Fixture,
} from './support/projection-fixtures.js';

const MODES: Record<Fixture['mode'], ProjectionMode> = { continuous: 'Continuous', onetime: 'OneTime', transient: 'Transient' };

/** Each event, with the link $by_category would write for it (category sources read those). */
function specsOf(fixture: Fixture): EventSpec[] {
  return fixture.events.map((e) => {
    const category = categoryOf(e.stream);
    return {
      stream: e.stream, type: e.type, data: e.data, metadata: e.metadata,
      ...(category === undefined ? {} : { via: `$ce-${category}`, linkMetadata: { $o: e.stream } }),
    };
  });
}

const parsed = (texts: Record<string, string | null>) =>
  Object.fromEntries(Object.entries(texts).map(([p, t]) => [p, t === null ? null : JSON.parse(t)]));

/**
 * State and result of every partition right after each of the fixture's events: the changes
 * collected after each handled event (one event per batch, a checkpoint after each), folded in order.
 */
function valuesAfterEachEvent(fixture: Fixture, run: RunResult): { states: Record<string, unknown>; results: Record<string, unknown> }[] {
  const numbers = eventNumbers(fixture.events);
  const indexOf = new Map(fixture.events.map((e, i) => [`${numbers[i]}@${e.stream}`, i]));
  expect(run.changes).toHaveLength(run.delivered.length);
  const states: Record<string, unknown> = {};
  const results: Record<string, unknown> = {};
  const after: { states: Record<string, unknown>; results: Record<string, unknown> }[] = [];
  let next = 0;
  run.delivered.forEach((d, k) => {
    const index = indexOf.get(`${d.eventNumber}@${d.streamId}`);
    if (index === undefined) throw new Error(`delivered an event the fixture did not write: ${d.eventNumber}@${d.streamId}`);
    for (; next < index; next++) after.push({ states: { ...states }, results: { ...results } });
    for (const [p, state, result] of run.changes[k]) {
      states[p] = state === null ? null : JSON.parse(state);
      results[p] = result === null ? null : JSON.parse(result);
    }
  });
  for (; next < fixture.events.length; next++) after.push({ states: { ...states }, results: { ...results } });
  return after;
}

const fixtures = await loadFixtures();

describe('projection fixtures, in memory (fixtures/projections/)', () => {
  it('there are fixtures of every mode', () => {
    expect(new Set(fixtures.map((f) => f.mode))).toEqual(new Set(['continuous', 'onetime', 'transient']));
  });

  for (const fixture of fixtures) {
    it(`${fixture.name}: ${fixture.about}`, async () => {
      const f = instantiate(fixture, { prefix: 'fx', name: PROJECTION_NAME });
      const streams = expectedStreams(f);
      // Queries run without checkpoints, as they are created over HTTP: they collect once, at the end.
      const continuous = f.mode === 'continuous';
      const run = await runProjection(f.query, specsOf(f), {
        mode: MODES[f.mode], emitEnabled: f.emit ?? false, checkpoints: continuous, streams: Object.keys(streams),
      });
      expect(run.error).toBeUndefined();

      expect(parsed(run.states)).toEqual(f.expect.states);
      expect(parsed(run.results)).toEqual(f.expect.results);
      for (const [stream, events] of Object.entries(streams)) {
        expect(comparable(run.streams[stream], events), stream).toEqual(events);
      }

      if (!f.expect.steps) return;
      expect(continuous, 'steps are checked for continuous fixtures').toBe(true);
      const after = valuesAfterEachEvent(f, run);
      for (const step of f.expect.steps) {
        const at = after[step.afterEvent];
        const pick = (values: Record<string, unknown>, keys: string[]) => Object.fromEntries(keys.map((p) => [p, values[p] ?? null]));
        if (step.states) expect(pick(at.states, Object.keys(step.states)), `states after event ${step.afterEvent}`).toEqual(step.states);
        if (step.results) expect(pick(at.results, Object.keys(step.results)), `results after event ${step.afterEvent}`).toEqual(step.results);
      }
    });
  }
});
