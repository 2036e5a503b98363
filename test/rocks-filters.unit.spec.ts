import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Rocks } from '../src/store/rocks.js';

// The store's table files carry no bloom filter (src/store/rocks.ts: the binding builds one per
// file unless told `filterPolicy: ''`, and holds it in memory for every open file). RocksDB names
// a file's filter block after the policy ("fullfilter.rocksdb.BuiltinBloomFilter"), so a table
// file written by the store must not hold that name.

const dirs: string[] = [];
afterEach(() => { for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true }); });

describe('table files', () => {
  it('are written without a filter block, and every key reads back (present or not)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-filters-'));
    dirs.push(dir);
    const rocks = await Rocks.open(dir, false);
    try {
      const key = (i: number) => Buffer.from(`key-${String(i).padStart(6, '0')}`);
      for (let b = 0; b < 10; b++) rocks.writeUnsynced(Array.from({ length: 1000 }, (_, i) => [key(b * 1000 + i), Buffer.from(`value-${b * 1000 + i}`)] as [Buffer, Buffer]));
      await rocks.flushMemtable(); // the memtable becomes a table file
      const tables = readdirSync(dir).filter((f) => f.endsWith('.sst'));
      expect(tables.length).toBeGreaterThan(0);
      for (const table of tables) expect(readFileSync(join(dir, table)).includes('fullfilter.'), table).toBe(false);
      expect(rocks.get(key(4321))?.toString()).toBe('value-4321');
      expect(rocks.get(Buffer.from('key-missing'))).toBeUndefined();
    } finally {
      await rocks.close();
    }
  });
});
