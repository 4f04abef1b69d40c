/**
 * The traffic inspector's hook in the HTTP ingress: one call per routed exchange, on either wire,
 * which records it in a {@link TrafficLog}. Kept apart from http-ingress.ts so that the ingress
 * stays about forwarding; the only coupling is the {@link ExchangeTap}. The log redacts
 * credentials as it records, so the ingress hands it headers as they came.
 */
import type { ExchangeDone, ExchangeTap } from './exchange.js';
import {
  BodyBuffer,
  REPLAY_HEADER,
  type TrafficLog,
  type TrafficRecord,
} from '../../metrics/traffic-log.js';

/** A record's response headers until its response starts: one list for all. */
const NO_HEADERS: readonly string[] = Object.freeze([]);

/** What is known of a request when it arrives. */
type RequestSide = Omit<
  TrafficRecord,
  | 'id'
  | 'seq'
  | 'startedAt'
  | 'status'
  | 'responseHeaders'
  | 'durationMs'
  | 'requestBody'
  | 'responseBody'
  | 'credentialsShown'
>;

/**
 * Add a request to the log, its answer still to come. The
 * record is spelled out, not spread: V8 builds `{ ...request, more }` on a slow path (10 µs per
 * request here, a sixth of the edge's time on keep-alive requests).
 */
function addRequest(log: TrafficLog, request: RequestSide): TrafficRecord {
  return log.add({
    host: request.host,
    tunnelId: request.tunnelId,
    scheme: request.scheme,
    method: request.method,
    path: request.path,
    clientIp: request.clientIp,
    requestHeaders: request.requestHeaders,
    replayOf: request.replayOf,
    startedAt: Date.now(),
    status: undefined,
    responseHeaders: NO_HEADERS,
    durationMs: undefined,
    requestBody: undefined,
    responseBody: undefined,
  });
}

/**
 * The inspector's hook for requests on the lean relay: the same record, and, for a host whose
 * bodies are captured, their first bytes, handed over by the relay as they pass
 * (`ExchangeBodies`: the request as the client sent it, the response as the agent sent it).
 * @example ingress option: `exchangeTap: trafficExchangeTap(log)`
 */
export function trafficExchangeTap(log: TrafficLog): ExchangeTap {
  return {
    begin({ host, tunnel, scheme, head, clientIp: ip, span }) {
      const started = performance.now();
      let replayOf: string | undefined;
      for (let i = 0; i < head.raw.length; i += 2) {
        if (
          head.raw[i]!.length === REPLAY_HEADER.length &&
          head.raw[i]!.toLowerCase() === REPLAY_HEADER
        ) {
          replayOf = head.raw[i + 1];
        }
      }
      const record = addRequest(log, {
        host,
        tunnelId: tunnel.id,
        scheme,
        method: head.method,
        path: head.target,
        clientIp: ip,
        requestHeaders: head.raw,
        replayOf,
      });
      if (span) record.trace = span;
      const bodies = log.captures(host)
        ? { request: new BodyBuffer(), response: new BodyBuffer() }
        : undefined;
      const done: ExchangeDone = (status, headers) =>
        log.answer(record, {
          status,
          responseHeaders: headers,
          durationMs: performance.now() - started,
          requestBody: bodies?.request.done(),
          responseBody: bodies?.response.done(),
        });
      return { done, bodies };
    },
  };
}
