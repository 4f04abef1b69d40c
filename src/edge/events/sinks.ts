/**
 * One sink per event destination, each on the OTLP exporter's queue (metrics/otlp-events.ts), so
 * every kind batches, retries with backoff and drops (counting) past its bound alike; only how a
 * batch is written and sent differs:
 * - `webhook`: a JSON array of events POSTed through the egress guard, signed
 *   `X-Burrow-Signature: sha256=<hex HMAC-SHA256 of the body under the signing secret>`;
 * - `file`: JSON lines appended to the path (opened per batch, so a rotation that moves the file
 *   away is followed at the next batch: no copytruncate needed);
 * - `opentelemetry`: OTLP/HTTP logs through the egress guard, in the destination's protocol
 *   (`http/protobuf` unless it says `http/json`), and with a `traces_url`, each request's span too.
 */
import { createHmac } from 'node:crypto';
import { appendFile } from 'node:fs/promises';
import { egressFetch } from '../../core/egress-guard.js';
import type { DestinationDelivery } from '../../store/event-destinations.js';
import type { OtlpEndpoint } from '../metrics/otlp-env.js';
import {
  logsEncoder,
  otlpAttribute,
  otlpContentType,
  OtlpLogExporter,
  tracesEncoder,
  type OtlpQueueOptions,
} from '../metrics/otlp-events.js';
import type { OtlpLogRecord, OtlpOrigin, OtlpSpan } from '../metrics/otlp-protobuf.js';
import type { TrafficEvent } from './traffic-events.js';

/** The header a webhook receiver checks: `sha256=` and the hex HMAC-SHA256 of the raw body. */
export const SIGNATURE_HEADER = 'x-burrow-signature';

/**
 * The signature header's value for `body` under `secret`.
 * @example timingSafeEqual(Buffer.from(signBody(secret, raw)), Buffer.from(req.headers['x-burrow-signature']))
 */
export function signBody(secret: string, body: string | Uint8Array): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

/**
 * Any traffic event as an OTLP log record: `event.name` is its type and each of its fields an
 * attribute of the same name (what a TCP connection's event becomes; requests have
 * requestLogRecord, which also carries their trace).
 * @example exporter.add(eventLogRecord(tcpConnectionEvent(closed, Date.now()), Date.now()));
 */
export function eventLogRecord(event: TrafficEvent, nowMs: number): OtlpLogRecord {
  return {
    timeUnixNano: `${BigInt(Date.parse(event.event_timestamp)) * 1_000_000n}`,
    observedTimeUnixNano: `${BigInt(Math.round(nowMs)) * 1_000_000n}`,
    severityNumber: 9,
    severityText: 'INFO',
    body: { stringValue: event.event_type },
    attributes: [
      otlpAttribute('event.name', event.event_type),
      ...Object.entries(event.object).map(([key, value]) => otlpAttribute(key, value)),
    ],
  };
}

/** An event's OpenTelemetry forms, made only by the sinks that send them. */
export interface OtlpForms {
  log: () => OtlpLogRecord;
  /** A request's span, when it was traced. */
  span?: (() => OtlpSpan | undefined) | undefined;
}

/** A destination's queue: events in, batches out. */
export interface EventSink {
  add(event: TrafficEvent, otlp: OtlpForms): void;
  /** Whether it exports spans (then the edge traces requests: trace-context.ts). */
  readonly traces: boolean;
  flush(): Promise<void>;
  close(): Promise<void>;
}

/** How long one delivery may take before it counts as failed (and is retried). */
const DELIVERY_TIMEOUT_MS = 10_000;

async function post(
  url: string,
  headers: Record<string, string>,
  body: string | Uint8Array,
): Promise<number> {
  const res = await egressFetch(url, {
    method: 'POST',
    headers: { 'content-type': otlpContentType(body), ...headers },
    body,
    signal: AbortSignal.timeout(DELIVERY_TIMEOUT_MS),
  });
  await res.arrayBuffer();
  return res.status;
}

const jsonLines = (batch: TrafficEvent[]): string =>
  batch.map((event) => `${JSON.stringify(event)}\n`).join('');

/** A webhook's or file's sink: the events as they are. */
function eventSink(exporter: OtlpLogExporter<TrafficEvent>): EventSink {
  return {
    traces: false,
    add: (event) => exporter.add(event),
    flush: () => exporter.flush(),
    close: () => exporter.close(),
  };
}

/** An OpenTelemetry sink: log records, and spans when it has a traces exporter. */
function otlpSink(
  logs: OtlpLogExporter<OtlpLogRecord> | undefined,
  traces: OtlpLogExporter<OtlpSpan> | undefined,
): EventSink {
  const both = [logs, traces].filter((e) => e !== undefined);
  return {
    traces: traces !== undefined,
    add: (_event, otlp) => {
      logs?.add(otlp.log());
      const span = traces && otlp.span?.();
      if (span) traces.add(span);
    },
    flush: async () => {
      await Promise.all(both.map((e) => e.flush()));
    },
    close: async () => {
      await Promise.all(both.map((e) => e.close()));
    },
  };
}

/**
 * The sink of one destination; `queue` sets the batching and loss reporting shared by all.
 * @example const sink = destinationSink(delivery, { onLoss: (l) => log.warn(l) }); sink.add(event, { log: () => eventLogRecord(event, Date.now()) });
 */
export function destinationSink(d: DestinationDelivery, queue: OtlpQueueOptions): EventSink {
  const { webhook, file, opentelemetry } = d.target;
  if (webhook) {
    const secret = d.signingSecret ?? '';
    return eventSink(
      new OtlpLogExporter<TrafficEvent>({
        ...queue,
        url: webhook.url,
        encode: (batch) => JSON.stringify(batch),
        deliver: (body) => post(webhook.url, { [SIGNATURE_HEADER]: signBody(secret, body) }, body),
      }),
    );
  }
  if (file) {
    return eventSink(
      new OtlpLogExporter<TrafficEvent>({
        ...queue,
        url: `file://${file.path}`,
        encode: jsonLines,
        deliver: async (body) => {
          await appendFile(file.path, body, { mode: 0o640 });
          return 200;
        },
      }),
    );
  }
  const otel = opentelemetry!;
  const protocol = otel.protocol ?? 'http/protobuf';
  const headers = otel.headers ?? {};
  const tracesUrl = otel.traces_url;
  return otlpSink(
    new OtlpLogExporter<OtlpLogRecord>({
      ...queue,
      url: otel.url,
      encode: logsEncoder(protocol),
      deliver: (body) => post(otel.url, headers, body),
    }),
    tracesUrl
      ? new OtlpLogExporter<OtlpSpan>({
          ...queue,
          url: tracesUrl,
          encode: tracesEncoder(protocol),
          deliver: (body) => post(tracesUrl, headers, body),
        })
      : undefined,
  );
}

/**
 * The sink the `OTEL_EXPORTER_OTLP_*` variables set up (otlp-env.ts), each signal to its endpoint
 * in its protocol: the operator wrote them, so it posts with plain fetch (a collector on localhost
 * is the usual case) rather than through the egress guard.
 * @example environmentSink({ logs: otlpFromEnv(env, 'logs'), traces: otlpFromEnv(env, 'traces') }, origin, {}, (url) => (loss) => log.warn({ ...loss, url }))
 */
export function environmentSink(
  endpoints: { logs?: OtlpEndpoint | undefined; traces?: OtlpEndpoint | undefined },
  origin: OtlpOrigin,
  queue: Omit<OtlpQueueOptions, 'onLoss'>,
  /** The loss reporter of one endpoint: each names its own URL (the two may differ). */
  lossAt?: (url: string) => OtlpQueueOptions['onLoss'],
): EventSink {
  const { logs, traces } = endpoints;
  return otlpSink(
    logs &&
      new OtlpLogExporter<OtlpLogRecord>({
        ...queue,
        ...logs,
        onLoss: lossAt?.(logs.url),
        encode: logsEncoder(logs.protocol, origin),
      }),
    traces &&
      new OtlpLogExporter<OtlpSpan>({
        ...queue,
        ...traces,
        onLoss: lossAt?.(traces.url),
        encode: tracesEncoder(traces.protocol, origin),
      }),
  );
}
