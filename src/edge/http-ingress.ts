/**
 * The HTTP side of the ingress: one http.Server for plain connections (`--http-listen`) and for
 * TLS-terminated ones handed over by the SNI router. Requests are routed by Host to an online
 * http/https tunnel and streamed through it in both directions with back-pressure; upgrades
 * (WebSocket) become raw relays.
 */
import {
  createServer,
  request,
  type ClientRequest,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { DEFAULT_LIMITS, type ServerLimits } from '../core/limits.js';
import type { Logger } from '../core/logger.js';
import type { EndpointMeters } from './endpoint-meters.js';
import { INGRESS_ERRORS, rawErrorResponse, sendErrorPage } from './error-pages.js';
import {
  forwardRequestHeaders,
  forwardResponseHeaders,
  requestHasBody,
  requestHead,
  routingHost,
} from './http-forwarding.js';
import { answerAcmeChallenge, type AcmeChallengeLookup } from './acme-http-challenge.js';
import { PublicConnections } from './http-connections.js';
import { misdirected } from './sni-host-match.js';
import { failRequest, writeUpstreamResponse } from './http-responses.js';
import { runHttpRequestPolicy, runUpgradePolicy, type HttpPolicyFlow } from './http-policy.js';
import {
  clientAddr,
  clientIp,
  connectTunnel,
  INGRESS_HIGH_WATER_MARK,
  relay,
  type Relay,
} from './proxy.js';
import { carriedBody, followForward } from './http-forward-internal.js';
import { TunnelAgent, type TunnelRequestArgs } from './tunnel-agent.js';
import type { OnlineTunnel, ProxyInfo, TunnelRegistry } from './tunnel-registry.js';

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
  readonly server: Server;
  private readonly registry: TunnelRegistry;
  private readonly meters: EndpointMeters;
  private readonly logger: Logger | undefined;
  private readonly connectTimeoutMs: number | undefined;
  private readonly idleStreamMs: number | undefined;
  private readonly acmeChallenge: AcmeChallengeLookup | undefined;
  private readonly tap: HttpIngressOptions['tap'];
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
    this.onLimit = options.onLimit;
    this.connections = new PublicConnections(options.meters);
    // Uploads may take longer than Node's 5-minute request timeout; headers may not dawdle.
    const limits = options.limits ?? DEFAULT_LIMITS;
    this.maxHeaderCount = limits.maxHeaderCount;
    this.server = createServer({
      requestTimeout: 0,
      headersTimeout: limits.headersTimeoutMs,
      maxHeaderSize: limits.maxHeaderBytes,
      highWaterMark: INGRESS_HIGH_WATER_MARK,
    });
    // Node's own header limit counts all headers; ours is applied per request in onRequest.
    this.server.maxHeadersCount = 0;
    this.server.keepAliveTimeout = options.keepAliveTimeoutMs ?? limits.keepAliveTimeoutMs;
    this.server.on('connection', (socket: Duplex) =>
      this.connections.track(socket, socket as Socket),
    );
    this.server.on('request', this.onRequest);
    this.server.on('checkContinue', this.onRequest);
    this.server.on('upgrade', this.onUpgrade);
  }

  /** Serve a TLS connection the SNI router terminated; `wire` is the TCP socket under it. */
  acceptTls(tlsSocket: Duplex, wire: Socket): void {
    this.connections.track(tlsSocket, wire);
    this.server.emit('connection', tlsSocket);
  }

  /** Public connections (plain and TLS) and relays still open. */
  get openConnections(): number {
    return this.connections.size + this.relays.size;
  }

  /** Stop keeping connections alive: each closes after its current response. */
  startDraining(): void {
    this.draining = true;
    this.server.closeIdleConnections();
  }

  /** Close idle keep-alive connections now (drain calls this as requests finish). */
  closeIdle(): void {
    this.server.closeIdleConnections();
  }

  /** Close every connection and relay now. */
  destroyAll(): void {
    for (const relayed of this.relays) relayed.destroy();
    this.connections.destroyAll();
    this.server.closeAllConnections();
    for (const agent of this.agents.values()) agent.destroy();
    this.agents.clear();
  }

  /** A tunnel went offline: close the streams kept for it once their requests are done. */
  tunnelRemoved(tunnel: OnlineTunnel): void {
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

  /** The tunnel for `req`, or undefined after answering it with an error page. */
  private route(req: IncomingMessage, res: ServerResponse): OnlineTunnel | undefined {
    const host = routingHost(req.headers.host);
    if (host === undefined) {
      this.meters.unrouted.request(INGRESS_ERRORS.missingHost.status);
      sendErrorPage(req, res, INGRESS_ERRORS.missingHost, '');
      return undefined;
    }
    const tunnel = this.registry.byHost(host);
    if (!tunnel || !servesHttp(tunnel)) {
      this.meters.unrouted.request(INGRESS_ERRORS.tunnelNotFound.status);
      sendErrorPage(req, res, INGRESS_ERRORS.tunnelNotFound, host);
      return undefined;
    }
    if (misdirected(req, host, tunnel, (name) => this.registry.byHost(name))) {
      this.meters.unrouted.request(INGRESS_ERRORS.misdirected.status);
      sendErrorPage(req, res, INGRESS_ERRORS.misdirected, host);
      return undefined;
    }
    return tunnel;
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
      proto,
      edgeType: '',
      passthroughTls: false,
    };
    const agent = this.agentFor(tunnel);
    const forwarded = forwardRequestHeaders(req, { proto, clientIp: clientIp(socket) });
    const args: TunnelRequestArgs = {
      agent,
      method: req.method,
      path: req.url,
      headers: flow ? flow.requestHeaders(forwarded) : forwarded,
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
    // A policy action (verify-webhook) or an earlier endpoint may have read the body whole.
    const readBody = flow?.body ?? carriedBody(req);
    const hasBody = requestHasBody(req) && readBody === undefined;

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
      req.unpipe(upstream);
      failRequest(req, res, INGRESS_ERRORS.tunnelUnreachable, err.code ?? err.message);
    });
    res.once('close', () => {
      // The client left before the whole answer: the stream is mid-message and cannot be reused.
      if (!res.writableFinished) upstream.destroy();
    });

    if (readBody) upstream.end(readBody);
    else if (hasBody) req.pipe(upstream);
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
      flow.response(up, res, forwardResponseHeaders(up), (headers, compress) =>
        writeUpstreamResponse(req, res, up, headers, compress),
      );
      return;
    }
    writeUpstreamResponse(req, res, up, forwardResponseHeaders(up), undefined);
  }

  private readonly onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    // The HTTP server dropped its own listeners when it handed the socket over.
    socket.on('error', () => socket.destroy());
    this.upgrade(req, socket, head, undefined);
  };

  /** Relay an upgrade through its tunnel; `flow` once the tunnel's policy let it through. */
  private upgrade(
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
    flow: HttpPolicyFlow | undefined,
    picked?: OnlineTunnel,
  ): void {
    const host = routingHost(req.headers.host);
    const found = host === undefined ? undefined : this.registry.byHost(host);
    if (host === undefined || !found || !servesHttp(found)) {
      this.meters.unrouted.request(INGRESS_ERRORS.tunnelNotFound.status);
      socket.end(rawErrorResponse(INGRESS_ERRORS.tunnelNotFound, host ?? ''));
      return;
    }
    if (misdirected(req, host, found, (name) => this.registry.byHost(name))) {
      this.meters.unrouted.request(INGRESS_ERRORS.misdirected.status);
      socket.end(rawErrorResponse(INGRESS_ERRORS.misdirected, host));
      return;
    }
    // Pooled endpoints: the policy and the relay of one upgrade belong to one member.
    const tunnel = picked ?? this.registry.pick(found);
    if (tunnel.policy && !flow) {
      runUpgradePolicy(req, socket, tunnel.policy, (admitted) =>
        this.upgrade(req, socket, head, admitted, tunnel),
      );
      return;
    }
    const meter = this.meters.of(tunnel);
    this.connections.handOver(socket, meter);
    const proto = publicProto(socket);
    const forwarded = forwardRequestHeaders(req, {
      proto,
      clientIp: clientIp(socket as Socket),
      upgrade: true,
    });
    const headers = flow ? flow.requestHeaders(forwarded) : forwarded;
    const info: ProxyInfo = {
      clientAddr: clientAddr(socket as Socket),
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
        meter.request(101);
        const relayed = relay(socket, stream, meter, () => this.relays.delete(relayed));
        this.relays.add(relayed);
      },
      (err: NodeJS.ErrnoException) => {
        meter.request(INGRESS_ERRORS.tunnelUnreachable.status);
        const detail = err.code ?? err.message;
        socket.end(rawErrorResponse(INGRESS_ERRORS.tunnelUnreachable, host ?? '', detail));
      },
    );
  }
}
