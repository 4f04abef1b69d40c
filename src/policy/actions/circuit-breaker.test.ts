import { describe, expect, it } from 'vitest';
import { bindPolicy, oneRule, sync } from '../../../test/support/policy-fixtures.js';
import type { PolicyRunner } from '../runner.js';

/**
 * A request through `runner` whose upstream answers `upstreamStatus` (told to the breaker as
 * the ingress tells it): the status the client gets, 0 when the connection is closed.
 */
function requester(runner: PolicyRunner): (upstreamStatus: number) => number {
  return (upstreamStatus) => {
    const d = sync(
      runner.onHttpRequest({
        conn: { client_ip: '192.0.2.1' },
        req: { method: 'GET', url: '/', headers: { host: 'a.test' } },
      }),
    );
    if (d.kind !== 'continue') return d.kind === 'respond' ? d.status : 0;
    for (const observe of d.afterResponse ?? []) observe(upstreamStatus);
    return upstreamStatus;
  };
}

describe('circuit-breaker', () => {
  it('opens after enough 5xx answers in the window, answers 503 while open, then closes', () => {
    let now = 1_000_000;
    const { runner, events, owner } = bindPolicy(
      oneRule('on_http_request', [
        {
          type: 'circuit-breaker',
          config: {
            error_threshold: 0.5,
            volume_threshold: 4,
            window_duration: '10s',
            tripped_duration: '5s',
          },
        },
      ]),
      'https',
      { now: () => now },
    );
    const request = requester(runner);
    expect(request(200)).toBe(200);
    expect(request(502)).toBe(502);
    expect(request(200)).toBe(200);
    expect(request(500)).toBe(500); // 2 of 4 failed: trips
    expect(request(200)).toBe(503);
    expect(events.eventsFor(owner)[0]!.outcome).toBe('circuit-open');
    now += 5_001;
    expect(request(200)).toBe(200); // closed again, with a fresh window
    expect(request(500)).toBe(500);
    expect(request(200)).toBe(200);
  });

  it('needs the volume threshold before it trips, and forgets errors outside the window', () => {
    let now = 0;
    const { runner } = bindPolicy(
      oneRule('on_http_request', [{ type: 'circuit-breaker', config: { volume_threshold: 3 } }]),
      'https',
      { now: () => now },
    );
    const request = requester(runner);
    request(500);
    request(500);
    now += 11_000;
    request(500);
    expect(request(200)).toBe(200);
  });

  it('takes error_threshold: 0 (ngrok allows 0.0–1.0): any error trips it, successes never do', () => {
    const { runner } = bindPolicy(
      oneRule('on_http_request', [
        { type: 'circuit-breaker', config: { error_threshold: 0, volume_threshold: 2 } },
      ]),
      'https',
      { now: () => 5_000_000 },
    );
    const request = requester(runner);
    for (let i = 0; i < 5; i++) expect(request(200)).toBe(200);
    expect(request(500)).toBe(500);
    expect(request(200)).toBe(503);
  });

  it('refuses bad settings at save time', () => {
    const bad = (config: Record<string, unknown>) => () =>
      bindPolicy(oneRule('on_http_request', [{ type: 'circuit-breaker', config }]), 'https');
    expect(bad({ error_threshold: 2 })).toThrow(/error_threshold/);
    expect(bad({ error_threshold: -0.1 })).toThrow(/error_threshold must be from 0 to 1/);
    expect(bad({ error_threshold: 'half' })).toThrow(/error_threshold/);
    expect(bad({ tripped_duration: 'forever' })).toThrow(/tripped_duration/);
    expect(bad({ num_buckets: 500 })).toThrow(/num_buckets/);
  });
});
