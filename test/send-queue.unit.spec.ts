// The send queue (src/api/send-queue.ts): big pages' later parts run in turns, every one of them,
// in order; while another client's request was answered lately, each turn of them is followed by
// a rest (/stats svc.feedPages.yieldedMs adds them up), and a page's first part goes ahead of
// them meanwhile; with no other client, and for the answers of big pages themselves, there is none.

import { describe, expect, it } from 'vitest';
import { SendQueue } from '../src/api/send-queue.js';

/** Work that takes `ms` of the event loop (a part being made). */
function busy(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) { /* making a part */ }
}

/** Queues `n` later parts of big pages that take longer than a turn each, and resolves with the order they ran in. */
function parts(queue: SendQueue, n: number, ran: string[] = []): Promise<string[]> {
  return Promise.all(Array.from({ length: n }, (_, i) => queue.call(() => {
    busy(1.5);
    ran.push(`part ${i}`);
  }, true))).then(() => ran);
}

const inOrder = (n: number) => Array.from({ length: n }, (_, i) => `part ${i}`);

describe('the send queue', () => {
  it('runs every part in order, without rests when nobody else is answered', async () => {
    const queue = new SendQueue(1024 * 1024, 30_000);
    expect(await parts(queue, 6)).toEqual(inOrder(6));
    expect(queue.figures().yieldedMs).toBe(0);
  });

  it('rests between turns of parts while other requests were answered lately', async () => {
    const queue = new SendQueue(1024 * 1024, 30_000);
    queue.noteAnswered({});
    expect(await parts(queue, 6)).toEqual(inOrder(6));
    // Five turns after the first, each after a rest of three times the turn (1.5 ms or more).
    expect(queue.figures().yieldedMs).toBeGreaterThanOrEqual(5 * 4);
  });

  it('runs a page\'s first part while the later parts of big pages rest', async () => {
    const queue = new SendQueue(1024 * 1024, 30_000);
    queue.noteAnswered();
    const ran: string[] = [];
    const later = parts(queue, 3, ran);
    // After the first turn of later parts, a rest; a first part asked for meanwhile goes in it.
    await new Promise((resolve) => setImmediate(resolve));
    const first = queue.call(() => ran.push('first part'));
    await Promise.all([later, first]);
    expect(ran).toEqual(['part 0', 'first part', 'part 1', 'part 2']);
  });

  it('does not stand back for the answers of big pages themselves', async () => {
    const queue = new SendQueue(1024 * 1024, 30_000);
    const response = {};
    queue.add({ bufferedBytes: 0 }, response);
    queue.noteAnswered(response);
    expect(await parts(queue, 6)).toEqual(inOrder(6));
    expect(queue.figures().yieldedMs).toBe(0);
  });
});
