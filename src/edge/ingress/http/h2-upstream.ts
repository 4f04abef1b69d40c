/**
 * HTTP/2 to the agent, for endpoints bound with app protocol `http2` (route.ts `appProtocol`:
 * @ngrok/ngrok's `.appProtocol('http2')`, `burrow http --app-protocol http2`). ngrok's agents pipe
 * a tunnel stream's bytes to the service unchanged, so the edge speaks HTTP/2 with prior knowledge
 * over the stream. Each public connection gets one client session per endpoint, over one tunnel
 * stream, as an HTTP/1.1 connection keeps its own stream: the agent's PROXY header and the
 * service's view of one client stay per connection, and an HTTP/2 client's streams map onto the
 * session's streams one to one (a gRPC call stays one call, trailers and resets included).
 */
import {
  connect,
  type ClientHttp2Session,
  type ClientHttp2Stream,
  type IncomingHttpHeaders,
  type OutgoingHttpHeaders,
} from 'node:http2';
import type { Duplex } from 'node:stream';
import { connectTunnel } from '../../registry/connect-tunnel.js';
import type { OnlineTunnel, ProxyInfo } from '../../registry/tunnel-registry.js';

/**
 * Flow-control windows the edge opens to peers, on both sides: what one stream, and one
 * connection, may send before the edge has passed it on. HTTP/2's 64 KiB default makes a peer wait
 * for a WINDOW_UPDATE every 64 KiB, a round trip through the tunnel each: a 4 MB gRPC message and
 * its echo took 3.3 s that way here, 1.4 s with these. Node stops granting more while a stream is paused by back-pressure, so the
 * windows are also the most a peer can make the edge hold.
 */
export const H2_STREAM_WINDOW = 1024 * 1024;
export const H2_SESSION_WINDOW = 4 * 1024 * 1024;

/** Headers HTTP/2 does not carry (RFC 9113 8.2.2); `te` only as `trailers`. */
export const CONNECTION_SPECIFIC: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'upgrade',
  'http2-settings',
]);

/**
 * The HTTP/2 request headers for a request forwarded with `raw` headers (the ingress's, from
 * http-forwarding.ts): pseudo-headers first, `Host` as `:authority`, connection-specific headers
 * dropped, repeated names kept as lists (cookies joined by `; `, RFC 9113 8.2.3 allows either).
 * @example h2RequestHeaders('GET', '/a', 'http', ['Host', 'a.example', 'Accept', '*\/*'])
 */
export function h2RequestHeaders(
  method: string,
  path: string,
  scheme: 'http' | 'https',
  raw: readonly string[],
): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = { ':method': method, ':path': path, ':scheme': scheme };
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    const value = raw[i + 1]!;
    if (name === 'host') {
      out[':authority'] = value;
      continue;
    }
    if (CONNECTION_SPECIFIC.has(name)) continue;
    if (name === 'te' && value.trim().toLowerCase() !== 'trailers') continue;
    const seen = out[name];
    if (seen === undefined) out[name] = value;
    else if (name === 'cookie') out[name] = `${String(seen)}; ${value}`;
    else out[name] = Array.isArray(seen) ? [...seen, value] : [String(seen), value];
  }
  return out;
}

/**
 * Names and values alternating, from an HTTP/2 header object; pseudo-headers left out.
 * @example rawOf({ ':status': 200, 'content-type': 'application/grpc' }) // ['content-type', 'application/grpc']
 */
export function rawOf(headers: IncomingHttpHeaders): string[] {
  const raw: string[] = [];
  for (const [name, value] of Object.entries(headers)) {
    if (name.startsWith(':') || value === undefined) continue;
    if (Array.isArray(value)) for (const v of value) raw.push(name, v);
    else raw.push(name, String(value));
  }
  return raw;
}

/**
 * The `:scheme` a request to `tunnel`'s service carries: `https` when the agent forwards to an
 * https URL, else `http`.
 * @example upstreamScheme(tunnel) // 'http'
 */
export function upstreamScheme(tunnel: Pick<OnlineTunnel, 'forwardsTo'>): 'http' | 'https' {
  return /^https:/i.test(tunnel.forwardsTo) ? 'https' : 'http';
}

/** What a public connection is known by: its socket (HTTP/1.1) or its HTTP/2 session. */
type ConnectionKey = object & { once(event: 'close', listener: () => void): unknown };

/**
 * HTTP/2 client sessions to agents' services, one per public connection and endpoint.
 * @example
 * const stream = await upstreams.request(tunnel, req.socket, proxyInfo, h2RequestHeaders(...));
 */
export class H2Upstreams {
  private readonly sessions = new WeakMap<
    ConnectionKey,
    Map<OnlineTunnel, Promise<ClientHttp2Session>>
  >();

  constructor(private readonly connectTimeoutMs: number | undefined) {}

  /**
   * Open a request stream to `tunnel`'s service for a request on `connection` (its session made
   * at the first request).
   */
  async request(
    tunnel: OnlineTunnel,
    connection: ConnectionKey,
    info: ProxyInfo,
    headers: OutgoingHttpHeaders,
    endStream: boolean,
  ): Promise<ClientHttp2Stream> {
    const session = await this.session(tunnel, connection, info);
    return session.request(headers, { endStream });
  }

  private session(
    tunnel: OnlineTunnel,
    connection: ConnectionKey,
    info: ProxyInfo,
  ): Promise<ClientHttp2Session> {
    let byTunnel = this.sessions.get(connection);
    if (!byTunnel) {
      const opened = new Map<OnlineTunnel, Promise<ClientHttp2Session>>();
      byTunnel = opened;
      this.sessions.set(connection, opened);
      // The public connection is gone: so are its calls, and the service hears of it at once.
      connection.once('close', () => {
        for (const pending of opened.values()) {
          pending.then(
            (s) => s.destroy(),
            () => undefined,
          );
        }
        opened.clear();
      });
    }
    const known = byTunnel.get(tunnel);
    if (known) return known;
    const sessions = byTunnel;
    const opening = connectTunnel(tunnel, info, this.connectTimeoutMs).then((stream) =>
      this.open(stream, () => sessions.delete(tunnel)),
    );
    // A failed open is not kept: the next request tries a new stream.
    opening.catch(() => sessions.delete(tunnel));
    sessions.set(tunnel, opening);
    return opening;
  }

  private open(stream: Duplex, forget: () => void): ClientHttp2Session {
    const session = connect('http://upstream.invalid', {
      createConnection: () => stream,
      // The service's own SETTINGS rule what it accepts; these only bound what it may send us.
      maxHeaderListPairs: 256,
      settings: { initialWindowSize: H2_STREAM_WINDOW },
    });
    session.once('connect', () => session.setLocalWindowSize(H2_SESSION_WINDOW));
    session.on('error', () => undefined);
    session.once('close', forget);
    session.once('goaway', forget);
    stream.once('close', () => session.destroy());
    return session;
  }
}
