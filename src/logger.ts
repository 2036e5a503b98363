import pino, { type Logger } from 'pino';

/** The one structured logger (pino, JSON lines to stdout); subsystems take child loggers. */
export function createLogger(level: string): Logger {
  return pino({ level, base: { pid: process.pid } });
}
