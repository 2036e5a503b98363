import { ApiFailure, getJson, request, seg } from '../../api';

// What the projections views read from the node, and the small pieces of arithmetic on it.

/** One projection's statistics as GET /projections/any and /projection/{name}/statistics give them. */
export interface ProjectionStats {
  name: string;
  effectiveName: string;
  status: string;
  stateReason: string;
  mode: 'Continuous' | 'OneTime' | 'Transient';
  position: string;
  progress: number;
  lastCheckpoint: string;
  eventsProcessedAfterRestart: number;
  eventsSkipped?: number;
  bufferedEvents: number;
  partitionsCached: number;
  writesInProgress: number;
  readsInProgress: number;
  coreProcessingTime: number;
  checkpointStatus: string;
  writePendingEventsBeforeCheckpoint: number;
  writePendingEventsAfterCheckpoint: number;
  version: number;
  epoch: number;
  resultStreamUrl: string | null;
}

/** GET /projection/{name}/query?config=yes */
export interface QueryConfig {
  name: string;
  query: string;
  emitEnabled?: boolean;
  trackEmittedStreams?: boolean;
  checkpointsEnabled?: boolean;
  definition: { byStreams?: boolean; byCustomPartitions?: boolean; [k: string]: unknown };
  outputConfig: { resultStreamName: string };
}

export const MODES = [
  { path: 'continuous', mode: 'Continuous', title: 'Continuous' },
  { path: 'onetime', mode: 'OneTime', title: 'One-time' },
  { path: 'transient', mode: 'Transient', title: 'Transient (query)' },
] as const;

export const modeTitle = (mode: string) => MODES.find((m) => m.mode === mode)?.title ?? mode;

export const projectionPath = (name: string) => `/projection/${seg(name)}`;

export async function listProjections(signal?: AbortSignal): Promise<ProjectionStats[]> {
  return (await getJson<{ projections: ProjectionStats[] }>('/projections/any', { signal })).projections;
}

export async function statisticsOf(name: string, signal?: AbortSignal): Promise<ProjectionStats> {
  return (await getJson<{ projections: ProjectionStats[] }>(`${projectionPath(name)}/statistics`, { signal })).projections[0];
}

/** The log's head position (the writer checkpoint), which a projection's position is measured against. */
export async function logHead(signal?: AbortSignal): Promise<number> {
  return Number((await request('/stats/svc/checksum', { signal })).text);
}

/** The log position in a statistics position text: `C:1234/P:1234` → 1234 (NaN when it has none). */
export function positionOf(text: string | undefined): number {
  const m = /C:(-?\d+)/.exec(text ?? '');
  return m ? Number(m[1]) : NaN;
}

/** Bytes of log the projection has still to read: the head minus its position. */
export function lagOf(p: ProjectionStats, head: number | undefined): number {
  const position = positionOf(p.position);
  if (head === undefined || !Number.isFinite(position)) return NaN;
  return Math.max(0, head - position);
}

/** A query syntax error's place, from the node's 400 text `Unexpected token at line 4, column 33`. */
export interface SyntaxPlace {
  message: string;
  line: number;
  column: number;
}

export function syntaxErrorOf(error: unknown): SyntaxPlace | undefined {
  if (!(error instanceof ApiFailure) || error.status !== 400) return undefined;
  const message = error.body.trim();
  const m = /\bat line (\d+), column (\d+)\s*$/.exec(message);
  return m ? { message, line: Number(m[1]), column: Number(m[2]) } : undefined;
}

/** The data of each event of a stream whose events are plain text (a projection's catalogues), newest first. */
export interface TextStream {
  items: string[];
  /** True when older events were left out (only the newest page is read). */
  more: boolean;
  /** Why the stream could not be read (not found is an empty list). */
  refused?: string;
}

export const CATALOG_PAGE = 1000;

/**
 * Reads the newest page of a `$projections-...` catalogue stream. System streams are $admins' by
 * default: a refusal is told as such (the rest of the page goes on), a missing stream is empty.
 */
export async function readTextStream(stream: string, signal?: AbortSignal): Promise<TextStream> {
  let feed: any;
  try {
    feed = await getJson(`/streams/${seg(stream)}/head/backward/${CATALOG_PAGE}?embed=tryharder`, { accept: 'application/vnd.eventstore.atom+json', signal });
  } catch (err) {
    if (err instanceof ApiFailure && (err.status === 404 || err.status === 410)) return { items: [], more: false };
    if (err instanceof ApiFailure && (err.status === 401 || err.status === 403)) return { items: [], more: false, refused: `You may not read ${stream}.` };
    throw err;
  }
  const entries: any[] = Array.isArray(feed?.entries) ? feed.entries : [];
  const items = entries.map((e) => (typeof e.data === 'string' ? e.data : e.data === undefined || e.data === null ? '' : JSON.stringify(e.data)));
  const more = Array.isArray(feed?.links) && feed.links.some((l: any) => l.relation === 'next');
  return { items, more };
}

/** The query's lines: `text` split as a textarea counts them. */
export const linesOf = (text: string) => text.split('\n');

/**
 * The detail route of a projection: `#/projections/{name}`. `#/projections/new` is the creation
 * form, so a projection named `new` is linked as `#/projections/new/details`.
 */
export const detailRoute = (name: string): string[] => (name === 'new' ? ['projections', name, 'details'] : ['projections', name]);
