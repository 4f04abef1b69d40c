import type { ActionSpec, CompiledAction, Terminal } from './types.js';

/** What counts and when it trips: the action's config, in milliseconds. */
interface BreakerSettings {
  /** Share of errors (0–1) in the window that trips the breaker. */
  errorThreshold: number;
  /** Fewer requests than this in the window never trip it (one early 502 is not an outage). */
  volumeThreshold: number;
  windowMs: number;
  trippedMs: number;
  buckets: number;
}

/**
 * A rolling-window circuit breaker: the window is split into `buckets` slots of requests and
 * 5xx answers. When the window holds at least `volumeThreshold` requests and their error share
 * reaches `errorThreshold`, it opens for `trippedMs`; then it closes with an empty window, so one
 * bad request right after does not reopen it at once.
 * @example
 * const b = new CircuitBreaker({ errorThreshold: 0.5, volumeThreshold: 2, windowMs: 10_000, trippedMs: 5_000, buckets: 10 });
 * b.record(500, 0); b.record(500, 1); b.isOpen(2) // true
 */
class CircuitBreaker {
  private readonly totals: number[];
  private readonly errors: number[];
  private readonly slotOf: number[];
  private openUntil = -Infinity;

  constructor(private readonly s: BreakerSettings) {
    this.totals = new Array<number>(s.buckets).fill(0);
    this.errors = new Array<number>(s.buckets).fill(0);
    this.slotOf = new Array<number>(s.buckets).fill(-1);
  }

  isOpen(now: number): boolean {
    if (now < this.openUntil) return true;
    if (this.openUntil !== -Infinity) {
      this.openUntil = -Infinity;
      this.totals.fill(0);
      this.errors.fill(0);
    }
    return false;
  }

  /** Seconds until the breaker closes (for retry-after); 0 when closed. */
  retryAfter(now: number): number {
    return Math.max(0, Math.ceil((this.openUntil - now) / 1000));
  }

  /** Count one answer; a 5xx is an error. Trips the breaker when the window says so. */
  record(status: number, now: number): void {
    const width = this.s.windowMs / this.s.buckets;
    const slot = Math.floor(now / width);
    const i = slot % this.s.buckets;
    if (this.slotOf[i] !== slot) {
      this.slotOf[i] = slot;
      this.totals[i] = 0;
      this.errors[i] = 0;
    }
    this.totals[i]!++;
    if (status >= 500) this.errors[i]!++;
    let total = 0;
    let failed = 0;
    for (let j = 0; j < this.s.buckets; j++) {
      if (slot - this.slotOf[j]! >= this.s.buckets) continue;
      total += this.totals[j]!;
      failed += this.errors[j]!;
    }
    // A threshold of 0 (ngrok allows 0.0–1.0) trips on any error, not on every request.
    if (total >= this.s.volumeThreshold && failed > 0 && failed / total >= this.s.errorThreshold) {
      this.openUntil = now + this.s.trippedMs;
    }
  }
}

const BREAKER_DURATION = { min: 1000, max: 3_600_000, range: '1s to 1h', example: '"10s"' };

/**
 * `circuit-breaker`: counts the answers of the endpoint (5xx are errors) over a rolling window;
 * once errors reach `error_threshold` (a share, 0–1; 0 trips on any error) of at least `volume_threshold` requests, it
 * answers 503 for `tripped_duration` without contacting the upstream. `enforce: false` only
 * records `would-circuit-open` events. State belongs to the binding (the endpoint).
 * @example { type: 'circuit-breaker', config: { error_threshold: 0.5, volume_threshold: 10, window_duration: '10s', tripped_duration: '30s' } }
 */
export const circuitBreakerAction: ActionSpec = {
  type: 'circuit-breaker',
  phases: ['on_http_request'],
  termination: 'conditionally',
  configKeys: [
    'error_threshold',
    'volume_threshold',
    'window_duration',
    'tripped_duration',
    'num_buckets',
    'enforce',
  ],
  compile(config) {
    const raw = config.value('error_threshold') ?? 0.5;
    if (typeof raw !== 'number') {
      return config.fail('error_threshold', 'must be a number from 0 to 1, e.g. 0.5');
    }
    const errorThreshold = raw;
    if (!(errorThreshold >= 0 && errorThreshold <= 1)) {
      config.fail('error_threshold', `must be from 0 to 1, not ${errorThreshold}`);
    }
    const settings: BreakerSettings = {
      errorThreshold,
      volumeThreshold: config.integer('volume_threshold', { min: 1, max: 1_000_000 }) ?? 10,
      windowMs: config.duration('window_duration', BREAKER_DURATION) ?? 10_000,
      trippedMs: config.duration('tripped_duration', BREAKER_DURATION) ?? 10_000,
      buckets: config.integer('num_buckets', { min: 1, max: 128 }) ?? 10,
    };
    const enforce = config.boolean('enforce') ?? true;
    const action: CompiledAction = {
      alwaysTerminates: false,
      run(c) {
        const breaker = c.state(action, () => new CircuitBreaker(settings));
        const now = c.now();
        if (breaker.isOpen(now)) {
          const retryAfter = breaker.retryAfter(now);
          if (enforce) {
            c.event('circuit-open', `the circuit is open; retry after ${retryAfter}s`);
            const refusal: Terminal = {
              kind: 'respond',
              status: 503,
              headers: { 'retry-after': String(retryAfter) },
              body: '',
            };
            return refusal;
          }
          c.event('would-circuit-open', 'the circuit is open (enforce is false: let through)');
        }
        c.afterResponse((status) => breaker.record(status, c.now()));
        return undefined;
      },
    };
    return action;
  },
};
