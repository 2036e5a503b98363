/** Figures of the group-commit writer, as /stats (svc.writer, svc.queue) and /metrics report them. */
export class WriterStats {
  lastFlushSize = 0;
  lastFlushDelayMs = 0;
  maxFlushSize = 0;
  maxFlushDelayMs = 0;
  private flushes = 0;
  private totalFlushSize = 0;
  private totalFlushDelayMs = 0;
  totalItemsProcessed = 0;
  /** Log records (events, links, metadata, tombstones) committed since the start. */
  recordsWritten = 0;
  /** Bytes of those records as stored in the log (their encoded form, RocksDB's own overhead not counted). */
  recordBytesWritten = 0;
  lengthLifetimePeak = 0;
  private peakWindowStart = 0;
  lengthCurrentTryPeak = 0;
  currentLength = 0;
  /** Time spent flushing (planning and the durable write), for idle/busy figures. */
  busyMs = 0;
  /** When the flush in progress started, or undefined when idle. */
  flushStartedAt: number | undefined;
  lastFlushEndedAt = performance.now();

  queued(length: number): void {
    this.currentLength = length;
    if (length > this.lengthLifetimePeak) this.lengthLifetimePeak = length;
    const now = performance.now();
    if (now - this.peakWindowStart > 100) {
      this.peakWindowStart = now;
      this.lengthCurrentTryPeak = length;
    } else if (length > this.lengthCurrentTryPeak) {
      this.lengthCurrentTryPeak = length;
    }
  }

  flushStarted(): void {
    this.flushStartedAt = performance.now();
  }

  flushed(size: number, delayMs: number, remaining: number): void {
    const now = performance.now();
    if (this.flushStartedAt !== undefined) this.busyMs += now - this.flushStartedAt;
    this.flushStartedAt = undefined;
    this.lastFlushEndedAt = now;
    this.lastFlushSize = size;
    this.lastFlushDelayMs = delayMs;
    this.maxFlushSize = Math.max(this.maxFlushSize, size);
    this.maxFlushDelayMs = Math.max(this.maxFlushDelayMs, delayMs);
    this.flushes++;
    this.totalFlushSize += size;
    this.totalFlushDelayMs += delayMs;
    this.totalItemsProcessed += size;
    this.currentLength = remaining;
  }

  get meanFlushSize(): number {
    return this.flushes === 0 ? 0 : this.totalFlushSize / this.flushes;
  }

  get meanFlushDelayMs(): number {
    return this.flushes === 0 ? 0 : this.totalFlushDelayMs / this.flushes;
  }
}
