import { readFileSync, statfsSync } from 'node:fs';
import { cpus, freemem, loadavg, totalmem } from 'node:os';
import { PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';
import { getHeapSpaceStatistics, getHeapStatistics } from 'node:v8';
import type { Server } from 'node:net';
import type { Socket } from 'node:net';
import type { Store } from '../store/index.js';

// Real measurements for GET /stats: process (memory, CPU, threads, GC, disk I/O, TCP), system
// (CPU, memory, the data drive) and the node's own queues, writer and read counters. Rates are
// taken between samples, one per second. The writer's figures say whether writes are refused
// because the data drive is full, since when and how many (out-of-space.ts).

const SAMPLE_MS = 1000;
/** The data drive's figures (statfs) are read at most this often, however often /stats is asked for. */
const DRIVE_CACHE_MS = 1000;

interface Sample {
  at: number;
  cpu: NodeJS.CpuUsage;
  sysTimes: { idle: number; total: number };
  received: number;
  sent: number;
  writerItems: number;
  writerBusyMs: number;
  gcMs: number;
  heapUsed: number;
  exceptions: number;
}

/** What big feed pages sent in parts hold for their clients (svc.feedPages). */
export interface FeedPageFigures {
  /** Pages being written in parts. */
  pages: number;
  /** Bytes those pages made that their clients have not taken (the node's share; the kernel's socket buffers are not counted). */
  bufferedBytes: number;
  limitBytes: number;
  /** Pages whose next part waits for its turn or for the budget. */
  waiting: number;
  /** Connections closed because their client left a part untaken for the timeout. */
  closedNotReading: number;
  /** Milliseconds the pages have stood back for other clients' requests (send-queue.ts), since the start. */
  yieldedMs: number;
}

export interface StatsSources {
  store: Store;
  dataPath: string;
  startTime: Date;
  /** What big feed pages hold for their clients. */
  /** The HTTP door's feed pages sent in parts (api/send-queue.ts). */
  sends: { figures(): FeedPageFigures };
}

function systemTimes(): { idle: number; total: number } {
  let idle = 0;
  let total = 0;
  for (const c of cpus()) {
    idle += c.times.idle;
    total += c.times.idle + c.times.user + c.times.nice + c.times.sys + c.times.irq;
  }
  return { idle, total };
}

function procFile(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

function field(text: string | undefined, name: string): number {
  const m = text ? new RegExp(`^${name}:\\s*(\\d+)`, 'm').exec(text) : null;
  return m ? Number(m[1]) : 0;
}

/** A .NET-style time span, `hh:mm:ss.fffffff`, as the established servers print queue times. */
function timeSpan(ms: number): string {
  const totalSeconds = Math.floor(ms / 1000);
  const h = Math.floor(totalSeconds / 3600);
  const m = Math.floor((totalSeconds % 3600) / 60);
  const s = totalSeconds % 60;
  const fraction = String(Math.round((ms % 1000) * 10_000)).padStart(7, '0');
  return `${String(h).padStart(2, '0')}:${String(m).padStart(2, '0')}:${String(s).padStart(2, '0')}.${fraction}`;
}

export class StatsCollector {
  private readonly sockets = new Set<Socket>();
  private connectionsTotal = 0;
  private closedReceived = 0;
  private closedSent = 0;
  private gcCounts = { minor: 0, incremental: 0, major: 0 };
  private gcMs = 0;
  private exceptions = 0;
  private previous: Sample;
  private rates = { cpu: 0, sysCpu: 0, receiving: 0, sending: 0, writerItemsPerSecond: 0, writerBusyPercent: 0, timeInGc: 0, allocation: 0, exceptions: 0 };
  private readonly timer: NodeJS.Timeout;
  private readonly gcObserver: PerformanceObserver;
  private drive: { at: number; figures: DriveFigures } | undefined;

  constructor(private readonly sources: StatsSources) {
    this.gcObserver = new PerformanceObserver((list) => {
      for (const entry of list.getEntries() as (PerformanceEntry & { detail?: { kind?: number } })[]) {
        this.gcMs += entry.duration;
        const kind = entry.detail?.kind ?? 0;
        if (kind === 1) this.gcCounts.minor++;
        else if (kind === 8) this.gcCounts.incremental++;
        else this.gcCounts.major++;
      }
    });
    this.gcObserver.observe({ entryTypes: ['gc'] });
    this.previous = this.sample();
    this.timer = setInterval(() => this.tick(), SAMPLE_MS).unref();
  }

  /** Counts the HTTP server's connections and bytes. */
  watch(server: Server): void {
    server.on('connection', (socket: Socket) => {
      this.connectionsTotal++;
      this.sockets.add(socket);
      socket.once('close', () => {
        this.sockets.delete(socket);
        this.closedReceived += socket.bytesRead;
        this.closedSent += socket.bytesWritten;
      });
    });
  }

  /** An exception reached the HTTP error handler. */
  countException(): void {
    this.exceptions++;
  }

  stop(): void {
    clearInterval(this.timer);
    this.gcObserver.disconnect();
  }

  private bytes(): { received: number; sent: number } {
    let received = this.closedReceived;
    let sent = this.closedSent;
    for (const s of this.sockets) {
      received += s.bytesRead;
      sent += s.bytesWritten;
    }
    return { received, sent };
  }

  private sample(): Sample {
    const { received, sent } = this.bytes();
    const writer = this.sources.store.writerStats;
    return {
      at: performance.now(), cpu: process.cpuUsage(), sysTimes: systemTimes(), received, sent,
      writerItems: writer.totalItemsProcessed, writerBusyMs: writer.busyMs, gcMs: this.gcMs,
      heapUsed: getHeapStatistics().used_heap_size, exceptions: this.exceptions,
    };
  }

  private tick(): void {
    const now = this.sample();
    const prev = this.previous;
    const elapsedMs = Math.max(now.at - prev.at, 1);
    const cpuMicros = now.cpu.user - prev.cpu.user + now.cpu.system - prev.cpu.system;
    const sysTotal = now.sysTimes.total - prev.sysTimes.total;
    this.rates = {
      cpu: (cpuMicros / 1000 / elapsedMs) * 100,
      sysCpu: sysTotal > 0 ? (1 - (now.sysTimes.idle - prev.sysTimes.idle) / sysTotal) * 100 : 0,
      receiving: ((now.received - prev.received) * 1000) / elapsedMs,
      sending: ((now.sent - prev.sent) * 1000) / elapsedMs,
      writerItemsPerSecond: ((now.writerItems - prev.writerItems) * 1000) / elapsedMs,
      writerBusyPercent: ((now.writerBusyMs - prev.writerBusyMs) / elapsedMs) * 100,
      timeInGc: ((now.gcMs - prev.gcMs) / elapsedMs) * 100,
      allocation: Math.max(0, ((now.heapUsed - prev.heapUsed) * 1000) / elapsedMs),
      exceptions: ((now.exceptions - prev.exceptions) * 1000) / elapsedMs,
    };
    this.previous = now;
  }

  /** The nested statistics document (root keys proc, sys, svc). */
  collect(): Record<string, unknown> {
    const { store, dataPath, startTime } = this.sources;
    const memory = process.memoryUsage();
    const status = procFile('/proc/self/status');
    const io = procFile('/proc/self/io');
    const heap = getHeapStatistics();
    const spaces = Object.fromEntries(getHeapSpaceStatistics().map((s) => [s.space_name, s.space_used_size]));
    const { received, sent } = this.bytes();
    const writer = store.writerStats;
    const now = performance.now();
    const idleMs = writer.flushStartedAt === undefined ? now - writer.lastFlushEndedAt : 0;
    const cores = cpus().length;
    return {
      proc: {
        startTime: startTime.toISOString(),
        id: process.pid,
        mem: memory.rss,
        cpu: round(this.rates.cpu),
        cpuScaled: round(this.rates.cpu / cores),
        threadsCount: field(status, 'Threads'),
        thrownExceptionsRate: round(this.rates.exceptions),
        gc: {
          allocationSpeed: round(this.rates.allocation),
          fragmentation: heap.total_heap_size > 0 ? round((1 - heap.used_heap_size / heap.total_heap_size) * 100) : 0,
          gen0ItemsCount: this.gcCounts.minor,
          gen0Size: spaces.new_space ?? 0,
          gen1ItemsCount: this.gcCounts.incremental,
          gen1Size: spaces.old_space ?? 0,
          gen2ItemsCount: this.gcCounts.major,
          gen2Size: (spaces.code_space ?? 0) + (spaces.map_space ?? 0),
          largeHeapSize: spaces.large_object_space ?? 0,
          timeInGc: round(this.rates.timeInGc),
          totalBytesInHeaps: heap.used_heap_size,
        },
        diskIo: {
          readBytes: field(io, 'read_bytes'), writtenBytes: field(io, 'write_bytes'),
          readOps: field(io, 'syscr'), writeOps: field(io, 'syscw'),
        },
        tcp: {
          connections: this.sockets.size,
          receivingSpeed: `${round(this.rates.receiving)}B/s`,
          sendingSpeed: round(this.rates.sending),
          measureTime: timeSpan(SAMPLE_MS),
          pendingSend: [...this.sockets].reduce((n, s) => n + s.writableLength, 0),
          receivedBytesSinceLastRun: received - this.previous.received,
          receivedBytesTotal: received,
          sentBytesSinceLastRun: sent - this.previous.sent,
          sentBytesTotal: sent,
          connectionsTotal: this.connectionsTotal,
        },
      },
      sys: {
        cpu: round(this.rates.sysCpu),
        loadavg: Object.fromEntries(['1m', '5m', '15m'].map((k, i) => [k, round(loadavg()[i])])),
        freeMem: freemem(),
        totalMem: totalmem(),
        drive: { [dataPath]: this.dataDrive(now) },
      },
      svc: {
        checksum: store.logEnd,
        checksumNonFlushed: store.logEnd,
        queue: {
          writer: {
            queueName: 'writer',
            groupName: 'storage',
            avgItemsPerSecond: Math.round(this.rates.writerItemsPerSecond),
            avgProcessingTime: writer.totalItemsProcessed > 0 ? round(writer.busyMs / writer.totalItemsProcessed) : 0,
            currentIdleTime: timeSpan(idleMs),
            currentItemProcessingTime: timeSpan(writer.flushStartedAt === undefined ? 0 : now - writer.flushStartedAt),
            idleTimePercent: round(Math.max(0, 100 - this.rates.writerBusyPercent)),
            length: store.writerQueueLength,
            lengthCurrentTryPeak: writer.lengthCurrentTryPeak,
            lengthLifetimePeak: writer.lengthLifetimePeak,
            totalItemsProcessed: writer.totalItemsProcessed,
            inProgressMessage: writer.flushStartedAt === undefined ? '<none>' : 'WriteBatch',
            lastProcessedMessage: writer.totalItemsProcessed > 0 ? 'WriteBatch' : '<none>',
          },
        },
        writer: {
          lastFlushSize: writer.lastFlushSize,
          lastFlushDelayMs: round(writer.lastFlushDelayMs),
          meanFlushSize: round(writer.meanFlushSize),
          meanFlushDelayMs: round(writer.meanFlushDelayMs),
          maxFlushSize: writer.maxFlushSize,
          maxFlushDelayMs: round(writer.maxFlushDelayMs),
          queuedFlushMessages: store.writerQueueLength,
          recordsWritten: writer.recordsWritten,
          // null while writes succeed; else when the data drive began refusing them, and how many it refused since.
          outOfSpaceSince: store.space.failingSince?.toISOString() ?? null,
          outOfSpaceRefusedWrites: store.space.refusedWrites,
          outOfSpaceEpisodes: store.space.episodes,
        },
        readIndex: { ...store.readCounters, cachedTransInfo: 0, notCachedTransInfo: 0, hashCollisions: 0 },
        // Feed pages written in parts: what they hold for clients that have not taken it yet (send-queue.ts).
        feedPages: this.sources.sends.figures(),
      },
    };
  }

  /** The data directory's file system (statfs), read at most once a second however often it is asked for (/stats, /metrics). */
  dataDrive(now = performance.now()): DriveFigures {
    if (!this.drive || now - this.drive.at >= DRIVE_CACHE_MS) this.drive = { at: now, figures: drive(this.sources.dataPath) };
    return this.drive.figures;
  }
}

export type DriveFigures = Record<'availableBytes' | 'totalBytes' | 'usage' | 'usedBytes', number>;

function drive(path: string): DriveFigures {
  try {
    const s = statfsSync(path);
    const totalBytes = s.blocks * s.bsize;
    const availableBytes = s.bavail * s.bsize;
    const usedBytes = totalBytes - s.bfree * s.bsize;
    return { availableBytes, totalBytes, usage: totalBytes > 0 ? round((usedBytes / totalBytes) * 100) : 0, usedBytes };
  } catch {
    return { availableBytes: 0, totalBytes: 0, usage: 0, usedBytes: 0 };
  }
}

function round(n: number): number {
  return Math.round(n * 100) / 100;
}
