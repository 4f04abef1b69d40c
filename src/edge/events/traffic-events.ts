/**
 * Traffic events as ngrok shapes them: an envelope (`event_id`, `event_type`, `event_timestamp`,
 * `object`) around the event's fields, named as ngrok names them (`conn.*` as its connection
 * variables, `http.*` for requests). Webhooks and files carry these envelopes as they are; an
 * OpenTelemetry destination gets each as a log record (src/edge/metrics/otlp-events.ts).
 */
import { newIdBody } from '../../core/ids.js';
import { geoOf, lookupIpIntel } from '../../policy/index.js';
import type { EventType } from '../../store/event-subscriptions.js';
import { clientIp } from '../registry/connect-tunnel.js';
import type { TrafficRecord } from '../metrics/traffic-log.js';
import type { RelayClosedHook } from '../ingress/proxy.js';

/** A field value: events carry text, numbers and booleans only. */
export type EventValue = string | number | boolean;

/** One event as delivered to webhooks and files. */
export interface TrafficEvent {
  /** `ev_…`, unique: a receiver that gets a batch twice (a retry) can drop what it has seen. */
  event_id: string;
  event_type: EventType;
  /** RFC 3339, when the request or connection ended. */
  event_timestamp: string;
  object: Record<string, EventValue>;
}

function envelope(type: EventType, endedAt: number, object: Record<string, EventValue>) {
  return {
    event_id: `ev_${newIdBody()}`,
    event_type: type,
    event_timestamp: new Date(endedAt).toISOString(),
    object,
  } satisfies TrafficEvent;
}

/**
 * What IP intelligence (`--geoip-*`) knows of the client, under the names of ngrok's variables
 * (`conn.client_ip.geo.location.*`, `conn.client_ip.as.*`); nothing when it knows nothing.
 */
function addGeo(object: Record<string, EventValue>, ip: string): void {
  const geo = geoOf(lookupIpIntel(ip));
  if (!geo) return;
  object['conn.client_ip.geo.location.country_code'] = geo.country_code;
  object['conn.client_ip.geo.location.subdivision'] = geo.subdivision;
  object['conn.client_ip.geo.location.city'] = geo.city;
  object['conn.client_ip.as.number'] = geo.as_number;
  object['conn.client_ip.as.organization'] = geo.as_organization;
}

/** `ip` without the IPv4-mapped prefix Node gives on a dual-stack listener. */
const plainIp = (ip: string | undefined): string => clientIp({ remoteAddress: ip });

/**
 * The `http_request_complete.v0` event of an answered request.
 * @example httpRequestEvent(record) // { event_type: 'http_request_complete.v0', object: { 'http.request.method': 'GET', … } }
 */
export function httpRequestEvent(r: TrafficRecord): TrafficEvent {
  const endedAt = r.startedAt + (r.durationMs ?? 0);
  const object: Record<string, EventValue> = {
    'conn.client_ip': r.clientIp,
    'conn.start_ts': new Date(r.startedAt).toISOString(),
    'endpoint.id': r.tunnelId,
    'http.request.id': r.id,
    'http.request.method': r.method,
    'http.request.url.scheme': r.scheme,
    'http.request.url.host': r.host,
    'http.request.url.path': r.path,
  };
  addGeo(object, r.clientIp);
  if (r.status !== undefined) object['http.response.status_code'] = r.status;
  if (r.durationMs !== undefined) object['http.response_time_ms'] = r.durationMs;
  return envelope('http_request_complete.v0', endedAt, object);
}

/**
 * The `tcp_connection_closed.v0` event of a TCP or TLS-passthrough connection that ended, from
 * what its public socket counted (`bytesRead`/`bytesWritten`: no work per chunk).
 * @example onRelayClosed: (closed) => out(tcpConnectionEvent(closed, Date.now()))
 */
export function tcpConnectionEvent(
  closed: Parameters<RelayClosedHook>[0],
  endedAt: number,
): TrafficEvent {
  const { socket, addresses, tunnel, proto, startedAt, error } = closed;
  const object: Record<string, EventValue> = {
    'conn.client_ip': plainIp(addresses.remoteAddress),
    'conn.client_port': addresses.remotePort ?? 0,
    'conn.server_ip': plainIp(addresses.localAddress),
    'conn.server_port': addresses.localPort ?? 0,
    'conn.start_ts': new Date(startedAt).toISOString(),
    'conn.end_ts': new Date(endedAt).toISOString(),
    'conn.duration_ms': endedAt - startedAt,
    'conn.bytes_in': socket.bytesRead ?? 0,
    'conn.bytes_out': socket.bytesWritten ?? 0,
    'endpoint.id': tunnel.id,
    'endpoint.proto': proto,
    'endpoint.url': tunnel.url ?? '',
  };
  addGeo(object, object['conn.client_ip'] as string);
  if (error !== undefined) {
    object['conn.error'] = error instanceof Error ? error.message : 'connect failed';
  }
  return envelope('tcp_connection_closed.v0', endedAt, object);
}
