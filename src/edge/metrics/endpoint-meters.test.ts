import { describe, expect, it } from 'vitest';
import { EndpointMeters, NO_ENDPOINT } from './endpoint-meters.js';
import { EdgeMetrics } from './metrics.js';
import type { OnlineTunnel } from '../registry/tunnel-registry.js';

const URL = 'https://app.burrow.test';
const tunnel = { url: URL, hostname: 'app.burrow.test', proto: 'https' } as OnlineTunnel;

/** The value of the exposition line `name{labels}`, undefined when absent. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe('EndpointMeter', () => {
  it('counts a request and observes its duration and upstream time in the histograms', async () => {
    const metrics = new EdgeMetrics();
    const meter = new EndpointMeters(metrics).of(tunnel);
    meter.request(200, 0.01, 0.005, 0.0002);
    meter.request(200, 0.2);
    meter.request(404);

    const text = await metrics.metrics();
    const e = `endpoint="${URL}"`;
    expect(sample(text, `burrow_http_requests_total{${e},code="200"}`)).toBe(2);
    expect(sample(text, `burrow_http_requests_total{${e},code="404"}`)).toBe(1);
    expect(sample(text, `burrow_http_request_duration_seconds_count{${e}}`)).toBe(2);
    expect(sample(text, `burrow_http_request_duration_seconds_sum{${e}}`)).toBeCloseTo(0.21);
    expect(sample(text, `burrow_http_request_duration_seconds_bucket{le="0.01",${e}}`)).toBe(1);
    expect(sample(text, `burrow_http_request_duration_seconds_bucket{le="0.25",${e}}`)).toBe(2);
    expect(sample(text, `burrow_http_upstream_duration_seconds_count{${e}}`)).toBe(1);
    expect(sample(text, `burrow_http_upstream_duration_seconds_bucket{le="0.005",${e}}`)).toBe(1);
    expect(sample(text, `burrow_http_upstream_duration_seconds_bucket{le="+Inf",${e}}`)).toBe(1);
    // The edge's own time has buckets fine enough for its tens of microseconds.
    expect(sample(text, `burrow_http_edge_duration_seconds_bucket{le="0.0001",${e}}`)).toBe(0);
    expect(sample(text, `burrow_http_edge_duration_seconds_bucket{le="0.00025",${e}}`)).toBe(1);
    expect(sample(text, `burrow_http_edge_duration_seconds_count{${e}}`)).toBe(1);
  });

  it('ignores a non-finite duration instead of throwing on the data path', async () => {
    const metrics = new EdgeMetrics();
    const meter = new EndpointMeters(metrics).of(tunnel);
    meter.request(200, Number.NaN, Number.POSITIVE_INFINITY);
    const text = await metrics.metrics();
    expect(sample(text, `burrow_http_requests_total{endpoint="${URL}",code="200"}`)).toBe(1);
    expect(text).not.toContain(`burrow_http_request_duration_seconds_count{endpoint="${URL}"}`);
  });

  it('removes every series of a released meter, histograms included', async () => {
    const metrics = new EdgeMetrics();
    const meters = new EndpointMeters(metrics);
    const meter = meters.of(tunnel);
    const closed = meters.connectionOpened(meter);
    meter.bytesIn.inc(10);
    meter.bytesOut.inc(20);
    meter.request(200, 0.01, 0.005);
    expect(await metrics.metrics()).toContain(URL);

    meters.tunnelRemoved(tunnel);
    await new Promise((resolve) => setImmediate(resolve)); // the tunnel's hold ends with the tick
    expect(await metrics.metrics()).toContain(URL); // the open connection still holds it
    closed();
    const text = await metrics.metrics();
    expect(text).not.toContain(URL);
    expect(metrics.render()).not.toContain(URL);

    meter.request(200, 0.01, 0.005); // a late request on the released meter counts nowhere
    meter.bytesOut.inc(5);
    expect(await metrics.metrics()).not.toContain(URL);
  });

  it('hands the series to a tunnel with the same URL that comes online in the same tick', async () => {
    const metrics = new EdgeMetrics();
    const meters = new EndpointMeters(metrics);
    const total = async () =>
      sample(await metrics.metrics(), `burrow_connections_total{endpoint="${URL}"}`);
    meters.connectionOpened(meters.of(tunnel))();
    // An edge or cloud endpoint changed, or an agent took its name over: out and in, one tick.
    const successor = { ...tunnel, id: 'tn_successor' };
    meters.tunnelRemoved(tunnel);
    meters.tunnelAdded(successor);
    await new Promise((resolve) => setImmediate(resolve));
    meters.connectionOpened(meters.of(successor))();
    expect(await total()).toBe(2);

    // Gone for good: the series go with the tick.
    meters.tunnelRemoved(successor);
    await new Promise((resolve) => setImmediate(resolve));
    expect(await metrics.metrics()).not.toContain(URL);
  });

  it('keeps the unrouted meter', async () => {
    const metrics = new EdgeMetrics();
    const meters = new EndpointMeters(metrics);
    meters.connectionOpened(meters.unrouted)();
    meters.unrouted.request(404, 0.001);
    const text = await metrics.metrics();
    expect(sample(text, `burrow_connections_total{endpoint="${NO_ENDPOINT}"}`)).toBe(1);
    expect(sample(text, `burrow_connections_active{endpoint="${NO_ENDPOINT}"}`)).toBe(0);
    expect(sample(text, `burrow_http_request_duration_seconds_count{endpoint="none"}`)).toBe(1);
  });
});
