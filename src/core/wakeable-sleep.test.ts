import { describe, expect, it } from 'vitest';
import { WakeableSleep } from './wakeable-sleep.js';

describe('WakeableSleep', () => {
  it('resolves after the delay when nobody wakes it', async () => {
    const pause = new WakeableSleep();
    const started = Date.now();
    await pause.sleep(30);
    expect(Date.now() - started).toBeGreaterThanOrEqual(25);
  });

  it('resolves at once when woken, and waking with no sleep under way does nothing', async () => {
    const pause = new WakeableSleep();
    pause.wake();
    const started = Date.now();
    const slept = pause.sleep(10_000);
    pause.wake();
    await slept;
    expect(Date.now() - started).toBeLessThan(1_000);
  });
});
