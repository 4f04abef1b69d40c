import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';

interface Bucket {
  window: number;
  current: number;
  previous: number;
}

/**
 * A sliding-window rate limiter: the count of the current fixed window plus the previous window's
 * count weighted by how much of it still overlaps the sliding window. Memory is two counters per
 * key; idle keys are swept.
 * @example const limiter = new SlidingWindowLimiter(120, 60_000); limiter.take('ak_1').allowed
 */
export class SlidingWindowLimiter {
  private readonly buckets: LRUCache<string, Bucket>;
  private lastSweep = 0;

  /**
   * @param maxKeys buckets kept at once; past it the least recently used goes (keys can come from
   *   request data, such as a header a rate-limit rule names, so their number must be bounded)
   */
  constructor(
    readonly capacity: number,
    readonly windowMs: number,
    readonly maxKeys = 100_000,
  ) {
    this.buckets = new LRUCache({ max: maxKeys });
  }

  /** Count one event for `key`; when refused, `retryAfterMs` says when a retry can succeed. */
  take(rawKey: string, now = Date.now()): { allowed: boolean; retryAfterMs: number } {
    this.sweep(now);
    // Long keys are kept as a fixed-size digest: memory per bucket does not grow with the input.
    const key =
      rawKey.length > 64 ? createHash('sha256').update(rawKey).digest('base64url') : rawKey;
    const window = Math.floor(now / this.windowMs);
    let b = this.buckets.get(key);
    if (!b) {
      b = { window, current: 0, previous: 0 };
      this.buckets.set(key, b); // past maxKeys, drops the least recently used
    }
    if (b.window !== window) {
      b.previous = b.window === window - 1 ? b.current : 0;
      b.current = 0;
      b.window = window;
    }
    const elapsed = (now % this.windowMs) / this.windowMs;
    const estimate = b.previous * (1 - elapsed) + b.current;
    if (estimate + 1 > this.capacity) {
      return { allowed: false, retryAfterMs: this.retryAfter(b, now) };
    }
    b.current++;
    return { allowed: true, retryAfterMs: 0 };
  }

  /** When the weighted count of `b` next leaves room for one event (an estimate, never 0). */
  private retryAfter(b: Bucket, now: number): number {
    const into = now % this.windowMs;
    const toNextWindow = this.windowMs - into;
    if (b.current + 1 <= this.capacity && b.previous > 0) {
      // Still in this window, once the previous window's weight has decayed enough.
      const weightNeeded = (this.capacity - 1 - b.current) / b.previous;
      const at = (1 - weightNeeded) * this.windowMs;
      return Math.max(1, Math.ceil(at - into));
    }
    // In the next window the current count becomes the previous one and decays from there.
    const weightNeeded = Math.max(0, this.capacity - 1) / b.current;
    return Math.max(1, Math.ceil(toNextWindow + (1 - weightNeeded) * this.windowMs));
  }

  private sweep(now: number): void {
    if (now - this.lastSweep < this.windowMs) return;
    this.lastSweep = now;
    const window = Math.floor(now / this.windowMs);
    const idle: string[] = [];
    for (const [key, b] of this.buckets.entries()) if (b.window < window - 1) idle.push(key);
    for (const key of idle) this.buckets.delete(key);
  }
}
