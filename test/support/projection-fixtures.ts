// The projection fixtures (fixtures/projections/, format in format.ts) as both runners use them:
// loaded, their placeholders filled in, and the events of a stream compared with what a fixture
// expects, whether they were read from a store in memory or over HTTP.

import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { ExpectedEvent, Fixture, FixtureEvent } from '../../fixtures/projections/format.js';

export type { ExpectedEvent, Fixture, FixtureEvent } from '../../fixtures/projections/format.js';

const DIR = fileURLToPath(new URL('../../fixtures/projections/', import.meta.url));

/** Every fixture, by file name order. */
export async function loadFixtures(): Promise<Fixture[]> {
  const files = readdirSync(DIR).filter((f) => f.endsWith('.ts') && f !== 'format.ts').sort();
  const fixtures: Fixture[] = [];
  for (const file of files) {
    const fixture = (await import(new URL(file, `file://${DIR}`).href)).default as Fixture;
    if (`${fixture.name}.ts` !== file) throw new Error(`fixture ${file} is named '${fixture.name}'`);
    fixtures.push(fixture);
  }
  return fixtures;
}

/** The fixture with {prefix} and {name} replaced in every string, object keys included. */
export function instantiate(fixture: Fixture, values: { prefix: string; name: string }): Fixture {
  if (/[-{}]/.test(values.prefix)) throw new Error(`a prefix must keep categories whole: '${values.prefix}'`);
  const fill = (text: string) => text.replaceAll('{prefix}', values.prefix).replaceAll('{name}', values.name);
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') return fill(v);
    if (Array.isArray(v)) return v.map(walk);
    if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [fill(k), walk(x)]));
    return v;
  };
  return walk(fixture) as Fixture;
}

/** The category $by_category files a stream under (the part before its first '-'), if any. */
export function categoryOf(stream: string): string | undefined {
  const dash = stream.indexOf('-');
  return stream.startsWith('$') || dash <= 0 ? undefined : stream.slice(0, dash);
}

/** Event number of each of the fixture's events in its stream. */
export function eventNumbers(events: FixtureEvent[]): number[] {
  const counts = new Map<string, number>();
  return events.map((e) => {
    const n = counts.get(e.stream) ?? 0;
    counts.set(e.stream, n + 1);
    return n;
  });
}

/** Every stream a fixture expects, results and emitted. */
export function expectedStreams(fixture: Fixture): Record<string, ExpectedEvent[]> {
  return { ...fixture.expect.resultStreams, ...fixture.expect.emittedStreams };
}

/** An event of a stream as read back. */
export interface ReadEvent {
  eventType: string;
  isJson: boolean;
  /** Data text ('' when none). */
  data: string;
  /** Metadata text ('' when none). */
  metadata: string;
}

/**
 * The events in the fixture's terms, to compare with toEqual: JSON data parsed where a JSON value is
 * expected (a JSON event's data otherwise stays text, so a mismatch shows), data left out when
 * empty, and only the metadata keys the fixture names.
 */
export function comparable(actual: ReadEvent[], expected: ExpectedEvent[]): ExpectedEvent[] {
  return actual.map((e, i) => {
    const want = expected[i];
    const out: ExpectedEvent = { type: e.eventType };
    if (e.data !== '') out.data = e.isJson && want?.data !== undefined && typeof want.data !== 'string' ? JSON.parse(e.data) : e.data;
    if (want?.metadata) {
      const metadata = e.metadata === '' ? {} : JSON.parse(e.metadata);
      out.metadata = Object.fromEntries(Object.keys(want.metadata).map((k) => [k, metadata[k]]));
    }
    return out;
  });
}
