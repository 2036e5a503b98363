import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KurrentDBClient, jsonEvent, NO_STREAM } from '@kurrent/kurrentdb-client';
import { append, eventually, http, newEvent, newUser, basic, softDeletedStream, startTestNode, uniq, type TestNode } from './support/node.js';
import { parseExposition, valueOf, type MetricFamily } from './support/prometheus.js';

// GET /metrics (issue 34, item 4): the Prometheus text exposition, read by a strict reader of the
// format (support/prometheus.ts), holds counts that follow what the test does (appends by result,
// events written and read, request durations by family and protocol), the gauges of a
// projection, a persistent subscription group and the node, and the process's own metrics;
// anonymous callers are refused as at /stats. The write counts are checked first, on a node
// nothing else writes to.

const COMPETING = 'application/vnd.eventstore.competingatom+json';
const JSON_TYPE = 'application/json';

let t: TestNode;
beforeAll(async () => { t = await startTestNode(); });
afterAll(async () => { await t?.dispose(); });

async function scrape(): Promise<Map<string, MetricFamily>> {
  const res = await http(t, '/metrics');
  expect(res.status).toBe(200);
  return parseExposition(await res.text());
}

/** How much a series rose between two scrapes (a series not there yet counts as 0). */
function rise(before: Map<string, MetricFamily>, after: Map<string, MetricFamily>, name: string, labels: Record<string, string> = {}): number {
  return (valueOf(after, name, labels) ?? 0) - (valueOf(before, name, labels) ?? 0);
}

async function created(res: Response): Promise<void> {
  expect(res.status, await res.clone().text()).toBe(201);
  await res.arrayBuffer();
}

describe('the exposition', () => {
  it('is text/plain version 0.0.4, for authenticated users only, as /stats', async () => {
    const res = await http(t, '/metrics');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
    const anonymous = await http(t, '/metrics', { authorization: '' });
    expect(anonymous.status).toBe(401);
    const login = await newUser(t);
    expect((await http(t, '/metrics', { authorization: basic(login, 'pw') })).status).toBe(200);
    // What Prometheus asks for is served; who accepts only JSON is refused.
    const prometheusAccept = 'application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.4,*/*;q=0.1';
    expect((await http(t, '/metrics', { headers: { Accept: prometheusAccept } })).status).toBe(200);
    expect((await http(t, '/metrics', { headers: { Accept: JSON_TYPE } })).status).toBe(406);
  });

  it('names every series by the conventions: svc_ or the process\'s own, counters ending in _total', async () => {
    const m = await scrape();
    for (const f of m.values()) {
      expect(f.name).toMatch(/^(svc|process|nodejs)_[a-z0-9_]+$/);
      // _total marks a counter, and (ours; prom-client's nodejs_active_resources_total is a gauge) only a counter.
      if (f.type === 'counter') expect(f.name).toMatch(/_total$/);
      else if (f.name.startsWith('svc_')) expect(f.name).not.toMatch(/_(total|count|sum|bucket)$/);
      expect(f.help.length).toBeGreaterThan(0);
    }
    expect(valueOf(m, 'process_resident_memory_bytes')).toBeGreaterThan(0);
    expect(valueOf(m, 'process_cpu_seconds_total')).toBeGreaterThan(0);
    expect(valueOf(m, 'svc_data_disk_available_bytes')).toBeGreaterThan(0);
    expect(valueOf(m, 'svc_data_disk_size_bytes')).toBeGreaterThanOrEqual(valueOf(m, 'svc_data_disk_available_bytes')!);
    expect(valueOf(m, 'svc_writer_queue_length')).toBe(0);
    expect(valueOf(m, 'svc_node_role', { role: 'Leader' })).toBe(1);
    expect(m.get('svc_node_role')!.series).toHaveLength(1);
    expect(valueOf(m, 'svc_scavenge_running')).toBe(0);
    // Not measured, not shown: no scavenge runs, and a single node follows no leader.
    expect(m.get('svc_scavenge_chunks_done')!.series).toHaveLength(0);
    expect(m.get('svc_scavenge_chunks_in_phase')!.series).toHaveLength(0);
    expect(m.get('svc_replication_lag_bytes')!.series).toHaveLength(0);
  });

  it('is what docs/operations.md documents, and has every metric the Grafana dashboard asks for', async () => {
    const served = [...(await scrape()).keys()];
    const table = readFileSync(new URL('../docs/operations.md', import.meta.url), 'utf8').split('\n').filter((l) => l.startsWith('| `svc_'));
    const documented = table.flatMap((l) => [...l.split('|')[1].matchAll(/`(svc_[a-z0-9_]+)`/g)].map((m) => m[1]));
    expect(documented.sort()).toEqual(served.filter((n) => n.startsWith('svc_')).sort());
    const dashboard = readFileSync(new URL('../docs/grafana-dashboard.json', import.meta.url), 'utf8');
    const asked = new Set([...dashboard.matchAll(/\b((?:svc|process|nodejs)_[a-z0-9_]+)\{/g)].map((m) => m[1].replace(/_bucket$/, '')));
    expect(asked.size).toBeGreaterThanOrEqual(6);
    for (const name of asked) expect(served, name).toContain(name);
  });
});

describe('counts that follow what clients do', () => {
  it('7 events appended: events written, appended and bytes rise by what was written, one successful append', async () => {
    const before = await scrape();
    const stream = uniq('orders');
    await created(await append(t, stream, Array.from({ length: 7 }, (_, i) => newEvent('OrderPlaced', { i }))));
    const after = await scrape();
    expect(rise(before, after, 'svc_events_written_total')).toBe(7);
    expect(rise(before, after, 'svc_appended_events_total')).toBe(7);
    expect(rise(before, after, 'svc_appends_total', { result: 'success' })).toBe(1);
    expect(rise(before, after, 'svc_log_position_bytes')).toBe(rise(before, after, 'svc_written_bytes_total'));
    expect(rise(before, after, 'svc_written_bytes_total')).toBeGreaterThan(7 * 20);
  });

  it('refused appends count by result: wrong expected version, deleted stream, access denied', async () => {
    const stream = uniq('refused');
    await created(await append(t, stream, [newEvent('A')]));
    const gone = uniq('gone');
    await created(await append(t, gone, [newEvent('A')]));
    expect((await http(t, `/streams/${gone}`, { method: 'DELETE', headers: { 'SVC-HardDelete': 'true' } })).status).toBe(204);
    const before = await scrape();
    const wrong = await append(t, stream, [newEvent('B')], { 'SVC-ExpectedVersion': '5' });
    expect(wrong.status).toBe(400);
    expect((await append(t, gone, [newEvent('B')])).status).toBe(410);
    const anonymous = await http(t, `/streams/${stream}`, {
      method: 'POST', authorization: '', headers: { 'Content-Type': 'application/vnd.eventstore.events+json' }, body: JSON.stringify([newEvent('C')]),
    });
    expect(anonymous.status).toBe(401);
    const after = await scrape();
    const appends = (result: string) => rise(before, after, 'svc_appends_total', { result });
    expect(appends('wrong_expected_version')).toBe(1);
    expect(appends('stream_deleted')).toBe(1);
    expect(appends('access_denied')).toBe(1);
    expect(appends('success')).toBe(0);
    expect(valueOf(after, 'svc_events_written_total')).toBe(valueOf(before, 'svc_events_written_total'));
  });

  it('reads count by result, and the events they return', async () => {
    const stream = uniq('read');
    await created(await append(t, stream, Array.from({ length: 5 }, () => newEvent('A'))));
    const before = await scrape();
    const feed = await http(t, `/streams/${stream}/0/forward/10`, { headers: { Accept: 'application/vnd.eventstore.atom+json' } });
    expect(feed.status).toBe(200);
    expect((await http(t, `/streams/${stream}/3`, { headers: { Accept: JSON_TYPE } })).status).toBe(200);
    expect((await http(t, `/streams/${uniq('none')}/0`, { headers: { Accept: JSON_TYPE } })).status).toBe(404);
    const after = await scrape();
    expect(rise(before, after, 'svc_reads_total', { result: 'ok' })).toBe(2);
    expect(rise(before, after, 'svc_reads_total', { result: 'not_found' })).toBe(1);
    expect(rise(before, after, 'svc_events_read_total')).toBe(6);
  });

  it('times HTTP requests by route family, never by URL', async () => {
    const before = await scrape();
    const stream = uniq('timed');
    await created(await append(t, stream, [newEvent('A')]));
    expect((await http(t, `/streams/${stream}/0`, { headers: { Accept: JSON_TYPE } })).status).toBe(200);
    expect((await http(t, '/users/')).status).toBe(200);
    expect((await http(t, '/projections/any', { headers: { Accept: JSON_TYPE } })).status).toBe(200);
    const after = await scrape();
    const timed = (family: string) => rise(before, after, 'svc_request_duration_seconds_count', { protocol: 'http', family });
    expect(timed('streams')).toBe(2);
    expect(timed('admin')).toBe(1);
    expect(timed('projections')).toBe(1);
    expect(timed('other')).toBe(1); // the first scrape, observed once answered
    for (const s of after.get('svc_request_duration_seconds')!.series) {
      expect(Object.keys(s.labels).sort()).toEqual(s.name.endsWith('_bucket') ? ['family', 'le', 'protocol'] : ['family', 'protocol']);
      expect(['http', 'grpc']).toContain(s.labels.protocol);
      expect(['streams', 'subscriptions', 'projections', 'admin', 'other']).toContain(s.labels.family);
    }
  });

  it('counts and times gRPC appends (BatchAppend, the client\'s way) like the HTTP door\'s', async () => {
    const client = KurrentDBClient.connectionString(`kurrentdb://admin:changeit@127.0.0.1:${new URL(t.url).port}?tls=false`);
    try {
      const stream = uniq('grpc');
      await client.appendToStream(stream, jsonEvent({ type: 'Warm', data: {} })); // connects and reads the server's features
      const before = await scrape();
      await client.appendToStream(stream, [1, 2, 3].map((n) => jsonEvent({ type: 'E', data: { n } })));
      await expect(client.appendToStream(stream, jsonEvent({ type: 'E', data: {} }), { streamState: NO_STREAM })).rejects.toThrow();
      const after = await scrape();
      expect(rise(before, after, 'svc_appends_total', { result: 'success' })).toBe(1);
      expect(rise(before, after, 'svc_appends_total', { result: 'wrong_expected_version' })).toBe(1);
      expect(rise(before, after, 'svc_events_written_total')).toBe(3);
      expect(rise(before, after, 'svc_request_duration_seconds_count', { protocol: 'grpc', family: 'streams' })).toBe(2);
    } finally {
      await client.dispose();
    }
  });
});

describe('the subsystems\' gauges', () => {
  it('a persistent subscription group: messages in flight, then parked', async () => {
    const stream = uniq('work');
    const group = uniq('g');
    const put = await http(t, `/subscriptions/${stream}/${group}`, {
      method: 'PUT', headers: { 'Content-Type': JSON_TYPE }, body: JSON.stringify({ messageTimeoutMilliseconds: 60_000 }),
    });
    expect(put.status).toBe(200);
    await created(await append(t, stream, Array.from({ length: 4 }, () => newEvent('Job'))));
    const labels = { stream, group };
    expect(valueOf(await scrape(), 'svc_persistent_subscription_in_flight_messages', labels)).toBe(0);
    const pulled = await eventually(async () => {
      const res = await http(t, `/subscriptions/${stream}/${group}/3`, { headers: { Accept: COMPETING } });
      const { entries } = await res.json() as { entries: { links: { relation: string; uri: string }[] }[] };
      expect(entries).toHaveLength(3);
      return entries.map((e) => new URL(e.links.find((l) => l.relation === 'nack')!.uri).pathname.split('/').pop()!);
    });
    expect(valueOf(await scrape(), 'svc_persistent_subscription_in_flight_messages', labels)).toBe(3);
    const nack = await http(t, `/subscriptions/${stream}/${group}/nack?ids=${pulled.slice(0, 2).join(',')}&action=park`, { method: 'POST' });
    expect(nack.status).toBe(200);
    await eventually(async () => {
      const m = await scrape();
      expect(valueOf(m, 'svc_persistent_subscription_in_flight_messages', labels)).toBe(1);
      expect(valueOf(m, 'svc_persistent_subscription_parked_messages', labels)).toBe(2);
    });
  });

  it('a projection: its position appears and moves with the log, events processed count, running, no lag once caught up', async () => {
    const name = uniq('counting');
    const stream = uniq('counted');
    const query = `fromStream('${stream}').when({ $init: () => ({ n: 0 }), $any: (s) => { s.n++; return s; } })`;
    await created(await http(t, `/projections/continuous?name=${name}&enabled=yes`, { method: 'POST', headers: { 'Content-Type': 'text/plain' }, body: query }));
    const labels = { projection: name };
    const first = await eventually(async () => {
      const m = await scrape();
      expect(valueOf(m, 'svc_projection_running', labels)).toBe(1);
      expect(valueOf(m, 'svc_projection_faulted', labels)).toBe(0);
      expect(valueOf(m, 'svc_projection_lag_bytes', labels)).toBe(0);
      return valueOf(m, 'svc_projection_position_bytes', labels)!;
    });
    await created(await append(t, stream, Array.from({ length: 4 }, () => newEvent('Counted'))));
    await eventually(async () => {
      const m = await scrape();
      expect(valueOf(m, 'svc_projection_events_processed_total', labels)).toBe(4);
      expect(valueOf(m, 'svc_projection_position_bytes', labels)).toBeGreaterThan(first);
      expect(valueOf(m, 'svc_projection_lag_bytes', labels)).toBe(0);
      // As far behind as its last checkpoint, and never past the log's end.
      expect(valueOf(m, 'svc_projection_checkpoint_lag_bytes', labels)).toBeLessThanOrEqual(valueOf(m, 'svc_log_position_bytes')!);
    });
    // A transient projection (a client's throw-away query) makes no series.
    const transient = uniq('transient');
    await created(await http(t, `/projections/transient?name=${transient}&enabled=yes`, { method: 'POST', headers: { 'Content-Type': 'text/plain' }, body: query }));
    expect(valueOf(await scrape(), 'svc_projection_position_bytes', { projection: transient })).toBeUndefined();
  });
});

describe('a scavenge\'s gauges', () => {
  let small: TestNode;
  beforeAll(async () => { small = await startTestNode({ chunkSize: 4096 }); });
  afterAll(async () => { await small?.dispose(); });

  it('running and its chunks while it runs; 0 and no chunk figures once stopped', async () => {
    const scrapeSmall = async () => parseExposition(await (await http(small, '/metrics')).text());
    await softDeletedStream(small, 3000);
    const start = await http(small, '/admin/scavenge?throttlePercent=1', { method: 'POST' });
    expect(start.status).toBe(200);
    await eventually(async () => {
      const m = await scrapeSmall();
      expect(valueOf(m, 'svc_scavenge_running')).toBe(1);
      expect(valueOf(m, 'svc_scavenge_chunks_in_phase')).toBeGreaterThan(0);
      expect(valueOf(m, 'svc_scavenge_chunks_done')).toBeLessThanOrEqual(valueOf(m, 'svc_scavenge_chunks_in_phase')!);
    });
    expect((await http(small, '/admin/scavenge/current', { method: 'DELETE' })).status).toBe(200);
    await eventually(async () => {
      const m = await scrapeSmall();
      expect(valueOf(m, 'svc_scavenge_running')).toBe(0);
      expect(valueOf(m, 'svc_scavenge_chunks_done')).toBeUndefined();
    });
  });
});
