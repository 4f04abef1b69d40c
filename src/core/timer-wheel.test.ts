import { afterEach, describe, expect, it, vi } from 'vitest';
import { TimerWheel } from './timer-wheel.js';

/** A wheel on a hand-driven clock: `at(ms)` moves the clock and looks at the due buckets. */
function manualWheel(options: { tickMs?: number; buckets?: number } = {}) {
  let clock = 10_000;
  const wheel = new TimerWheel({ ...options, now: () => clock });
  const at = (ms: number): void => {
    clock = ms;
    wheel.advance();
  };
  return { wheel, at, now: () => clock };
}

describe('TimerWheel', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('fires a timer after its deadline and within one tick of it, never before', () => {
    const { wheel, at } = manualWheel({ tickMs: 100 });
    const fired: number[] = [];
    const t = wheel.timer(() => fired.push(1));
    t.schedule(250); // due at 10,250
    for (let ms = 10_000; ms < 10_250; ms += 10) at(ms);
    expect(fired).toEqual([]);
    // The first tick boundary at or after the deadline.
    at(10_300);
    expect(fired).toEqual([1]);
    expect(t.armed).toBe(false);
    expect(wheel.size).toBe(0);
  });

  it('does not fire a cancelled timer, and can arm it again', () => {
    const { wheel, at } = manualWheel({ tickMs: 100 });
    let fired = 0;
    const t = wheel.timer(() => fired++);
    t.schedule(100);
    t.cancel();
    expect(wheel.size).toBe(0);
    at(11_000);
    expect(fired).toBe(0);
    t.schedule(100);
    at(11_100);
    expect(fired).toBe(1);
  });

  it('pushes a deadline back on touch() without relinking, and fires at the last one', () => {
    const { wheel, at } = manualWheel({ tickMs: 100 });
    let fired = 0;
    const t = wheel.timer(() => fired++);
    t.schedule(300);
    const bucket = t.bucket;
    // Activity every 200 ms keeps it from ever expiring: only the deadline field changes.
    for (let ms = 10_200; ms <= 12_000; ms += 200) {
      at(ms);
      t.touch(300);
      expect(fired).toBe(0);
      if (ms === 10_200) expect(t.bucket).toBe(bucket);
    }
    // Last touch at 12,000: due at 12,300.
    at(12_200);
    expect(fired).toBe(0);
    at(12_300);
    expect(fired).toBe(1);
  });

  it('allocates nothing on touch(): the same timer object is re-armed', () => {
    const { wheel } = manualWheel();
    const t = wheel.timer(() => {});
    t.schedule(5000);
    const before = t.deadline;
    t.touch(6000);
    expect(t.deadline).toBe(before + 1000);
    expect(wheel.size).toBe(1);
  });

  it('moves a timer touched to an earlier deadline so it is not late', () => {
    const { wheel, at } = manualWheel({ tickMs: 100 });
    let fired = 0;
    const t = wheel.timer(() => fired++);
    t.schedule(5000);
    t.touch(100);
    at(10_100);
    expect(fired).toBe(1);
  });

  it('keeps deadlines further than one lap of the wheel for later laps', () => {
    const { wheel, at } = manualWheel({ tickMs: 100, buckets: 8 });
    let fired = 0;
    wheel.timer(() => fired++).schedule(2000); // 20 ticks on an 8-bucket wheel
    for (let ms = 10_100; ms < 12_000; ms += 100) at(ms);
    expect(fired).toBe(0);
    at(12_000);
    expect(fired).toBe(1);
  });

  it('fires every due timer after a stall longer than a lap', () => {
    const { wheel, at } = manualWheel({ tickMs: 100, buckets: 8 });
    let fired = 0;
    for (let i = 1; i <= 20; i++) wheel.timer(() => fired++).schedule(i * 100);
    at(20_000);
    expect(fired).toBe(20);
    expect(wheel.size).toBe(0);
  });

  it('lets a callback arm timers, its own included', () => {
    const { wheel, at } = manualWheel({ tickMs: 100 });
    let fired = 0;
    const t = wheel.timer(() => {
      if (++fired < 3) t.schedule(100);
    });
    t.schedule(100);
    at(10_100);
    at(10_200);
    at(10_300);
    at(10_400);
    expect(fired).toBe(3);
  });

  it('ticks on its own with real timers only while a timer is armed', () => {
    vi.useFakeTimers();
    const wheel = new TimerWheel({ tickMs: 1000 });
    let fired = 0;
    const t = wheel.timer(() => fired++);
    expect(vi.getTimerCount()).toBe(0);
    t.schedule(2500);
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(4000);
    expect(fired).toBe(1);
    // Nothing armed any more: no tick left behind.
    expect(vi.getTimerCount()).toBe(0);
    t.schedule(1000);
    t.cancel();
    expect(vi.getTimerCount()).toBe(0);
  });
});
