/**
 * The HTTP side of the ingress, for plain connections (`--http-listen`) and TLS-terminated ones
 * handed over by the SNI router. Every request rides one pipeline, whatever its wire: an HTTP/1.x
 * connection is served by the relay (http-relay.ts, http-connection.ts), an HTTP/2 one (ALPN
 * `h2`, or h2c with prior knowledge) by Node's HTTP/2 framing (h2-ingress.ts) feeding the same
 * stages (h2-exchange.ts, h2-call.ts). This file holds the listener, the one routing of a request
 * (`leanRoute`: ACME, limits, Host, each endpoint's policy and forward-internal hops), and the
 * life of the connections (draining, closing, tunnels going offline).
 */
import { createServer as createNetServer, type Socket, type Server as NetServer } from 'node:net';
import type { Duplex } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import { DEFAULT_LIMITS, type ServerLimits } from '../../../core/limits.js';
import type { Relay } from '../../../core/relay.js';
import type { EndpointMeters } from '../../metrics/endpoint-meters.js';
import {
  acmeChallengeAnswer,
  type AcmeChallengeLookup,
} from '../../certificates/acme-http-challenge.js';
import { PublicConnections } from './http-connections.js';
import { INGRESS_SOCKET_OPTIONS, relayTimeoutsOf, type RawRelayTimeouts } from '../proxy.js';
import type { ExchangeTap } from './exchange.js';
import { constants, type Http2ServerRequest, type Http2ServerResponse } from 'node:http2';
import { serveH2 } from './h2-serve.js';
import { h2RequestHead } from './h2-head.js';
import { H2Ingress, type H2Limits } from './h2-ingress.js';
import { routingHost } from './http-forwarding.js';
import { HttpRelay, ROUTING_FAILED, type LeanRoute, type LeanRouting } from './http-relay.js';
import { INGRESS_ERRORS } from '../error-pages.js';
import { clientIp } from '../../registry/connect-tunnel.js';
import {
  leanVerdict,
  pageAnswer,
  type ForwarderRun,
  type LeanVerdict,
} from './http-policy-lean.js';
import { forwardRefused, ownRun, withForwarders } from './lean-forward-chain.js';
import type { BodyHolder } from './http-policy-body.js';
import { applyToRawHeaders, REQUEST_OWNED } from './header-changes.js';
import { NO_BODY, streamBodySource, type PolicyBodySource } from './body-peek.js';
import { H2Upstreams } from './h2-upstream.js';
import { lookupHttpTunnel } from './http-routing.js';
import type { RawRelays } from './protocol-switch.js';
import type { RequestHead } from './request-head.js';
import { followInternal } from '../../registry/internal-routing.js';
import type { OnlineTunnel, TunnelRegistry } from '../../registry/tunnel-registry.js';

const RELAY: LeanVerdict = { kind: 'relay' };
const NO_VIA: readonly OnlineTunnel[] = [];
/** A step of the walk that moved on to the next endpoint (forward-internal). */
const CONTINUE = Symbol('continue');

/** Where the relay's walk of one request stands: the endpoint it is at and how it got there. */
interface LeanWalk {
  /** The request as the policies walked so far left it (forward-internal after changes). */
  head: RequestHead;
  /** The policies changed `head` on the way. */
  changed?: boolean;
  readonly socket: Duplex;
  /** The request's body, for a policy that reads it first (body-peek.ts). */
  readonly body: PolicyBodySource;
  tunnel: OnlineTunnel;
  chain: string[];
  via?: OnlineTunnel[];
  /** What the endpoints that forwarded the request keep for its response, the first first. */
  forwarders?: ForwarderRun[];
}

export interface HttpIngressOptions {
  registry: TunnelRegistry;
  meters: EndpointMeters;
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
  /** When upgraded connections' raw relays end for going quiet; default DEFAULT_LIMITS'. */
  relayTimeouts?: RawRelayTimeouts | undefined;
  /** Told of every routed exchange (the traffic inspector, traffic-tap.ts). */
  exchangeTap?: ExchangeTap | undefined;
  /**
   * Whether traces are exported now (asked per request): then each request gets the edge's span,
   * handed to the tap and named as the parent in the `traceparent` the service gets.
   */
  tracing?: (() => boolean) | undefined;
}

/** The ingress limits the HTTP server applies. */
type HeaderLimits = Pick<
  ServerLimits,
  'headersTimeoutMs' | 'keepAliveTimeoutMs' | 'maxHeaderBytes' | 'maxHeaderCount'
> &
  H2Limits;

/**
 * @example
 * const ingress = new HttpIngress({ registry, meters });
 * ingress.server.listen(8080, '127.0.0.1');
 */
export class HttpIngress {
  /** The public listener: HTTP/1.x connections go to the relay, h2c ones to HTTP/2. */
  readonly server: NetServer;
  private readonly relay: HttpRelay;
  private readonly h2: H2Ingress;
  /** HTTP/2 sessions to services of endpoints bound with app protocol `http2`. */
  private readonly h2Upstreams: H2Upstreams;
  private readonly registry: TunnelRegistry;
  private readonly acmeChallenge: AcmeChallengeLookup | undefined;
  private readonly connections: PublicConnections;
  /** Upgraded connections, relayed raw after a 101. */
  private readonly raw: RawRelays;
  private readonly maxHeaderCount: number;
  private readonly onLimit: ((clientIp: string, limit: string) => void) | undefined;

  constructor(options: HttpIngressOptions) {
    this.registry = options.registry;
    this.acmeChallenge = options.acmeChallenge;
    const connections = new PublicConnections(options.meters);
    this.connections = connections;
    const limits = options.limits ?? DEFAULT_LIMITS;
    this.maxHeaderCount = limits.maxHeaderCount;
    this.onLimit = options.onLimit;
    this.h2Upstreams = new H2Upstreams(options.connectTimeoutMs);
    this.raw = {
      open: new Set<Relay>(),
      timeouts: options.relayTimeouts ?? relayTimeoutsOf(DEFAULT_LIMITS),
      connections,
    };
    const keepAliveTimeoutMs = options.keepAliveTimeoutMs ?? limits.keepAliveTimeoutMs;
    this.h2 = new H2Ingress({
      limits: { ...limits, keepAliveTimeoutMs },
      onRequest: (req, res, socket) => this.serveH2(req, res, socket),
    });
    this.relay = new HttpRelay({
      meters: options.meters,
      connections,
      maxHeaderBytes: limits.maxHeaderBytes,
      headersTimeoutMs: limits.headersTimeoutMs,
      keepAliveTimeoutMs,
      connectTimeoutMs: options.connectTimeoutMs,
      idleStreamMs: options.idleStreamMs,
      // An HTTP/2 client's streams each hold a tunnel stream while they run and give it back
      // after: as many may be idle at once as it may run at once, or each one past would open a
      // new stream (and the agent a new connection to its service) per request.
      idleStreamsPerClient: Math.max(32, limits.http2MaxConcurrentStreams),
      tap: options.exchangeTap,
      tracing: options.tracing,
      raw: this.raw,
      h2Upstreams: this.h2Upstreams,
      route: (head, host, socket, body) => this.leanRoute(head, host, socket, body),
      h2c: (socket, buffered) => this.h2.accept(socket, buffered),
      onLimit: (ip, limit) => options.onLimit?.(ip, limit),
    });
    this.server = createNetServer(INGRESS_SOCKET_OPTIONS, (socket) => this.accept(socket, socket));
  }

  /** Serve a TLS connection the SNI router terminated, by the protocol it chose by ALPN. */
  acceptTls(tlsSocket: TLSSocket): void {
    if (tlsSocket.alpnProtocol === 'h2') {
      this.connections.track(tlsSocket, tlsSocket);
      this.h2.accept(tlsSocket, undefined);
      return;
    }
    this.accept(tlsSocket, tlsSocket);
  }

  private accept(socket: Duplex, wire: Socket): void {
    this.connections.track(socket, wire);
    this.relay.accept(socket);
  }

  /**
   * Where a request goes, on either wire: the ACME answer, the edge's page (a limit, no endpoint
   * for its Host), or its endpoint, the policy's verdict followed through forward-internal to the
   * internal endpoint that takes it. A promise while a decision waits (an IP policy lookup,
   * jwt-validation's keys, a body a policy reads first).
   */
  private leanRoute(
    head: RequestHead,
    host: string | undefined,
    socket: Duplex,
    body: PolicyBodySource,
  ): LeanRouting | Promise<LeanRouting> {
    // head.target is origin-form: parseRequestHead read it (core/request-target.ts), turning an
    // absolute-form target into one and refusing CONNECT and `*`.
    // Before any routing or policy: the CA must reach the answer whatever serves the name.
    const acme = acmeChallengeAnswer(head.method, head.target, this.acmeChallenge);
    if (acme) return acme.then((edge) => ({ edge }));
    if (head.raw.length / 2 > this.maxHeaderCount) {
      this.onLimit?.(clientIp(socket as Socket), 'ingress_header_count');
      const detail = String(this.maxHeaderCount);
      return { page: INGRESS_ERRORS.tooManyHeaders, detail, close: true };
    }
    const found = lookupHttpTunnel(this.registry, host, socket);
    const routed = 'status' in found ? found : this.registry.pick(found);
    // The edge's own page (a gRPC client's status) is the relay's to write, on either wire.
    if ('status' in routed) return { page: routed };
    return this.walk({ head, socket, body, tunnel: routed, chain: [] });
  }

  /**
   * The rest of {@link leanRoute} from `walk.tunnel` on: its policy's verdict, then the internal
   * endpoint forward-internal names, and so on; a verdict that waits is waited for, and the walk
   * goes on from there.
   */
  private walk(walk: LeanWalk): LeanRoute | Promise<LeanRoute> {
    for (;;) {
      const { policy } = walk.tunnel;
      const verdict = policy ? leanVerdict(walk.socket, policy, walk.head, walk.body) : RELAY;
      if (verdict instanceof Promise) {
        return verdict.then((v) => {
          const after = this.step(walk, v);
          return after === CONTINUE ? this.walk(walk) : after;
        });
      }
      const next = this.step(walk, verdict);
      if (next !== CONTINUE) return next;
    }
  }

  /** One verdict of the walk: where the request goes, or on to `walk.tunnel`. */
  private step(walk: LeanWalk, verdict: LeanVerdict): LeanRoute | typeof CONTINUE {
    const { tunnel } = walk;
    const via = walk.via ?? NO_VIA;
    if (verdict.kind === 'answer') return { tunnel, via, answer: verdict.answer };
    if (verdict.kind === 'close') return { tunnel, via, close: true };
    const step =
      verdict.kind === 'forward'
        ? followInternal(this.registry, verdict.forward, walk.chain, tunnel, ['http', 'https'])
        : undefined;
    if (step && 'refusal' in step) {
      const { refused, detail } = forwardRefused(step.refusal);
      return { tunnel, via, answer: pageAnswer(refused, walk.head, detail) };
    }
    if (!step) {
      // The endpoint itself serves it (a forward's target offline with `on_error: continue`).
      if (tunnel.cloud) {
        // A cloud endpoint has no agent: its policy neither answered nor forwarded the request.
        return { tunnel, via, answer: pageAnswer(INGRESS_ERRORS.cloudUnanswered, walk.head) };
      }
      // A service that speaks HTTP/2 (app protocol `http2`) gets an HTTP/2 client's call as a
      // call (h2-call.ts), an HTTP/1.x request through an H2Bridge (h2-bridge.ts), where an
      // upgrade it asks for is one the service does not make.
      const run = withForwarders(ownRun(verdict), walk.forwarders);
      return { tunnel, via, policy: run, sent: walk.changed ? walk.head : undefined };
    }
    (walk.via ??= []).push(tunnel);
    if (verdict.kind === 'forward' && verdict.forwarder) {
      (walk.forwarders ??= []).push(verdict.forwarder);
    }
    if (verdict.kind === 'forward' && verdict.changes) {
      // The next endpoint's policy, and in the end the agent, get the request as changed.
      const { headers, target } = verdict.changes;
      const raw = applyToRawHeaders(walk.head.raw, headers, REQUEST_OWNED);
      walk.head = { ...walk.head, raw, target: target ?? walk.head.target };
      walk.changed = true;
    }
    walk.chain = step.chain;
    walk.tunnel = step.next;
    return CONTINUE;
  }

  /**
   * An HTTP/2 request on the relay's pipeline (h2-exchange.ts), routed by {@link leanRoute} as
   * an HTTP/1.1 one is, its body read for a policy that decides on it (body-peek.ts
   * streamBodySource). A request it cannot read is answered here (h2-head.ts).
   */
  private serveH2(req: Http2ServerRequest, res: Http2ServerResponse, socket: Duplex): void {
    const read = h2RequestHead(req);
    if ('malformed' in read) {
      req.stream.close(constants.NGHTTP2_PROTOCOL_ERROR);
      return;
    }
    const head = 'badTarget' in read ? read.head : read;
    const routed = routingHost(head.host);
    const host = routed ?? '';
    const held: BodyHolder = { body: undefined };
    const serve = (route: LeanRouting): void => {
      // The client may have reset its stream while the policy decided.
      if (req.stream.destroyed) return;
      serveH2(this.relay.context, this.h2Upstreams, { req, res, socket, head, host, route, held });
    };
    if ('badTarget' in read) {
      serve({ page: INGRESS_ERRORS.badRequestTarget, detail: read.badTarget });
      return;
    }
    const body = req.stream.endAfterHeaders ? NO_BODY : streamBodySource(req, held);
    const route = this.leanRoute(head, routed, socket, body);
    if (!(route instanceof Promise)) serve(route);
    else route.then(serve, () => serve(ROUTING_FAILED));
  }

  /** Public connections (plain and TLS) and relays still open. */
  get openConnections(): number {
    return this.connections.size + this.raw.open.size;
  }

  /** Stop keeping connections alive: each closes after its current response. */
  startDraining(): void {
    this.relay.startDraining();
    this.h2.startDraining();
  }

  /** Close idle keep-alive connections now (drain calls this as requests finish). */
  closeIdle(): void {
    this.relay.closeIdle();
  }

  /** Close every connection and relay now. */
  destroyAll(): void {
    for (const relayed of this.raw.open) relayed.destroy();
    this.h2.destroyAll();
    this.relay.dropIdleStreams();
    this.connections.destroyAll();
  }

  /** A tunnel went offline: close the streams kept for it once their requests are done. */
  tunnelRemoved(tunnel: OnlineTunnel): void {
    this.relay.tunnelRemoved(tunnel);
  }
}
