import { ApiFailure, request, seg } from '../../api';

// Helpers of the admin views: the node's refusal as a sentence, history streams read as Atom
// feeds (embed=body), .NET TimeSpan strings made readable.

/**
 * The node's message in a failure: its 4xx/5xx bodies are plain text, a JSON string (auto-scavenge
 * refusals) or problem+json ({title}); anything else (a network failure) is the error's message.
 */
export function nodeMessage(error: unknown): string {
  if (!(error instanceof ApiFailure)) return error instanceof Error ? error.message : String(error);
  const body = error.body.trim();
  if (!body) return `${error.status} ${error.statusText}`;
  try {
    const parsed = JSON.parse(body);
    if (typeof parsed === 'string') return parsed;
    if (parsed && typeof parsed === 'object' && typeof parsed.title === 'string') return parsed.title;
  } catch { /* plain text */ }
  return body;
}

/** A failure next to the action that met it: the status and the node's own words. */
export function Failure({ error }: { error: unknown }) {
  if (!error) return null;
  const status = error instanceof ApiFailure ? `${error.status} ${error.statusText}: ` : '';
  return <p class="error" role="alert">{status}{nodeMessage(error)}</p>;
}

export interface FeedEvent {
  eventType: string;
  eventNumber: number;
  streamId: string;
  /** The entry's time (for a resolved link: the link's). */
  updated: string;
  data: any;
}

const ATOM = 'application/vnd.eventstore.atom+json';

function entryOf(e: any): FeedEvent {
  let data: any = e.data;
  if (typeof data === 'string') {
    try { data = JSON.parse(data); } catch { /* kept as text */ }
  }
  return { eventType: e.eventType ?? e.summary, eventNumber: e.eventNumber, streamId: e.streamId, updated: e.updated, data };
}

/**
 * The newest events of a stream (newest first), up to `max`, following the feed's `next` (older)
 * pages; a stream that does not exist (404) has none.
 */
export async function readBackward(stream: string, max: number, signal?: AbortSignal): Promise<FeedEvent[]> {
  const pageSize = Math.min(max, 100);
  let path: string | undefined = `/streams/${seg(stream)}/head/backward/${pageSize}?embed=body`;
  const out: FeedEvent[] = [];
  try {
    while (path && out.length < max) {
      const doc: any = (await request(path, { accept: ATOM, signal })).json();
      const entries: any[] = doc?.entries ?? [];
      out.push(...entries.map(entryOf));
      const next: string | undefined = doc?.links?.find((l: any) => l.relation === 'next')?.uri;
      if (!next || entries.length === 0) break;
      const url = new URL(next, location.href);
      url.searchParams.set('embed', 'body');
      path = url.pathname + url.search;
    }
  } catch (err) {
    if (err instanceof ApiFailure && err.status === 404) return out;
    throw err;
  }
  return out.slice(0, max);
}

/** Seconds in a .NET TimeSpan string (`[d.]hh:mm:ss[.fffffff]`); NaN when it is not one. */
export function timeSpanSeconds(text: unknown): number {
  if (typeof text !== 'string') return NaN;
  const m = /^(?:(\d+)\.)?(\d+):(\d\d):(\d\d)(?:\.(\d+))?$/.exec(text);
  if (!m) return NaN;
  const [, d, h, min, s, f] = m;
  return Number(d ?? 0) * 86_400 + Number(h) * 3600 + Number(min) * 60 + Number(s) + (f ? Number(`0.${f}`) : 0);
}

/** A duration for people: `850 ms`, `12.3 s`, `4 min 05 s`, `2 h 03 min`. */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds)) return '–';
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  const whole = Math.round(seconds);
  if (whole < 3600) return `${Math.floor(whole / 60)} min ${String(whole % 60).padStart(2, '0')} s`;
  const minutes = Math.floor(whole / 60);
  if (minutes < 1440) return `${Math.floor(minutes / 60)} h ${String(minutes % 60).padStart(2, '0')} min`;
  return `${Math.floor(minutes / 1440)} d ${Math.floor((minutes % 1440) / 60)} h`;
}

/** A TimeSpan string for people, the original kept for the tooltip. */
export function Duration({ value }: { value: unknown }) {
  if (typeof value !== 'string') return <span>–</span>;
  return <span title={value}>{formatDuration(timeSpanSeconds(value))}</span>;
}
