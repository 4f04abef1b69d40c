/**
 * The edge's Prometheus metrics, on prom-client: one Registry per edge (so several edges in one
 * process do not collide), holding the edge's families and Node's process metrics. Hot paths hold
 * on to a labelled series (`counter.with({ endpoint })`) or histogram series (`labels(...)`).
 */
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { TrafficSeries } from './traffic-series.js';

type Labels = Record<string, string>;

/**
 * Buckets of the HTTP duration histograms, in seconds (5 ms … 10 s).
 * @example new HistogramMetric(name, help, DURATION_BUCKETS, registry)
 */
export const DURATION_BUCKETS: readonly number[] = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
];

/** Buckets of the edge's own time per request, in seconds (50 µs … 100 ms). */
export const EDGE_TIME_BUCKETS: readonly number[] = [
  0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1,
];

function escapeLabel(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

function labelKey(labels: Labels): string {
  const entries = Object.entries(labels);
  if (entries.length === 0) return '';
  return '{' + entries.map(([k, v]) => `${k}="${escapeLabel(v)}"`).join(',') + '}';
}

/**
 * One counter series: adding to it is one addition; prom-client reads `value` at scrape time.
 * @example metrics.agentErrors.with({ code: 'ERR_NGROK_107' }).inc()
 */
export interface CounterSeries {
  inc(by?: number): void;
  readonly value: number;
}

/**
 * One gauge series.
 * @example metrics.tunnels.with({ proto: 'https' }).dec()
 */
export interface Series extends CounterSeries {
  dec(by?: number): void;
  set(value: number): void;
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

/**
 * A counter or gauge family, registered in a prom-client Registry as a Counter or Gauge whose
 * `collect` copies the series' values in when scraped. (A prom-client child hashes its labels on
 * every `inc`, about 1 µs; a SeriesValue is one addition.)
 * @example
 * const tunnels = metrics.tunnels.with({ proto: 'https' }); // look up once
 * tunnels.inc();
 */
export class Metric<S extends CounterSeries = Series> {
  private readonly series = new Map<string, { labels: Labels; series: S }>();

  constructor(
    readonly name: string,
    private readonly help: string,
    readonly type: 'counter' | 'gauge',
    labelNames: string[],
    registry: Registry,
    private readonly make: () => S,
  ) {
    const all = this.series;
    // One collector for both kinds: it copies the series' values in when scraped.
    const config = {
      name,
      help,
      labelNames,
      registers: [registry],
      collect(this: Counter<string> | Gauge<string>) {
        this.reset();
        for (const { labels, series } of all.values()) {
          if (this instanceof Gauge) this.set(labels, series.value);
          // A counter cannot go down; a bad value must not fail the whole scrape.
          else if (series.value >= 0 && series.value < Infinity) this.inc(labels, series.value);
        }
      },
    };
    if (type === 'counter') new Counter(config);
    else new Gauge(config);
  }

  /** The series for `labels`, created at zero; hold on to it on hot paths. */
  with(labels: Labels = {}): S {
    const key = labelKey(labels);
    let entry = this.series.get(key);
    if (!entry) {
      entry = { labels, series: this.make() };
      this.series.set(key, entry);
    }
    return entry.series;
  }

  /**
   * Drop a series (e.g. when its endpoint goes offline), so label sets do not grow forever. A
   * series object held past this counts nowhere.
   */
  remove(labels: Labels): void {
    this.series.delete(labelKey(labels));
  }

  /** This family in the text exposition, synchronously. */
  render(): string {
    let out = `# HELP ${this.name} ${this.help}\n# TYPE ${this.name} ${this.type}\n`;
    for (const [key, { series }] of this.series) out += `${this.name}${key} ${series.value}\n`;
    return out;
  }
}

/**
 * One histogram series: `observe` is a bucket search and three additions. (A prom-client
 * histogram child hashes its labels and validates them on every `observe`, 2-3.5 % of the edge's
 * busy time on keep-alive requests with three per request; docs/benchmarks.md, issue 29.)
 * @example metrics.edgeDuration.labels({ endpoint }).observe(0.00012)
 */
export class HistogramSeries {
  /** Observations per bucket (not cumulative), the last one for values above every bound. */
  readonly counts: Float64Array;
  /** The sum of the observations, in a typed array: a double field would be boxed anew. */
  private readonly total = new Float64Array(1);
  count = 0;

  constructor(
    private readonly bounds: readonly number[],
    readonly labels: Labels,
    private readonly onFirst: (series: HistogramSeries) => void,
  ) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  /** The sum of the observations. */
  get sum(): number {
    return this.total[0]!;
  }

  /** Count `value` (seconds); a non-finite value is dropped, as prom-client would refuse it. */
  observe(value: number): void {
    if (!Number.isFinite(value)) return;
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    this.counts[i]!++;
    this.total[0]! += value;
    if (this.count++ === 0) this.onFirst(this);
  }

  /** Forget every observation. */
  clear(): void {
    this.counts.fill(0);
    this.total[0] = 0;
    this.count = 0;
  }
}

interface ExportedValue {
  value: number;
  labels: Record<string, string | number>;
  metricName: string;
  sharedLabels?: Labels;
  exemplar?: null;
}

/**
 * A histogram family registered in a prom-client Registry as an object with prom-client's metric
 * interface (`get`, `getForPromString`, `reset`): the exposition, the JSON form and the order of
 * lines are those of a prom-client Histogram with the same buckets (a series appears from its
 * first observation, `_bucket` lines with `le` first, then `+Inf`, `_sum`, `_count`).
 * @example
 * const edge = family.labels({ endpoint }); // look up once
 * edge.observe(seconds);
 */
export class HistogramMetric {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  private readonly series = new Map<string, HistogramSeries>();
  /** Series observed at least once, in the order of their first observation. */
  private readonly live = new Map<string, HistogramSeries>();
  private readonly bounds: readonly number[];

  constructor(
    readonly name: string,
    readonly help: string,
    bounds: readonly number[],
    registry: Registry,
  ) {
    this.bounds = [...bounds].sort((a, b) => a - b);
    // The Registry asks a metric only for name, get(), getForPromString() and reset().
    registry.registerMetric(this as unknown as Parameters<Registry['registerMetric']>[0]);
  }

  /** The series for `labels`; hold on to it on hot paths. */
  labels(labels: Labels): HistogramSeries {
    const key = labelKey(labels);
    let series = this.series.get(key);
    if (!series) {
      // A series held past remove() or reset() comes back on its next observation only if it is
      // still the family's series for its labels.
      series = new HistogramSeries(this.bounds, labels, (s) => {
        if (this.series.get(key) === s) this.live.set(key, s);
      });
      this.series.set(key, series);
    }
    return series;
  }

  /** Drop a series; one held past this counts nowhere. */
  remove(labels: Labels): void {
    const key = labelKey(labels);
    this.series.delete(key);
    this.live.delete(key);
  }

  /** Forget every observation (prom-client's `resetMetrics`); held series count again from 0. */
  reset(): void {
    for (const series of this.series.values()) series.clear();
    this.live.clear();
  }

  /** prom-client's Registry renders this (`_bucket` with `le` first, then the series' labels). */
  getForPromString(): {
    name: string;
    help: string;
    type: string;
    values: ExportedValue[];
    aggregator: string;
  } {
    const values: ExportedValue[] = [];
    const bucket = `${this.name}_bucket`;
    for (const series of this.live.values()) {
      const shared = series.labels;
      let acc = 0;
      for (let i = 0; i < this.bounds.length; i++) {
        acc += series.counts[i]!;
        values.push({
          labels: { le: this.bounds[i]! },
          value: acc,
          metricName: bucket,
          sharedLabels: shared,
        });
      }
      values.push({
        labels: { le: '+Inf' },
        value: series.count,
        metricName: bucket,
        sharedLabels: shared,
      });
      values.push({
        labels: {},
        value: series.sum,
        metricName: `${this.name}_sum`,
        sharedLabels: shared,
      });
      values.push({
        labels: {},
        value: series.count,
        metricName: `${this.name}_count`,
        sharedLabels: shared,
      });
    }
    return {
      name: this.name,
      help: this.help,
      type: this.type,
      values,
      aggregator: this.aggregator,
    };
  }

  /** The JSON form (`registry.getMetricsAsJSON()`): the series' labels spread into each value's. */
  get(): {
    name: string;
    help: string;
    type: string;
    values: ExportedValue[];
    aggregator: string;
  } {
    const data = this.getForPromString();
    data.values = data.values.map(({ value, metricName, labels, sharedLabels }) =>
      // prom-client's key order, and `exemplar: null` on buckets, as its Histogram gives them.
      'le' in labels
        ? { value, metricName, exemplar: null, labels: { ...labels, ...sharedLabels } }
        : { value, metricName, labels: { ...labels, ...sharedLabels } },
    );
    return data;
  }
}

let processRegistry: Registry | undefined;

/**
 * Node's process metrics (`process_cpu_seconds_total`, `nodejs_eventloop_lag_seconds`,
 * `nodejs_gc_duration_seconds`, `nodejs_heap_size_used_bytes`, …), collected once per process:
 * they describe the process, and every collectDefaultMetrics call starts an event-loop monitor and
 * a GC observer that are never stopped.
 */
function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    // The event-loop delay monitor samples on a libuv timer; prom-client's default 10 ms wakes an
    // idle edge 100 times a second (about 4 ms of CPU per second on a 2-core node, more than a
    // thousand idle sessions cost). Every 100 ms still sees any stall long enough to matter.
    collectDefaultMetrics({ register: processRegistry, eventLoopMonitoringPrecision: 100 });
  }
  return processRegistry;
}

/**
 * The edge's metrics. Names follow Prometheus conventions (`_total` for counters, base units).
 * @example
 * metrics.requests.with({ endpoint: 'https://app.example.com', code: '200' }).inc();
 * res.type(metrics.contentType).send(await metrics.metrics());
 */
export class EdgeMetrics {
  private readonly own = new Registry();
  /** The counters and gauges, in declaration order, for `render()`; each helper adds its own. */
  private readonly families: Metric<CounterSeries>[] = [];
  readonly sessions = this.gauge('burrow_agent_sessions', 'Online agent sessions.', []);
  readonly tunnels = this.gauge('burrow_tunnels', 'Online tunnels by protocol.', ['proto']);
  readonly connections = this.counter(
    'burrow_connections_total',
    'Public connections accepted, by endpoint.',
    ['endpoint'],
  );
  readonly activeConnections = this.gauge(
    'burrow_connections_active',
    'Public connections open now, by endpoint.',
    ['endpoint'],
  );
  readonly bytesIn = this.counter(
    'burrow_bytes_received_total',
    'Bytes received from public clients, by endpoint.',
    ['endpoint'],
  );
  readonly bytesOut = this.counter(
    'burrow_bytes_sent_total',
    'Bytes sent to public clients, by endpoint.',
    ['endpoint'],
  );
  readonly requests = this.counter(
    'burrow_http_requests_total',
    'HTTP requests by endpoint and status code.',
    ['endpoint', 'code'],
  );
  readonly agentErrors = this.counter(
    'burrow_agent_errors_total',
    'Agent refusals by error code.',
    ['code'],
  );
  readonly limitRefusals = this.counter(
    'burrow_limit_refusals_total',
    'Clients refused for going over a limit, by limit (docs/security.md).',
    ['limit'],
  );
  readonly rpcPendingBytes = this.gauge(
    'burrow_agent_rpc_pending_bytes',
    'Bytes of agent requests being read or served now (docs/security.md, "Budgets").',
    [],
  );
  readonly policyStates = this.gauge(
    'burrow_policy_states',
    'Traffic-policy states of binds (runners), live or kept for a gone tunnel, by state.',
    ['state'],
  );
  readonly policyStateBytes = this.gauge(
    'burrow_policy_state_bytes',
    'Estimated bytes of the policies of live tunnels and of the states kept for gone ones, by state (bounded, docs/security.md).',
    ['state'],
  );
  readonly compiledPolicies = this.gauge(
    'burrow_policies_compiled',
    'Compiled traffic policies in the shared cache, and their estimated bytes, by unit.',
    ['unit'],
  );
  readonly streamsReleased = this.counter(
    'burrow_http_streams_released_total',
    'Tunnel streams given up because the public client closed, reset or timed out before its exchange ended, by ingress path (lean, full, upgrade).',
    ['path'],
  );
  /** Public request head received → response finished, by endpoint. */
  readonly requestDuration = this.histogram(
    'burrow_http_request_duration_seconds',
    'HTTP request duration from request head received to response finished, by endpoint.',
  );
  /** Request sent to the agent → response head received, by endpoint. */
  readonly upstreamDuration = this.histogram(
    'burrow_http_upstream_duration_seconds',
    'Time from request sent to the agent to response head received, by endpoint.',
  );
  /** The edge's own share of a request: head read → sent to the agent, plus the answer's head. */
  readonly edgeDuration = this.histogram(
    'burrow_http_edge_duration_seconds',
    "The edge's own time per request on the lean relay, by endpoint: from the request head read to the request sent to the agent, plus from the response head received to it written to the client.",
    EDGE_TIME_BUCKETS,
  );

  /**
   * The dashboard's charts: this node's requests, status classes, latency and bytes per endpoint
   * over the last hour and day, and the agents online (traffic-series.ts; the edge starts its timer).
   */
  readonly series = new TrafficSeries({ agents: () => this.sessions.with().value });

  /** This edge's registry: its own metrics and the process metrics. */
  readonly registry = Registry.merge([this.own, processMetrics()]);

  /** The Content-Type of `metrics()`. */
  get contentType(): string {
    return this.registry.contentType;
  }

  /** The Prometheus text exposition of every metric (what `GET /metrics` serves). */
  metrics(): Promise<string> {
    return this.registry.metrics();
  }

  /**
   * The counters and gauges only, synchronously, in the same format (for tests and quick reads;
   * the histograms and process metrics are in `metrics()`).
   */
  render(): string {
    return this.families.map((m) => m.render()).join('');
  }

  private counter(name: string, help: string, labelNames: string[]): Metric<CounterSeries> {
    return this.family(name, help, 'counter', labelNames);
  }

  private gauge(name: string, help: string, labelNames: string[]): Metric<Series> {
    return this.family(name, help, 'gauge', labelNames);
  }

  private family(
    name: string,
    help: string,
    type: 'counter' | 'gauge',
    labelNames: string[],
  ): Metric<Series> {
    const metric = new Metric(name, help, type, labelNames, this.own, () => new SeriesValue());
    this.families.push(metric);
    return metric;
  }

  private histogram(
    name: string,
    help: string,
    bounds: readonly number[] = DURATION_BUCKETS,
  ): HistogramMetric {
    return new HistogramMetric(name, help, bounds, this.own);
  }
}
