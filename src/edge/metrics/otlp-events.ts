/**
 * Traffic events out to OpenTelemetry (issue 33, first part): each answered HTTP request as an
 * OTLP log record (`event.name` `http_request_complete.v0`, with the fields of ngrok's event of
 * that name as attributes), sent as OTLP/HTTP JSON to the endpoint the standard variables name
 * (`OTEL_EXPORTER_OTLP_LOGS_ENDPOINT`, else `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/logs`, with
 * `OTEL_EXPORTER_OTLP_HEADERS` / `OTEL_EXPORTER_OTLP_LOGS_HEADERS`), as every OpenTelemetry SDK
 * reads them. Events wait in a bounded queue and go in batches; a failed batch is retried with
 * backoff; past the bound the newest events are dropped and counted, never kept without end.
 */
import type { TrafficRecord } from './traffic-log.js';

/** How the exporter batches, retries and bounds what waits. */
export interface OtlpExportOptions {
  /** Full URL of the logs endpoint, e.g. `http://collector:4318/v1/logs`. */
  url: string;
  headers?: Record<string, string>;
  /** Events kept waiting at most (default 10,000); more are dropped and counted. */
  maxQueue?: number;
  /** Events per request at most (default 512). */
  maxBatch?: number;
  /** How long an event may wait for its batch to fill (default 1 s). */
  flushMs?: number;
  /** Tries per batch (default 5), the first retry after `backoffMs` (default 500), doubling. */
  maxTries?: number;
  backoffMs?: number;
  /**
   * Other destinations reuse this queue (src/edge/events/sinks.ts): `encode` makes one batch's
   * body (default: an OTLP `resourceLogs` document) and `deliver` sends it and answers an HTTP
   * status (default: POST to `url` with fetch), so webhooks and files batch, retry and drop alike.
   */
  encode?: ((batch: Record<string, unknown>[]) => string) | undefined;
  deliver?: ((body: string) => Promise<number>) | undefined;
  /** Told of a batch given up or events dropped (a log line, at most one a minute). */
  onLoss?: (what: { dropped: number; failed: number; error?: string }) => void;
}

/** The OTLP endpoint the standard variables name, or undefined when none is set. */
export function otlpFromEnv(env: NodeJS.ProcessEnv): OtlpExportOptions | undefined {
  const logs = env.OTEL_EXPORTER_OTLP_LOGS_ENDPOINT?.trim();
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  const url = logs || (base ? `${base.replace(/\/+$/, '')}/v1/logs` : '');
  if (url === '') return undefined;
  const headers: Record<string, string> = {};
  // `key1=value1,key2=value2`, values URL-encoded, as the OpenTelemetry specification says.
  for (const raw of [env.OTEL_EXPORTER_OTLP_HEADERS, env.OTEL_EXPORTER_OTLP_LOGS_HEADERS]) {
    for (const pair of (raw ?? '').split(',')) {
      const eq = pair.indexOf('=');
      if (eq > 0) headers[pair.slice(0, eq).trim()] = decodeURIComponent(pair.slice(eq + 1).trim());
    }
  }
  return { url, headers };
}

type AnyValue =
  { stringValue: string } | { intValue: string } | { doubleValue: number } | { boolValue: boolean };
/** An OTLP attribute. */
export interface KeyValue {
  key: string;
  value: AnyValue;
}

const str = (key: string, value: string): KeyValue => ({ key, value: { stringValue: value } });
const int = (key: string, value: number): KeyValue => ({
  key,
  value: { intValue: String(Math.round(value)) },
});

/** W3C `traceparent`: version 00, a trace id and parent id not all zeros, flags. */
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$/;

/** The trace and span ids of the request's `traceparent` header, when it has a valid one. */
function traceOf(headers: readonly string[]): { traceId: string; spanId: string } | undefined {
  for (let i = 0; i < headers.length; i += 2) {
    if (headers[i]!.toLowerCase() !== 'traceparent') continue;
    const m = TRACEPARENT.exec(headers[i + 1]!.trim().toLowerCase());
    if (!m || /^0+$/.test(m[1]!) || /^0+$/.test(m[2]!)) return undefined;
    return { traceId: m[1]!, spanId: m[2]! };
  }
  return undefined;
}

/**
 * One answered request as an OTLP log record; a request that came with a W3C `traceparent`
 * (which the edge passes to the service unchanged) carries its trace id, so the collector puts
 * the edge's record in the trace the client and the service share.
 */
export function requestLogRecord(r: TrafficRecord, nowMs: number): Record<string, unknown> {
  const attributes: KeyValue[] = [
    str('event.name', 'http_request_complete.v0'),
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
  return {
    ...traceOf(r.requestHeaders),
    timeUnixNano: `${BigInt(Math.round(r.startedAt)) * 1_000_000n}`,
    observedTimeUnixNano: `${BigInt(Math.round(nowMs)) * 1_000_000n}`,
    severityNumber: 9,
    severityText: 'INFO',
    body: { stringValue: `${r.method} ${r.host}${r.path} ${r.status ?? '-'}` },
    attributes,
  };
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
 * Batches log records to one OTLP/HTTP JSON endpoint.
 * @example const out = new OtlpLogExporter(otlpFromEnv(process.env)!); out.add(requestLogRecord(r, Date.now()));
 */
export class OtlpLogExporter {
  private queue: Record<string, unknown>[] = [];
  private timer: NodeJS.Timeout | undefined;
  private sending: Promise<void> | undefined;
  private closed = false;
  /** Events dropped because the queue was full, and batches given up after every try. */
  dropped = 0;
  failed = 0;
  sent = 0;

  constructor(private readonly options: OtlpExportOptions) {}

  add(record: Record<string, unknown>): void {
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

  private async send(batch: Record<string, unknown>[]): Promise<void> {
    const body = (this.options.encode ?? otlpLogsBody)(batch);
    const deliver = this.options.deliver ?? ((text: string) => this.post(text));
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

  private async post(body: string): Promise<number> {
    const res = await fetch(this.options.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...this.options.headers },
      body,
      signal: AbortSignal.timeout(10_000),
    });
    await res.arrayBuffer();
    return res.status;
  }
}

/**
 * One OTLP/HTTP JSON logs request carrying `records`.
 * @example await fetch(url, { method: 'POST', body: otlpLogsBody([requestLogRecord(r, Date.now())]) });
 */
export function otlpLogsBody(records: Record<string, unknown>[]): string {
  return JSON.stringify({
    resourceLogs: [
      {
        resource: { attributes: [str('service.name', 'burrow')] },
        scopeLogs: [{ scope: { name: 'burrow.traffic' }, logRecords: records }],
      },
    ],
  });
}
