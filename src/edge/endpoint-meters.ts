import type { EdgeMetrics, Series } from './metrics.js';
import type { OnlineTunnel } from './tunnel-registry.js';

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

/**
 * One endpoint's series, looked up once so that counting on the data path is one addition.
 * Held (`acquire`) by the online tunnel and by each open connection; when the last holder lets
 * go, the series are dropped, so quick tunnels with random names do not grow /metrics forever.
 */
export class EndpointMeter {
  readonly connections: Series;
  readonly activeConnections: Series;
  readonly bytesIn: Series;
  readonly bytesOut: Series;
  private readonly byCode = new Map<number, Series>();
  /** @internal holders, managed by EndpointMeters. */
  holders = 0;

  constructor(
    private readonly metrics: EdgeMetrics,
    readonly endpoint: string,
  ) {
    const labels = { endpoint };
    this.connections = metrics.connections.with(labels);
    this.activeConnections = metrics.activeConnections.with(labels);
    this.bytesIn = metrics.bytesIn.with(labels);
    this.bytesOut = metrics.bytesOut.with(labels);
  }

  /** Count one HTTP request answered with `status`. */
  request(status: number): void {
    let series = this.byCode.get(status);
    if (!series) {
      series = this.metrics.requests.with({ endpoint: this.endpoint, code: String(status) });
      this.byCode.set(status, series);
    }
    series.inc();
  }

  /** @internal */
  removeSeries(): void {
    const labels = { endpoint: this.endpoint };
    this.metrics.connections.remove(labels);
    this.metrics.activeConnections.remove(labels);
    this.metrics.bytesIn.remove(labels);
    this.metrics.bytesOut.remove(labels);
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

  /** The tunnel went offline: its hold ends (open connections keep theirs). */
  tunnelRemoved(tunnel: OnlineTunnel): void {
    const meter = this.byTunnel.get(tunnel);
    if (!meter) return;
    this.byTunnel.delete(tunnel);
    this.release(meter);
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
