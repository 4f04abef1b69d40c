/**
 * The HTTP/1.x relay of one ingress: its public connections, the tunnel streams they keep idle
 * between connections, and the limits they share. The ingress routes each request (`route`) and
 * serves the connections that turn out to speak HTTP/2 with prior knowledge (`h2c`).
 */
import type { Duplex } from 'node:stream';
import type { EndpointMeters } from '../../metrics/endpoint-meters.js';
import type { CounterSeries } from '../../metrics/metric-families.js';
import type { PublicConnections } from './http-connections.js';
import type { OnlineTunnel } from '../../registry/tunnel-registry.js';
import type { ExchangeTap } from './exchange.js';
import { HttpConnection } from './http-connection.js';
import type { RequestHead } from './request-head.js';
import { StreamPool } from './stream-pool.js';
import type { RespondDecision } from '../../../policy/index.js';
import type { IngressError } from '../error-pages.js';
import type { LeanPolicyRun } from './http-policy-lean.js';
import type { RawRelays } from './protocol-switch.js';
import type { PolicyBodySource } from './body-peek.js';
import type { H2Upstreams } from './h2-upstream.js';
import { POLICY_FAILED_ANSWER } from './http-policy-writes.js';

/**
 * Where the relay carries a request: `tunnel` (a pool member, picked), reached through `via`, the
 * endpoints whose policy forwarded it there (forward-internal), first to last; they count it too.
 */
export interface LeanRoute {
  tunnel: OnlineTunnel;
  via: readonly OnlineTunnel[];
  /** The endpoint's policy as the relay applies it (header changes, the response phase). */
  policy?: LeanPolicyRun | undefined;
  /** The policy answered the request itself: the relay writes this and asks the agent nothing. */
  answer?: RespondDecision | undefined;
  /** The policy closes the connection without an answer (close-connection). */
  close?: boolean | undefined;
  /**
   * The request as the policies of the endpoints it passed left it (header changes, a new target
   * before a forward-internal): what the agent gets. Unset when it goes as it came.
   */
  sent?: RequestHead | undefined;
}

/**
 * The edge's own page for a request no endpoint serves (no Host, no tunnel, a misdirected
 * connection) or that it refuses (too many headers).
 */
export interface LeanPage {
  page: IngressError;
  /** What the page says in its parentheses (the limit gone over). */
  detail?: string | undefined;
  /** The connection closes after it. */
  close?: boolean | undefined;
}

/** An answer of the edge's that is no endpoint's and no error: an ACME HTTP-01 challenge's. */
export interface LeanEdgeAnswer {
  edge: { status: number; headers: Record<string, string>; body: string };
}

/** What the relay's routing says of a request: where it goes, or the edge's page or answer. */
export type LeanRouting = LeanRoute | LeanPage | LeanEdgeAnswer;

/**
 * The answer to a request whose routing failed unexpectedly (a policy's decision that rejected
 * instead of failing closed itself): the policy's 500, as every wire writes it.
 */
export const ROUTING_FAILED: LeanEdgeAnswer = { edge: { ...POLICY_FAILED_ANSWER } };

/** What every connection of one listener shares. */
export interface HttpRelayContext {
  meters: EndpointMeters;
  connections: PublicConnections;
  pool: StreamPool;
  maxHeaderBytes: number;
  headersTimeoutMs: number;
  keepAliveTimeoutMs: number;
  connectTimeoutMs: number | undefined;
  tap: ExchangeTap | undefined;
  /** Whether traces are exported now: each request then gets the edge's span (trace-context.ts). */
  tracing(): boolean;
  /** Counts streams given up because their client left before the exchange ended. */
  released: CounterSeries;
  /** Where a connection goes after the agent answered its upgrade with a 101. */
  raw: RawRelays;
  /** HTTP/2 sessions to services bound with app protocol `http2` (h2-bridge.ts, h2-call.ts). */
  h2Upstreams: H2Upstreams;
  /**
   * Where this relay carries the request, or the edge's own page or answer for it. A promise
   * when a policy's decision waits (jwt-validation, a body it reads first); bytes that arrive
   * meanwhile are held, as pipelined requests are.
   */
  route(
    head: RequestHead,
    host: string | undefined,
    socket: Duplex,
    /** The request's body, read on demand for a policy that decides on it (body-peek.ts). */
    body: PolicyBodySource,
  ): LeanRouting | Promise<LeanRouting>;
  /** Serve a connection that began with HTTP/2's preface (h2c); `buffered` was read, not served. */
  h2c(socket: Duplex, buffered: Buffer): void;
  /** A client went over a limit the relay enforces. */
  onLimit(clientIp: string, limit: string): void;
  /** True once the ingress drains: connections close after their current response. */
  readonly draining: boolean;
  /** Forget a closed connection. */
  closed(connection: HttpConnection): void;
}

export interface HttpRelayOptions {
  meters: EndpointMeters;
  connections: PublicConnections;
  maxHeaderBytes: number;
  headersTimeoutMs: number;
  keepAliveTimeoutMs: number;
  connectTimeoutMs?: number | undefined;
  /** Idle tunnel streams are closed after this long. Default 15 s. */
  idleStreamMs?: number | undefined;
  /** Idle tunnel streams kept per tunnel and client. Default 32. */
  idleStreamsPerClient?: number | undefined;
  tap?: ExchangeTap | undefined;
  tracing?: (() => boolean) | undefined;
  raw: RawRelays;
  h2Upstreams: H2Upstreams;
  route: HttpRelayContext['route'];
  h2c: HttpRelayContext['h2c'];
  onLimit: HttpRelayContext['onLimit'];
}

/**
 * @example
 * const relay = new HttpRelay({ meters, connections, raw, route, h2c, onLimit, ...limits });
 * netServer.on('connection', (socket) => relay.accept(socket));
 */
export class HttpRelay {
  private readonly open = new Set<HttpConnection>();
  private readonly pool: StreamPool;
  /** What its connections share; HTTP/2 exchanges on the same pipeline share it too. */
  readonly context: HttpRelayContext;
  private drainingNow = false;

  constructor(options: HttpRelayOptions) {
    this.pool = new StreamPool({
      idleMs: options.idleStreamMs,
      maxPerClient: options.idleStreamsPerClient,
    });
    const isDraining = (): boolean => this.drainingNow;
    this.context = {
      meters: options.meters,
      connections: options.connections,
      pool: this.pool,
      maxHeaderBytes: options.maxHeaderBytes,
      headersTimeoutMs: options.headersTimeoutMs,
      keepAliveTimeoutMs: options.keepAliveTimeoutMs,
      connectTimeoutMs: options.connectTimeoutMs,
      tap: options.tap,
      tracing: options.tracing ?? (() => false),
      released: options.meters.metrics.streamsReleased.with({ path: 'lean' }),
      raw: options.raw,
      h2Upstreams: options.h2Upstreams,
      route: options.route,
      h2c: options.h2c,
      onLimit: options.onLimit,
      get draining() {
        return isDraining();
      },
      closed: (connection) => this.open.delete(connection),
    };
  }

  /** Serve a public connection (plain, or TLS already terminated). */
  accept(socket: Duplex): void {
    const connection = new HttpConnection(socket, this.context);
    this.open.add(connection);
    connection.start();
  }

  /** Connections close after their current response; idle ones now. */
  startDraining(): void {
    this.drainingNow = true;
    this.closeIdle();
  }

  closeIdle(): void {
    for (const connection of this.open) connection.closeIfIdle();
  }

  /** Close the idle streams kept (the connections themselves are PublicConnections'). */
  dropIdleStreams(): void {
    this.pool.destroyAll();
  }

  /** A tunnel went offline: its idle streams close. */
  tunnelRemoved(tunnel: OnlineTunnel): void {
    this.pool.retire(tunnel);
    for (const connection of this.open) connection.tunnelRemoved(tunnel);
  }
}
