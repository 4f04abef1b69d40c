/**
 * HTTP/2 from public clients: TLS connections that chose `h2` by ALPN (sni-router.ts offers it
 * next to `http/1.1`). Node's HTTP/2 server reads the frames, with its limits on streams, header
 * lists, SETTINGS and PING floods and rapid resets; each request then goes through the full path's
 * request handler (http-requests.ts), as an HTTP/1.1 request handed over by the lean relay does:
 * the same routing, policy phases, forward-internal, agent exchange, inspector and metrics.
 *
 * Node's compatibility objects stand in for IncomingMessage and ServerResponse there. Three things
 * differ, and are made equal here, once per request: the Host is the `:authority`, the request's
 * socket is the TLS connection (policies' `conn.*`, on_tcp_connect once per connection, byte
 * counts, the SNI check), and a response has no reason phrase and takes trailers as an object.
 */
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { ServerLimits } from '../../../core/limits.js';
import {
  createServer,
  Http2ServerResponse,
  type Http2Server,
  type Http2ServerRequest,
  type Http2Session,
} from 'node:http2';
import type { Duplex } from 'node:stream';
import { H2_SESSION_WINDOW, H2_STREAM_WINDOW } from './h2-upstream.js';

/**
 * What the HTTP/2 side bounds, from the server's limits (docs/security.md): streams per connection
 * (`--http2-max-concurrent-streams`), the header list (`--max-header-bytes`, as on HTTP/1.1) and
 * an idle connection's life (`--keep-alive-timeout-ms`, then GOAWAY).
 */
export type H2Limits = Pick<
  ServerLimits,
  'http2MaxConcurrentStreams' | 'maxHeaderBytes' | 'keepAliveTimeoutMs'
>;

export interface H2IngressOptions {
  limits: H2Limits;
  /** The full path's request handler. */
  onRequest: (req: IncomingMessage, res: ServerResponse) => void;
  /**
   * The lean relay's pipeline, asked first (h2-exchange.ts); it calls `full` for a request it
   * does not carry. Without it every request takes the full path.
   */
  lean?: (
    req: Http2ServerRequest,
    res: Http2ServerResponse,
    socket: Duplex,
    full: () => void,
  ) => void;
}

/**
 * @example
 * const h2 = new H2Ingress({ limits: DEFAULT_LIMITS, onRequest: requests.onRequest });
 * if (tlsSocket.alpnProtocol === 'h2') h2.accept(tlsSocket);
 */
export class H2Ingress {
  private readonly server: Http2Server;
  private readonly sessions = new Set<Http2Session>();
  /**
   * Each session's TLS socket: `session.socket` is a proxy of it, and the ingress knows connections
   * by the socket itself (byte counts, on_tcp_connect once per connection).
   */
  private readonly sockets = new WeakMap<Http2Session, Duplex>();
  /** The socket being accepted: Node makes its session, and emits 'session', in the same turn. */
  private accepting: Duplex | undefined;

  constructor(options: H2IngressOptions) {
    const { limits } = options;
    this.server = createServer({
      settings: {
        maxConcurrentStreams: limits.http2MaxConcurrentStreams,
        maxHeaderListSize: limits.maxHeaderBytes,
        // No server push: the edge never pushes.
        enablePush: false,
        initialWindowSize: H2_STREAM_WINDOW,
      },
      maxHeaderListPairs: 256,
      // Node answers a client that opens and resets streams faster than it serves them
      // (CVE-2023-44487), or floods SETTINGS, PINGs or CONTINUATION frames, with GOAWAY.
      maxSettings: 32,
      maxOutstandingPings: 10,
      Http2ServerResponse: EdgeH2Response,
    });
    this.server.on('session', (session: Http2Session) => {
      this.sessions.add(session);
      if (this.accepting) this.sockets.set(session, this.accepting);
      session.once('connect', () => session.setLocalWindowSize(H2_SESSION_WINDOW));
      session.once('close', () => this.sessions.delete(session));
      session.setTimeout(limits.keepAliveTimeoutMs, () => session.close());
    });
    const { onRequest, lean } = options;
    this.server.on('request', (req: Http2ServerRequest, res: Http2ServerResponse) => {
      const socket = this.sockets.get(req.stream.session!) ?? req.stream.session!.socket;
      // Made with EdgeH2Response, which writes as the full path expects.
      const full = (): void => onRequest(asIncoming(req, socket), res as unknown as ServerResponse);
      if (lean) lean(req, res, socket, full);
      else full();
    });
  }

  /**
   * Serve an HTTP/2 connection on `socket`: a TLS connection that negotiated `h2`, or a plain one
   * that began with the connection preface (h2c with prior knowledge), `buffered` its bytes read.
   */
  accept(socket: Duplex, buffered: Buffer | undefined): void {
    // Paused: Node's HTTP/2 session reads what is buffered, then the socket's handle, itself; a
    // socket left flowing (the lean relay read it) would drop bytes between the two.
    socket.pause();
    if (buffered) socket.unshift(buffered);
    this.accepting = socket;
    try {
      this.server.emit('connection', socket);
    } finally {
      this.accepting = undefined;
    }
  }

  /** Open connections, for draining. */
  get size(): number {
    return this.sessions.size;
  }

  /** GOAWAY to every connection: open streams finish, no new ones start. */
  startDraining(): void {
    for (const session of this.sessions) session.close();
  }

  destroyAll(): void {
    for (const session of this.sessions) session.destroy();
  }
}

/**
 * The request as the full path reads one: its headers without pseudo-headers and with `Host` from
 * `:authority`, a body without a length said to be chunked (as HTTP/1.1 would frame it, and as it
 * goes on to an HTTP/1.1 service), and the TLS connection as its socket.
 */
function asIncoming(req: Http2ServerRequest, socket: unknown): IncomingMessage {
  const headers: Record<string, string | string[] | undefined> = {};
  const raw: string[] = [];
  const given = req.rawHeaders;
  if (req.headers.host === undefined && req.authority) {
    headers.host = req.authority;
    raw.push('host', req.authority);
  }
  for (let i = 0; i < given.length; i += 2) {
    if (given[i]!.startsWith(':')) continue;
    raw.push(given[i]!, given[i + 1]!);
  }
  for (const [name, value] of Object.entries(req.headers)) {
    if (!name.startsWith(':')) headers[name] = value;
  }
  if (!req.stream.endAfterHeaders && headers['content-length'] === undefined) {
    headers['transfer-encoding'] = 'chunked';
  }
  // Own properties over the prototype's getters; Node's compatibility layer reads its own fields.
  Object.defineProperties(req, {
    headers: { value: headers, writable: true, configurable: true },
    rawHeaders: { value: raw, writable: true, configurable: true },
    socket: { value: socket, configurable: true },
  });
  // The compatibility request has every field the full path reads (http-requests.ts).
  return req as unknown as IncomingMessage;
}

/**
 * The response as the full path writes one (see the file's comment): Node makes every response of
 * the server with this class, so nothing is patched per request.
 */
class EdgeH2Response extends Http2ServerResponse {
  /**
   * HTTP/2 has no reason phrase (RFC 9113 8.3.2); Node warns when one is given. Headers may also
   * be a flat `[name, value, …]` list, as the full path writes them: Node reads both.
   */
  override writeHead(
    statusCode: number,
    reason?: string | OutgoingHttpHeaders,
    headers?: OutgoingHttpHeaders,
  ): this {
    return typeof reason === 'string' || reason === undefined
      ? super.writeHead(statusCode, headers)
      : super.writeHead(statusCode, reason);
  }

  /** Trailers as pairs too, as the full path adds an upstream's raw trailers. */
  override addTrailers(trailers: OutgoingHttpHeaders | Array<[string, string]>): void {
    super.addTrailers(Array.isArray(trailers) ? Object.fromEntries(trailers) : trailers);
  }
}
