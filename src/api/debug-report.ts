import type { DebugEvent, DebugReport, DebugStep } from '../projections/index.js';
import { indentedValue, jsonOrText, type JsonText } from './json-indent.js';

// The body of POST /projections/debug (docs/projection-debugger.md): the report of a debug run,
// with every JSON value the node holds as text (event data and metadata, states, results, emitted
// data) written as it is, so that a client parsing without loss sees every digit it was sent.
// Members that do not apply are left out; a null state means none.

type Json = JsonText | string | number | boolean | null | Json[] | { [k: string]: Json | undefined };

const jsonOrNull = (text: string | null | undefined): Json | undefined => (text === undefined ? undefined : text === null ? null : jsonOrText(text));

function eventJson(e: DebugEvent): Json {
  return {
    streamId: e.streamId, eventNumber: e.eventNumber, eventType: e.eventType, eventId: e.eventId, isJson: e.isJson,
    data: e.dataIsJson ? jsonOrText(e.data) : e.data,
    metadata: e.metadata === null ? undefined : jsonOrText(e.metadata),
    linkMetadata: e.linkMetadata === null ? undefined : jsonOrText(e.linkMetadata),
    position: e.position,
    link: e.link ?? undefined,
  };
}

function stepJson(s: DebugStep): Json {
  return {
    event: eventJson(s.event), partition: s.partition, handler: s.handler, calls: s.calls,
    stateBefore: jsonOrNull(s.stateBefore), stateAfter: jsonOrNull(s.stateAfter),
    sharedStateBefore: jsonOrNull(s.sharedStateBefore), sharedStateAfter: jsonOrNull(s.sharedStateAfter),
    result: jsonOrNull(s.result),
    emits: s.emits.map((e) => ({
      streamId: e.streamId, eventType: e.eventType, data: e.isJson ? jsonOrText(e.data) : e.data,
      metadata: e.metadata as Json, isLink: e.eventType === '$>',
    })),
    logs: s.logs.length > 0 ? s.logs : undefined,
    skipped: s.skipped, error: s.error,
  };
}

export function debugReportJson(r: DebugReport): string {
  return indentedValue({
    name: r.name, mode: r.mode, emitEnabled: r.emitEnabled, biState: r.biState, producesResults: r.producesResults,
    steps: r.steps.map(stepJson), truncated: r.truncated, fault: r.fault,
  });
}
