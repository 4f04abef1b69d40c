import { Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { EdgeMetrics } from './metrics.js';
import { HistogramMetric } from './metric-families.js';

describe('EdgeMetrics', () => {
  it('serves counters and gauges through prom-client with their names, types and labels', async () => {
    const metrics = new EdgeMetrics();
    metrics.requests.with({ endpoint: 'https://a.test', code: '200' }).inc();
    metrics.bytesIn.with({ endpoint: 'https://a.test' }).inc(42);
    const tunnels = metrics.tunnels.with({ proto: 'https' });
    tunnels.inc();
    tunnels.inc();
    tunnels.dec();
    metrics.sessions.with().set(3);

    const text = await metrics.metrics();
    expect(text).toContain('# TYPE burrow_http_requests_total counter');
    expect(text).toContain('burrow_http_requests_total{endpoint="https://a.test",code="200"} 1');
    expect(text).toContain('burrow_bytes_received_total{endpoint="https://a.test"} 42');
    expect(text).toContain('# TYPE burrow_tunnels gauge');
    expect(text).toContain('burrow_tunnels{proto="https"} 1');
    expect(text).toContain('burrow_agent_sessions 3');
    expect(text).toContain('# TYPE burrow_http_request_duration_seconds histogram');
    expect(text).toContain('# TYPE burrow_http_upstream_duration_seconds histogram');
    expect(metrics.contentType).toMatch(/^text\/plain; version=0\.0\.4/);
  });

  it('keeps values readable synchronously, and render() matches the exposition', async () => {
    const metrics = new EdgeMetrics();
    const refusals = metrics.limitRefusals.with({ limit: 'ingress_header_bytes' });
    refusals.inc();
    expect(metrics.limitRefusals.with({ limit: 'ingress_header_bytes' }).value).toBe(1);
    const line = 'burrow_limit_refusals_total{limit="ingress_header_bytes"} 1';
    expect(metrics.render()).toContain(line);
    expect(await metrics.metrics()).toContain(line);
  });

  it('includes the process metrics under their usual names', async () => {
    const text = await new EdgeMetrics().metrics();
    for (const name of [
      'process_cpu_seconds_total',
      'process_resident_memory_bytes',
      'nodejs_eventloop_lag_seconds',
      'nodejs_heap_size_used_bytes',
      'nodejs_gc_duration_seconds',
    ]) {
      expect(text).toContain(`# TYPE ${name} `);
    }
  });

  it('keeps each edge in its own registry', async () => {
    const a = new EdgeMetrics();
    const b = new EdgeMetrics();
    a.agentErrors.with({ code: 'ERR_NGROK_107' }).inc();
    expect(await a.metrics()).toContain('burrow_agent_errors_total{code="ERR_NGROK_107"} 1');
    expect(await b.metrics()).not.toContain('ERR_NGROK_107');
  });

  it('drops a removed series, and a series held past removal counts nowhere', async () => {
    const metrics = new EdgeMetrics();
    const active = metrics.activeConnections.with({ endpoint: 'tcp://:20001' });
    active.inc();
    metrics.activeConnections.remove({ endpoint: 'tcp://:20001' });
    active.dec();
    expect(await metrics.metrics()).not.toContain('tcp://:20001');
    expect(metrics.render()).not.toContain('tcp://:20001');
  });

  it('still scrapes when a counter was given a value a counter cannot have', async () => {
    const metrics = new EdgeMetrics();
    metrics.bytesOut.with({ endpoint: 'https://bad.test' }).inc(-1);
    metrics.bytesOut.with({ endpoint: 'https://good.test' }).inc(7);
    const text = await metrics.metrics();
    expect(text).toContain('burrow_bytes_sent_total{endpoint="https://good.test"} 7');
    expect(text).not.toContain('bad.test');
  });

  it('renders its histograms exactly as a prom-client Histogram with the same buckets', async () => {
    const theirs = new Registry();
    const ours = new Registry();
    const help = 'Seconds "per" request \\ endpoint.';
    const bounds = [0.005, 0.01, 0.1];
    const reference = new Histogram({
      name: 'x_seconds',
      help,
      labelNames: ['endpoint'],
      buckets: bounds,
      registers: [theirs],
    });
    const histogram = new HistogramMetric('x_seconds', help, bounds, ours);
    const observations: [string, number][] = [
      ['https://b"\\\n', 0.003],
      ['https://a', 0.2],
      ['https://b"\\\n', 0.01],
      ['https://a', 0.005],
      ['c', 1e-9],
    ];
    for (const [endpoint, seconds] of observations) {
      reference.labels({ endpoint }).observe(seconds);
      histogram.labels({ endpoint }).observe(seconds);
    }
    reference.remove({ endpoint: 'c' });
    histogram.remove({ endpoint: 'c' });
    expect(await ours.metrics()).toBe(await theirs.metrics());
    expect(await ours.getMetricsAsJSON()).toEqual(await theirs.getMetricsAsJSON());
    expect(await ours.metrics()).toContain('x_seconds_bucket{le="0.01",endpoint="https://a"} 1');

    // A series held past its removal counts nowhere; reset() starts held series from zero.
    const held = histogram.labels({ endpoint: 'https://a' });
    histogram.remove({ endpoint: 'https://a' });
    held.observe(0.001);
    expect(await ours.metrics()).not.toContain('https://a');
    ours.resetMetrics();
    expect(await ours.metrics()).not.toContain('_count');
    histogram.labels({ endpoint: 'd' }).observe(Number.NaN);
    expect(await ours.metrics()).not.toContain('_count');
    histogram.labels({ endpoint: 'd' }).observe(0.02);
    expect(await ours.metrics()).toContain('x_seconds_count{endpoint="d"} 1');
  });
});
