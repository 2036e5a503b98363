import { isSystemRecordStream } from './log-spaces.js';

// The places of many records, packed: a position and the key space each (log-spaces.ts), ~9
// bytes a record. A big feed page held its records' places as objects ({position, streamId}: a
// thousand a page): fifty pages being read at once kept ~50,000 such objects alive across young
// collections, and copying them to the old generation made collections of 5-12 ms, in the event
// loop that answers appends (measured with --trace-gc-nvp on bench/big-reads.ts: the long
// collections promoted 1.2-1.9 MB each).

export class PackedPlaces {
  private positions: Float64Array;
  private system: Uint8Array;
  private count = 0;

  constructor(capacity = 64) {
    this.positions = new Float64Array(Math.max(1, capacity));
    this.system = new Uint8Array(Math.max(1, capacity));
  }

  get length(): number {
    return this.count;
  }

  /** Adds the place of a record (its position, and its stream's key space). */
  push(record: { readonly position: number; readonly streamId: string }): void {
    if (this.count === this.positions.length) this.grow();
    this.positions[this.count] = record.position;
    this.system[this.count] = isSystemRecordStream(record.streamId) ? 1 : 0;
    this.count++;
  }

  position(i: number): number {
    return this.positions[i];
  }

  /** Whether the record at `i` is of a system stream (LogSpaces.keyOf says which space that is). */
  isSystem(i: number): boolean {
    return this.system[i] === 1;
  }

  /** The places in the opposite order. */
  reverse(): this {
    this.positions.subarray(0, this.count).reverse();
    this.system.subarray(0, this.count).reverse();
    return this;
  }

  private grow(): void {
    const positions = new Float64Array(this.positions.length * 2);
    positions.set(this.positions);
    const system = new Uint8Array(this.system.length * 2);
    system.set(this.system);
    this.positions = positions;
    this.system = system;
  }
}
