import { describe, expect, it } from 'vitest';
import { logClock, requestLogLine } from './request-log-line.js';

describe('requestLogLine', () => {
  const at = new Date(2026, 10, 28, 12, 0, 1, 234);

  it('prints time to the millisecond, the padded method, path, status and duration', () => {
    const line = requestLogLine({ method: 'GET', path: '/', status: 200, durationMs: 3.4 }, at);
    expect(line).toBe('12:00:01.234 GET    / 200 3ms');
  });

  it('prints --- for no status, and the time of one instant (no second read of the clock)', () => {
    const late = new Date(2026, 10, 28, 12, 0, 1, 999);
    const line = requestLogLine({ method: 'POST', path: '/x', status: 0, durationMs: 0.4 }, late);
    expect(line).toBe('12:00:01.999 POST   /x --- 0ms');
  });

  it('logClock is the time the lines start with', () => {
    expect(logClock(at)).toBe('12:00:01.234');
  });
});
