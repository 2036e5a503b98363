/** Wall-clock time in whole microseconds (event timestamps carry µs, as Atom `updated` shows). */
export function nowMicros(): number {
  return Math.floor((performance.timeOrigin + performance.now()) * 1000);
}
