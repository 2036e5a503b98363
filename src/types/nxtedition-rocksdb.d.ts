// Minimal typings for the parts of @nxtedition/rocksdb the store uses (the package ships none).
declare module '@nxtedition/rocksdb' {
  interface RangeOptions {
    gt?: Buffer; gte?: Buffer; lt?: Buffer; lte?: Buffer;
    limit?: number; reverse?: boolean; keys?: boolean; values?: boolean;
    keyEncoding?: 'buffer' | 'utf8'; valueEncoding?: 'buffer' | 'utf8';
    highWaterMarkBytes?: number; fillCache?: boolean;
  }
  export class RocksLevel {
    constructor(location: string, options?: Record<string, unknown>);
    open(options?: Record<string, unknown>): Promise<void>;
    close(): Promise<void>;
    readonly status: string;
    readonly handle: bigint;
    querySync(options: RangeOptions): { rows: (Buffer | undefined)[]; finished: boolean };
    _getManySync(keys: Buffer[], options?: { valueEncoding?: 'buffer' | 'utf8'; fillCache?: boolean }): (Buffer | undefined)[];
    getProperty(property: string): string;
  }
}
