import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { append, newEvent, readFeed, startTestNode, type TestNode } from './support/node.js';

describe('smoke', () => {
  let t: TestNode;
  beforeAll(async () => { t = await startTestNode(); });
  afterAll(async () => { await t.dispose(); });

  it('appends and reads back', async () => {
    const res = await append(t, 'smoke-1', [newEvent('A', { x: 1 })]);
    expect(res.status).toBe(201);
    expect(res.headers.get('location')).toBe(`${t.url}/streams/smoke-1/0`);
    const feed = await readFeed(t, '/streams/smoke-1');
    expect(feed.entries.map((e: any) => e.summary)).toEqual(['A']);
  });
});
