import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';

/**
 * A test OTLP/HTTP collector: decodes what it is sent with the OpenTelemetry packages' own
 * definitions (the protobufjs code @opentelemetry/otlp-transformer generates from
 * opentelemetry-proto), never with Burrow's encoder, so a test proves a real collector reads it.
 * Protobuf bodies and JSON bodies are both turned into the OTLP JSON mapping (hex ids, 64-bit
 * integers as decimal text), so tests compare one shape whichever protocol was sent.
 */

/** An attribute as decoded: the one kind of value that is set. */
export interface DecodedKeyValue {
  key: string;
  value: { stringValue?: string; intValue?: string; doubleValue?: number; boolValue?: boolean };
}

export interface DecodedLogRecord {
  timeUnixNano: string;
  observedTimeUnixNano?: string;
  severityNumber?: number;
  body?: { stringValue?: string };
  attributes: DecodedKeyValue[];
  traceId?: string;
  spanId?: string;
}

export interface DecodedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: DecodedKeyValue[];
  status?: { code?: number; message?: string };
  flags?: number;
}

export interface DecodedRequest<T> {
  /** The `service.name` of the resource, and the items of every scope. */
  resource: DecodedKeyValue[];
  scope: string;
  items: T[];
}

/** The generated message types this needs: decode the bytes, then turn them into plain objects. */
interface GeneratedType {
  decode(bytes: Uint8Array): object;
  toObject(message: object, options: Record<string, unknown>): Record<string, unknown>;
}

interface GeneratedRoot {
  opentelemetry: {
    proto: {
      collector: {
        logs: { v1: { ExportLogsServiceRequest: GeneratedType } };
        trace: { v1: { ExportTraceServiceRequest: GeneratedType } };
      };
    };
  };
}

// The package has no `exports` map, so its generated root (CommonJS) is reachable by path; its
// declared type is a bare protobufjs Root, hence the narrow interface above.
const root = createRequire(import.meta.url)(
  '@opentelemetry/otlp-transformer/build/src/generated/root.js',
) as GeneratedRoot;
const collector = root.opentelemetry.proto.collector;

/** Ids as bytes become hex (the JSON mapping's form); everything else is left alone. */
function hexIds(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(hexIds);
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value as Record<string, unknown>)) {
    out[key] =
      /^(traceId|spanId|parentSpanId)$/.test(key) && typeof v === 'string'
        ? Buffer.from(v, 'base64').toString('hex')
        : hexIds(v);
  }
  return out;
}

/**
 * A protobuf `ExportLogsServiceRequest` or `ExportTraceServiceRequest` as the JSON mapping.
 * @example decodeOtlp('logs', body).resourceLogs
 */
export function decodeOtlp(signal: 'logs' | 'traces', body: Uint8Array): Record<string, unknown> {
  const type =
    signal === 'logs'
      ? collector.logs.v1.ExportLogsServiceRequest
      : collector.trace.v1.ExportTraceServiceRequest;
  const message = type.decode(body);
  // longs as decimal text and enums as numbers, as OTLP/JSON has them; bytes as base64, then hex.
  return hexIds(
    type.toObject(message, { longs: String, enums: Number, bytes: String, defaults: false }),
  ) as Record<string, unknown>;
}

interface Scope {
  scope?: { name?: string };
  logRecords?: DecodedLogRecord[];
  spans?: DecodedSpan[];
}
type Blocks = Array<{
  resource?: { attributes?: DecodedKeyValue[] };
  scopeLogs?: Scope[];
  scopeSpans?: Scope[];
}>;

/** The requests of a decoded (or JSON) body: one per resource block, its scopes' items merged. */
function requestsOf<T>(signal: 'logs' | 'traces', doc: Record<string, unknown>) {
  const blocks = (signal === 'logs' ? doc.resourceLogs : doc.resourceSpans) as Blocks | undefined;
  return (blocks ?? []).map((block) => {
    const scopes = (signal === 'logs' ? block.scopeLogs : block.scopeSpans) ?? [];
    return {
      resource: block.resource?.attributes ?? [],
      scope: scopes[0]?.scope?.name ?? '',
      items: scopes.flatMap<T>((s) => (s.logRecords ?? s.spans ?? []) as T[]),
    } satisfies DecodedRequest<T>;
  });
}

export interface OtlpReceiver {
  /** `http://127.0.0.1:<port>`: the value of OTEL_EXPORTER_OTLP_ENDPOINT. */
  url: string;
  logs: DecodedLogRecord[];
  spans: DecodedSpan[];
  /** Each request as received: its path, content type and headers. */
  requests: Array<{ path: string; contentType: string; headers: Record<string, unknown> }>;
  /** Resource attributes of the last request of each signal. */
  resources: { logs: DecodedKeyValue[]; traces: DecodedKeyValue[] };
  close(): Promise<void>;
}

/**
 * Start a collector on 127.0.0.1 taking `/v1/logs` and `/v1/traces` in protobuf or JSON.
 * @example const otlp = await startOtlpReceiver(); process.env.OTEL_EXPORTER_OTLP_ENDPOINT = otlp.url;
 */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const receiver: Omit<OtlpReceiver, 'url' | 'close'> = {
    logs: [],
    spans: [],
    requests: [],
    resources: { logs: [], traces: [] },
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const path = (req.url ?? '').split('?')[0]!;
      const signal = path === '/v1/logs' ? 'logs' : path === '/v1/traces' ? 'traces' : undefined;
      const contentType = String(req.headers['content-type'] ?? '');
      receiver.requests.push({ path, contentType, headers: req.headers });
      if (!signal) {
        res.writeHead(404).end();
        return;
      }
      const body = Buffer.concat(chunks);
      let doc: Record<string, unknown>;
      try {
        doc =
          contentType === 'application/x-protobuf'
            ? decodeOtlp(signal, body)
            : (JSON.parse(body.toString('utf8')) as Record<string, unknown>);
      } catch {
        res.writeHead(400).end();
        return;
      }
      for (const request of requestsOf<DecodedLogRecord & DecodedSpan>(signal, doc)) {
        receiver.resources[signal] = request.resource;
        if (signal === 'logs') receiver.logs.push(...request.items);
        else receiver.spans.push(...request.items);
      }
      // An empty ExportLogsServiceResponse / ExportTraceServiceResponse: no partial success.
      const json = contentType !== 'application/x-protobuf';
      res
        .writeHead(200, { 'content-type': json ? 'application/json' : 'application/x-protobuf' })
        .end(json ? '{}' : Buffer.alloc(0));
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    ...receiver,
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * An attribute's value as text (integers are text in the JSON mapping already).
 * @example otlpAttr(span, 'url.path') // '/one'
 */
export function otlpAttr(item: { attributes: DecodedKeyValue[] }, key: string): string | undefined {
  const v = item.attributes.find((a) => a.key === key)?.value;
  if (!v) return undefined;
  return v.stringValue ?? v.intValue ?? (v.doubleValue ?? v.boolValue)?.toString();
}
