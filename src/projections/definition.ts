// The start-time rules over a source definition (its shape: language/source-definition.js):
// what it delivers, and the illegal combinations it is rejected for (with the reasons the
// established servers give).

import type { SourceDefinition } from './language/source-definition.js';

/** Which event types reach the handlers: every type, or only the listed ones. */
export interface EventFilter { all: boolean; types: Set<string> }

export function eventFilterOf(def: SourceDefinition): EventFilter {
  let all = def.handlerOrder.length === 0;
  const types = new Set<string>();
  for (const key of def.handlerOrder) {
    if (key === '$any') all = true;
    else {
      all = false;
      types.add(key);
    }
  }
  if (def.handlerOrder.length > 0 && def.handlerOrder[def.handlerOrder.length - 1] === '$any' && types.size > 0) {
    return { all: true, types }; // rejected by validateDefinition
  }
  return { all, types };
}

/** The reason a definition cannot run, or undefined when it can. */
export function definitionProblem(def: SourceDefinition): string | undefined {
  const hasStreams = def.streams.length > 0;
  const hasCategories = def.categories.length > 0;
  if (!def.allStreams && !hasStreams && !hasCategories) return 'None of streams and categories are included';
  if (hasStreams && hasCategories) return 'Streams and categories cannot be included in a filter at the same time';
  if (def.allStreams && (hasStreams || hasCategories)) return 'Both FromAll and specific categories/streams cannot be set';
  const filter = eventFilterOf(def);
  if (filter.all && filter.types.size > 0) return 'Both AllEvents and specific event filters cannot be set';
  if (def.byStream && hasStreams) return 'foreachStream projections are not supported on stream based sources';
  if (def.reorderEvents && def.allStreams) return 'Event reordering cannot be used with fromAll()';
  if (def.reorderEvents && def.streams.length < 2) return 'Event reordering is only available in fromStreams([]) projections';
  if (def.reorderEvents && def.processingLag < 50) return 'Event reordering requires processing lag at least of 50ms';
  if (def.handlesDeletedNotifications && !def.byStream) return 'Deleted stream notifications are only supported with foreachStream()';
  return undefined;
}

/**
 * JSON data crosses into the sandbox already parsed, unless the query needs the exact text it
 * was written with: `bodyRaw`, `copyTo`, or the no-handler rule (the state is the raw body).
 */
export function needsRawBody(def: SourceDefinition, query: string): boolean {
  return def.handlerOrder.length === 0 || /\bbodyRaw\b|\bcopyTo\b/.test(query);
}
