import { describe, expect, it } from 'vitest';
import { EndpointMeters } from './endpoint-meters.js';
import { EdgeMetrics } from './metrics.js';
import { OTHER_ENDPOINTS, SERIES_RANGES, TrafficSeries } from './traffic-series.js';
import type { OnlineTunnel } from '../registry/tunnel-registry.js';

const A = 'https://a.burrow.test';
const B = 'https://b.burrow.test';
/** A clock the test moves: starts on a 5-minute boundary. */
function clock(start = 1_800_000_000_000) {
  let now = start;
  return { now: () => now, move: (ms: number) => (now += ms) };
}

const last = <T>(values: T[]): T => values[values.length - 1]!;

describe('TrafficSeries', () => {
  it('counts requests, status classes, latency percentiles and bytes in the current bucket', () => {
    const time = clock();
    const series = new TrafficSeries({ now: time.now });
    const a = series.of(A);
    for (let i = 0; i < 90; i++) a.request(200, 0.01);
    for (let i = 0; i < 9; i++) a.request(404, 0.1);
    a.request(502, 2);
    a.bytesIn(1000);
    a.bytesOut(5000);
    series.of(B).request(301, 0.001);

    const view = series.read(A, 'hour');
    expect(view.time).toHaveLength(SERIES_RANGES.hour.buckets);
    expect(last(view.time)).toBe(time.now() / 1000);
    expect(last(view.requests)).toBe(100);
    expect(last(view.requests_per_second)).toBe(10);
    expect(last(view.status['2xx'])).toBe(90);
    expect(last(view.status['4xx'])).toBe(9);
    expect(last(view.status['5xx'])).toBe(1);
    expect(last(view.bytes_in)).toBe(1000);
    expect(last(view.bytes_out)).toBe(5000);
    // Within a bin of √2: p50 ≈ 10 ms, p95 ≈ 100 ms, p99 ≈ 100 ms (the 99th of 100 is a 404).
    expect(last(view.latency_ms.p50)).toBeGreaterThan(7);
    expect(last(view.latency_ms.p50)).toBeLessThanOrEqual(11.4);
    expect(last(view.latency_ms.p95)).toBeGreaterThan(70);
    expect(last(view.latency_ms.p95)).toBeLessThanOrEqual(114);
    expect(view.totals.requests).toBe(100);
    // Buckets before the series started are null, not zero.
    expect(view.requests[0]).toBeNull();

    const total = series.read(undefined, 'hour');
    expect(total.totals.requests).toBe(101);
    expect(total.totals.status['3xx']).toBe(1);
    expect(series.endpointNames()).toEqual([A, B]);
  });

  it('moves on every 10 seconds, keeps an hour, and folds closed buckets into the day', () => {
    const time = clock();
    let agents = 2;
    const series = new TrafficSeries({ now: time.now, agents: () => agents });
    const a = series.of(A);
    a.request(200, 0.01);
    time.move(10_000);
    series.advance();
    agents = 3;
    a.request(200, 0.01);
    a.request(500, 0.01);
    series.advance();

    const hour = series.read(A, 'hour');
    expect(hour.requests.slice(-2)).toEqual([1, 2]);
    expect(hour.agents_online.slice(-2)).toEqual([2, 3]);
    const day = series.read(A, 'day');
    // The open 10-second bucket is in the day's last bucket too.
    expect(last(day.requests)).toBe(3);
    expect(last(day.status['5xx'])).toBe(1);
    expect(last(day.agents_online)).toBe(3);

    // Ten minutes later: two new 5-minute buckets; the hour still shows the first requests.
    time.move(600_000);
    series.advance();
    expect(series.read(A, 'day').requests.slice(-3)).toEqual([3, 0, 0]);
    expect(series.read(A, 'hour').totals.requests).toBe(3);
    // Past an hour the hour is empty; the day keeps them.
    time.move(3_600_000);
    expect(series.read(A, 'hour').totals.requests).toBe(0);
    expect(series.read(A, 'day').totals.requests).toBe(3);
    // Past a day, nothing.
    time.move(86_400_000);
    expect(series.read(A, 'day').totals.requests).toBe(0);
  });

  it('counts endpoints beyond the cap in "other", and gives an idle place to a new endpoint', () => {
    const time = clock();
    const series = new TrafficSeries({ now: time.now, cap: 2 });
    series.of(A).request(200, 0.01);
    series.of(B).request(200, 0.01);
    series.of('https://c.burrow.test').request(500, 0.01);
    expect(series.read(OTHER_ENDPOINTS, 'hour').totals.status['5xx']).toBe(1);
    expect(series.read(undefined, 'hour').totals.requests).toBe(3);
    expect(series.endpointNames()).toEqual([A, B, OTHER_ENDPOINTS]);

    // An endpoint that has counted nothing for a day gives its place up.
    const quiet = new TrafficSeries({ now: time.now, cap: 2 });
    quiet.of(A).request(200, 0.01);
    const held = quiet.of(B);
    quiet.of('https://c.burrow.test').request(200, 0.01);
    expect(quiet.endpointNames()).toEqual([A, 'https://c.burrow.test']);
    expect(quiet.read(undefined, 'hour').totals.requests).toBe(2);
    // B's meter, still holding its series, now counts in "other".
    held.request(404, 0.01);
    expect(quiet.read(OTHER_ENDPOINTS, 'hour').totals.status['4xx']).toBe(1);
    expect(quiet.read(undefined, 'hour').totals.requests).toBe(3);
  });

  it('is fed by EndpointMeter: requests with their duration, and bytes', () => {
    const metrics = new EdgeMetrics();
    const meter = new EndpointMeters(metrics).of({ url: A } as OnlineTunnel);
    meter.request(200, 0.02);
    meter.request(404);
    meter.bytesIn.inc(10);
    meter.bytesOut.inc(20);
    const view = metrics.series.read(A, 'hour');
    expect(view.totals.requests).toBe(2);
    expect(view.totals.status['4xx']).toBe(1);
    expect(view.totals.bytes_in).toBe(10);
    expect(view.totals.bytes_out).toBe(20);
    expect(meter.bytesOut.value).toBe(20);
    expect(view.totals.latency_ms.p50).toBeGreaterThan(14);
    expect(view.totals.latency_ms.p50).toBeLessThanOrEqual(22.7);
  });

  it('costs tens of nanoseconds per request on the data path', () => {
    const series = new TrafficSeries();
    const a = series.of(A);
    const n = 1_000_000;
    for (let i = 0; i < n; i++) a.request(200, 0.001 * (i % 100)); // warm up
    const started = process.hrtime.bigint();
    for (let i = 0; i < n; i++) a.request(200 + (i % 4) * 100, 0.001 * (i % 100));
    const ns = Number(process.hrtime.bigint() - started) / n;
    console.log(`traffic series: ${ns.toFixed(1)} ns per request`);
    expect(ns).toBeLessThan(1000);
  });
});
