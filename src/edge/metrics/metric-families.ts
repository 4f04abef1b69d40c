/**
 * The metric families the edge's metrics are made of (metrics.ts): counters and gauges whose
 * labelled series the hot paths hold on to, and histograms with fixed buckets, each rendered in
 * Prometheus's text format and, for prom-client's registry, in its own export shape.
 */
import { Counter, Gauge, type Registry } from 'prom-client';

export type Labels = Record<string, string>;

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

export class SeriesValue implements Series {
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
