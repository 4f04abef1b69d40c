/**
 * Traffic events out to OpenTelemetry (issue 33): each answered HTTP request as an OTLP log record
 * (`event.name` `http_request_complete.v0`, with the fields of ngrok's event of that name as
 * attributes) and, while traces are exported, as a SERVER span of the edge in the request's trace
 * (trace-context.ts), sent as OTLP/HTTP protobuf or JSON (otlp-protobuf.ts) to the endpoints the
 * standard variables name (otlp-env.ts) or an OpenTelemetry destination's. Events wait in a
 * bounded queue and go in batches; a failed batch is retried with backoff; past the bound the
 * newest events are dropped and counted, never kept without end.
 */
import {
  encodeLogsRequest,
  encodeTraceRequest,
  jsonLogsRequest,
  jsonTraceRequest,
  type KeyValue,
  type OtlpLogRecord,
  type OtlpOrigin,
  type OtlpSpan,
} from './otlp-protobuf.js';
import type { OtlpProtocol } from './otlp-env.js';
import { incomingTrace } from './trace-context.js';
import type { TrafficRecord } from './traffic-log.js';

/** How a queue batches, retries and bounds what waits (every destination kind shares these). */
export interface OtlpQueueOptions {
  /** Events kept waiting at most (default 10,000); more are dropped and counted. */
  maxQueue?: number;
  /** Events per request at most (default 512). */
  maxBatch?: number;
  /** How long an event may wait for its batch to fill (default 1 s). */
  flushMs?: number;
  /** Tries per batch (default 5), the first retry after `backoffMs` (default 500), doubling. */
  maxTries?: number;
  backoffMs?: number;
  /** Told of a batch given up or events dropped (a log line, at most one a minute). */
  onLoss?: (what: { dropped: number; failed: number; error?: string }) => void;
}

/** A queue to one endpoint; `T` is what waits in it (an OTLP record, span, or an event). */
export interface OtlpExportOptions<T = Record<string, unknown>> extends OtlpQueueOptions {
  /** Full URL of the endpoint, e.g. `http://collector:4318/v1/logs`. */
  url: string;
  headers?: Record<string, string>;
  /**
   * Other destinations reuse this queue (src/edge/events/sinks.ts): `encode` makes one batch's
   * body (default: an OTLP/HTTP JSON `resourceLogs` document; bytes are sent as protobuf) and
   * `deliver` sends it and answers an HTTP status (default: POST to `url` with fetch), so
   * webhooks and files batch, retry and drop alike.
   */
  encode?: ((batch: T[]) => string | Uint8Array) | undefined;
  deliver?: ((body: string | Uint8Array) => Promise<number>) | undefined;
}

/**
 * The content type of an OTLP/HTTP body: protobuf bytes or JSON text.
 * @example fetch(url, { method: 'POST', headers: { 'content-type': otlpContentType(body) }, body })
 */
export function otlpContentType(body: string | Uint8Array): string {
  return typeof body === 'string' ? 'application/json' : 'application/x-protobuf';
}

const str = (key: string, value: string): KeyValue => ({ key, value: { stringValue: value } });
/** An integer attribute; one past 2^53 (no exact integer text) goes as a double instead. */
const int = (key: string, value: number): KeyValue =>
  Number.isSafeInteger(Math.round(value))
    ? { key, value: { intValue: String(Math.round(value)) } }
    : { key, value: { doubleValue: value } };

/** Epoch milliseconds (and a fraction of one) as OTLP's nanoseconds, as decimal text. */
function nanos(ms: number, plusMs = 0): string {
  return `${BigInt(Math.round(ms)) * 1_000_000n + BigInt(Math.round(plusMs * 1e6))}`;
}

/** What the log record and the span of a request both say of it. */
function requestAttributes(r: TrafficRecord): KeyValue[] {
  const attributes: KeyValue[] = [
    str('http.request.method', r.method),
    str('url.scheme', r.scheme),
    str('server.address', r.host),
    str('url.path', r.path),
    str('client.address', r.clientIp),
    str('burrow.tunnel_id', r.tunnelId),
    str('burrow.request_id', r.id),
  ];
  if (r.status !== undefined) attributes.push(int('http.response.status_code', r.status));
  if (r.durationMs !== undefined) {
    attributes.push({ key: 'burrow.duration_ms', value: { doubleValue: r.durationMs } });
  }
  return attributes;
}

/**
 * One answered request as an OTLP log record. With traces exported, it carries the edge's span
 * (`r.trace`); otherwise a request that came with a valid W3C `traceparent` (which then reaches
 * the service unchanged) carries that trace and parent, so the collector still puts the edge's
 * record in the trace the client and the service share.
 * @example exporter.add(requestLogRecord(record, Date.now()))
 */
export function requestLogRecord(r: TrafficRecord, nowMs: number): OtlpLogRecord {
  const incoming = r.trace ? undefined : incomingTrace(r.requestHeaders);
  const trace = r.trace ?? (incoming && { traceId: incoming.traceId, spanId: incoming.parentId });
  return {
    ...(trace && { traceId: trace.traceId, spanId: trace.spanId }),
    timeUnixNano: nanos(r.startedAt),
    observedTimeUnixNano: nanos(nowMs),
    severityNumber: 9,
    severityText: 'INFO',
    body: { stringValue: `${r.method} ${r.host}${r.path} ${r.status ?? '-'}` },
    attributes: [str('event.name', 'http_request_complete.v0'), ...requestAttributes(r)],
  };
}

/**
 * The edge's SERVER span of an answered request, when it was traced (`r.trace`, set while traces
 * are exported): named by method and host (the edge knows no route), from its arrival to its
 * end, an error when the answer was a 5xx (the OpenTelemetry HTTP conventions for servers).
 * @example const span = requestSpan(record); if (span) traces.add(span);
 */
export function requestSpan(r: TrafficRecord): OtlpSpan | undefined {
  const trace = r.trace;
  if (!trace) return undefined;
  const failed = r.status === undefined || r.status >= 500;
  return {
    traceId: trace.traceId,
    spanId: trace.spanId,
    parentSpanId: trace.parentSpanId,
    name: `${r.method} ${r.host}`,
    kind: 2,
    startTimeUnixNano: nanos(r.startedAt),
    endTimeUnixNano: nanos(r.startedAt, r.durationMs ?? 0),
    attributes: requestAttributes(r),
    status: failed ? { code: 2, message: `HTTP ${r.status ?? 'no answer'}` } : { code: 0 },
    flags: Number.parseInt(trace.flags, 16),
  };
}

/** Who the edge's telemetry says it comes from, unless the environment names it otherwise. */
export const BURROW_ORIGIN: OtlpOrigin = {
  resource: [str('service.name', 'burrow')],
  scope: 'burrow.traffic',
};

/**
 * The batch encoder of log records in `protocol`.
 * @example new OtlpLogExporter({ url, encode: logsEncoder('http/protobuf') })
 */
export function logsEncoder(
  protocol: OtlpProtocol,
  origin: OtlpOrigin = BURROW_ORIGIN,
): (batch: OtlpLogRecord[]) => string | Uint8Array {
  return protocol === 'http/json'
    ? (batch) => jsonLogsRequest(origin, batch)
    : (batch) => encodeLogsRequest(origin, batch);
}

/**
 * The batch encoder of spans in `protocol`.
 * @example new OtlpLogExporter<OtlpSpan>({ url, encode: tracesEncoder('http/json') })
 */
export function tracesEncoder(
  protocol: OtlpProtocol,
  origin: OtlpOrigin = BURROW_ORIGIN,
): (batch: OtlpSpan[]) => string | Uint8Array {
  return protocol === 'http/json'
    ? (batch) => jsonTraceRequest(origin, batch)
    : (batch) => encodeTraceRequest(origin, batch);
}

/**
 * One OTLP attribute of a text, number (an integer as `intValue`) or boolean value.
 * @example otlpAttribute('conn.bytes_in', 512) // { key: 'conn.bytes_in', value: { intValue: '512' } }
 */
export function otlpAttribute(key: string, value: string | number | boolean): KeyValue {
  if (typeof value === 'string') return str(key, value);
  if (typeof value === 'boolean') return { key, value: { boolValue: value } };
  return Number.isInteger(value) ? int(key, value) : { key, value: { doubleValue: value } };
}

/**
 * Batches what is added (log records, spans, or any destination's events) to one endpoint.
 * @example const out = new OtlpLogExporter({ url, encode: logsEncoder('http/protobuf') }); out.add(requestLogRecord(r, Date.now()));
 */
export class OtlpLogExporter<T = Record<string, unknown>> {
  private queue: T[] = [];
  private timer: NodeJS.Timeout | undefined;
  private sending: Promise<void> | undefined;
  private closed = false;
  /** Events dropped because the queue was full, and batches given up after every try. */
  dropped = 0;
  failed = 0;
  sent = 0;

  constructor(private readonly options: OtlpExportOptions<T>) {}

  add(record: T): void {
    if (this.closed) return;
    if (this.queue.length >= (this.options.maxQueue ?? 10_000)) {
      this.dropped++;
      this.options.onLoss?.({ dropped: this.dropped, failed: this.failed });
      return;
    }
    this.queue.push(record);
    if (this.queue.length >= (this.options.maxBatch ?? 512)) this.kick();
    else this.timer ??= setTimeout(() => this.kick(), this.options.flushMs ?? 1000).unref();
  }

  /** Send what waits now (the batches one after another), e.g. before the process ends. */
  async flush(): Promise<void> {
    while (this.queue.length > 0 || this.sending) {
      this.kick();
      await this.sending;
    }
  }

  async close(): Promise<void> {
    await this.flush();
    this.closed = true;
  }

  private kick(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.sending || this.queue.length === 0) return;
    const batch = this.queue.splice(0, this.options.maxBatch ?? 512);
    this.sending = this.send(batch).finally(() => {
      this.sending = undefined;
      if (this.queue.length > 0) this.kick();
    });
  }

  private async send(batch: T[]): Promise<void> {
    let body: string | Uint8Array;
    try {
      body = this.options.encode
        ? this.options.encode(batch)
        : jsonLogsRequest(BURROW_ORIGIN, batch as unknown as OtlpLogRecord[]);
    } catch (err) {
      // A batch that cannot be encoded is lost, not thrown out of the timer that sent it.
      this.failed++;
      this.dropped += batch.length;
      this.options.onLoss?.({ dropped: this.dropped, failed: this.failed, error: String(err) });
      return;
    }
    const deliver = this.options.deliver ?? ((payload: string | Uint8Array) => this.post(payload));
    const tries = this.options.maxTries ?? 5;
    let delay = this.options.backoffMs ?? 500;
    let error = '';
    for (let attempt = 1; attempt <= tries; attempt++) {
      try {
        const status = await deliver(body);
        if (status >= 200 && status < 300) {
          this.sent += batch.length;
          return;
        }
        error = `HTTP ${status}`;
        // Only 429 and 5xx are worth another try (the OTLP specification's retryable answers).
        if (status !== 429 && status < 500) break;
      } catch (err) {
        error = (err as Error).message;
      }
      if (attempt < tries) {
        await new Promise((resolve) => setTimeout(resolve, delay));
        delay *= 2;
      }
    }
    this.failed++;
    this.dropped += batch.length;
    this.options.onLoss?.({ dropped: this.dropped, failed: this.failed, error });
  }

  private async post(body: string | Uint8Array): Promise<number> {
    const res = await fetch(this.options.url, {
      method: 'POST',
      headers: { 'content-type': otlpContentType(body), ...this.options.headers },
      body,
      signal: AbortSignal.timeout(10_000),
    });
    await res.arrayBuffer();
    return res.status;
  }
}
