import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ExpectedVersion, newUuid, Store, type EventRecord } from '../src/store/index.js';
import { StreamSourceReader } from '../src/projections/stream-source.js';

// A query over named streams reads them through the stream index (src/projections/stream-source.ts):
// from any position, its pages hold exactly the records of those streams a read of the whole log
// would, in log order, with the bytes between them as gaps, and end at the head of the log.

const dirs: string[] = [];
const stores: Store[] = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close().catch(() => {});
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function openStore(): Promise<Store> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-source-'));
  dirs.push(dir);
  const store = await Store.open({ dir, inMemory: false, chunkSize: 256 * 1024 * 1024, logCacheBytes: 0 });
  stores.push(store);
  return store;
}

const view = (records: EventRecord[]) => records.map((r) => [r.position, r.streamId, r.eventNumber]);

describe('reading a projection source through the stream index', () => {
  it('answers what the log answers for those streams, from any position, page by page, to the head', async () => {
    const store = await openStore();
    const names = ['a', 'b', '$ce-c', 'other', '$system'];
    for (let i = 0; i < 600; i++) {
      const stream = names[(i * 7) % names.length];
      await store.append(stream, ExpectedVersion.any, [{ eventId: newUuid(), eventType: 'E', isJson: true, data: Buffer.from(`{"i":${i}}`), metadata: Buffer.alloc(0) }]);
    }
    const sources = ['a', 'b', '$ce-c', 'missing'];
    const log = store.readAllForward(0, 100_000).records;
    for (const start of [0, log[37].position, log[300].position + 1, store.headPosition]) {
      const reader = new StreamSourceReader(store, sources);
      const read: EventRecord[] = [];
      let covered = 0;
      for (let position = start, pages = 0; ; pages++) {
        expect(pages).toBeLessThan(100);
        const page = reader.read(position, 25);
        expect(page.gaps!.length).toBe(page.records.length + 1);
        covered += page.gaps!.reduce((n, g) => n + g, 0) + page.records.reduce((n, r) => n + r.size, 0);
        read.push(...page.records);
        if (page.isEnd) {
          expect(page.nextPosition).toBe(store.headPosition);
          break;
        }
        position = page.nextPosition;
      }
      expect(view(read)).toEqual(view(log.filter((r) => r.position >= start && sources.includes(r.streamId))));
      // Every byte from the start to the head is a record read or a gap.
      expect(covered).toBe(store.headPosition - start);
    }
  });
});
