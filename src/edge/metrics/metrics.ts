/**
 * The edge's Prometheus metrics, on prom-client: one Registry per edge (so several edges in one
 * process do not collide), holding the edge's families and Node's process metrics. Hot paths hold
 * on to a labelled series (`counter.with({ endpoint })`) or histogram series (`labels(...)`).
 */
import { Registry, collectDefaultMetrics } from 'prom-client';
import { TrafficSeries } from './traffic-series.js';
import {
  DURATION_BUCKETS,
  EDGE_TIME_BUCKETS,
  HistogramMetric,
  Metric,
  SeriesValue,
  type CounterSeries,
  type Series,
} from './metric-families.js';

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
