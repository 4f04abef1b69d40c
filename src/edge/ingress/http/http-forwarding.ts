/**
 * What an HTTP request and response look like on the other side of the ingress: hop-by-hop headers
 * dropped, `X-Forwarded-*` set, everything else passed on with its original case and order.
 */
import type { Duplex } from 'node:stream';
import { HOP_BY_HOP_HEADERS as HOP_BY_HOP } from '../../../core/http-framing.js';
import { parseHostPort } from '../../../core/host-port.js';
import { hostName } from '../../../core/request-target.js';
import { traceparentOf, type SpanContext } from '../../metrics/trace-context.js';
import type { OnlineTunnel } from '../../registry/tunnel-registry.js';

/** Set by the ingress from what it saw; values sent by clients are replaced. */
const REPLACED = new Set(['x-forwarded-proto', 'x-forwarded-host']);

/**
 * The routing name of a Host header: lowercase, no port, no trailing dot; IPv6 literals keep
 * their brackets. Undefined when there is no usable name.
 * @example routingHost('App.Example.com:8080') // 'app.example.com'
 */
export function routingHost(host: string | undefined): string | undefined {
  if (!host) return undefined;
  // The same name an absolute-form target's host is compared by (core/request-target.ts).
  const name = hostName(host);
  return name === '' ? undefined : name;
}

/** Schemes of a ForwardsTo URL whose host the Host header may name (their default ports dropped). */
const FORWARD_SCHEMES: ReadonlySet<string> = new Set(['http:', 'https:', 'ws:', 'wss:']);
/** The host of a bare ForwardsTo `host:port`: a name (letters, digits, `_.-`) or an IPv6 address. */
const FORWARD_HOST = /^(?:\[[0-9a-f:.]+\]|[a-z0-9_](?:[a-z0-9_.-]*[a-z0-9_])?)$/i;

/**
 * The Host header of where an agent forwards, from the bind's ForwardsTo: a URL's `host[:port]`
 * (http, https, ws, wss; the scheme's default port dropped, as a client would send it) or a bare
 * `host:port` as it is. Undefined for anything else (empty, `app://…`, `http.Server`, garbage).
 * @example upstreamHost('http://localhost:3000') // 'localhost:3000'
 * @example upstreamHost('https://api.internal.example:443/') // 'api.internal.example'
 * @example upstreamHost('127.0.0.1:8080') // '127.0.0.1:8080'
 */
export function upstreamHost(forwardsTo: string): string | undefined {
  const text = forwardsTo.trim();
  if (text === '') return undefined;
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(text)) {
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      return undefined;
    }
    return FORWARD_SCHEMES.has(url.protocol) && url.hostname !== '' ? url.host : undefined;
  }
  // The port is required: `http.Server` is a description, not a host.
  const hp = parseHostPort(text, { keepBrackets: true, minPort: 1 });
  return hp && FORWARD_HOST.test(hp.host) ? text : undefined;
}

/**
 * The Host header the agent gets for a request to `tunnel`: with Opts.HostHeaderRewrite, where it
 * forwards ({@link upstreamHost} of its ForwardsTo); otherwise (or when ForwardsTo names no
 * host) undefined, and the client's Host goes on unchanged. `X-Forwarded-Host` keeps the client's.
 * @example rewrittenHost({ hostHeaderRewrite: true, forwardsTo: 'localhost:3000' }) // 'localhost:3000'
 */
export function rewrittenHost(
  tunnel: Pick<OnlineTunnel, 'hostHeaderRewrite' | 'forwardsTo'>,
): string | undefined {
  if (!tunnel.hostHeaderRewrite) return undefined;
  // Asked on every request: parse a tunnel's ForwardsTo once (it changes only with a new bind).
  const known = rewrites.get(tunnel);
  if (known?.from === tunnel.forwardsTo) return known.host;
  const host = upstreamHost(tunnel.forwardsTo);
  rewrites.set(tunnel, { from: tunnel.forwardsTo, host });
  return host;
}

const rewrites = new WeakMap<object, { from: string; host: string | undefined }>();

/**
 * The public protocol of a connection: https when the ingress terminated TLS for it.
 * @example publicProto(tlsSocket) // 'https'
 */
export function publicProto(socket: Duplex): 'http' | 'https' {
  return (socket as { encrypted?: boolean }).encrypted === true ? 'https' : 'http';
}

/** Extra header names a `Connection` header declares hop-by-hop (`Connection: close, X-Foo`). */
export function connectionListed(connection: string | undefined): Set<string> | undefined {
  if (!connection || !connection.includes(',')) {
    const only = connection?.trim().toLowerCase();
    return only && !HOP_BY_HOP.has(only) && only !== 'close' ? new Set([only]) : undefined;
  }
  const names = new Set<string>();
  for (const token of connection.split(',')) {
    const name = token.trim().toLowerCase();
    if (name && name !== 'close' && !HOP_BY_HOP.has(name)) names.add(name);
  }
  return names.size > 0 ? names : undefined;
}

export interface ForwardedRequest {
  /** Public protocol the client used. */
  proto: 'http' | 'https';
  /** The client's IP, appended to X-Forwarded-For. */
  clientIp: string;
  /** Keep `Upgrade` and send `Connection: Upgrade` (WebSocket and friends). */
  upgrade?: boolean;
  /**
   * The Host header to send instead of the client's ({@link rewrittenHost}: HostHeaderRewrite);
   * `X-Forwarded-Host` still carries the client's.
   */
  host?: string | undefined;
  /**
   * The edge's span of the request, while traces are exported: the service gets a `traceparent`
   * naming it as the parent (the client's is replaced; its `tracestate` goes on, unless the trace
   * was restarted because the client's traceparent was missing or invalid).
   */
  span?: SpanContext | undefined;
}

/** What {@link forwardedHeaders} reads of a request besides its raw headers. */
export interface RequestFraming {
  /** The Host header. */
  host: string | undefined;
  /** The Connection header, for the names it declares hop-by-hop. */
  connection: string | undefined;
  /** The body is sent chunked (as received, or re-chunked by Node). */
  chunked: boolean;
}

/**
 * The headers to send upstream for a request with `raw` headers: hop-by-hop ones dropped,
 * `X-Forwarded-For` appended to, `X-Forwarded-Host` and `-Proto` set from what the edge saw, and
 * with `options.host` the Host header replaced (added first when the request had none), with
 * `options.span` the `traceparent` the edge's span.
 * @example forwardedHeaders(['Host', 'a'], { host: 'a', connection: undefined, chunked: false }, { proto: 'http', clientIp: '203.0.113.7' })
 */
export function forwardedHeaders(
  raw: readonly string[],
  request: RequestFraming,
  options: ForwardedRequest,
): string[] {
  const listed = connectionListed(request.connection);
  const out: string[] = [];
  let forwardedFor: string | undefined;
  const host = options.host;
  const span = options.span;
  let hostSent = false;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    const value = raw[i + 1]!;
    const lower = name.toLowerCase();
    if (host !== undefined && lower === 'host') {
      // In the client's place, once (Node's parser refuses a second Host; the lean one too).
      if (!hostSent) out.push(name, host);
      hostSent = true;
      continue;
    }
    if (HOP_BY_HOP.has(lower)) {
      if (lower === 'upgrade' && options.upgrade) out.push(name, value);
      // Trailers survive the ingress, so a client asking for them may still get them.
      else if (lower === 'te' && value.trim().toLowerCase() === 'trailers') out.push(name, value);
      continue;
    }
    if (lower === 'x-forwarded-for') {
      forwardedFor = forwardedFor === undefined ? value : `${forwardedFor}, ${value}`;
      continue;
    }
    if (REPLACED.has(lower) || listed?.has(lower)) continue;
    if (span && (lower === 'traceparent' || (lower === 'tracestate' && !span.parentSpanId))) {
      continue;
    }
    out.push(name, value);
  }
  if (span) out.push('traceparent', traceparentOf(span));
  if (host !== undefined && !hostSent) out.unshift('Host', host);
  out.push(
    'X-Forwarded-For',
    forwardedFor === undefined ? options.clientIp : `${forwardedFor}, ${options.clientIp}`,
    'X-Forwarded-Host',
    request.host ?? '',
    'X-Forwarded-Proto',
    options.proto,
  );
  if (options.upgrade) {
    out.push('Connection', 'Upgrade');
  } else {
    out.push('Connection', 'keep-alive');
    // A chunked body goes on chunked: relayed as it came, or re-chunked after Node de-chunked it.
    if (request.chunked) out.push('Transfer-Encoding', 'chunked');
  }
  return out;
}
