import type { CounterSeries, HistogramSeries, Series } from './metric-families.js';
import type { EdgeMetrics } from './metrics.js';
import type { EndpointSeries } from './traffic-series.js';
import type { OnlineTunnel } from '../registry/tunnel-registry.js';

/** The `endpoint` label of traffic that matched no online tunnel (unknown Host or SNI). */
export const NO_ENDPOINT = 'none';

/**
 * The label an endpoint's series carry: its public URL.
 * @example endpointLabel(tunnel) // 'https://app.burrow.localhost:8443'
 */
export function endpointLabel(tunnel: OnlineTunnel): string {
  if (tunnel.url) return tunnel.url;
  if (tunnel.hostname !== undefined) return `${tunnel.proto ?? 'http'}://${tunnel.hostname}`;
  return `${tunnel.proto ?? 'tcp'}://:${tunnel.port ?? 0}`;
}

type Observer = HistogramSeries;

/** A byte counter that also adds to the endpoint's chart series (traffic-series.ts). */
class ChartedBytes implements CounterSeries {
  constructor(
    private readonly counter: CounterSeries,
    private readonly add: (n: number) => void,
  ) {}
  inc(by = 1): void {
    this.counter.inc(by);
    this.add(by);
  }
  get value(): number {
    return this.counter.value;
  }
}

/** Observe `seconds` when given; a non-finite value (a clock bug) is dropped, not thrown. */
function observe(histogram: Observer, seconds: number | undefined): void {
  if (seconds !== undefined && Number.isFinite(seconds)) histogram.observe(seconds);
}

/**
 * One endpoint's series, looked up once so that counting on the data path costs no lookup.
 * Held (`acquire`) by the online tunnel and by each open connection; when the last holder lets
 * go, the series are dropped, so quick tunnels with random names do not grow /metrics forever.
 * @example
 * const meter = meters.of(tunnel);
 * meter.bytesIn.inc(chunk.length);
 * meter.request(200, 0.012, 0.008); // status, total seconds, upstream seconds
 */
export class EndpointMeter {
  readonly connections: CounterSeries;
  readonly activeConnections: Series;
  readonly bytesIn: CounterSeries;
  readonly bytesOut: CounterSeries;
  private readonly byCode = new Map<number, CounterSeries>();
  private readonly duration: Observer;
  private readonly upstream: Observer;
  private readonly edge: Observer;
  /** The endpoint's chart series, which outlive the meter (the last hour and day). */
  private readonly series: EndpointSeries;
  private removed = false;
  /** @internal holders, managed by EndpointMeters. */
  holders = 0;

  constructor(
    private readonly metrics: EdgeMetrics,
    readonly endpoint: string,
  ) {
    const labels = { endpoint };
    const series = metrics.series.of(endpoint);
    this.series = series;
    this.connections = metrics.connections.with(labels);
    this.activeConnections = metrics.activeConnections.with(labels);
    this.bytesIn = new ChartedBytes(metrics.bytesIn.with(labels), (n) => series.bytesIn(n));
    this.bytesOut = new ChartedBytes(metrics.bytesOut.with(labels), (n) => series.bytesOut(n));
    this.duration = metrics.requestDuration.labels(labels);
    this.upstream = metrics.upstreamDuration.labels(labels);
    this.edge = metrics.edgeDuration.labels(labels);
  }

  /**
   * Count one HTTP request answered with `status`; observe its duration (request head received →
   * response finished) and upstream time (sent to the agent → response head received), in
   * seconds, when given, and the edge's own time on it; the chart series count it too. Nothing is
   * counted once the meter's series are removed.
   */
  request(
    status: number,
    durationSeconds?: number,
    upstreamSeconds?: number,
    edgeSeconds?: number,
  ): void {
    if (this.removed) return;
    let series = this.byCode.get(status);
    if (!series) {
      series = this.metrics.requests.with({ endpoint: this.endpoint, code: String(status) });
      this.byCode.set(status, series);
    }
    series.inc();
    this.series.request(status, durationSeconds);
    observe(this.duration, durationSeconds);
    observe(this.upstream, upstreamSeconds);
    observe(this.edge, edgeSeconds);
  }

  /** @internal */
  removeSeries(): void {
    this.removed = true;
    const labels = { endpoint: this.endpoint };
    this.metrics.connections.remove(labels);
    this.metrics.activeConnections.remove(labels);
    this.metrics.bytesIn.remove(labels);
    this.metrics.bytesOut.remove(labels);
    this.metrics.requestDuration.remove(labels);
    this.metrics.upstreamDuration.remove(labels);
    this.metrics.edgeDuration.remove(labels);
    for (const code of this.byCode.keys()) {
      this.metrics.requests.remove({ endpoint: this.endpoint, code: String(code) });
    }
    this.byCode.clear();
  }
}

/**
 * The ingress's per-endpoint meters over EdgeMetrics. An online tunnel holds its meter from first
 * use until `tunnelRemoved`; connections that may outlive it `hold` and `release` it too.
 * @example
 * const meter = meters.of(tunnel);
 * meters.hold(meter);
 * socket.once('close', () => meters.release(meter));
 */
export class EndpointMeters {
  private readonly meters = new Map<string, EndpointMeter>();
  private readonly byTunnel = new WeakMap<OnlineTunnel, EndpointMeter>();
  /** Meters whose tunnel went offline in this tick, by label, until the tick ends. */
  private readonly leaving = new Map<string, EndpointMeter>();
  /** Traffic for names and ports no tunnel serves; never dropped. */
  readonly unrouted: EndpointMeter;

  constructor(readonly metrics: EdgeMetrics) {
    this.unrouted = new EndpointMeter(metrics, NO_ENDPOINT);
  }

  /** The meter of an online tunnel's endpoint. */
  of(tunnel: OnlineTunnel): EndpointMeter {
    let meter = this.byTunnel.get(tunnel);
    if (!meter) {
      const endpoint = endpointLabel(tunnel);
      meter = this.meters.get(endpoint);
      if (!meter) {
        meter = new EndpointMeter(this.metrics, endpoint);
        this.meters.set(endpoint, meter);
      }
      meter.holders++;
      this.byTunnel.set(tunnel, meter);
    }
    return meter;
  }

  /**
   * The tunnel went offline: its hold ends (open connections keep theirs) at the end of this
   * tick, unless a tunnel with the same URL comes online in it and takes the hold over
   * (`tunnelAdded`): a changed edge or cloud endpoint, or an agent taking its name over on
   * reconnect, keeps counting in the same series instead of starting them again.
   */
  tunnelRemoved(tunnel: OnlineTunnel): void {
    const meter = this.byTunnel.get(tunnel);
    if (!meter) return;
    this.byTunnel.delete(tunnel);
    this.leaving.set(meter.endpoint, meter);
    setImmediate(() => {
      if (this.leaving.get(meter.endpoint) !== meter) return;
      this.leaving.delete(meter.endpoint);
      this.release(meter);
    });
  }

  /** A tunnel came online: it takes over the hold of one with its URL that left in this tick. */
  tunnelAdded(tunnel: OnlineTunnel): void {
    if (this.leaving.size === 0) return;
    const label = endpointLabel(tunnel);
    const meter = this.leaving.get(label);
    if (!meter) return;
    this.leaving.delete(label);
    this.byTunnel.set(tunnel, meter);
  }

  /**
   * Count a public connection to `meter`'s endpoint, holding the meter while it is open; call the
   * returned function when it closes (extra calls do nothing).
   */
  connectionOpened(meter: EndpointMeter): () => void {
    this.hold(meter);
    meter.connections.inc();
    meter.activeConnections.inc();
    let open = true;
    return () => {
      if (!open) return;
      open = false;
      meter.activeConnections.dec();
      this.release(meter);
    };
  }

  hold(meter: EndpointMeter): void {
    if (meter !== this.unrouted) meter.holders++;
  }

  release(meter: EndpointMeter): void {
    if (meter === this.unrouted || --meter.holders > 0) return;
    if (this.meters.get(meter.endpoint) === meter) this.meters.delete(meter.endpoint);
    meter.removeSeries();
  }
}
