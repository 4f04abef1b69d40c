/**
 * The OpenTelemetry exporter settings every OpenTelemetry SDK reads from the environment, read the
 * same way here, so an operator configures Burrow as any other service of theirs: per signal
 * (`logs`, `traces`) the endpoint (`OTEL_EXPORTER_OTLP_<SIGNAL>_ENDPOINT` as it is, else
 * `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/<signal>`), the headers (`OTEL_EXPORTER_OTLP_HEADERS`, then
 * the signal's, which win), the protocol (`OTEL_EXPORTER_OTLP_<SIGNAL>_PROTOCOL`, else
 * `OTEL_EXPORTER_OTLP_PROTOCOL`, else `http/protobuf`, the specification's default), the
 * switches `OTEL_SDK_DISABLED=true` and `OTEL_<SIGNAL>_EXPORTER=none`, and the resource
 * (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`).
 */
import { OTLP_PROTOCOLS, type OtlpProtocol } from '../../store/event-destinations.js';
import type { KeyValue } from './otlp-protobuf.js';

// `grpc`, the specification's third protocol, is not offered: the edge speaks OTLP over HTTP.
export type { OtlpProtocol };

export type OtlpSignal = 'logs' | 'traces';

/** Where and how one signal is exported. */
export interface OtlpEndpoint {
  /** Full URL, e.g. `http://collector:4318/v1/logs`. */
  url: string;
  headers: Record<string, string>;
  protocol: OtlpProtocol;
}

/** `key1=value1,key2=value2`, values URL-encoded, as the OpenTelemetry specification says. */
function pairs(raw: string | undefined): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (const pair of (raw ?? '').split(',')) {
    const eq = pair.indexOf('=');
    if (eq <= 0) continue;
    let value = pair.slice(eq + 1).trim();
    try {
      value = decodeURIComponent(value);
    } catch {
      // A stray `%` is kept as written rather than losing the whole setting.
    }
    out.push([pair.slice(0, eq).trim(), value]);
  }
  return out;
}

/** The protocol a value names; anything else is refused naming the variable and the values allowed. */
function otlpProtocol(value: string, variable: string): OtlpProtocol {
  const v = value.trim().toLowerCase();
  if ((OTLP_PROTOCOLS as readonly string[]).includes(v)) return v as OtlpProtocol;
  throw new Error(`${variable}: must be one of ${OTLP_PROTOCOLS.join(', ')} (got ${value})`);
}

/**
 * The endpoint the standard variables set for `signal`, or undefined when none is set (or the
 * signal is switched off). An unsupported protocol (`grpc`) throws, naming the variable.
 * @example otlpFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }, 'traces') // { url: 'http://c:4318/v1/traces', headers: {}, protocol: 'http/protobuf' }
 */
export function otlpFromEnv(
  env: NodeJS.ProcessEnv,
  signal: OtlpSignal = 'logs',
): OtlpEndpoint | undefined {
  const upper = signal.toUpperCase();
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return undefined;
  if (env[`OTEL_${upper}_EXPORTER`]?.trim().toLowerCase() === 'none') return undefined;
  const own = env[`OTEL_EXPORTER_OTLP_${upper}_ENDPOINT`]?.trim();
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  const url = own || (base ? `${base.replace(/\/+$/, '')}/v1/${signal}` : '');
  if (url === '') return undefined;
  const headers = Object.fromEntries([
    ...pairs(env.OTEL_EXPORTER_OTLP_HEADERS),
    ...pairs(env[`OTEL_EXPORTER_OTLP_${upper}_HEADERS`]),
  ]);
  const ownProtocol = `OTEL_EXPORTER_OTLP_${upper}_PROTOCOL`;
  const [variable, value] = env[ownProtocol]?.trim()
    ? [ownProtocol, env[ownProtocol]]
    : ['OTEL_EXPORTER_OTLP_PROTOCOL', env.OTEL_EXPORTER_OTLP_PROTOCOL];
  const protocol = value?.trim() ? otlpProtocol(value, variable) : 'http/protobuf';
  return { url, headers, protocol };
}

/**
 * The resource Burrow's telemetry describes: `OTEL_RESOURCE_ATTRIBUTES`, with `service.name`
 * from `OTEL_SERVICE_NAME`, else from those attributes, else `burrow`.
 * @example otlpResourceFromEnv({ OTEL_SERVICE_NAME: 'edge-eu' }) // [{ key: 'service.name', value: { stringValue: 'edge-eu' } }]
 */
export function otlpResourceFromEnv(env: NodeJS.ProcessEnv): KeyValue[] {
  const attributes = new Map(pairs(env.OTEL_RESOURCE_ATTRIBUTES));
  const name = env.OTEL_SERVICE_NAME?.trim() || attributes.get('service.name') || 'burrow';
  attributes.delete('service.name');
  return [
    { key: 'service.name', value: { stringValue: name } },
    ...[...attributes].map(([key, value]) => ({ key, value: { stringValue: value } })),
  ];
}
