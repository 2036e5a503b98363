import { randomUUID } from 'node:crypto';
import type autocannon from 'autocannon';
import type { ScenarioId } from './config.js';

// What the load looks like: the events, the streams they go to and the request each scenario
// sends. Node and ceiling get the very same requests, so the ratio compares like with like.

export const AUTHORIZATION = 'Basic ' + Buffer.from('admin:changeit').toString('base64');
export const EVENTS_JSON = 'application/vnd.eventstore.events+json';

export const WRITE_STREAMS = 1000;
export const READ_STREAMS = 1000;
export const EVENTS_PER_READ_STREAM = 100;
export const READ_PAGE = 20;
export const READ_PAGE_ACCEPT = 'application/json';
/** A single event as an Atom entry with its content, as event-store clients read one. */
export const READ_EVENT_ACCEPT = 'application/vnd.eventstore.atom+json';

export interface Scenario {
  id: ScenarioId;
  title: string;
  /** Events carried (appends) or returned (reads) by one successful request. */
  eventsPerRequest: number;
  /** A fresh request list per run: the generators keep their own round-robin counters. */
  requests(): autocannon.Request[];
}

/** One event's JSON, about 150 bytes: an ordinary business event, not a degenerate empty one. */
export function eventJson(seq: number): string {
  return `{"eventId":"${randomUUID()}","eventType":"OrderPlaced","data":{"orderId":"o-${seq}",`
    + `"customerId":"c-${seq % 977}","amount":${(seq % 10_000) / 100},"currency":"EUR","lines":3}}`;
}

export function appendBody(count: number, seq: number): string {
  const events: string[] = [];
  for (let i = 0; i < count; i++) events.push(eventJson(seq + i));
  return `[${events.join(',')}]`;
}

export const readStreamName = (i: number) => `bench-read-${i}`;

/** Appends of `count` events per request, round-robin over WRITE_STREAMS streams, each event a new id. */
function appends(id: ScenarioId, count: number): Scenario {
  return {
    id,
    title: `append ${count} event${count === 1 ? '' : 's'}/req`,
    eventsPerRequest: count,
    requests() {
      let seq = 0;
      return [{
        method: 'POST',
        headers: { Authorization: AUTHORIZATION, 'Content-Type': EVENTS_JSON },
        setupRequest(request) {
          const n = seq++;
          request.path = `/streams/bench-${id}-${n % WRITE_STREAMS}`;
          request.body = appendBody(count, n * count);
          return request;
        },
      }];
    },
  };
}

/** Full 20-event pages with bodies embedded, from random pre-written streams. */
const pageReads: Scenario = {
  id: 'c',
  title: `read ${READ_PAGE}-event pages`,
  eventsPerRequest: READ_PAGE,
  requests() {
    const pages = EVENTS_PER_READ_STREAM / READ_PAGE;
    return [{
      method: 'GET',
      headers: { Authorization: AUTHORIZATION, Accept: READ_PAGE_ACCEPT },
      setupRequest(request) {
        const stream = readStreamName(Math.floor(Math.random() * READ_STREAMS));
        const from = Math.floor(Math.random() * pages) * READ_PAGE;
        request.path = `/streams/${stream}/${from}/forward/${READ_PAGE}?embed=body`;
        return request;
      },
    }];
  },
};

/** Single events of random pre-written streams. */
const singleReads: Scenario = {
  id: 'd',
  title: 'read single events',
  eventsPerRequest: 1,
  requests() {
    return [{
      method: 'GET',
      headers: { Authorization: AUTHORIZATION, Accept: READ_EVENT_ACCEPT },
      setupRequest(request) {
        const stream = readStreamName(Math.floor(Math.random() * READ_STREAMS));
        request.path = `/streams/${stream}/${Math.floor(Math.random() * EVENTS_PER_READ_STREAM)}`;
        return request;
      },
    }];
  },
};

export const SCENARIOS: Record<ScenarioId, Scenario> = {
  a: appends('a', 1),
  b: appends('b', 100),
  c: pageReads,
  d: singleReads,
};
