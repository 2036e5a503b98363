import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, http, startTestNode, type TestNode, uniq } from './support/node.js';

// What GET /projection/{name}/query?config=yes says of a query's definition (issue 34):
// the sources at the top (allStreams, allEvents, categories, events, streams, byStreams,
// byCustomPartitions) and under `options` what the query's own calls declared, with the names
// of projections.md §3-4 (definesFold, producesResults, definesStateTransform,
// handlesDeletedNotifications, biState, resultStreamName, partitionResultStreamNamePattern,
// $includeLinks, reorderEvents, processingLag). False, 0 and null are left out, except
// resultStreamName (null when the query names none). Each query reads a stream or category no
// event is in, so it only needs to start for its definition to be known.

let t: TestNode;
beforeAll(async () => { t = await startTestNode(); });
afterAll(async () => { await t?.dispose(); });

const p = (name: string) => `/projection/${encodeURIComponent(name)}`;

/** Creates a continuous projection, waits until it runs, and returns its query?config=yes answer. */
async function configOf(query: string): Promise<any> {
  const name = uniq('defn');
  const res = await http(t, `/projections/continuous?name=${name}`, {
    method: 'POST', headers: { 'Content-Type': 'text/plain' }, body: query,
  });
  expect(res.status, await res.clone().text()).toBe(201);
  await eventually(async () => expect((await (await http(t, p(name))).json()).status).toBe('Running'));
  const cfg = await http(t, `${p(name)}/query?config=yes`);
  expect(cfg.status).toBe(200);
  const doc = await cfg.json();
  expect(doc).toMatchObject({ name, query, type: 'JS' });
  return doc;
}

const INIT = '$init: function () { return { n: 0 }; }';
const COUNT = 'function (s, e) { s.n++; return s; }';

describe('query?config=yes: the definition', () => {
  it('fromAll().when() with $init and an event type: definesFold, the event listed, nothing else', async () => {
    const type = uniq('Ev');
    const doc = await configOf(`fromAll().when({ ${INIT}, '${type}': ${COUNT} })`);
    expect(doc.definition).toEqual({ allStreams: true, events: [type], options: { resultStreamName: null, definesFold: true } });
  });

  it('a query without when(): every event, and no flag', async () => {
    const stream = uniq('plain');
    const doc = await configOf(`fromStream('${stream}')`);
    expect(doc.definition).toEqual({ allEvents: true, streams: [stream], options: { resultStreamName: null } });
  });

  it('foreachStream() sets byStreams', async () => {
    const category = uniq('each').replace(/-/g, '');
    const doc = await configOf(`fromCategory('${category}').foreachStream().when({ ${INIT}, $any: ${COUNT} })`);
    expect(doc.definition).toEqual({
      allEvents: true, byStreams: true, categories: [category], options: { resultStreamName: null, definesFold: true },
    });
  });

  it('partitionBy() sets byCustomPartitions', async () => {
    const stream = uniq('part');
    const doc = await configOf(`fromStream('${stream}').partitionBy(function (e) { return e.body.region; })
      .when({ ${INIT}, Sold: ${COUNT} })`);
    expect(doc.definition).toEqual({
      byCustomPartitions: true, events: ['Sold'], streams: [stream], options: { resultStreamName: null, definesFold: true },
    });
  });

  it('outputState() produces results; transformBy and filterBy also define a state transform, as $defines_state_transform does', async () => {
    const stream = uniq('out');
    const when = `fromStream('${stream}').when({ ${INIT}, $any: ${COUNT} })`;
    const fold = { resultStreamName: null, definesFold: true };
    expect((await configOf(`${when}.outputState()`)).definition.options).toEqual({ ...fold, producesResults: true });
    const transformed = { ...fold, producesResults: true, definesStateTransform: true };
    expect((await configOf(`${when}.transformBy(function (s) { return { seen: s.n }; })`)).definition.options).toEqual(transformed);
    expect((await configOf(`${when}.filterBy(function (s) { return s.n > 1; })`)).definition.options).toEqual(transformed);
    expect((await configOf(`${when}.outputState().transformBy(function (s) { return s.n; }).filterBy(function (n) { return n > 0; })`))
      .definition.options).toEqual(transformed);
    expect((await configOf(`${when}.$defines_state_transform()`)).definition.options).toEqual(transformed);
  });

  it('options() are reported under their own names, and name the result stream in effect', async () => {
    const [a, b, out] = [uniq('ra'), uniq('rb'), uniq('opt-result')];
    const doc = await configOf(`options({ resultStreamName: '${out}', $includeLinks: true, reorderEvents: true, processingLag: 100 });
      fromStreams(['${a}', '${b}']).when({ ${INIT}, $any: ${COUNT} }).outputState()`);
    expect(doc.definition).toEqual({
      allEvents: true, streams: [a, b],
      options: {
        resultStreamName: out, $includeLinks: true, reorderEvents: true, processingLag: 100, definesFold: true, producesResults: true,
      },
    });
    expect(doc.outputConfig).toEqual({ resultStreamName: out });
  });

  it('option keys match in any case; one set to its default is not reported', async () => {
    const stream = uniq('cased');
    const doc = await configOf(`options({ RESULTSTREAMNAME: '${stream}-r', $INCLUDELINKS: false, processingLag: 0 });
      fromStream('${stream}').when({ ${INIT}, $any: ${COUNT} })`);
    expect(doc.definition.options).toEqual({ resultStreamName: `${stream}-r`, definesFold: true });
  });

  it('outputTo(name, pattern) names the result stream and the partitions\' pattern; it does not turn results on by itself', async () => {
    const category = uniq('routed').replace(/-/g, '');
    const out = uniq('out');
    const each = `fromCategory('${category}').foreachStream().when({ ${INIT}, $any: ${COUNT} })`;
    const routed = await configOf(`${each}.outputState().outputTo('${out}', '${out}-{0}')`);
    expect(routed.definition.options).toEqual({
      resultStreamName: out, partitionResultStreamNamePattern: `${out}-{0}`, definesFold: true, producesResults: true,
    });
    expect(routed.outputConfig).toEqual({ resultStreamName: out });
    // (quirk, projections.md §3) outputTo alone names the stream but produces no results.
    const named = await configOf(`${each}.outputTo('${out}-alone')`);
    expect(named.definition.options).toEqual({ resultStreamName: `${out}-alone`, definesFold: true });
  });

  it('a $deleted handler sets handlesDeletedNotifications', async () => {
    const category = uniq('gone').replace(/-/g, '');
    const doc = await configOf(`fromCategory('${category}').foreachStream().when({ ${INIT}, $any: ${COUNT},
      $deleted: function (s, e) { return null; } })`);
    expect(doc.definition.options).toEqual({ resultStreamName: null, definesFold: true, handlesDeletedNotifications: true });
  });

  it('$initShared or options({ biState: true }) sets biState', async () => {
    const category = uniq('shared').replace(/-/g, '');
    const byHandler = await configOf(`fromCategory('${category}').foreachStream().when({
      $initShared: function () { return { total: 0 }; }, ${INIT}, $any: function (s, e) { s[0].n++; s[1].total++; return s; } })`);
    expect(byHandler.definition.options).toEqual({ resultStreamName: null, definesFold: true, biState: true });
    const byOption = await configOf(`options({ biState: true });
      fromCategory('${category}').foreachStream().when({ ${INIT}, $any: function (s, e) { return s; } })`);
    expect(byOption.definition.options).toEqual({ resultStreamName: null, definesFold: true, biState: true });
  });
});
