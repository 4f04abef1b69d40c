/**
 * What the lean relay knows of one request and its response while they pass, and the bytes it
 * writes for them: the request head as the agent gets it, the response head as the client gets
 * it.
 */
import type { EndpointMeter } from '../../metrics/endpoint-meters.js';
import type { ConnectionState, PublicConnections } from './http-connections.js';
import { applyToRawHeaders, REQUEST_OWNED } from './header-changes.js';
import { forwardedHeaders, rewrittenHost } from './http-forwarding.js';
import { h2RequestHeaders, upstreamScheme } from './h2-upstream.js';
import type { OutgoingHttpHeaders } from 'node:http2';
import type { LeanPolicyRun } from './http-policy-lean.js';
import type { OnlineTunnel } from '../../registry/tunnel-registry.js';
import type { SpanContext } from '../../metrics/trace-context.js';
import { ChunkedFramer, LengthFramer, type BodyFramer } from './body-framing.js';
import { HeadScanner } from './head-syntax.js';
import type { RequestHead } from './request-head.js';
import { parseResponseHead, type ResponseFraming, type ResponseHead } from './response-head.js';
import type { Duplex } from 'node:stream';
import type { HttpRelayContext, LeanRoute } from './http-relay.js';
import type { BodyTransforms } from './body-transforms.js';

/** Told when an exchange ends, for the traffic inspector: the status and response headers. */
export type ExchangeDone = (status: number, headers: readonly string[]) => void;

/** Where the inspector keeps a body it captures: the bytes as they pass, in order. */
export interface BodySink {
  add(bytes: Buffer): void;
}

/**
 * The bodies the inspector captures for an exchange: the request's as the client sent it, the
 * response's as the agent sent it, both without their HTTP/1.1 framing (a chunked body decoded),
 * before any policy rewrites them.
 */
export interface ExchangeBodies {
  request: BodySink;
  response: BodySink;
}

/** The inspector's record of one exchange: told when it ends; its bodies, when it captures them. */
export interface ExchangeRecording {
  done: ExchangeDone;
  bodies: ExchangeBodies | undefined;
}

/** The traffic inspector's hook into the lean relay. */
export interface ExchangeTap {
  /** Record the start of an exchange (and capture its bodies, when its host captures them). */
  begin(start: {
    host: string;
    tunnel: OnlineTunnel;
    scheme: 'http' | 'https';
    head: RequestHead;
    clientIp: string;
    /** The edge's span of the request, while traces are exported. */
    span?: SpanContext | undefined;
  }): ExchangeRecording;
}

/** A body that ends when the agent ends the stream. */
export class CloseFramer implements BodyFramer {
  done = false;
  take(buf: Buffer, start: number): number {
    return buf.length - start;
  }
  /** The stream ended: so did the body. */
  end(): void {
    this.done = true;
  }
}

/**
 * The framer for a request body, or undefined when it has none; a chunked one hands its data,
 * decoded, to `data` when given (the inspector's capture, a rewrite).
 * @example requestFramer(head)?.take(buf, 0)
 */
export function requestFramer(
  head: RequestHead,
  data?: (bytes: Buffer) => void,
): BodyFramer | undefined {
  if (head.chunked) return chunkedFramer(data);
  return head.contentLength ? new LengthFramer(head.contentLength) : undefined;
}

/**
 * The framer for a response body; a chunked one hands its data, decoded, to `data` when given.
 * @example responseFramer({ kind: 'length', length: 12 })
 */
export function responseFramer(
  framing: ResponseFraming,
  data?: (bytes: Buffer) => void,
): BodyFramer {
  switch (framing.kind) {
    case 'none':
      return new LengthFramer(0);
    case 'length':
      return new LengthFramer(framing.length);
    case 'chunked':
      return chunkedFramer(data);
    case 'close':
      return new CloseFramer();
  }
}

function chunkedFramer(data: ((bytes: Buffer) => void) | undefined): ChunkedFramer {
  return data ? new ChunkedFramer({ data, trailer: ignoreTrailer }) : new ChunkedFramer();
}

function ignoreTrailer(): void {}

/**
 * What hands a body's bytes to `sink`: the data callback of a decoding framer.
 * @example responseFramer(response.framing, captured(bodies.response))
 */
export function captured(sink: BodySink): (bytes: Buffer) => void {
  return (bytes) => sink.add(bytes);
}

/** One request on a public connection, from its head to the end of its response. */
export class Exchange {
  readonly started = performance.now();
  sentAt = 0;
  upstreamAt = 0;
  /** When the response head was written to the client. */
  answeredAt = 0;
  /** The request body's framer while it is relayed; undefined once done (or none). */
  requestBody: BodyFramer | undefined;
  response: ResponseHead | undefined;
  responseBody: BodyFramer | undefined;
  /** Response bytes read so far while its head is incomplete. */
  pendingHead: Buffer | undefined;
  readonly responseScanner = new HeadScanner();
  /** Bytes were written to the public client for this exchange. */
  answered = false;
  /** The stream carried an earlier exchange (a failure may be a stale stream, worth one retry). */
  reused = false;
  retried = false;
  /** The response head said `Connection: close` to the client. */
  closing = false;
  /** The stream cannot carry another exchange (the agent sent more than the response). */
  spoiled = false;
  /** The edge's span of the request (while traces are exported): its traceparent, every try. */
  span: SpanContext | undefined;
  /** The body's transforms, when the policy changes it on its way (body-transforms.ts). */
  transforms: BodyTransforms | undefined;
  /** The transforms' last bytes went out. */
  flushed = false;
  /** request-body-find-replace's rewrite, while the request body streams through it. */
  requestTransforms: BodyTransforms | undefined;
  /** Where the inspector captures the bodies, when it does (beginExchange sets it). */
  bodies: ExchangeBodies | undefined;
  /** An HTTP/2 request's body, read whole for its policy: sent in place of its spent stream. */
  heldBody: Buffer | undefined;

  constructor(
    readonly head: RequestHead,
    readonly tunnel: OnlineTunnel,
    readonly meter: EndpointMeter,
    readonly state: ConnectionState | undefined,
    readonly done: ExchangeDone | undefined,
    /** The meters of the endpoints that forwarded the request here (forward-internal). */
    readonly passed: readonly EndpointMeter[],
    /** The endpoint's policy as the relay applies it (http-policy-lean.ts). */
    readonly policy: LeanPolicyRun | undefined,
    /** The request as the agent gets it: `head`, or as the policies before a hop changed it. */
    readonly sent: RequestHead = head,
  ) {
    this.requestBody = requestFramer(head);
  }

  /**
   * The agent switched protocols (its 101 to an upgrade): counted as a 101 with the exchange's
   * times so far, and recorded with the agent's head.
   */
  switched(raw: string[]): void {
    const now = performance.now();
    const { started, sentAt } = this;
    this.count(101, (now - started) / 1000, (now - sentAt) / 1000, (sentAt - started) / 1000);
    this.done?.(101, raw);
  }

  /**
   * Count the request on its endpoint, with its status and times, and its status on those it came
   * through (the times are the last endpoint's).
   */
  count(
    status: number,
    durationSeconds?: number,
    upstreamSeconds?: number,
    edgeSeconds?: number,
  ): void {
    this.meter.request(status, durationSeconds, upstreamSeconds, edgeSeconds);
    for (const meter of this.passed) meter.request(status);
    // circuit-breaker: a client that left before any answer (499) says nothing about the
    // service's health.
    const observers = this.policy?.observers;
    if (observers && status !== 499) for (const observer of observers) observer(status);
  }

  /** The whole response reached the client: count it with its times, and record it. */
  completed(connections: Pick<PublicConnections, 'countBytes'>): void {
    const response = this.response!;
    const now = performance.now();
    this.count(
      response.status,
      (now - this.started) / 1000,
      (this.upstreamAt - this.sentAt) / 1000,
      (this.sentAt - this.started + this.answeredAt - this.upstreamAt) / 1000,
    );
    if (this.state) connections.countBytes(this.state);
    this.done?.(response.status, response.raw);
  }

  /**
   * Read the response head from `chunk`, after what came of it before: the head and the bytes
   * that followed it, undefined while it is incomplete (the part is kept), or why it is refused.
   */
  takeResponseHead(
    chunk: Buffer,
  ): { response: ResponseHead; rest: Buffer | undefined } | string | undefined {
    const buf = this.pendingHead === undefined ? chunk : Buffer.concat([this.pendingHead, chunk]);
    const end = this.responseScanner.scan(buf);
    if (typeof end === 'string') return end;
    if (end < 0) {
      if (buf.length > MAX_RESPONSE_HEAD) return 'a response head over 64 KiB';
      this.pendingHead = buf;
      return undefined;
    }
    this.pendingHead = undefined;
    this.responseScanner.reset();
    const response = parseResponseHead(buf.toString('latin1', 0, end), this.head.method);
    if (!('raw' in response)) return response.reason;
    return { response, rest: end < buf.length ? buf.subarray(end) : undefined };
  }

  /** Whether the whole request has been sent (rewritten, its rewrite's last bytes too). */
  get requestSent(): boolean {
    return (
      (this.requestBody === undefined || this.requestBody.done) &&
      this.requestTransforms === undefined
    );
  }

  /** Whether the whole response has been relayed (and, transformed, its transforms flushed). */
  get responded(): boolean {
    const body = this.responseBody;
    return body !== undefined && body.done && (this.transforms === undefined || this.flushed);
  }
}

const NO_METERS: readonly EndpointMeter[] = [];
/** The most a response head may take. */
const MAX_RESPONSE_HEAD = 64 * 1024;

/**
 * The exchange of a routed request, on either wire (an HTTP/1.1 connection of the relay, an
 * HTTP/2 stream): the endpoint's meters, the public connection attributed to it, the inspector's
 * record begun.
 * @example const exchange = beginExchange(ctx, socket, { head, host, route, scheme: 'https', clientIp, span });
 */
export function beginExchange(
  ctx: Pick<HttpRelayContext, 'meters' | 'connections' | 'tap'>,
  socket: Duplex,
  start: {
    head: RequestHead;
    host: string;
    route: LeanRoute;
    scheme: 'http' | 'https';
    clientIp: string;
    span: SpanContext | undefined;
  },
): Exchange {
  const { tunnel, via } = start.route;
  const meter = ctx.meters.of(tunnel);
  const state = ctx.connections.attribute(socket, meter);
  const recording = ctx.tap?.begin({
    host: start.host,
    // The endpoint the client asked for, not the internal one it was forwarded to.
    tunnel: via[0] ?? tunnel,
    scheme: start.scheme,
    head: start.head,
    clientIp: start.clientIp,
    span: start.span,
  });
  const passed = via.length === 0 ? NO_METERS : via.map((t) => ctx.meters.of(t));
  const { policy, sent } = start.route;
  const done = recording?.done;
  const exchange = new Exchange(start.head, tunnel, meter, state, done, passed, policy, sent);
  exchange.span = start.span;
  const bodies = recording?.bodies;
  if (bodies) {
    exchange.bodies = bodies;
    // A chunked body is captured decoded, as the framer reads it.
    if (start.head.chunked)
      exchange.requestBody = requestFramer(start.head, captured(bodies.request));
  }
  return exchange;
}

/**
 * The request head the agent gets: the client's request line and headers, hop-by-hop headers
 * dropped and `X-Forwarded-*` set (http-forwarding.ts); `host` replaces the client's Host
 * (HostHeaderRewrite, http-forwarding.ts rewrittenHost); `policy`'s header changes are applied
 * (header-changes.ts) and its url-rewrite target
 * replaces the client's; `span` sets the `traceparent`. An upgrade keeps its `Upgrade` header and
 * asks for it with `Connection: Upgrade`.
 * @example stream.write(agentRequestHead(head, 'https', '203.0.113.7', undefined), 'latin1')
 */
export function agentRequestHead(
  head: RequestHead,
  proto: 'http' | 'https',
  clientIp: string,
  host?: string,
  policy?: Pick<LeanPolicyRun, 'requestHeaders' | 'target' | 'bodyRewrite'>,
  span?: SpanContext,
): string {
  const headers = agentRequestHeaders(head, proto, clientIp, host, policy, span);
  // An HTTP/1.0 request goes on as one, so the service frames its answer for an HTTP/1.0 client.
  let text = `${head.method} ${policy?.target ?? head.target} HTTP/1.${head.minor}\r\n`;
  for (let i = 0; i < headers.length; i += 2) text += `${headers[i]}: ${headers[i + 1]}\r\n`;
  return text + '\r\n';
}

/**
 * The header list of {@link agentRequestHead}: what a request that goes on as HTTP/2 (an endpoint
 * bound with app protocol `http2`, h2-call.ts) carries.
 * @example h2RequestHeaders(head.method, target, 'http', agentRequestHeaders(head, 'https', ip))
 */
export function agentRequestHeaders(
  head: RequestHead,
  proto: 'http' | 'https',
  clientIp: string,
  host?: string,
  policy?: Pick<LeanPolicyRun, 'requestHeaders' | 'target' | 'bodyRewrite'>,
  span?: SpanContext,
): string[] {
  // A body the policy rewrites has a length nobody knows yet: it goes chunked.
  const rewritten =
    policy?.bodyRewrite !== undefined && (head.chunked || (head.contentLength ?? 0) > 0);
  const forwarded = forwardedHeaders(
    rewritten ? withoutLength(head.raw) : head.raw,
    { host: head.host, connection: head.connection, chunked: head.chunked || rewritten },
    { proto, clientIp, host, span, upgrade: head.upgrade },
  );
  return policy ? applyToRawHeaders(forwarded, policy.requestHeaders, REQUEST_OWNED) : forwarded;
}

/**
 * The HTTP/2 headers `exchange` goes on with to a service bound with app protocol `http2`
 * (h2-call.ts, h2-bridge.ts): {@link agentRequestHeaders}, to the target the policy left.
 * @example upstreams.request(tunnel, socket, info, h2CallHeaders(exchange, 'https', ip), false)
 */
export function h2CallHeaders(
  exchange: Exchange,
  proto: 'http' | 'https',
  clientIp: string,
): OutgoingHttpHeaders {
  const { tunnel, sent, policy } = exchange;
  const host = rewrittenHost(tunnel);
  const raw = agentRequestHeaders(sent, proto, clientIp, host, policy, exchange.span);
  const target = policy?.target ?? sent.target;
  return h2RequestHeaders(sent.method, target, upstreamScheme(tunnel), raw);
}

/** `raw` without its Content-Length. */
function withoutLength(raw: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() !== 'content-length') out.push(raw[i]!, raw[i + 1]!);
  }
  return out;
}

/**
 * `raw` with its Content-Length replaced by `length` (a body rewritten whole, held-rewrite.ts).
 * @example withLength(['content-length', '5', 'x', 'y'], 7) // ['x', 'y', 'content-length', '7']
 */
export function withLength(raw: readonly string[], length: number): string[] {
  const out = withoutLength(raw);
  out.push('content-length', String(length));
  return out;
}

/**
 * The response head the public client gets; `close` adds `Connection: close`, and an HTTP/1.0
 * client (`http10`) whose connection stays open is told so with `Connection: keep-alive`.
 * @example socket.write(clientResponseHead(response, false, false), 'latin1')
 */
export function clientResponseHead(
  response: ResponseHead,
  close: boolean,
  http10: boolean,
): string {
  let text = `HTTP/1.1 ${response.status} ${response.reason}\r\n`;
  const raw = response.raw;
  for (let i = 0; i < raw.length; i += 2) text += `${raw[i]}: ${raw[i + 1]}\r\n`;
  if (close) return text + 'Connection: close\r\n\r\n';
  return text + (http10 ? 'Connection: keep-alive\r\n\r\n' : '\r\n');
}
