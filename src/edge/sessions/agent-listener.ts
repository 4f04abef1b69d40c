import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import tls from 'node:tls';
import { formatHostPort, parseHostPort } from '../../core/host-port.js';
import type { Logger } from '../../core/logger.js';
import { compiledPolicyCacheSize, PolicyEventLog, type SecretsLookup } from '../../policy/index.js';
import { BURROW_ALPN } from '../../protocol/index.js';
import type { Repositories } from '../../store/index.js';
import { AgentSession, DEFAULT_SESSION_LIMITS, type SessionLimits } from './agent-session.js';
import { SessionTunnel } from './agent-tunnel.js';
import { RpcBudgets } from './agent-rpc.js';
import type { AgentEdgeSettings } from '../binds/agent-edge-settings.js';
import { BindPolicy } from '../binds/bind-policy.js';
import {
  agentListenerCertificate,
  renewServerCertificate,
  type LocalCa,
} from '../certificates/certificates.js';
import {
  EndpointPolicies,
  type EndpointPolicyCounts,
  type PolicyRetention,
  type EndpointPolicyEvents,
} from '../binds/endpoint-policy.js';
import type { AgentCertificatePicker } from './agent-listener-certificates.js';
import { gateConnections, RefusalLog, type ConnectionGate } from '../listeners/connection-gate.js';
import { enforceHandshakeDeadline } from '../listeners/handshake-deadline.js';
import { proxyProtocolFront } from '../listeners/proxy-protocol-front.js';
import type { EdgeMetrics } from '../metrics/metrics.js';
import { RevocationWatch } from './revocation.js';
import type { TunnelClaims } from './agent-binds.js';
import { ResumptionKeys } from '../binds/session-resumption.js';
import {
  servedByAgent,
  type OnlineTunnel,
  type TunnelRegistry,
} from '../registry/tunnel-registry.js';

export interface AgentListenerOptions {
  /** `host:port` to listen on (`--agent-listen`); port 0 picks a free one. */
  listen: string;
  repos: Repositories;
  registry: TunnelRegistry;
  metrics: EdgeMetrics;
  logger: Logger;
  ca: LocalCa;
  settings: AgentEdgeSettings;
  /** Further names agents dial, for the listener certificate (loopback names are always in). */
  hosts?: readonly string[];
  /**
   * Serves a stored (ACME-issued or uploaded) certificate to agents that dial `--agent-hostname`,
   * instead of the local CA's.
   */
  publicCertificate?: AgentCertificatePicker | undefined;
  /** Folder of real certificates (`<host>.pem` + `.key`) that win over the local CA. */
  certsDir?: string;
  limits?: Partial<SessionLimits>;
  /** Where endpoints' traffic policies send events (the API's source). Default: a log of its own. */
  policyEvents?: EndpointPolicyEvents | undefined;
  /** What bound policies' `secrets.get` reads (the edge's SecretsResolver). */
  secrets?: SecretsLookup | undefined;
  /** How often live sessions' credentials are checked against the store (ms; 0: never). */
  revocationCheckMs?: number | undefined;
  /** Open connections in all and per client IP (`--agent-max-connections[-per-ip]`). */
  maxConnections?: { total: number; perIp: number } | undefined;
  /** TLS handshake deadline (`--tls-handshake-timeout-ms`); default the Auth timeout. */
  handshakeTimeoutMs?: number | undefined;
  /**
   * `--agent-proxy-protocol 1`: every connection starts with a PROXY v1/v2 header (behind a load
   * balancer); sessions, per-IP limits and logs see the client address it names.
   */
  proxyProtocol?: boolean | undefined;
  /** The cluster's claims on names and ports (several nodes on one store); absent on one node. */
  claims?: TunnelClaims | undefined;
  /** How long and how many gone binds' policy states are kept (default POLICY_RETENTION). */
  policyRetention?: Partial<PolicyRetention> | undefined;
}

/** A running agent listener. */
export interface AgentListener {
  /** The bound `host:port`, with the real port. */
  address: string;
  port: number;
  /** Sessions connected now, authenticated or not. */
  sessions(): AgentSession[];
  /** Closes sessions whose credential was revoked; `checkNow()` after a change in this process. */
  revocation: RevocationWatch;
  /** The endpoints' live traffic policies (the cluster gives other nodes' tunnels theirs here). */
  policies: EndpointPolicies;
  /**
   * Stop accepting agents and send every session GOAWAY so agents reconnect (to another edge, or
   * to this one once it is back); resolves when they are gone or after `graceMs`.
   */
  drain(message?: string, graceMs?: number): Promise<void>;
  /** drain(), then free the port. */
  close(): Promise<void>;
}

/** The gauges of policy states and of compiled policies (compilePolicy's cache, process-wide). */
function policyGauges(metrics: EdgeMetrics, counts: EndpointPolicyCounts): void {
  metrics.policyStates.with({ state: 'live' }).set(counts.live);
  metrics.policyStates.with({ state: 'retained' }).set(counts.retained);
  metrics.policyStateBytes.with({ state: 'live' }).set(counts.liveBytes);
  metrics.policyStateBytes.with({ state: 'retained' }).set(counts.retainedBytes);
  const compiled = compiledPolicyCacheSize();
  metrics.compiledPolicies.with({ unit: 'entries' }).set(compiled.entries);
  metrics.compiledPolicies.with({ unit: 'bytes' }).set(compiled.bytes);
}

/** Keep the registry's gauges current and mark removed tunnels so they refuse connections. */
function watchRegistry(registry: TunnelRegistry, metrics: EdgeMetrics): () => void {
  // This node's own: other nodes' sessions and tunnels (src/edge/cluster) count on their node.
  const sessionsChanged = (): void =>
    metrics.sessions.with().set(registry.listSessions().filter((s) => !s.node).length);
  // This node's agents' tunnels, as the API lists them: not cloud endpoints or edges' hostports.
  const counted = (t: OnlineTunnel): boolean => !t.node && servedByAgent(t);
  const added = (t: OnlineTunnel): void => {
    if (counted(t)) metrics.tunnels.with({ proto: t.proto ?? 'labeled' }).inc();
  };
  const removed = (t: OnlineTunnel): void => {
    if (t instanceof SessionTunnel) t.removed = true;
    if (counted(t)) metrics.tunnels.with({ proto: t.proto ?? 'labeled' }).dec();
  };
  registry.on('session-added', sessionsChanged);
  registry.on('session-removed', sessionsChanged);
  registry.on('tunnel-added', added);
  registry.on('tunnel-removed', removed);
  return () => {
    registry.off('session-added', sessionsChanged);
    registry.off('session-removed', sessionsChanged);
    registry.off('tunnel-added', added);
    registry.off('tunnel-removed', removed);
  };
}

/**
 * Start the agent side of the edge: a TLS listener (certificate from the local CA, renewed before
 * it expires) speaking the agent protocol. Agents offering no ALPN (the ngrok SDKs) get the
 * standard 256 KiB stream window; agents offering `burrow/1` get BURROW_WINDOW.
 *
 * @example
 * const agents = await startAgentListener({ listen: '127.0.0.1:4443', repos, registry, metrics, logger, ca,
 *   settings: { baseDomain: 'burrow.localhost', tcpHost: 'localhost', tcpPorts: { first: 20000, last: 20999 }, httpsPort: 8443, httpPort: 8080 } });
 * process.once('SIGTERM', () => void agents.close());
 */
export async function startAgentListener(options: AgentListenerOptions): Promise<AgentListener> {
  // Port 0 (any free port) is fine here, unlike in hostports.
  const hp = parseHostPort(options.listen);
  if (!hp) throw new Error(`--agent-listen must be host:port, got '${options.listen}'`);
  const host = hp.host;
  const logger = options.logger.child({ component: 'agents' });
  const limits = { ...DEFAULT_SESSION_LIMITS, ...options.limits };
  const keys = await ResumptionKeys.load(options.repos.settings);
  const obtain = () =>
    agentListenerCertificate(options.ca, {
      hosts: [host, ...(options.hosts ?? [])],
      certsDir: options.certsDir,
    });
  const cert = await obtain();
  const region = options.settings.region ?? 'local';
  const policies = new EndpointPolicies({
    registry: options.registry,
    events: options.policyEvents ?? new PolicyEventLog({ logger }),
    ipPolicyRules: (ids) => options.repos.ipPolicies.rulesFor(ids),
    secrets: options.secrets,
    retention: options.policyRetention,
    liveBudget: limits.livePolicyBytes,
    onChange: (counts) => policyGauges(options.metrics, counts),
  });
  const live = new Set<AgentSession>();
  const refusalLog = new RefusalLog(logger, options.metrics);
  const revocation = new RevocationWatch({
    repos: options.repos,
    sessions: () => live,
    logger,
    metrics: options.metrics,
    intervalMs: options.revocationCheckMs ?? 1000,
  });
  const ctx = {
    repos: options.repos,
    registry: options.registry,
    metrics: options.metrics,
    logger,
    limits,
    region,
    keys,
    policy: new BindPolicy(options.repos, options.registry, options.settings),
    policies,
    serving: { logger, metrics: options.metrics, timeoutMs: limits.rpcTimeoutMs },
    rpcBudgets: new RpcBudgets(limits.rpcBudget, options.metrics.rpcPendingBytes.with()),
    revocation,
    refusals: refusalLog,
    claims: options.claims,
  };

  const server = tls.createServer({
    cert: cert.certPem,
    key: cert.keyPem,
    ALPNProtocols: [BURROW_ALPN],
    ...(options.publicCertificate ? { SNICallback: options.publicCertificate.sniCallback } : {}),
    minVersion: 'TLSv1.2',
  });
  // Unauthenticated connections must not pile up: the handshake and then Auth each get a deadline.
  enforceHandshakeDeadline(server, options.handshakeTimeoutMs ?? limits.authTimeoutMs, logger);
  let gate: ConnectionGate | undefined;
  if (options.maxConnections) {
    const { total, perIp } = options.maxConnections;
    gate = gateConnections(server, { name: 'agent', maxTotal: total, maxPerIp: perIp }, refusalLog);
  }
  // The header is read before the TLS server sees the socket, so the gate counts the real client;
  // connections still waiting for it count in the total (they hold descriptors too).
  const listener = options.proxyProtocol
    ? proxyProtocolFront(server, {
        timeoutMs: options.handshakeTimeoutMs ?? limits.authTimeoutMs,
        onRefused: (peer) => refusalLog.refused(peer, 'agent_proxy_protocol'),
        handOverPaused: true,
      })
    : server;
  if (listener !== server) gate?.attach(listener, { perAddress: false });
  server.on('secureConnection', (socket: tls.TLSSocket) => {
    const session = new AgentSession(socket, ctx);
    live.add(session);
    session.mux.once('close', () => live.delete(session));
    session.start();
  });
  const unwatch = watchRegistry(options.registry, options.metrics);
  const renewal = renewServerCertificate(server, cert, obtain, { logger });
  revocation.start();

  listener.listen(hp.port, host);
  try {
    await once(listener, 'listening');
  } catch (err) {
    renewal.stop();
    revocation.stop();
    unwatch();
    policies.close();
    throw err;
  }
  const port = (listener.address() as AddressInfo).port;
  const address = formatHostPort(host, port);
  logger.info({ address, certificate: cert.source }, 'agent listener ready');

  let closing: Promise<void> | undefined;
  let stopped: Promise<void> | undefined;
  const stopAccepting = (): Promise<void> =>
    (stopped ??= new Promise<void>((resolve) => listener.close(() => resolve())));
  const drain = async (message = 'the edge is shutting down; reconnect', graceMs = 5000) => {
    void stopAccepting();
    const ended = [...live].map((s) => s.mux.wait());
    for (const session of live) session.close(message);
    const deadline = new Promise<void>((resolve) => setTimeout(resolve, graceMs).unref());
    await Promise.race([Promise.all(ended).then(() => undefined), deadline]);
    for (const session of live) session.mux.destroy();
  };
  return {
    address,
    port,
    sessions: () => [...live],
    revocation,
    policies,
    drain,
    close() {
      closing ??= (async () => {
        await drain();
        renewal.stop();
        revocation.stop();
        unwatch();
        policies.close();
        await stopAccepting();
      })();
      return closing;
    },
  };
}
