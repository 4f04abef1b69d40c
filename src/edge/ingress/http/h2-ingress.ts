/**
 * HTTP/2 from public clients: TLS connections that chose `h2` by ALPN (sni-router.ts offers it
 * next to `http/1.1`) and plain ones that open with the connection preface (h2c with prior
 * knowledge). Node's HTTP/2 server reads the frames, with its limits on streams, header lists,
 * SETTINGS and PING floods and rapid resets; each request then rides the same pipeline as an
 * HTTP/1.1 one (http-ingress.ts routes it, h2-exchange.ts and h2-call.ts carry it): the same
 * routing, policy phases, forward-internal, agent exchange, inspector and metrics. A request knows
 * its connection by the TLS (or plain) socket itself: policies' `conn.*`, on_tcp_connect once per
 * connection, byte counts, the SNI check.
 */
import type { ServerLimits } from '../../../core/limits.js';
import {
  createServer,
  type Http2Server,
  type Http2ServerRequest,
  type Http2ServerResponse,
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
  /** Serve one request; `socket` is its connection's own socket. */
  onRequest: (req: Http2ServerRequest, res: Http2ServerResponse, socket: Duplex) => void;
}

/**
 * @example
 * const h2 = new H2Ingress({ limits: DEFAULT_LIMITS, onRequest: (req, res, socket) => serve(req, res, socket) });
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
        // RFC 8441: WebSocket over HTTP/2, by extended CONNECT (h2-head.ts upgradeHead).
        enableConnectProtocol: true,
        initialWindowSize: H2_STREAM_WINDOW,
      },
      maxHeaderListPairs: 256,
      // Node answers a client that opens and resets streams faster than it serves them
      // (CVE-2023-44487), or floods SETTINGS, PINGs or CONTINUATION frames, with GOAWAY.
      maxSettings: 32,
      maxOutstandingPings: 10,
    });
    this.server.on('session', (session: Http2Session) => {
      this.sessions.add(session);
      if (this.accepting) this.sockets.set(session, this.accepting);
      session.once('connect', () => session.setLocalWindowSize(H2_SESSION_WINDOW));
      session.once('close', () => this.sessions.delete(session));
      session.setTimeout(limits.keepAliveTimeoutMs, () => session.close());
    });
    const { onRequest } = options;
    const serve = (req: Http2ServerRequest, res: Http2ServerResponse): void => {
      onRequest(req, res, this.sockets.get(req.stream.session!) ?? req.stream.session!.socket);
    };
    this.server.on('request', serve);
    // CONNECT: an extended one (`:protocol`) is an upgrade like another; the edge proxies no other.
    this.server.on('connect', (req: Http2ServerRequest, res: Http2ServerResponse) => {
      if (req.headers[':protocol'] !== undefined) {
        serve(req, res);
        return;
      }
      res.statusCode = 405;
      res.end();
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
