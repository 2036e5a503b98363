// Minimal typings for the parts of @nxtedition/rocksdb the store uses (the package ships none).
declare module '@nxtedition/rocksdb' {
  interface RangeOptions {
    gt?: Buffer; gte?: Buffer; lt?: Buffer; lte?: Buffer;
    limit?: number; reverse?: boolean; keys?: boolean; values?: boolean;
    keyEncoding?: 'buffer' | 'utf8'; valueEncoding?: 'buffer' | 'utf8';
    highWaterMarkBytes?: number; fillCache?: boolean;
  }
  interface ChainedBatch {
    _put(key: Buffer, value: Buffer, options: object): void;
    _del(key: Buffer, options: object): void;
    _writeSync(options: { sync?: boolean }): void;
    close(): Promise<void>;
  }
  interface Iterator {
    nextv(size: number): Promise<[Buffer, Buffer][]>;
    seek(target: Buffer): void;
    close(): Promise<void>;
  }
  export class RocksLevel {
    iterator(options: RangeOptions): Iterator;
    constructor(location: string, options?: Record<string, unknown>);
    open(options?: Record<string, unknown>): Promise<void>;
    close(): Promise<void>;
    readonly status: string;
    batch(): ChainedBatch;
    querySync(options: RangeOptions): { rows: (Buffer | undefined)[]; finished: boolean };
    _getManySync(keys: Buffer[], options?: { valueEncoding?: 'buffer' | 'utf8'; fillCache?: boolean }): (Buffer | undefined)[];
    getProperty(property: string): string;
    clear(options: RangeOptions): Promise<void>;
  }
}
