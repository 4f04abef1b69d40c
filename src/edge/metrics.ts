/**
 * A small Prometheus registry: counters and gauges with labels, rendered in the text exposition
 * format. Hot paths hold on to a labelled child (`counter.with({ endpoint })`) so that counting a
 * byte or a request is one addition.
 */

type Labels = Record<string, string>;

function escapeLabel(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

function labelKey(labels: Labels): string {
  const entries = Object.entries(labels);
  if (entries.length === 0) return '';
  return '{' + entries.map(([k, v]) => `${k}="${escapeLabel(v)}"`).join(',') + '}';
}

/** One time series of a metric. */
export interface Series {
  inc(by?: number): void;
  dec(by?: number): void;
  set(value: number): void;
  readonly value: number;
}

class SeriesValue implements Series {
  value = 0;
  inc(by = 1): void {
    this.value += by;
  }
  dec(by = 1): void {
    this.value -= by;
  }
  set(value: number): void {
    this.value = value;
  }
}

/** A counter or gauge family. */
export class Metric {
  private readonly series = new Map<string, SeriesValue>();

  constructor(
    readonly name: string,
    readonly help: string,
    readonly type: 'counter' | 'gauge',
  ) {}

  /** The series for `labels`, created at zero. */
  with(labels: Labels = {}): Series {
    const key = labelKey(labels);
    let s = this.series.get(key);
    if (!s) {
      s = new SeriesValue();
      this.series.set(key, s);
    }
    return s;
  }

  /** Drop a series (e.g. when its endpoint goes offline), so label sets do not grow forever. */
  remove(labels: Labels): void {
    this.series.delete(labelKey(labels));
  }

  render(): string {
    let out = `# HELP ${this.name} ${this.help}\n# TYPE ${this.name} ${this.type}\n`;
    for (const [key, s] of this.series) out += `${this.name}${key} ${s.value}\n`;
    return out;
  }
}

/**
 * The edge's metrics. Names follow Prometheus conventions (`_total` for counters, base units).
 * @example metrics.requests.with({ endpoint: 'https://app.example.com', code: '200' }).inc()
 */
export class EdgeMetrics {
  readonly sessions = new Metric('burrow_agent_sessions', 'Online agent sessions.', 'gauge');
  readonly tunnels = new Metric('burrow_tunnels', 'Online tunnels by protocol.', 'gauge');
  readonly connections = new Metric(
    'burrow_connections_total',
    'Public connections accepted, by endpoint.',
    'counter',
  );
  readonly activeConnections = new Metric(
    'burrow_connections_active',
    'Public connections open now, by endpoint.',
    'gauge',
  );
  readonly bytesIn = new Metric(
    'burrow_bytes_received_total',
    'Bytes received from public clients, by endpoint.',
    'counter',
  );
  readonly bytesOut = new Metric(
    'burrow_bytes_sent_total',
    'Bytes sent to public clients, by endpoint.',
    'counter',
  );
  readonly requests = new Metric(
    'burrow_http_requests_total',
    'HTTP requests by endpoint and status code.',
    'counter',
  );
  readonly agentErrors = new Metric(
    'burrow_agent_errors_total',
    'Agent refusals by error code.',
    'counter',
  );

  readonly limitRefusals = new Metric(
    'burrow_limit_refusals_total',
    'Clients refused for going over a limit, by limit (docs/security.md).',
    'counter',
  );

  private readonly all: Metric[] = [
    this.sessions,
    this.tunnels,
    this.connections,
    this.activeConnections,
    this.bytesIn,
    this.bytesOut,
    this.requests,
    this.agentErrors,
    this.limitRefusals,
  ];

  /** The Prometheus text exposition of every metric. */
  render(): string {
    return this.all.map((m) => m.render()).join('');
  }
}
