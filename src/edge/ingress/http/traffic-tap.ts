/**
 * The traffic inspector's hook in the HTTP ingress: one call per routed request, which records
 * it in a {@link TrafficLog}. Kept apart from http-ingress.ts so that the ingress stays about
 * forwarding; the only coupling is `tap(req, res, tunnel)`. The log redacts credentials as it
 * records, so both paths hand it headers as they came.
 */
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { hostOfHostPort } from '../../../core/host-port.js';
import type { ExchangeDone, ExchangeTap } from './exchange.js';
import { clientIp } from '../../registry/connect-tunnel.js';
import {
  BodyBuffer,
  REPLAY_HEADER,
  type TrafficLog,
  type TrafficRecord,
} from '../../metrics/traffic-log.js';
import type { OnlineTunnel } from '../../registry/tunnel-registry.js';
import type { SpanContext } from '../../metrics/trace-context.js';

type WriteArgs = [chunk: unknown, ...rest: unknown[]];

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
 * Add a request to the log, its answer still to come; both HTTP paths record through this. The
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
    responseHeaders: {},
    durationMs: undefined,
    requestBody: undefined,
    responseBody: undefined,
  });
}

/**
 * Records `req` and, once it is answered, its status, headers and duration; with capture on for
 * the host, the first bytes of both bodies too.
 * While traces are exported, `span` (the edge's span of the request) goes on the record.
 * @example ingress option: `tap: (req, res, tunnel, span) => trafficTap(log, req, res, tunnel, span)`
 */
export function trafficTap(
  log: TrafficLog,
  req: IncomingMessage,
  res: ServerResponse,
  tunnel: OnlineTunnel,
  span?: SpanContext,
): void {
  const host = hostOfHostPort(req.headers.host ?? '').toLowerCase();
  const capture = log.captures(host);
  const started = process.hrtime.bigint();
  const replayOf = req.headers[REPLAY_HEADER];
  const record = addRequest(log, {
    host,
    tunnelId: tunnel.id,
    scheme: (req.socket as Duplex & { encrypted?: boolean }).encrypted === true ? 'https' : 'http',
    method: req.method ?? 'GET',
    path: req.url ?? '/',
    clientIp: clientIp(req.socket),
    requestHeaders: req.rawHeaders,
    replayOf: typeof replayOf === 'string' ? replayOf : undefined,
  });
  // Set on the kept record only when traced: untraced records keep their shape.
  if (span) record.trace = span;
  let requestBody: BodyBuffer | undefined;
  let responseBody: BodyBuffer | undefined;
  if (capture) {
    requestBody = new BodyBuffer();
    responseBody = new BodyBuffer();
    const reqBody = requestBody;
    // A 'data' listener of our own would switch the request to flowing mode before the ingress
    // pipes it (after an asynchronous policy, say) and lose bytes; so listen once it is piped.
    const pipe = req.pipe.bind(req);
    req.pipe = <T extends NodeJS.WritableStream>(dest: T, options?: { end?: boolean }) => {
      const piped = pipe(dest, options);
      req.on('data', (chunk: Buffer) => reqBody.add(chunk));
      return piped;
    };
    const resBody = responseBody;
    // Whatever reaches the client passes res.write/res.end, whichever way the ingress writes it.
    const write = res.write.bind(res) as (...args: WriteArgs) => boolean;
    const end = res.end.bind(res) as (...args: unknown[]) => ServerResponse;
    res.write = ((...args: WriteArgs) => {
      if (typeof args[0] === 'string' || Buffer.isBuffer(args[0])) resBody.add(args[0]);
      return write(...args);
    }) as typeof res.write;
    res.end = ((...args: unknown[]) => {
      if (typeof args[0] === 'string' || Buffer.isBuffer(args[0])) resBody.add(args[0]);
      return end(...args);
    }) as typeof res.end;
  }
  // Headers given to writeHead without setHeader before (the ingress writes the agent's raw list
  // so) are written straight to the wire: getHeaders() never sees them, so note them here.
  let headOnly: OutgoingHttpHeaders = {};
  const writeHead = res.writeHead.bind(res) as (...args: unknown[]) => ServerResponse;
  res.writeHead = (...args: unknown[]) => {
    const given = args[1] !== undefined && typeof args[1] !== 'string' ? args[1] : args[2];
    if (Array.isArray(given)) headOnly = responseHeaderObject(given.map(String));
    else if (given !== null && typeof given === 'object')
      headOnly = lowerCaseNames(given as OutgoingHttpHeaders);
    return writeHead(...args);
  };
  res.once('close', () => {
    const set = res.getHeaders();
    log.answer(record, {
      status: res.headersSent ? res.statusCode : 499,
      responseHeaders: !res.headersSent ? {} : Object.keys(set).length > 0 ? set : headOnly,
      durationMs: Number(process.hrtime.bigint() - started) / 1e6,
      requestBody: requestBody?.done(),
      responseBody: responseBody?.done(),
    });
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
          responseHeaders: responseHeaderObject(headers),
          durationMs: performance.now() - started,
          requestBody: bodies?.request.done(),
          responseBody: bodies?.response.done(),
        });
      return { done, bodies };
    },
  };
}

/** `headers` with lower-case names, as `getHeaders()` gives them. */
function lowerCaseNames(headers: OutgoingHttpHeaders): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) out[name.toLowerCase()] = value;
  return out;
}

/** Raw response headers as Node's `getHeaders()` gives them: lower-case names, repeats in arrays. */
function responseHeaderObject(raw: readonly string[]): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    const value = raw[i + 1]!;
    const known = out[name];
    if (known === undefined) out[name] = value;
    else out[name] = Array.isArray(known) ? [...known, value] : [String(known), value];
  }
  return out;
}
