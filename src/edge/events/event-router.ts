/**
 * Traffic events out (issue 33): the edge's answered requests and closed TCP/TLS connections, as
 * ngrok's `http_request_complete.v0` and `tcp_connection_closed.v0` events, to the destinations
 * the API's subscriptions name (`/event_destinations`, `/event_subscriptions`), and to the
 * OpenTelemetry collector the standard `OTEL_EXPORTER_OTLP_*` variables name (every type; and
 * each request as a span when traces are exported there). While any traces are exported the
 * ingress gives each request the edge's span ({@link EventRouter.tracing}), which its span and
 * log record carry and the service is told of in `traceparent`. The routing table is rebuilt from the store on `reload()` (an API change, a cluster notice, a
 * timer); a destination whose settings did not change keeps its queue across reloads.
 */
import type { Logger } from '../../core/logger.js';
import type { DestinationDelivery } from '../../store/event-destinations.js';
import type { EventSubscription, EventType } from '../../store/event-subscriptions.js';
import type { RelayClosedHook } from '../ingress/proxy.js';
import { otlpFromEnv, otlpResourceFromEnv, type OtlpSignal } from '../metrics/otlp-env.js';
import {
  BURROW_ORIGIN,
  requestLogRecord,
  requestSpan,
  type OtlpQueueOptions,
} from '../metrics/otlp-events.js';
import type { TrafficRecord } from '../metrics/traffic-log.js';
import {
  destinationSink,
  environmentSink,
  eventLogRecord,
  type EventSink,
  type OtlpForms,
} from './sinks.js';
import { httpRequestEvent, tcpConnectionEvent, type TrafficEvent } from './traffic-events.js';

/** What the router reads at each reload (the repositories, or a test's fixed lists). */
export interface EventConfigSource {
  deliveries(): Promise<DestinationDelivery[]>;
  subscriptions(): Promise<EventSubscription[]>;
}

export interface EventRouterOptions {
  source: EventConfigSource;
  logger: Logger;
  env?: NodeJS.ProcessEnv | undefined;
  /** Batching for API destinations (tests shorten `flushMs`); default the exporter's. */
  queue?: Omit<OtlpQueueOptions, 'onLoss'> | undefined;
}

/**
 * `make`'s value, made at the first call only: every OpenTelemetry sink an event goes to (the
 * environment's, each destination's) shares one log record and one span rather than each making it.
 */
function once<T>(make: () => T): () => T {
  let made: { value: T } | undefined;
  return () => (made ??= { value: make() }).value;
}

/** At most one loss line a minute per destination: one that is down would log every batch. */
const LOSS_LOG_MS = 60_000;
/** How long closing waits for queued events to go out. */
const CLOSE_WAIT_MS = 5000;

interface Routed {
  key: string;
  sink: EventSink;
}

/**
 * @example
 * const events = new EventRouter({ source: { deliveries: () => repos.eventDestinations.deliveries(), subscriptions: () => repos.eventSubscriptions.all() }, logger });
 * await events.reload();
 * new TrafficLog({ onAnswered: (r) => events.httpRequest(r) });
 */
export class EventRouter {
  private sinks = new Map<string, Routed>();
  private routes = new Map<EventType, EventSink[]>();
  private readonly envSink: EventSink | undefined;
  /** Whether a destination routed requests to takes spans (set at each reload). */
  private routedTraces = false;
  private reloading: Promise<void> = Promise.resolve();

  constructor(private readonly options: EventRouterOptions) {
    const env = options.env ?? process.env;
    const logs = this.fromEnv(env, 'logs');
    const traces = this.fromEnv(env, 'traces');
    if (logs || traces) {
      const origin = { ...BURROW_ORIGIN, resource: otlpResourceFromEnv(env) };
      this.envSink = environmentSink({ logs, traces }, origin, options.queue ?? {}, (url) =>
        this.lossLogger(url),
      );
      const describe = (e: typeof logs) => e && `${e.url} (${e.protocol})`;
      options.logger.info(
        { logs: describe(logs), traces: describe(traces) },
        'traffic events go to OpenTelemetry (OTEL_EXPORTER_OTLP_*)',
      );
    }
  }

  /** Whether any event would go anywhere now (the edge skips building events otherwise). */
  get active(): boolean {
    return this.envSink !== undefined || this.routes.size > 0;
  }

  /**
   * Whether request spans go anywhere now: the environment's traces endpoint, or a destination
   * with a `traces_url` that requests are routed to. Only then does the ingress trace requests
   * (and alter their `traceparent`); otherwise requests go on as they came.
   */
  get tracing(): boolean {
    return this.envSink?.traces === true || this.routedTraces;
  }

  /** Re-read destinations and subscriptions; reloads asked for meanwhile run one after another. */
  reload(): Promise<void> {
    this.reloading = this.reloading.then(
      () => this.load(),
      () => this.load(),
    );
    return this.reloading;
  }

  /** An answered HTTP request. */
  httpRequest(record: TrafficRecord): void {
    if (!this.active) return;
    this.emit(httpRequestEvent(record), {
      log: once(() => requestLogRecord(record, Date.now())),
      span: once(() => requestSpan(record)),
    });
  }

  /** A TCP or TLS-passthrough connection that ended (the ingress's relay hook). */
  readonly tcpClosed: RelayClosedHook = (closed) => {
    if (!this.active) return;
    const event = tcpConnectionEvent(closed, Date.now());
    this.emit(event, { log: once(() => eventLogRecord(event, Date.now())) });
  };

  /** Send what waits everywhere (tests, shutdown). */
  async flush(): Promise<void> {
    await Promise.all([...this.allSinks()].map((s) => s.flush()));
  }

  /** Send what waits, for at most `waitMs` (a destination that is down must not hold a shutdown). */
  async close(waitMs = CLOSE_WAIT_MS): Promise<void> {
    const closed = Promise.all([...this.allSinks()].map((s) => s.close()));
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise<void>((resolve) => (timer = setTimeout(resolve, waitMs)));
    await Promise.race([closed, waited]);
    clearTimeout(timer);
    this.sinks.clear();
    this.routes.clear();
  }

  private *allSinks(): Iterable<EventSink> {
    if (this.envSink) yield this.envSink;
    for (const { sink } of this.sinks.values()) yield sink;
  }

  private emit(event: TrafficEvent, otlp: OtlpForms): void {
    this.envSink?.add(event, otlp);
    for (const sink of this.routes.get(event.event_type) ?? []) sink.add(event, otlp);
  }

  private async load(): Promise<void> {
    const [deliveries, subscriptions] = await Promise.all([
      this.options.source.deliveries(),
      this.options.source.subscriptions(),
    ]);
    const next = new Map<string, Routed>();
    for (const d of deliveries) {
      const key = JSON.stringify([d.target, d.signingSecret]);
      const kept = this.sinks.get(d.id);
      next.set(
        d.id,
        kept?.key === key
          ? kept
          : {
              key,
              sink: destinationSink(d, {
                ...this.options.queue,
                onLoss: this.lossLogger(d.id),
              }),
            },
      );
    }
    // One sink per destination per type, however many subscriptions route the type there.
    const routes = new Map<EventType, Set<EventSink>>();
    for (const sub of subscriptions) {
      for (const { type } of sub.sources) {
        for (const id of sub.destination_ids) {
          const sink = next.get(id)?.sink;
          if (sink) routes.set(type, (routes.get(type) ?? new Set()).add(sink));
        }
      }
    }
    const dropped = [...this.sinks].filter(([id, r]) => next.get(id) !== r);
    this.sinks = next;
    this.routes = new Map([...routes].map(([type, set]) => [type, [...set]]));
    this.routedTraces = [...(routes.get('http_request_complete.v0') ?? [])].some((s) => s.traces);
    // What a removed or changed destination still held is sent before its queue goes.
    await Promise.all(dropped.map(([, r]) => r.sink.close()));
  }

  /** One signal's endpoint from the standard variables; a setting it cannot use is logged. */
  private fromEnv(env: NodeJS.ProcessEnv, signal: OtlpSignal) {
    try {
      return otlpFromEnv(env, signal);
    } catch (err) {
      this.options.logger.warn(
        { err: (err as Error).message },
        `OpenTelemetry ${signal} not exported: unsupported setting`,
      );
      return undefined;
    }
  }

  private lossLogger(destination: string): NonNullable<OtlpQueueOptions['onLoss']> {
    let last = 0;
    return (what) => {
      if (Date.now() - last < LOSS_LOG_MS) return;
      last = Date.now();
      this.options.logger.warn({ ...what, destination }, 'traffic events lost');
    };
  }
}
