/** What an append or delete expects of the stream: a named special case or an exact last event number. */
export type ExpectedVersion =
  | { kind: 'any' }          // -2: no check
  | { kind: 'noStream' }     // -1: the stream must not exist (a soft-deleted stream counts as absent)
  | { kind: 'streamExists' } // -4: the stream (or its metadata stream) must exist
  | { kind: 'exact'; version: number };

export const ExpectedVersion = {
  any: { kind: 'any' } as ExpectedVersion,
  noStream: { kind: 'noStream' } as ExpectedVersion,
  streamExists: { kind: 'streamExists' } as ExpectedVersion,
  exact: (version: number): ExpectedVersion => ({ kind: 'exact', version }),

  /** The wire form: -2, -1, -4 or N ≥ 0. Anything else (including -3) is undefined. */
  fromNumber(n: number): ExpectedVersion | undefined {
    if (!Number.isSafeInteger(n)) return undefined;
    if (n === -2) return ExpectedVersion.any;
    if (n === -1) return ExpectedVersion.noStream;
    if (n === -4) return ExpectedVersion.streamExists;
    return n >= 0 ? ExpectedVersion.exact(n) : undefined;
  },

  /** The wire form of an expected version (fromNumber's inverse). */
  toNumber(e: ExpectedVersion): number {
    return e.kind === 'any' ? -2 : e.kind === 'noStream' ? -1 : e.kind === 'streamExists' ? -4 : e.version;
  },
};
