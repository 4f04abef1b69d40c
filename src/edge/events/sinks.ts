/**
 * One sink per event destination, each on the OTLP exporter's queue (metrics/otlp-events.ts), so
 * every kind batches, retries with backoff and drops (counting) past its bound alike; only how a
 * batch is written and sent differs:
 * - `webhook`: a JSON array of events POSTed through the egress guard, signed
 *   `X-Burrow-Signature: sha256=<hex HMAC-SHA256 of the body under the signing secret>`;
 * - `file`: JSON lines appended to the path (opened per batch, so a rotation that moves the file
 *   away is followed at the next batch: no copytruncate needed);
 * - `opentelemetry`: OTLP/HTTP JSON logs through the egress guard.
 */
import { createHmac } from 'node:crypto';
import { appendFile } from 'node:fs/promises';
import { egressFetch } from '../../core/egress-guard.js';
import type { DestinationDelivery } from '../../store/event-destinations.js';
import { otlpAttribute, OtlpLogExporter, type OtlpExportOptions } from '../metrics/otlp-events.js';
import type { TrafficEvent } from './traffic-events.js';

/** The header a webhook receiver checks: `sha256=` and the hex HMAC-SHA256 of the raw body. */
export const SIGNATURE_HEADER = 'x-burrow-signature';

/**
 * The signature header's value for `body` under `secret`.
 * @example timingSafeEqual(Buffer.from(signBody(secret, raw)), Buffer.from(req.headers['x-burrow-signature']))
 */
export function signBody(secret: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

/**
 * Any traffic event as an OTLP log record: `event.name` is its type and each of its fields an
 * attribute of the same name (what a TCP connection's event becomes; requests have
 * requestLogRecord, which also carries their trace).
 * @example exporter.add(eventLogRecord(tcpConnectionEvent(closed, Date.now()), Date.now()));
 */
export function eventLogRecord(event: TrafficEvent, nowMs: number): Record<string, unknown> {
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

/** A destination's queue: events in, batches out. */
export interface EventSink {
  /** `otlp` makes the OTLP record, when the sink wants one (requests carry their trace). */
  add(event: TrafficEvent, otlp: () => Record<string, unknown>): void;
  flush(): Promise<void>;
  close(): Promise<void>;
  readonly exporter: OtlpLogExporter;
}

/** How long one delivery may take before it counts as failed (and is retried). */
const DELIVERY_TIMEOUT_MS = 10_000;

async function post(url: string, headers: Record<string, string>, body: string): Promise<number> {
  const res = await egressFetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body,
    signal: AbortSignal.timeout(DELIVERY_TIMEOUT_MS),
  });
  await res.arrayBuffer();
  return res.status;
}

const jsonLines = (batch: Record<string, unknown>[]): string =>
  batch.map((event) => `${JSON.stringify(event)}\n`).join('');

function sinkOf(exporter: OtlpLogExporter, asOtlp: boolean): EventSink {
  return {
    exporter,
    add: (event, otlp) =>
      exporter.add(asOtlp ? otlp() : (event as unknown as Record<string, unknown>)),
    flush: () => exporter.flush(),
    close: () => exporter.close(),
  };
}

/**
 * The sink of one destination; `queue` sets the batching and loss reporting shared by all.
 * @example const sink = destinationSink(delivery, { onLoss: (l) => log.warn(l) }); sink.add(event, () => eventLogRecord(event, Date.now()));
 */
export function destinationSink(
  d: DestinationDelivery,
  queue: Omit<OtlpExportOptions, 'url'>,
): EventSink {
  const { webhook, file, opentelemetry } = d.target;
  if (webhook) {
    const secret = d.signingSecret ?? '';
    return sinkOf(
      new OtlpLogExporter({
        ...queue,
        url: webhook.url,
        encode: (batch) => JSON.stringify(batch),
        deliver: (body) => post(webhook.url, { [SIGNATURE_HEADER]: signBody(secret, body) }, body),
      }),
      false,
    );
  }
  if (file) {
    return sinkOf(
      new OtlpLogExporter({
        ...queue,
        url: `file://${file.path}`,
        encode: jsonLines,
        deliver: async (body) => {
          await appendFile(file.path, body, { mode: 0o640 });
          return 200;
        },
      }),
      false,
    );
  }
  const otel = opentelemetry!;
  return sinkOf(
    new OtlpLogExporter({
      ...queue,
      url: otel.url,
      deliver: (body) => post(otel.url, otel.headers ?? {}, body),
    }),
    true,
  );
}

/**
 * The sink the `OTEL_EXPORTER_OTLP_*` variables set up: the operator wrote them, so it posts with
 * plain fetch (a collector on localhost is the usual case) rather than through the egress guard.
 */
export function environmentSink(options: OtlpExportOptions): EventSink {
  return sinkOf(new OtlpLogExporter(options), true);
}
