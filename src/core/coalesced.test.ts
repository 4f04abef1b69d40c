import { describe, expect, it } from 'vitest';
import { coalesced } from './coalesced.js';

/** A task whose runs are counted and each held open until `release()`. */
function gated(): {
  task: () => Promise<void>;
  runs: () => number;
  release: (err?: Error) => void;
} {
  let runs = 0;
  let finish: ((err?: Error) => void) | undefined;
  return {
    task: () => {
      runs++;
      return new Promise<void>((resolve, reject) => {
        finish = (err) => (err ? reject(err) : resolve());
      });
    },
    runs: () => runs,
    release: (err) => finish?.(err),
  };
}

const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('coalesced', () => {
  it('folds calls made during a run into exactly one more run, and all callers wait for it', async () => {
    const t = gated();
    const run = coalesced(t.task);
    const first = run();
    const rest = [run(), run(), run()];
    expect(t.runs()).toBe(1);
    expect(rest.every((p) => p === first)).toBe(true);
    let settled = false;
    void first.then(() => (settled = true));
    t.release();
    await tick();
    expect(t.runs()).toBe(2);
    expect(settled).toBe(false);
    t.release();
    await Promise.all([first, ...rest]);
    expect(t.runs()).toBe(2);
  });

  it('runs once for a lone call, and a call after it settles runs again', async () => {
    let runs = 0;
    const run = coalesced(async () => {
      runs++;
    });
    await run();
    expect(runs).toBe(1);
    await run();
    expect(runs).toBe(2);
  });

  it('rejects every caller of a failing run, skips its follow-up, and the next call runs again', async () => {
    const t = gated();
    const run = coalesced(t.task);
    const first = run();
    const second = run();
    t.release(new Error('store away'));
    await expect(first).rejects.toThrow('store away');
    await expect(second).rejects.toThrow('store away');
    expect(t.runs()).toBe(1);
    const third = run();
    expect(t.runs()).toBe(2);
    t.release();
    await expect(third).resolves.toBeUndefined();
  });

  it('skips the follow-up once stop says so, but still starts a fresh call', async () => {
    const t = gated();
    let stopped = false;
    const run = coalesced(t.task, { stop: () => stopped });
    const first = run();
    void run();
    stopped = true;
    t.release();
    await first;
    expect(t.runs()).toBe(1);
    const again = run();
    expect(t.runs()).toBe(2);
    t.release();
    await again;
  });
});
