/**
 * The HTTP side of the ingress, for plain connections (`--http-listen`) and TLS-terminated ones
 * handed over by the SNI router. Every connection starts on the lean relay (ingress/http/), which
 * carries requests to tunnels without a traffic policy as bytes. A request it does not carry (a
 * policy, an upgrade, an error page, an ACME challenge, body capture) hands the connection to
 * the full path here: Node's http.Server, requests routed by Host and streamed through a pooled
 * tunnel stream with back-pressure; upgrades (WebSocket) become raw relays.
 */
import {
  createServer,
  request,
  type ClientRequest,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { createServer as createNetServer, type Socket, type Server as NetServer } from 'node:net';
import type { Duplex } from 'node:stream';
import { DEFAULT_LIMITS, type ServerLimits } from '../../../core/limits.js';
import type { Logger } from '../../../core/logger.js';
import type { EndpointMeter, EndpointMeters } from '../../metrics/endpoint-meters.js';
import {
  INGRESS_ERRORS,
  rawErrorResponse,
  sendErrorPage,
  type IngressError,
} from '../error-pages.js';
import {
  forwardRequestHeaders,
  forwardResponseHeaders,
  requestHasBody,
  requestHead,
  rewrittenHost,
  routingHost,
} from './http-forwarding.js';
import {
  ACME_CHALLENGE_PATH,
  answerAcmeChallenge,
  type AcmeChallengeLookup,
} from '../../certificates/acme-http-challenge.js';
import { PublicConnections } from './http-connections.js';
import { misdirected } from '../sni-host-match.js';
import { failRequest, writeUpstreamResponse } from './http-responses.js';
import { runHttpRequestPolicy, runUpgradePolicy, type HttpPolicyFlow } from './http-policy.js';
import { clientAddr, clientIp, connectTunnel, serverAddr } from '../../registry/connect-tunnel.js';
import { relay, type Relay } from '../../../core/relay.js';
import { INGRESS_HIGH_WATER_MARK, INGRESS_SOCKET_OPTIONS } from '../proxy.js';
import { carriedBody, followForward, forwardStep } from './http-forward-internal.js';
import type { ExchangeTap } from './exchange.js';
import { HttpRelay } from './http-relay.js';
import type { RequestHead } from './request-head.js';
import { TunnelAgent, type TunnelRequestArgs } from './tunnel-agent.js';
import type { OnlineTunnel, ProxyInfo, TunnelRegistry } from '../../registry/tunnel-registry.js';

export interface HttpIngressOptions {
  registry: TunnelRegistry;
  meters: EndpointMeters;
  logger?: Logger | undefined;
  /** Wait for a tunnel stream this long before answering 502. Default 10 s. */
  connectTimeoutMs?: number | undefined;
  /** Keep-alive tunnel streams unused this long are closed. Default 15 s. */
  idleStreamMs?: number | undefined;
  /** An idle public keep-alive connection is closed after this long. Default 60 s. */
  keepAliveTimeoutMs?: number | undefined;
  /** ACME HTTP-01 answers, served before any routing (when ACME is on). */
  acmeChallenge?: AcmeChallengeLookup | undefined;
  /** Header time, keep-alive, header bytes and count; default DEFAULT_LIMITS. */
  limits?: HeaderLimits | undefined;
  /** Told when a client goes over a limit the server enforces itself (for /metrics and logs). */
  onLimit?: ((clientIp: string, limit: string) => void) | undefined;
  /** Told of every routed request (the traffic inspector, traffic-tap.ts). */
  tap?: ((req: IncomingMessage, res: ServerResponse, tunnel: OnlineTunnel) => void) | undefined;
  /** The same for requests on the lean relay. */
  exchangeTap?: ExchangeTap | undefined;
}

/** The ingress limits the HTTP server applies. */
type HeaderLimits = Pick<
  ServerLimits,
  'headersTimeoutMs' | 'keepAliveTimeoutMs' | 'maxHeaderBytes' | 'maxHeaderCount'
>;

function servesHttp(tunnel: OnlineTunnel): boolean {
  return tunnel.proto === 'http' || tunnel.proto === 'https';
}

/** The public protocol of a request: https when the ingress terminated TLS for it. */
function publicProto(socket: Duplex): 'http' | 'https' {
  return (socket as { encrypted?: boolean }).encrypted === true ? 'https' : 'http';
}

/**
 * @example
 * const ingress = new HttpIngress({ registry, meters });
 * ingress.server.listen(8080, '127.0.0.1');
 */
export class HttpIngress {
  /** The public listener: connections start on the lean relay. */
  readonly server: NetServer;
  /** The full HTTP path, which serves the connections the relay hands over; never listens. */
  readonly httpServer: Server;
  private readonly relay: HttpRelay;
  private readonly registry: TunnelRegistry;
  private readonly meters: EndpointMeters;
  private readonly logger: Logger | undefined;
  private readonly connectTimeoutMs: number | undefined;
  private readonly idleStreamMs: number | undefined;
  private readonly acmeChallenge: AcmeChallengeLookup | undefined;
  private readonly tap: HttpIngressOptions['tap'];
  private readonly exchangeTap: ExchangeTap | undefined;
  private readonly onLimit: HttpIngressOptions['onLimit'];
  private readonly agents = new Map<OnlineTunnel, TunnelAgent>();
  private readonly connections: PublicConnections;
  private readonly relays = new Set<Relay>();
  private draining = false;
  private readonly maxHeaderCount: number;

  constructor(options: HttpIngressOptions) {
    this.registry = options.registry;
    this.meters = options.meters;
    this.logger = options.logger;
    this.connectTimeoutMs = options.connectTimeoutMs;
    this.idleStreamMs = options.idleStreamMs;
    this.acmeChallenge = options.acmeChallenge;
    this.tap = options.tap;
    this.exchangeTap = options.exchangeTap;
    this.onLimit = options.onLimit;
    this.connections = new PublicConnections(options.meters);
    // Uploads may take longer than Node's 5-minute request timeout; headers may not dawdle.
    const limits = options.limits ?? DEFAULT_LIMITS;
    this.maxHeaderCount = limits.maxHeaderCount;
    this.httpServer = createServer({
      requestTimeout: 0,
      headersTimeout: limits.headersTimeoutMs,
      maxHeaderSize: limits.maxHeaderBytes,
      highWaterMark: INGRESS_HIGH_WATER_MARK,
    });
    // Node's own header limit counts all headers; ours is applied per request in onRequest.
    this.httpServer.maxHeadersCount = 0;
    const keepAliveTimeoutMs = options.keepAliveTimeoutMs ?? limits.keepAliveTimeoutMs;
    this.httpServer.keepAliveTimeout = keepAliveTimeoutMs;
    this.httpServer.on('request', this.onRequest);
    this.httpServer.on('checkContinue', this.onRequest);
    this.httpServer.on('upgrade', this.onUpgrade);
    this.relay = new HttpRelay({
      meters: this.meters,
      connections: this.connections,
      maxHeaderBytes: limits.maxHeaderBytes,
      headersTimeoutMs: limits.headersTimeoutMs,
      keepAliveTimeoutMs,
      connectTimeoutMs: options.connectTimeoutMs,
      idleStreamMs: options.idleStreamMs,
      tap: options.exchangeTap,
      route: (head, host, socket) => this.leanRoute(head, host, socket),
      handOver: (socket, buffered) => {
        if (buffered) socket.unshift(buffered);
        this.httpServer.emit('connection', socket);
        socket.resume();
      },
      onLimit: (ip, limit) => this.onLimit?.(ip, limit),
    });
    this.server = createNetServer(INGRESS_SOCKET_OPTIONS, (socket) => this.accept(socket, socket));
  }

  /** Serve a TLS connection the SNI router terminated; `wire` is the TCP socket under it. */
  acceptTls(tlsSocket: Duplex, wire: Socket): void {
    this.accept(tlsSocket, wire);
  }

  private accept(socket: Duplex, wire: Socket): void {
    this.connections.track(socket, wire);
    this.relay.accept(socket);
  }

  /**
   * The tunnel the lean relay carries a request to, or undefined when the full path must serve
   * it: anything but a plain HTTP/1.1 request to a tunnel without a traffic policy.
   */
  private leanRoute(
    head: RequestHead,
    host: string | undefined,
    socket: Duplex,
  ): OnlineTunnel | undefined {
    if (host === undefined || head.minor !== 1 || head.upgrade) return undefined;
    // origin-form only: absolute-form, CONNECT and `*` keep Node's handling.
    if (head.target.charCodeAt(0) !== 0x2f) return undefined;
    if (head.raw.length / 2 > this.maxHeaderCount) return undefined;
    if (this.acmeChallenge && head.target.startsWith(ACME_CHALLENGE_PATH)) return undefined;
    const found = this.lookup(host, socket);
    if ('status' in found || found.policy || found.cloud) return undefined;
    if (this.exchangeTap?.captures(host)) return undefined;
    const tunnel = this.registry.pick(found);
    return tunnel.policy || tunnel.cloud ? undefined : tunnel;
  }

  /** Public connections (plain and TLS) and relays still open. */
  get openConnections(): number {
    return this.connections.size + this.relays.size;
  }

  /** Stop keeping connections alive: each closes after its current response. */
  startDraining(): void {
    this.draining = true;
    this.relay.startDraining();
    this.httpServer.closeIdleConnections();
  }

  /** Close idle keep-alive connections now (drain calls this as requests finish). */
  closeIdle(): void {
    this.relay.closeIdle();
    this.httpServer.closeIdleConnections();
  }

  /** Close every connection and relay now. */
  destroyAll(): void {
    for (const relayed of this.relays) relayed.destroy();
    this.relay.dropIdleStreams();
    this.connections.destroyAll();
    this.httpServer.closeAllConnections();
    for (const agent of this.agents.values()) agent.destroy();
    this.agents.clear();
  }

  /** A tunnel went offline: close the streams kept for it once their requests are done. */
  tunnelRemoved(tunnel: OnlineTunnel): void {
    this.relay.tunnelRemoved(tunnel);
    const agent = this.agents.get(tunnel);
    if (!agent) return;
    this.agents.delete(tunnel);
    agent.retire();
  }

  private agentFor(tunnel: OnlineTunnel): TunnelAgent {
    let agent = this.agents.get(tunnel);
    if (!agent) {
      agent = new TunnelAgent(tunnel, {
        connectTimeoutMs: this.connectTimeoutMs,
        idleMs: this.idleStreamMs,
      });
      this.agents.set(tunnel, agent);
    }
    return agent;
  }

  /**
   * The tunnel serving `host` on `socket`, or why none does: no Host, no http tunnel for it, or
   * a TLS connection made for another name. Both HTTP paths route through this.
   */
  private lookup(host: string | undefined, socket: Duplex): OnlineTunnel | IngressError {
    if (host === undefined) return INGRESS_ERRORS.missingHost;
    const tunnel = this.registry.byHost(host);
    if (!tunnel || !servesHttp(tunnel)) return INGRESS_ERRORS.tunnelNotFound;
    const byHost = (name: string): OnlineTunnel | undefined => this.registry.byHost(name);
    return misdirected(socket, host, tunnel, byHost) ? INGRESS_ERRORS.misdirected : tunnel;
  }

  /** The tunnel for `req`, or undefined after answering it with an error page. */
  private route(req: IncomingMessage, res: ServerResponse): OnlineTunnel | undefined {
    const host = routingHost(req.headers.host);
    const found = this.lookup(host, req.socket);
    if (!('status' in found)) return found;
    this.meters.unrouted.request(found.status);
    sendErrorPage(req, res, found, host ?? '');
    return undefined;
  }

  private readonly onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    if (this.draining) res.shouldKeepAlive = false;
    if (answerAcmeChallenge(req, res, this.acmeChallenge)) return;
    if (req.rawHeaders.length / 2 > this.maxHeaderCount) {
      this.meters.unrouted.request(INGRESS_ERRORS.tooManyHeaders.status);
      this.onLimit?.(clientIp(req.socket), 'ingress_header_count');
      res.shouldKeepAlive = false;
      sendErrorPage(
        req,
        res,
        INGRESS_ERRORS.tooManyHeaders,
        routingHost(req.headers.host) ?? '',
        String(this.maxHeaderCount),
      );
      return;
    }
    const tunnel = this.route(req, res);
    if (!tunnel) return;
    this.tap?.(req, res, tunnel);
    this.serve(req, res, this.registry.pick(tunnel), []);
  };

  /**
   * Serve a request at `tunnel` (a pool member already picked): its policy, then its agent, a
   * forward-internal to the next endpoint, or for a cloud endpoint the error page. `chain` names
   * the endpoints the request went through before this one.
   */
  private serve(
    req: IncomingMessage,
    res: ServerResponse,
    tunnel: OnlineTunnel,
    chain: readonly string[],
  ): void {
    const meter = this.meters.of(tunnel);
    const state = this.connections.attribute(req.socket, meter);
    res.once('close', () => {
      // 499: the client went away before an answer (nginx's convention).
      meter.request(res.headersSent ? res.statusCode : 499);
      if (state) this.connections.countBytes(state);
    });
    const policy = tunnel.policy;
    if (policy) {
      runHttpRequestPolicy(req, res, policy, (flow) =>
        this.afterPolicy(req, res, tunnel, chain, flow),
      );
      return;
    }
    this.afterPolicy(req, res, tunnel, chain, undefined);
  }

  private afterPolicy(
    req: IncomingMessage,
    res: ServerResponse,
    tunnel: OnlineTunnel,
    chain: readonly string[],
    flow: HttpPolicyFlow | undefined,
  ): void {
    if (flow?.forwardInternal) {
      const next = followForward(this.registry, req, res, tunnel, chain, flow);
      if (next === 'answered') return;
      if (next) {
        this.serve(req, res, next.next, next.chain);
        return;
      }
    }
    if (tunnel.cloud) {
      if (!req.complete) req.resume();
      sendErrorPage(req, res, INGRESS_ERRORS.cloudUnanswered, req.headers.host ?? '');
      return;
    }
    this.forward(req, res, tunnel, 0, flow);
  }

  private forward(
    req: IncomingMessage,
    res: ServerResponse,
    tunnel: OnlineTunnel,
    attempt: number,
    flow?: HttpPolicyFlow,
  ): void {
    const socket = req.socket;
    const proto = publicProto(socket);
    const proxyInfo: ProxyInfo = {
      clientAddr: clientAddr(socket),
      serverAddr: serverAddr(socket),
      proto,
      edgeType: '',
      passthroughTls: false,
    };
    const agent = this.agentFor(tunnel);
    const forwarded = forwardRequestHeaders(req, {
      proto,
      clientIp: clientIp(socket),
      host: rewrittenHost(tunnel),
    });
    const headers = flow ? flow.requestHeaders(forwarded) : forwarded;
    // A policy action (verify-webhook) or an earlier endpoint may have read the body whole.
    const readBody = flow?.body ?? carriedBody(req);
    const hasBody = requestHasBody(req) && readBody === undefined;
    // request-body-find-replace: the body goes through its rewrite, chunked.
    const rewrite = hasBody || readBody ? flow?.rewriteRequestBody(headers) : undefined;
    const args: TunnelRequestArgs = {
      agent,
      method: req.method,
      path: req.url,
      headers: rewrite?.headers ?? headers,
      setHost: false,
      proxyInfo,
    };
    let upstream: ClientRequest;
    try {
      upstream = request(args);
    } catch (err) {
      // Node refuses some paths and headers its own parser let through; never crash on them.
      failRequest(req, res, INGRESS_ERRORS.tunnelUnreachable, (err as Error).message);
      return;
    }
    const sink = rewrite ? rewrite.body : upstream;
    if (rewrite) {
      rewrite.body.once('error', (err) => upstream.destroy(err));
      rewrite.body.pipe(upstream);
    }

    upstream.on('response', (up) => this.respond(req, res, up, flow));
    upstream.on('continue', () => {
      if (!res.headersSent) res.writeContinue();
    });
    upstream.on('error', (err: NodeJS.ErrnoException) => {
      if (res.headersSent || res.destroyed) {
        res.destroy();
        return;
      }
      // A kept-alive stream may have been closed by the agent's service just as it was reused;
      // a request that sent no body can safely go again, on a fresh stream.
      const stillOnline = this.registry.tunnel(tunnel.id) === tunnel;
      if (attempt === 0 && upstream.reusedSocket && !hasBody && stillOnline) {
        agent.dropIdle(proxyInfo);
        this.forward(req, res, tunnel, 1, flow);
        return;
      }
      // A pool member whose agent just went: a request without a body goes to another member.
      const successor =
        attempt === 0 && !hasBody && !stillOnline && tunnel.pooling === true
          ? this.registry.holder({ hostname: tunnel.hostname, internal: tunnel.internal })
          : undefined;
      if (successor && successor !== tunnel) {
        this.forward(req, res, this.registry.pick(successor), 1, flow);
        return;
      }
      this.logger?.debug(
        { err, tunnel: tunnel.id, host: req.headers.host },
        'tunnel request failed',
      );
      req.unpipe(sink);
      failRequest(req, res, INGRESS_ERRORS.tunnelUnreachable, err.code ?? err.message);
    });
    res.once('close', () => {
      // The client left before the whole answer: the stream is mid-message and cannot be reused.
      if (!res.writableFinished) upstream.destroy();
    });

    if (readBody) sink.end(readBody);
    else if (hasBody) req.pipe(sink);
    else upstream.end();
  }

  private respond(
    req: IncomingMessage,
    res: ServerResponse,
    up: IncomingMessage,
    flow?: HttpPolicyFlow,
  ): void {
    if (res.destroyed) {
      up.destroy();
      return;
    }
    if (this.draining) res.shouldKeepAlive = false;
    if (flow) {
      flow.response(up, res, forwardResponseHeaders(up), (headers, transforms) =>
        writeUpstreamResponse(req, res, up, headers, transforms),
      );
      return;
    }
    writeUpstreamResponse(req, res, up, forwardResponseHeaders(up), undefined);
  }

  private readonly onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    // The HTTP server dropped its own listeners when it handed the socket over.
    socket.on('error', () => socket.destroy());
    const host = routingHost(req.headers.host);
    const found = this.lookup(host, req.socket);
    if ('status' in found) {
      this.meters.unrouted.request(found.status);
      socket.end(rawErrorResponse(found, host ?? ''));
      return;
    }
    // Pooled endpoints: the policy and the relay of one upgrade belong to one member.
    this.serveUpgrade(req, socket, head, this.registry.pick(found), [], []);
  };

  /**
   * Serve an upgrade at `tunnel` (a pool member already picked), as `serve` does a request: its
   * policy, then a forward-internal to the next endpoint, the relay to its agent, or for a cloud
   * endpoint the error page. `chain` names the endpoints it went through before this one, and
   * `via` holds their meters, which count the upgrade too.
   */
  private serveUpgrade(
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
    tunnel: OnlineTunnel,
    chain: readonly string[],
    via: readonly EndpointMeter[],
  ): void {
    const meters = [...via, this.meters.of(tunnel)];
    const policy = tunnel.policy;
    if (!policy) {
      this.afterUpgradePolicy(req, socket, head, tunnel, chain, meters, undefined);
      return;
    }
    runUpgradePolicy(req, socket, policy, (flow) =>
      this.afterUpgradePolicy(req, socket, head, tunnel, chain, meters, flow),
    );
  }

  private afterUpgradePolicy(
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
    tunnel: OnlineTunnel,
    chain: readonly string[],
    meters: readonly EndpointMeter[],
    flow: HttpPolicyFlow | undefined,
  ): void {
    const host = routingHost(req.headers.host) ?? '';
    const refuse = (error: IngressError, detail?: string): void => {
      for (const meter of meters) meter.request(error.status);
      socket.end(rawErrorResponse(error, host, detail));
    };
    const step = flow && forwardStep(this.registry, req, tunnel, chain, flow);
    if (step && 'refused' in step) {
      refuse(step.refused, step.detail);
      return;
    }
    if (step) {
      this.serveUpgrade(req, socket, head, step.next, step.chain, meters);
      return;
    }
    if (tunnel.cloud) {
      refuse(INGRESS_ERRORS.cloudUnanswered);
      return;
    }
    this.relayUpgrade(req, socket, head, tunnel, meters, flow);
  }

  /** Relay an upgrade to `tunnel`'s agent; `flow` once the tunnel's policy let it through. */
  private relayUpgrade(
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
    tunnel: OnlineTunnel,
    meters: readonly EndpointMeter[],
    flow: HttpPolicyFlow | undefined,
  ): void {
    const meter = this.meters.of(tunnel);
    this.connections.handOver(socket, meter);
    const proto = publicProto(socket);
    const forwarded = forwardRequestHeaders(req, {
      proto,
      clientIp: clientIp(socket as Socket),
      upgrade: true,
      host: rewrittenHost(tunnel),
    });
    const headers = flow ? flow.requestHeaders(forwarded) : forwarded;
    const info: ProxyInfo = {
      clientAddr: clientAddr(socket as Socket),
      serverAddr: serverAddr(socket as Socket),
      proto,
      edgeType: '',
      passthroughTls: false,
    };
    connectTunnel(tunnel, info, this.connectTimeoutMs).then(
      (stream) => {
        if (socket.destroyed) {
          stream.destroy();
          return;
        }
        stream.write(requestHead(req, headers));
        if (head.length > 0) stream.write(head);
        // Counted when handed over; the agent's answer is relayed unparsed.
        for (const passed of meters) passed.request(101);
        const relayed = relay(socket, stream, {
          bytesIn: meter.bytesIn,
          bytesOut: meter.bytesOut,
          onClose: () => this.relays.delete(relayed),
        });
        this.relays.add(relayed);
      },
      (err: NodeJS.ErrnoException) => {
        const status = INGRESS_ERRORS.tunnelUnreachable.status;
        for (const passed of meters) passed.request(status);
        const detail = err.code ?? err.message;
        const host = routingHost(req.headers.host) ?? '';
        socket.end(rawErrorResponse(INGRESS_ERRORS.tunnelUnreachable, host, detail));
      },
    );
  }
}
