// What one request may hold in memory, for every door: an append's events together are bounded
// by the larger of 64 MiB and four of the largest event (`maxAppendSize`), so a client that
// streams a million tiny events or one huge body meets the same limit over HTTP and gRPC.

export function maxAppendBytes(maxAppendSize: number): number {
  return Math.max(64 * 1024 * 1024, maxAppendSize * 4);
}
