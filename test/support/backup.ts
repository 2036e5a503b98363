import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { runMain } from './process.js';
import { readAll, readStreams, request, type LogRecord, type StreamView, type Target } from './scavenge.js';

// Helpers of the backup tests: the backup call, the restore command, and what a node holds
// (every record of $all with its position, and every stream read as a client reads it).

export function tempDir(prefix: string): string {
  return mkdtempSync(join(tmpdir(), `svc-${prefix}-`));
}

export function postBackup(t: Target, body: unknown, authorization?: string): Promise<Response> {
  return request(t, '/admin/backup', {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body),
    ...(authorization === undefined ? {} : { authorization }),
  });
}

export interface BackupAnswer { position: number; chunks: string[]; copied: number; removed: number; bytes: number; seconds: number }

export async function backupOk(t: Target, to: string, differential = false): Promise<BackupAnswer> {
  const res = await postBackup(t, { to, differential });
  const text = await res.text();
  expect(res.status, `POST /admin/backup: ${text}`).toBe(200);
  return JSON.parse(text) as BackupAnswer;
}

/** `node dist/src/main.js restore --from DIR --db PATH`, expected to succeed. */
export async function restoreOk(from: string, db: string): Promise<void> {
  const { code, stdout, stderr } = await runMain(['restore', '--from', from, '--db', db]);
  expect(code, `restore: ${stdout}${stderr}`).toBe(0);
}

export interface Contents {
  all: LogRecord[];
  streams: Record<string, StreamView>;
}

/** $all, and every stream named in it (and its metastream) as read. */
export async function contentsOf(t: Target): Promise<Contents> {
  const all = await readAll(t);
  const names = [...new Set(all.flatMap((r) => [r.streamId, r.streamId.startsWith('$$') ? r.streamId.slice(2) : `$$${r.streamId}`]))].sort();
  return { all, streams: await readStreams(t, names) };
}
