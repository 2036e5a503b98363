import { randomUUID } from 'node:crypto';
import type { Store } from '../store/index.js';
import { definitionProblem, eventFilterOf } from './definition.js';
import { blankDefinition, type SourceDefinition } from './language/source-definition.js';
import { selectEvent } from './source.js';
import { ProjectionError } from './manager.js';

// POST /projections/read-events: the events a query definition would read, from a position,
// without running a projection (the debugger feed of the established servers).

const DEFAULT_MAX_EVENTS = 10;
const MAX_EVENTS = 4096;

function field(doc: Record<string, unknown>, name: string): unknown {
  const key = Object.keys(doc).find((k) => k.toLowerCase() === name.toLowerCase());
  return key === undefined ? undefined : doc[key];
}

function strings(value: unknown, what: string): string[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value) || !value.every((v) => typeof v === 'string')) throw new ProjectionError('PROJECTION_REFUSED', `${what} must be an array of strings.`);
  return value as string[];
}

/** The query part of the request: the shape of a source definition (as `query?config=yes` shows it). */
export function parseQueryDefinition(query: unknown): SourceDefinition {
  if (typeof query !== 'object' || query === null || Array.isArray(query)) throw new ProjectionError('PROJECTION_REFUSED', 'query must be a source definition object.');
  const q = query as Record<string, unknown>;
  const options = (field(q, 'options') ?? {}) as Record<string, unknown>;
  const events = strings(field(q, 'events'), 'events');
  if (field(q, 'allEvents') === true && events.length > 0) throw new ProjectionError('PROJECTION_REFUSED', 'Both AllEvents and specific event filters cannot be set');
  const allEvents = field(q, 'allEvents') === true || events.length === 0;
  return {
    ...blankDefinition(), allEvents, allStreams: field(q, 'allStreams') === true, streams: strings(field(q, 'streams'), 'streams'),
    categories: strings(field(q, 'categories'), 'categories'), events,
    includeLinks: field(options, '$includeLinks') === true || field(options, 'includeLinks') === true,
    handlerOrder: allEvents ? [] : events,
  };
}

function startPosition(position: unknown): { log: number; streams: Record<string, number> } {
  if (position === undefined || position === null) return { log: 0, streams: {} };
  if (typeof position !== 'object' || Array.isArray(position)) throw new ProjectionError('PROJECTION_REFUSED', 'position must be a checkpoint tag object.');
  const p = position as Record<string, unknown>;
  const commit = field(p, '$c') ?? field(p, 'commitPosition');
  const log = commit === undefined ? 0 : Number(commit);
  if (!Number.isSafeInteger(log) || log < 0) throw new ProjectionError('PROJECTION_REFUSED', 'position $c must be a non-negative integer.');
  const s = field(p, '$s');
  const streams: Record<string, number> = {};
  if (s !== undefined) {
    if (typeof s !== 'object' || s === null) throw new ProjectionError('PROJECTION_REFUSED', 'position $s must map streams to event numbers.');
    for (const [stream, n] of Object.entries(s)) {
      if (typeof n !== 'number' || !Number.isInteger(n)) throw new ProjectionError('PROJECTION_REFUSED', 'position $s must map streams to event numbers.');
      streams[stream] = n;
    }
  }
  return { log, streams };
}

function payload(bytes: Buffer, isJson: boolean): unknown {
  const text = bytes.toString('utf8');
  if (!isJson) return text;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

export interface ReadEventsResult {
  correlationId: string;
  readerPosition: Record<string, number>;
  events: Record<string, unknown>[];
}

export interface ReadEventsRequest {
  definition: SourceDefinition;
  doc: Record<string, unknown>;
}

/** Parses and checks the request; the caller checks read access to the streams the definition names. */
export function parseReadEventsRequest(body: unknown): ReadEventsRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new ProjectionError('PROJECTION_REFUSED', 'The body must be {"query": {...}, "position": {...}, "maxEvents": n}.');
  const doc = body as Record<string, unknown>;
  const definition = parseQueryDefinition(field(doc, 'query'));
  const problem = definitionProblem(definition);
  if (problem) throw new ProjectionError('PROJECTION_REFUSED', problem);
  return { definition, doc };
}

export function readEvents(store: Store, { definition: def, doc }: ReadEventsRequest): ReadEventsResult {
  const max = field(doc, 'maxEvents') ?? DEFAULT_MAX_EVENTS;
  if (typeof max !== 'number' || !Number.isInteger(max) || max < 1 || max > MAX_EVENTS) {
    throw new ProjectionError('PROJECTION_REFUSED', `maxEvents must be an integer from 1 to ${MAX_EVENTS}.`);
  }
  const sources = [...def.streams, ...def.categories.map((c) => `$ce-${c}`)];
  if (!def.allStreams && sources.every((s) => !store.streamInfo(s))) throw new ProjectionError('PROJECTION_NOT_FOUND', `None of the streams ${sources.join(', ')} exists.`);
  const start = startPosition(field(doc, 'position'));
  const filter = eventFilterOf(def);
  const events: Record<string, unknown>[] = [];
  let position = start.log;
  while (events.length < max) {
    const page = store.readAllForward(position, 1000);
    for (const record of page.records) {
      position = record.position + record.size;
      const selected = selectEvent(def, filter, store, record);
      if (!selected) continue;
      const { event, link } = selected;
      const seen = start.streams[record.streamId];
      if (seen !== undefined && record.eventNumber <= seen) continue;
      // Null and default-valued members are omitted, as the established servers write this answer.
      const out: Record<string, unknown> = { eventStreamId: event.streamId };
      if (event.eventNumber !== 0) out.eventNumber = event.eventNumber;
      out.eventType = event.eventType;
      out.data = payload(event.data, event.dataIsJson);
      if (event.metadata.length > 0) out.metadata = payload(event.metadata, true);
      if (link && link.metadata.length > 0) out.linkMetadata = payload(link.metadata, true);
      if (event.isJson) out.isJson = true;
      out.readerPosition = { $c: position, $p: position };
      events.push(out);
      if (events.length >= max) break;
    }
    if (page.isEnd || page.records.length === 0) break;
  }
  return { correlationId: randomUUID(), readerPosition: { $c: position, $p: position }, events };
}
