/**
 * What a route is: an online tunnel of an agent, a cloud endpoint or an edge's hostport, as the
 * registry holds it and the ingress serves it (`OnlineTunnel`), with the sessions agents hold and
 * what each proxied connection tells the agent (`ProxyInfo`).
 */
import type { Duplex } from 'node:stream';
import type { IpRule } from '../../core/cidr.js';
import type { EndpointInput, PolicyRunner } from '../../policy/index.js';
import type { TlsTerminationModule } from '../../store/edges.js';

/** How a tunnel is reached from the public side. Labeled tunnels have none: edges route to them. */
export type TunnelProto = 'http' | 'https' | 'tcp' | 'tls';

/** Suffix of internal endpoints' names (`api.internal`, `db.internal:5432`). */
export const INTERNAL_SUFFIX = '.internal';

/** The ProxyHeader fields the edge sends with each proxied connection (docs/protocol.md §7). */
export interface ProxyInfo {
  /** Public client's `ip:port`. */
  clientAddr: string;
  /** Public protocol: http, https, tcp or tls. */
  proto: string;
  /** '' for endpoints, '1' TCP edge, '2' TLS edge, '3' HTTPS edge. */
  edgeType: '' | '1' | '2' | '3';
  passthroughTls: boolean;
  /**
   * The `ip:port` the public client connected to (the ingress socket's local address), for the
   * PROXY protocol header of endpoints bound with ProxyProto; not part of the ProxyHeader.
   */
  serverAddr?: string | undefined;
}

/** An online agent session, as the API's `/tunnel_sessions` shows it. */
export interface OnlineSession {
  id: string;
  credentialId: string;
  /** Agent's address as the edge sees it. */
  ip: string;
  metadata: string;
  os: string;
  agentVersion: string;
  /** "ngrok/2" for third-party agents, "burrow/1" for the Burrow SDK. */
  transport: string;
  startedAt: string;
  /** Region the edge reports to agents (AuthResp, SrvInfo) and the API shows. */
  region?: string | undefined;
  /**
   * The cluster node that holds the session when it is another node (docs/operations.md
   * "Several nodes"); unset for this process's own sessions.
   */
  node?: string | undefined;
  /** Ask the agent to stop (Stop command); resolves when it answered or the session closed. */
  stop(): Promise<void>;
  /** Ask the agent to restart (Restart command). */
  restart(): Promise<void>;
  /** Close the session from the edge side. */
  close(reason: string): void;
}

/**
 * The traffic policy an endpoint enforces (its bind's `TrafficPolicy`), ready to run; the
 * ingress listeners consult it for every connection and request. Labeled tunnels have none: the
 * edges that route to them own the policy.
 */
export interface TunnelPolicy {
  /** Owner of the runner's events and rate-limit counters (see endpoint-policy.ts). */
  readonly ownerId: string;
  readonly runner: PolicyRunner;
  /** The `endpoint.*` variables. */
  readonly endpoint: EndpointInput;
}

/**
 * TLS that ends at the edge before a route's policy runs: a TLS edge's `tls_termination`
 * (`terminate_at: edge`) and `mutual_tls` modules. The agent then gets plaintext.
 */
export interface EdgeTermination {
  /** The lowest version accepted; TLS 1.2 when null. */
  readonly minVersion: TlsTerminationModule['min_version'];
  /** Mutual TLS: the CAs a client certificate must chain to; a client without one is refused. */
  readonly clientCas: readonly string[] | null;
}

/**
 * An online route: an agent's tunnel, a cloud endpoint, or a hostport of a TCP or TLS edge. The
 * ingress routes to every kind the same way; exactly one of hostname, port, internal and labels
 * identifies where it is served.
 */
export interface OnlineTunnel {
  /** `tn_…` */
  id: string;
  sessionId: string;
  /** The bind id the agent chose or was given; resumption re-binds with it. */
  bindId: string;
  proto: TunnelProto | undefined;
  /** Public URL, e.g. `https://app.burrow.localhost:8443` or `tcp://localhost:20001`. */
  url: string | undefined;
  /** http, https and tls tunnels: the served name (may be a wildcard `*.x.example.com`). */
  hostname?: string | undefined;
  /** tcp tunnels: the public port. */
  port?: number | undefined;
  /** Labeled tunnels: their labels. */
  labels?: Record<string, string> | undefined;
  forwardsTo: string;
  metadata: string;
  /** The bind's traffic policy text (JSON or YAML), if any. */
  trafficPolicy?: string | undefined;
  /** The compiled form of `trafficPolicy`; unset when the tunnel has none. */
  policy?: TunnelPolicy | undefined;
  startedAt: string;
  /** The reserved domain (`rd_…`) the name stands on, when it is reserved. */
  domainId?: string | undefined;
  /** The reserved address (`ra_…`) a tcp tunnel serves, when it is reserved. */
  addrId?: string | undefined;
  /**
   * Internal endpoints (binding `internal`): `name.internal` (http, https, tls) or
   * `name.internal:port` (tcp). Never on a public listener: only forward-internal reaches them.
   */
  internal?: string | undefined;
  /** Shares its name or port with other pooling endpoints, round robin (Extra.PoolingEnabled). */
  pooling?: boolean | undefined;
  /**
   * Opts.ProxyProto: each stream to the agent starts with a PROXY protocol header of this version
   * naming the public client (written by the AgentTunnel of the node that holds the session).
   */
  proxyProto?: 1 | 2 | undefined;
  /**
   * Opts.HostHeaderRewrite (http and https endpoints): the request head the agent gets carries
   * `Host: <forwardsTo's host:port>` (written by the ingress of the node that receives the request,
   * http-forwarding.ts rewrittenHost); policies still see the Host the client sent.
   */
  hostHeaderRewrite?: true | undefined;
  /**
   * The bind's ForwardsProto `http2` (@ngrok/ngrok's `.appProtocol('http2')`): the agent pipes a
   * stream's bytes to a service that speaks HTTP/2, so the ingress speaks HTTP/2 with prior
   * knowledge over the tunnel stream (ingress/http/h2-upstream.ts). Unset: HTTP/1.1.
   */
  appProtocol?: 'http2' | undefined;
  /** A cloud endpoint (POST /endpoints): no agent behind it, its traffic policy answers. */
  cloud?: boolean | undefined;
  /** The cluster node whose agent serves the tunnel when it is another node; unset for our own. */
  node?: string | undefined;
  /**
   * A hostport of an edge (the API's `/edges/tcp`, `/edges/tls`): connect() opens its backend,
   * a labeled tunnel or a static address (src/edge/binds/edge-routes.ts).
   */
  edge?: { readonly id: string; readonly type: 'tcp' | 'tls' } | undefined;
  /**
   * An edge's ip_restriction: clients whose address these rules do not allow are closed before
   * anything else runs (before a TLS handshake, before the policy).
   */
  ipRules?: readonly IpRule[] | undefined;
  /** TLS ends at the edge before the policy runs (a TLS edge's termination modules). */
  termination?: EdgeTermination | undefined;
  /** Why every connection is refused (an edge whose stored policy cannot run); never bypassed. */
  refusal?: string | undefined;
  /** Open one proxied connection to the agent; the stream carries the public connection's bytes. */
  connect(info: ProxyInfo): Promise<Duplex>;
}

/**
 * Whether an agent stands behind `tunnel` (its own or another node's), rather than a cloud
 * endpoint or an edge's hostport: what the API lists as tunnels and endpoints of agents.
 * @example registry.listTunnels().filter(servedByAgent)
 */
export function servedByAgent(tunnel: OnlineTunnel): boolean {
  return tunnel.cloud !== true && tunnel.edge === undefined;
}

/**
 * Who holds a route, for messages.
 * @example holderOf(registry.byPort(20001)!) // 'edge edgtcp_2abc…' or 'agent session ts_2abc…'
 */
export function holderOf(tunnel: OnlineTunnel): string {
  if (tunnel.edge) return `${tunnel.edge.type.toUpperCase()} edge ${tunnel.edge.id}`;
  if (tunnel.cloud) return `cloud endpoint ${tunnel.id}`;
  return `agent session ${tunnel.sessionId}`;
}
