import pino, { type Logger } from 'pino';

// The one structured logger (pino, JSON lines to stdout). Subsystems take children made here,
// so a level change at reload reaches every one of them (pino children keep their own level).

const children = new WeakMap<Logger, Set<Logger>>();

export function createLogger(level: string): Logger {
  const root = pino({ level, base: { pid: process.pid } });
  children.set(root, new Set());
  return root;
}

export function childLogger(root: Logger, subsystem: string): Logger {
  const child = root.child({ subsystem });
  children.get(root)?.add(child);
  return child;
}

export function setLogLevel(root: Logger, level: string): void {
  root.level = level;
  for (const child of children.get(root) ?? []) child.level = level;
}
