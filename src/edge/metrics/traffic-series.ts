/**
 * The dashboard's charts: a small in-memory time series of this node's HTTP traffic, per endpoint
 * and in total, for the last hour (10-second buckets) and the last day (5-minute buckets), and the
 * agents online over the same times. Memory is fixed: each endpoint has two rings of typed arrays
 * (about 110 KB), at most `cap` endpoints have their own (later ones are counted in `other` until
 * an endpoint with no traffic for a day gives its place up). Counting a request is two array
 * increments in the current 10-second bucket; buckets move on a timer and when read, and each
 * closed 10-second bucket is added into its 5-minute bucket then.
 * @example
 * const series = new TrafficSeries({ agents: () => sessions.value });
 * series.start();
 * series.of('https://app.example.com').request(200, 0.012);
 * series.read('https://app.example.com', 'hour').requests;
 */

/** The ranges the series keep: bucket width and how many buckets. */
export const SERIES_RANGES = {
  hour: { stepMs: 10_000, buckets: 360 },
  day: { stepMs: 300_000, buckets: 288 },
} as const;

export type SeriesRange = keyof typeof SERIES_RANGES;

/** How many endpoints have series of their own; later ones count in {@link OTHER_ENDPOINTS}. */
export const SERIES_ENDPOINT_CAP = 50;

/** The series of endpoints beyond the cap. */
export const OTHER_ENDPOINTS = 'other';

/** Status classes, in array order. */
export const STATUS_CLASSES = ['1xx', '2xx', '3xx', '4xx', '5xx'] as const;
const CLASSES = STATUS_CLASSES.length;

/**
 * Latency bins: upper bounds 0.5 ms × √2^k (k = 0 … 30, up to 16.4 s) and one bin beyond. A
 * percentile is read within its bin (geometric interpolation), so it is within ±19% of the truth.
 */
const LATENCY_BASE_S = 0.0005;
const BINS = 32;

function binOf(seconds: number): number {
  if (seconds <= LATENCY_BASE_S) return 0;
  const k = Math.ceil(2 * Math.log2(seconds / LATENCY_BASE_S));
  return k < BINS - 1 ? k : BINS - 1;
}

function binUpper(k: number): number {
  return LATENCY_BASE_S * Math.SQRT2 ** k;
}

function classOf(status: number): number {
  const c = ((status / 100) | 0) - 1;
  // Anything outside 1xx–5xx (none is sent) counts as a server error.
  return c >= 0 && c < CLASSES ? c : CLASSES - 1;
}

/** One ring of buckets: status classes, latency bins and bytes per bucket. */
class Ring {
  readonly status: Uint32Array;
  readonly latency: Uint32Array;
  readonly bytesIn: Float64Array;
  readonly bytesOut: Float64Array;

  constructor(readonly buckets: number) {
    this.status = new Uint32Array(buckets * CLASSES);
    this.latency = new Uint32Array(buckets * BINS);
    this.bytesIn = new Float64Array(buckets);
    this.bytesOut = new Float64Array(buckets);
  }

  clear(i: number): void {
    this.status.fill(0, i * CLASSES, (i + 1) * CLASSES);
    this.latency.fill(0, i * BINS, (i + 1) * BINS);
    this.bytesIn[i] = 0;
    this.bytesOut[i] = 0;
  }

  /** Add bucket `from` of `source` into bucket `to` of this ring. */
  addBucket(source: Ring, from: number, to: number): void {
    for (let c = 0; c < CLASSES; c++)
      this.status[to * CLASSES + c]! += source.status[from * CLASSES + c]!;
    for (let b = 0; b < BINS; b++) this.latency[to * BINS + b]! += source.latency[from * BINS + b]!;
    this.bytesIn[to]! += source.bytesIn[from]!;
    this.bytesOut[to]! += source.bytesOut[from]!;
  }

  requests(i: number): number {
    let n = 0;
    for (let c = 0; c < CLASSES; c++) n += this.status[i * CLASSES + c]!;
    return n;
  }
}

/**
 * One endpoint's series; held by its EndpointMeter, so counting costs no lookup.
 * @example series.request(404, 0.003); series.bytesIn(512);
 */
export class EndpointSeries {
  /** @internal; an evicted endpoint's rings are `other`'s, so a meter still holding it counts there. */
  hour = new Ring(SERIES_RANGES.hour.buckets);
  /** @internal */
  day = new Ring(SERIES_RANGES.day.buckets);

  constructor(
    private readonly store: TrafficSeries,
    readonly endpoint: string,
  ) {}

  /** Count one request answered with `status`, and its duration when known (seconds). */
  request(status: number, seconds: number | undefined): void {
    const i = this.store.cursor;
    this.hour.status[i * CLASSES + classOf(status)]!++;
    if (seconds !== undefined && seconds >= 0 && seconds < Infinity) {
      this.hour.latency[i * BINS + binOf(seconds)]!++;
    }
  }

  bytesIn(n: number): void {
    this.hour.bytesIn[this.store.cursor]! += n;
  }

  bytesOut(n: number): void {
    this.hour.bytesOut[this.store.cursor]! += n;
  }

  /** Whether any request or byte was counted in the last day. */
  idle(): boolean {
    for (let i = 0; i < this.hour.buckets; i++) {
      if (this.hour.requests(i) > 0 || this.hour.bytesIn[i]! > 0 || this.hour.bytesOut[i]! > 0)
        return false;
    }
    for (let i = 0; i < this.day.buckets; i++) {
      if (this.day.requests(i) > 0 || this.day.bytesIn[i]! > 0 || this.day.bytesOut[i]! > 0)
        return false;
    }
    return true;
  }
}

/** Latency percentiles, in milliseconds. */
export interface LatencyPercentiles {
  p50: number | null;
  p95: number | null;
  p99: number | null;
}

/** What `read` returns: one array per series, one value per bucket, oldest first. */
export interface SeriesView {
  range: SeriesRange;
  step_seconds: number;
  /** The endpoint read, `null` for this node's total. */
  endpoint: string | null;
  /** Bucket starts, Unix seconds. */
  time: number[];
  /** Requests per bucket; null before this node started. */
  requests: Array<number | null>;
  requests_per_second: Array<number | null>;
  status: Record<(typeof STATUS_CLASSES)[number], Array<number | null>>;
  latency_ms: { p50: Array<number | null>; p95: Array<number | null>; p99: Array<number | null> };
  bytes_in: Array<number | null>;
  bytes_out: Array<number | null>;
  /** Agent sessions on this node: the most seen in each bucket. */
  agents_online: Array<number | null>;
  /** The whole range at once. */
  totals: {
    requests: number;
    status: Record<(typeof STATUS_CLASSES)[number], number>;
    latency_ms: LatencyPercentiles;
    bytes_in: number;
    bytes_out: number;
  };
}

function percentile(bins: Uint32Array, offset: number, total: number, q: number): number | null {
  if (total === 0) return null;
  const rank = q * total;
  let seen = 0;
  for (let b = 0; b < BINS; b++) {
    const n = bins[offset + b]!;
    if (n > 0 && seen + n >= rank) {
      if (b === BINS - 1) return binUpper(BINS - 2) * 1000;
      const frac = (rank - seen) / n;
      const upper = binUpper(b);
      const value = b === 0 ? upper * frac : (upper / Math.SQRT2) * Math.SQRT2 ** frac;
      return Math.round(value * 1e6) / 1e3;
    }
    seen += n;
  }
  return null;
}

export interface TrafficSeriesOptions {
  /** How many agents are online now (sampled each bucket and when read). */
  agents?: () => number;
  now?: () => number;
  cap?: number;
}

/**
 * This node's traffic series: one {@link EndpointSeries} per endpoint label (up to the cap), and
 * the agents online. `start` moves the buckets on a timer; `stop` ends it.
 */
export class TrafficSeries {
  /** @internal index of the current hour bucket: what the data path writes to. */
  cursor = 0;
  /** The current hour bucket's number (`floor(now / 10 s)`). */
  private epoch: number;
  /** The current day bucket's number (`floor(now / 5 min)`). */
  private dayEpoch: number;
  /** The first hour bucket this node counted in: earlier buckets read as null. */
  private readonly firstEpoch: number;
  private readonly endpoints = new Map<string, EndpointSeries>();
  private readonly other: EndpointSeries;
  private readonly agentsHour = new Float64Array(SERIES_RANGES.hour.buckets);
  private readonly agentsDay = new Float64Array(SERIES_RANGES.day.buckets);
  private readonly now: () => number;
  private readonly agents: () => number;
  private readonly cap: number;
  private timer: NodeJS.Timeout | undefined;

  constructor(options: TrafficSeriesOptions = {}) {
    this.now = options.now ?? Date.now;
    this.agents = options.agents ?? (() => 0);
    this.cap = options.cap ?? SERIES_ENDPOINT_CAP;
    this.epoch = Math.floor(this.now() / SERIES_RANGES.hour.stepMs);
    this.firstEpoch = this.epoch;
    this.dayEpoch = this.dayOf(this.epoch);
    this.cursor = this.epoch % SERIES_RANGES.hour.buckets;
    this.other = new EndpointSeries(this, OTHER_ENDPOINTS);
    this.sampleAgents();
  }

  /** The series of `endpoint`: its own, or `other` when the cap is reached. */
  of(endpoint: string): EndpointSeries {
    let series = this.endpoints.get(endpoint);
    if (series) return series;
    if (this.endpoints.size >= this.cap && !this.evictIdle()) return this.other;
    series = new EndpointSeries(this, endpoint);
    this.endpoints.set(endpoint, series);
    return series;
  }

  /** The endpoints with series of their own (and `other` once used), sorted. */
  endpointNames(): string[] {
    const names = [...this.endpoints.keys()].sort();
    if (!this.other.idle()) names.push(OTHER_ENDPOINTS);
    return names;
  }

  /** Move the buckets on every 10 seconds (unref'd: it keeps no process alive). */
  start(): void {
    if (this.timer) return;
    const tick = (): void => {
      this.advance();
      const step = SERIES_RANGES.hour.stepMs;
      this.timer = setTimeout(tick, step - (this.now() % step) + 5);
      this.timer.unref();
    };
    tick();
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Move the buckets on to `now`: each closed 10-second bucket is added into its 5-minute one. */
  advance(now = this.now()): void {
    const { buckets } = SERIES_RANGES.hour;
    const target = Math.floor(now / SERIES_RANGES.hour.stepMs);
    if (target <= this.epoch) {
      this.sampleAgents();
      return;
    }
    if (target - this.epoch > buckets) {
      // Away for over an hour: the open bucket goes into its day; every other one was already.
      this.fold(this.epoch);
      for (const s of this.all()) for (let i = 0; i < buckets; i++) s.hour.clear(i);
      this.agentsHour.fill(0);
    } else {
      for (let e = this.epoch; e < target; e++) {
        this.fold(e);
        const next = (e + 1) % buckets;
        for (const s of this.all()) s.hour.clear(next);
        this.agentsHour[next] = 0;
      }
    }
    this.epoch = target;
    this.cursor = target % buckets;
    this.moveDay(this.dayOf(target));
    this.sampleAgents();
  }

  /** The series of `endpoint` (undefined: this node's total) over the last hour or day. */
  read(endpoint: string | undefined, range: SeriesRange): SeriesView {
    this.advance();
    const { stepMs, buckets } = SERIES_RANGES[range];
    const sources =
      endpoint === undefined
        ? [...this.all()]
        : endpoint === OTHER_ENDPOINTS
          ? [this.other]
          : [this.endpoints.get(endpoint)].filter((s) => s !== undefined);
    // Sum the sources into one ring; the day's last bucket also takes the open 10-second bucket.
    const ring = new Ring(buckets);
    for (const s of sources) {
      const own = range === 'hour' ? s.hour : s.day;
      for (let i = 0; i < buckets; i++) ring.addBucket(own, i, i);
      if (range === 'day') ring.addBucket(s.hour, this.cursor, this.dayEpoch % buckets);
    }
    const last = range === 'hour' ? this.epoch : this.dayEpoch;
    const first = range === 'hour' ? this.firstEpoch : this.dayOf(this.firstEpoch);
    const agents = range === 'hour' ? this.agentsHour : this.agentsDay;
    if (range === 'day') {
      const d = this.dayEpoch % buckets;
      agents[d] = Math.max(agents[d]!, this.agentsHour[this.cursor]!);
    }
    const view: SeriesView = {
      range,
      step_seconds: stepMs / 1000,
      endpoint: endpoint ?? null,
      time: [],
      requests: [],
      requests_per_second: [],
      status: { '1xx': [], '2xx': [], '3xx': [], '4xx': [], '5xx': [] },
      latency_ms: { p50: [], p95: [], p99: [] },
      bytes_in: [],
      bytes_out: [],
      agents_online: [],
      totals: {
        requests: 0,
        status: { '1xx': 0, '2xx': 0, '3xx': 0, '4xx': 0, '5xx': 0 },
        latency_ms: { p50: null, p95: null, p99: null },
        bytes_in: 0,
        bytes_out: 0,
      },
    };
    const allBins = new Uint32Array(BINS);
    for (let e = last - buckets + 1; e <= last; e++) {
      view.time.push((e * stepMs) / 1000);
      const before = e < first;
      const i = ((e % buckets) + buckets) % buckets;
      const n = before ? 0 : ring.requests(i);
      const push = <T>(into: Array<T | null>, value: T) => into.push(before ? null : value);
      push(view.requests, n);
      push(view.requests_per_second, Math.round((n / (stepMs / 1000)) * 1000) / 1000);
      STATUS_CLASSES.forEach((name, c) => {
        const v = ring.status[i * CLASSES + c]!;
        push(view.status[name], v);
        if (!before) view.totals.status[name] += v;
      });
      let timed = 0;
      for (let b = 0; b < BINS; b++) timed += ring.latency[i * BINS + b]!;
      if (!before) for (let b = 0; b < BINS; b++) allBins[b]! += ring.latency[i * BINS + b]!;
      view.latency_ms.p50.push(percentile(ring.latency, i * BINS, timed, 0.5));
      view.latency_ms.p95.push(percentile(ring.latency, i * BINS, timed, 0.95));
      view.latency_ms.p99.push(percentile(ring.latency, i * BINS, timed, 0.99));
      push(view.bytes_in, ring.bytesIn[i]!);
      push(view.bytes_out, ring.bytesOut[i]!);
      push(view.agents_online, agents[i]!);
      if (!before) {
        view.totals.requests += n;
        view.totals.bytes_in += ring.bytesIn[i]!;
        view.totals.bytes_out += ring.bytesOut[i]!;
      }
    }
    let timed = 0;
    for (let b = 0; b < BINS; b++) timed += allBins[b]!;
    view.totals.latency_ms = {
      p50: percentile(allBins, 0, timed, 0.5),
      p95: percentile(allBins, 0, timed, 0.95),
      p99: percentile(allBins, 0, timed, 0.99),
    };
    return view;
  }

  private *all(): Iterable<EndpointSeries> {
    yield* this.endpoints.values();
    yield this.other;
  }

  /** Add hour bucket `e` (closing) into its day bucket. */
  private fold(e: number): void {
    const i = e % SERIES_RANGES.hour.buckets;
    this.moveDay(this.dayOf(e));
    const d = this.dayEpoch % SERIES_RANGES.day.buckets;
    for (const s of this.all()) s.day.addBucket(s.hour, i, d);
    this.agentsDay[d] = Math.max(this.agentsDay[d]!, this.agentsHour[i]!);
  }

  private dayOf(hourEpoch: number): number {
    return Math.floor((hourEpoch * SERIES_RANGES.hour.stepMs) / SERIES_RANGES.day.stepMs);
  }

  /** Move the day ring on to day bucket `target`, clearing the buckets it enters. */
  private moveDay(target: number): void {
    const { buckets } = SERIES_RANGES.day;
    if (target <= this.dayEpoch) return;
    for (let e = Math.max(this.dayEpoch + 1, target - buckets + 1); e <= target; e++) {
      const d = e % buckets;
      for (const s of this.all()) s.day.clear(d);
      this.agentsDay[d] = 0;
    }
    this.dayEpoch = target;
  }

  private sampleAgents(): void {
    const n = this.agents();
    if (n > this.agentsHour[this.cursor]!) this.agentsHour[this.cursor] = n;
  }

  /** Give the place of an endpoint with no traffic for a day to a new one. */
  private evictIdle(): boolean {
    for (const [name, series] of this.endpoints) {
      if (series.idle()) {
        this.endpoints.delete(name);
        series.hour = this.other.hour;
        series.day = this.other.day;
        return true;
      }
    }
    return false;
  }
}
