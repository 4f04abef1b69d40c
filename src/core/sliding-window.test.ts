import { describe, expect, it } from 'vitest';
import { SlidingWindowLimiter } from './sliding-window.js';

describe('SlidingWindowLimiter', () => {
  it('allows capacity events per window per key', () => {
    const l = new SlidingWindowLimiter(3, 60_000);
    const t = 600_000; // start of a window
    expect([1, 2, 3].map(() => l.take('a', t).allowed)).toEqual([true, true, true]);
    const refused = l.take('a', t + 10);
    expect(refused.allowed).toBe(false);
    expect(refused.retryAfterMs).toBeGreaterThan(0);
    expect(l.take('b', t + 10).allowed).toBe(true);
  });

  it('weights the previous window so a burst at a boundary is not doubled', () => {
    const l = new SlidingWindowLimiter(10, 60_000);
    const end = 660_000 - 1;
    for (let i = 0; i < 10; i++) expect(l.take('k', end).allowed).toBe(true);
    // Just after the boundary almost all of the previous window still counts.
    expect(l.take('k', 660_001).allowed).toBe(false);
    // Halfway through, half of it counts: 5 more fit.
    const half = 690_000;
    const allowed = Array.from({ length: 10 }, () => l.take('k', half).allowed).filter(
      Boolean,
    ).length;
    expect(allowed).toBe(5);
  });

  it('tells a retry time after which a request is allowed', () => {
    const l = new SlidingWindowLimiter(2, 1_000);
    const t = 10_000;
    l.take('k', t);
    l.take('k', t);
    const { retryAfterMs } = l.take('k', t + 100);
    expect(l.take('k', t + 100 + retryAfterMs).allowed).toBe(true);
  });
});

describe('SlidingWindowLimiter memory', () => {
  it('keeps at most maxKeys buckets, dropping the least recently used', () => {
    const limiter = new SlidingWindowLimiter(1, 60_000, 3);
    const now = 1_000_000;
    for (const key of ['a', 'b', 'c']) expect(limiter.take(key, now).allowed).toBe(true);
    expect(limiter.take('a', now).allowed).toBe(false); // 'a' is now the most recent
    expect(limiter.take('d', now).allowed).toBe(true); // evicts 'b'
    expect(limiter.take('b', now).allowed).toBe(true); // forgotten, so allowed again
    expect(limiter.take('a', now).allowed).toBe(false); // still remembered
  });

  it('treats long keys by digest, the same key still the same bucket', () => {
    const limiter = new SlidingWindowLimiter(1, 60_000);
    const long = 'k'.repeat(10_000);
    expect(limiter.take(long, 5).allowed).toBe(true);
    expect(limiter.take(long, 6).allowed).toBe(false);
    expect(limiter.take(`${long}x`, 7).allowed).toBe(true);
  });
});
