/**
 * Requests on the full HTTP path: what the lean relay hands over (a traffic policy, an error page,
 * an ACME challenge, body capture…) is served here with Node's http server and client. A request
 * is routed by its Host, goes through its endpoint's policy and any forward-internal, and is
 * streamed with back-pressure through a tunnel stream of the endpoint's pool (tunnel-agent.ts).
 * Upgrades take their own way (http-upgrades.ts).
 */
import { request, type ClientRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from '../../../core/logger.js';
import {
  answerAcmeChallenge,
  type AcmeChallengeLookup,
} from '../../certificates/acme-http-challenge.js';
import type { EndpointMeters } from '../../metrics/endpoint-meters.js';
import { startSpan, type SpanContext } from '../../metrics/trace-context.js';
import { clientIp, proxyInfoOf } from '../../registry/connect-tunnel.js';
import type { OnlineTunnel, TunnelPolicy, TunnelRegistry } from '../../registry/tunnel-registry.js';
import type { HttpRequestDecision } from '../../../policy/index.js';
import { failureDetail, INGRESS_ERRORS, sendErrorPage, type IngressError } from '../error-pages.js';
import type { PublicConnections } from './http-connections.js';
import { carriedBody, followForward } from './http-forward-internal.js';
import {
  forwardRequestHeaders,
  forwardResponseHeaders,
  publicProto,
  requestHasBody,
  rewrittenHost,
  routingHost,
} from './http-forwarding.js';
import type { HttpIngressOptions } from './http-ingress.js';
import { runHttpRequestPolicy, type HttpPolicyFlow, type Settled } from './http-policy.js';
import { H2Upstreams } from './h2-upstream.js';
import { failRequest, writeUpstreamResponse, type UpstreamResponse } from './http-responses.js';
import { lookupHttpTunnel, readIncomingTarget } from './http-routing.js';
import { TunnelAgent, type TunnelRequestArgs } from './tunnel-agent.js';

export type HttpRequestsOptions = Pick<
  HttpIngressOptions,
  | 'registry'
  | 'meters'
  | 'logger'
  | 'connectTimeoutMs'
  | 'idleStreamMs'
  | 'acmeChallenge'
  | 'onLimit'
  | 'tap'
  | 'tracing'
> & {
  connections: PublicConnections;
  /** Requests with more headers are refused (431). */
  maxHeaderCount: number;
};

/** An on_http_request decision the lean relay made for a request (http-policy-lean.ts). */
export interface PolicyDecision {
  policy: TunnelPolicy;
  decision: Settled<HttpRequestDecision>;
}

/** What the lean relay found for a request before it handed the connection over. */
export interface RoutedAhead {
  /** The pool member picked, or the error page. */
  routed: OnlineTunnel | IngressError;
  /** The decisions it made for the request, one per endpoint (a forward chain has several). */
  decisions?: readonly PolicyDecision[] | undefined;
}

/**
 * @example
 * const requests = new HttpRequests({ registry, meters, connections, maxHeaderCount: 100 });
 * httpServer.on('request', requests.onRequest);
 */
export class HttpRequests {
  /** True once the ingress drains: connections close after their current response. */
  draining = false;
  private readonly registry: TunnelRegistry;
  private readonly meters: EndpointMeters;
  private readonly connections: PublicConnections;
  private readonly logger: Logger | undefined;
  private readonly connectTimeoutMs: number | undefined;
  private readonly idleStreamMs: number | undefined;
  private readonly acmeChallenge: AcmeChallengeLookup | undefined;
  private readonly maxHeaderCount: number;
  private readonly onLimit: HttpIngressOptions['onLimit'];
  private readonly tap: HttpIngressOptions['tap'];
  private readonly tracing: HttpIngressOptions['tracing'];
  /** The edge's span of each request, while traces are exported (every try sends its traceparent). */
  private readonly spans = new WeakMap<IncomingMessage, SpanContext>();
  private readonly agents = new Map<OnlineTunnel, TunnelAgent>();
  /** HTTP/2 sessions to services of endpoints bound with app protocol `http2`; the relay's too. */
  readonly h2: H2Upstreams;
  /** What the lean relay found for the request it handed over, by connection. */
  private readonly ahead = new WeakMap<Duplex, RoutedAhead>();
  /** Its decisions, by request, for each endpoint of a forward chain (as carriedBody's bodies). */
  private readonly decided = new WeakMap<IncomingMessage, readonly PolicyDecision[]>();

  constructor(options: HttpRequestsOptions) {
    this.registry = options.registry;
    this.meters = options.meters;
    this.connections = options.connections;
    this.logger = options.logger;
    this.connectTimeoutMs = options.connectTimeoutMs;
    this.idleStreamMs = options.idleStreamMs;
    this.acmeChallenge = options.acmeChallenge;
    this.maxHeaderCount = options.maxHeaderCount;
    this.onLimit = options.onLimit;
    this.tap = options.tap;
    this.tracing = options.tracing;
    this.h2 = new H2Upstreams(options.connectTimeoutMs);
  }

  /** Close every tunnel stream kept. */
  destroyAll(): void {
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
        released: this.meters.metrics.streamsReleased.with({ path: 'full' }),
      });
      this.agents.set(tunnel, agent);
    }
    return agent;
  }

  /**
   * The first request the full path reads on `socket` was already routed by the lean relay, which
   * handed the connection over: the pool member it picked (or why none serves it), and the
   * on_http_request decisions it made for the request on the way.
   */
  routedAhead(socket: Duplex, ahead: RoutedAhead): void {
    this.ahead.set(socket, ahead);
  }

  /** The tunnel (a pool member, picked) for `req`, or undefined after an error page. */
  private route(
    req: IncomingMessage,
    res: ServerResponse,
    ahead: RoutedAhead | undefined,
  ): OnlineTunnel | undefined {
    const host = routingHost(req.headers.host);
    let routed = ahead?.routed;
    if (!routed) {
      const found = lookupHttpTunnel(this.registry, host, req.socket);
      routed = 'status' in found ? found : this.registry.pick(found);
    }
    if (!('status' in routed)) return routed;
    this.meters.unrouted.request(routed.status);
    sendErrorPage(req, res, routed, host ?? '');
    return undefined;
  }

  /** The http server's 'request' and 'checkContinue' listener. */
  readonly onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    if (this.draining) res.shouldKeepAlive = false;
    // The target is read once, as the lean relay reads it, before anything routes or judges it.
    const badTarget = readIncomingTarget(req);
    if (badTarget) {
      this.meters.unrouted.request(INGRESS_ERRORS.badRequestTarget.status);
      failRequest(req, res, INGRESS_ERRORS.badRequestTarget, badTarget);
      return;
    }
    if (answerAcmeChallenge(req, res, this.acmeChallenge)) return;
    if (req.rawHeaders.length / 2 > this.maxHeaderCount) {
      this.ahead.delete(req.socket);
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
    const ahead = this.ahead.get(req.socket);
    if (ahead) this.ahead.delete(req.socket);
    const tunnel = this.route(req, res, ahead);
    if (!tunnel) return;
    // Made only while traces are exported: otherwise the request goes on as it came.
    const span = this.tracing?.() ? startSpan(req.rawHeaders) : undefined;
    if (span) this.spans.set(req, span);
    this.tap?.(req, res, tunnel, span);
    if (ahead?.decisions) this.decided.set(req, ahead.decisions);
    this.serve(req, res, tunnel, []);
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
    const started = performance.now();
    res.once('close', () => {
      // 499: the client went away before an answer (nginx's convention).
      meter.request(res.headersSent ? res.statusCode : 499, (performance.now() - started) / 1000);
      if (state) this.connections.countBytes(state);
    });
    const policy = tunnel.policy;
    if (policy) {
      runHttpRequestPolicy(
        req,
        res,
        policy,
        (flow) => this.afterPolicy(req, res, tunnel, chain, flow),
        this.decided.get(req)?.find((d) => d.policy === policy)?.decision,
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
    const proxyInfo = proxyInfoOf(socket, proto, false);
    const forwarded = forwardRequestHeaders(req, {
      proto,
      clientIp: clientIp(socket),
      host: rewrittenHost(tunnel),
      span: this.spans.get(req),
    });
    const headers = flow ? flow.requestHeaders(forwarded) : forwarded;
    // A policy action (verify-webhook) or an earlier endpoint may have read the body whole.
    const readBody = flow?.body ?? carriedBody(req);
    const hasBody = requestHasBody(req) && readBody === undefined;
    // request-body-find-replace: the body goes through its rewrite, chunked.
    const rewrite = hasBody || readBody ? flow?.rewriteRequestBody(headers) : undefined;
    if (tunnel.appProtocol === 'http2') {
      if (rewrite) {
        // The rewrite is fed as on HTTP/1.1 below, and is the body the service gets.
        if (readBody) rewrite.body.end(readBody);
        else req.pipe(rewrite.body);
      }
      const body = rewrite
        ? { stream: rewrite.body, whole: undefined }
        : { stream: hasBody ? req : undefined, whole: readBody };
      this.h2.forward(req, res, tunnel, proxyInfo, rewrite?.headers ?? headers, body, (up) =>
        this.respond(req, res, up, flow),
      );
      return;
    }
    const agent = this.agentFor(tunnel);
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
      failRequest(req, res, INGRESS_ERRORS.tunnelUnreachable, failureDetail(err));
    });
    res.once('close', () => {
      // The client left before the whole answer: the stream is mid-message and cannot be reused,
      // and is given up at once (the agent then lets go of its service connection).
      if (!res.writableFinished) agent.abandon(upstream);
    });

    if (readBody) sink.end(readBody);
    else if (hasBody) req.pipe(sink);
    else upstream.end();
  }

  private respond(
    req: IncomingMessage,
    res: ServerResponse,
    up: UpstreamResponse,
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
}
