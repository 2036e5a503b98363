// Our custom headers come in three spellings: the SVC- prefix of this service, and the Kurrent-
// and ES- forms that existing clients send and read. A request may use any of them (the first
// present wins, in this order); an answer carries every one.

export const HEADER_PREFIXES = ['SVC-', 'Kurrent-', 'ES-'] as const;

/** `name` in every spelling (for the CORS header lists). */
export function spellings(name: string): string[] {
  return HEADER_PREFIXES.map((prefix) => prefix + name);
}

/** A response header in every spelling. */
export function inEverySpelling(name: string, value: string): Record<string, string> {
  return Object.fromEntries(spellings(name).map((header) => [header, value]));
}
