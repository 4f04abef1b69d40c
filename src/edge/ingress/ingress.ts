/**
 * The edge's public ingress: plain HTTP on `--http-listen`, HTTPS and TLS (by SNI) on
 * `--https-listen`, and one port per TCP route, all forwarding to the routes of one registry
 * (agents' endpoints, cloud endpoints, edges' hostports) through the same gate and relays.
 */
import { once } from 'node:events';
import type { AddressInfo, Server, ServerOpts } from 'node:net';
import type { Logger } from '../../core/logger.js';
import type { AcmeChallengeLookup } from '../certificates/acme-http-challenge.js';
import type { CertificateStore } from '../certificates/certificate-store.js';
import { EndpointMeters } from '../metrics/endpoint-meters.js';
import { HttpIngress, type HttpIngressOptions } from './http/http-ingress.js';
import type { EdgeMetrics } from '../metrics/metrics.js';
import { formatAddress, parseListenAddress } from '../../core/host-port.js';
import { SniRouter } from './sni-router.js';
import { TcpIngress } from './tcp-ingress.js';
import { relayTimeoutsOf, type RelayClosedHook } from './proxy.js';
import type { OnlineTunnel, TunnelRegistry } from '../registry/tunnel-registry.js';
import { DEFAULT_LIMITS, type ServerLimits } from '../../core/limits.js';
import { ConnectionGate, RefusalLog } from '../listeners/connection-gate.js';
import { proxyProtocolFront } from '../listeners/proxy-protocol-front.js';

export interface IngressOptions {
  /** `host:port` for plain HTTP; port 0 picks a free port. */
  httpListen: string;
  /** `host:port` for HTTPS and TLS passthrough. */
  httpsListen: string;
  /** Interface TCP endpoints listen on. Default: the host of `httpListen`. */
  tcpBindHost?: string | undefined;
  registry: TunnelRegistry;
  metrics: EdgeMetrics;
  certificates: CertificateStore;
  /** Certificate for HTTPS clients that send no SNI; without it their handshake fails. */
  defaultCertificate?: { certPem: string; keyPem: string } | undefined;
  logger?: Logger | undefined;
  /** How long to wait for an agent to accept a proxied connection. Default 10 s. */
  connectTimeoutMs?: number | undefined;
  /** ACME HTTP-01 answers (when ACME is on). */
  acmeChallenge?: AcmeChallengeLookup | undefined;
  /** Told of every routed HTTP exchange (the traffic inspector). */
  exchangeTap?: HttpIngressOptions['exchangeTap'];
  /** Whether traces are exported now (traffic events): requests then get the edge's span. */
  tracing?: HttpIngressOptions['tracing'];
  /** Told of each TCP and TLS-passthrough connection as it ends (traffic events). */
  onRelayClosed?: RelayClosedHook | undefined;
  /** Listener limits (`--ingress-max-connections`, `--headers-timeout-ms`, …); default DEFAULT_LIMITS. */
  limits?: ServerLimits | undefined;
}

export interface Ingress {
  /** `host:port` the HTTP listener is bound to. */
  httpAddress: string;
  /** `host:port` the HTTPS listener is bound to. */
  httpsAddress: string;
  /** TCP endpoints: which ports listen, and waiting for one to be ready. */
  tcp: Pick<TcpIngress, 'ports' | 'listening'>;
  /** Stop now: listeners closed, every open connection cut. */
  close(): Promise<void>;
  /**
   * Stop accepting, let open requests and connections finish for up to `graceMs`, then close.
   * Keep-alive connections are closed as soon as their current response is sent.
   */
  drain(graceMs: number): Promise<void>;
}

async function listen(server: Server, address: string): Promise<string> {
  const { host, port } = parseListenAddress(address);
  server.listen(port, host);
  await Promise.race([
    once(server, 'listening'),
    once(server, 'error').then(([err]: unknown[]) => {
      throw err;
    }),
  ]);
  return formatAddress(server.address() as AddressInfo);
}

/**
 * Start the public listeners.
 * @example
 * const ingress = await startIngress({ httpListen: '127.0.0.1:8080', httpsListen: '127.0.0.1:8443',
 *   registry, metrics, certificates, logger });
 * process.once('SIGTERM', () => void ingress.drain(30_000));
 */
export async function startIngress(options: IngressOptions): Promise<Ingress> {
  const { registry, logger } = options;
  const meters = new EndpointMeters(options.metrics);
  const limits = options.limits ?? DEFAULT_LIMITS;
  const refusals = new RefusalLog(logger, options.metrics);
  const relayTimeouts = relayTimeoutsOf(limits, (ip, limit) => refusals.timedOut(ip, limit));
  const http = new HttpIngress({
    registry,
    meters,
    limits,
    connectTimeoutMs: options.connectTimeoutMs,
    acmeChallenge: options.acmeChallenge,
    exchangeTap: options.exchangeTap,
    tracing: options.tracing,
    onLimit: (ip, limit) => refusals.refused(ip, limit),
    relayTimeouts,
  });
  const sni = new SniRouter({
    registry,
    meters,
    http,
    certificates: options.certificates,
    defaultCertificate: options.defaultCertificate,
    logger,
    connectTimeoutMs: options.connectTimeoutMs,
    handshakeTimeoutMs: limits.tlsHandshakeTimeoutMs,
    relayTimeouts,
    onRelayClosed: options.onRelayClosed,
  });
  // One budget for every public port: an address's connections to the HTTP, the HTTPS and all
  // TCP endpoint ports add up, so opening more endpoints does not give it more.
  const gate = new ConnectionGate(
    {
      name: 'ingress',
      maxTotal: limits.ingressMaxConnections,
      maxPerIp: limits.ingressMaxConnectionsPerIp,
    },
    refusals,
  );
  gate.attach(http.server);
  gate.attach(sni.server);
  // Behind a load balancer: listen on a front that reads the PROXY header, then hands over.
  // Connections waiting for their header count in the gate's total too (not against the
  // balancer's address): they hold descriptors like any other.
  const front = (server: Server, socketOptions?: ServerOpts): Server => {
    if (limits.ingressProxyProtocol !== 1) return server;
    const outer = proxyProtocolFront(server, {
      timeoutMs: limits.tlsHandshakeTimeoutMs,
      onRefused: (peer) => refusals.refused(peer, 'ingress_proxy_protocol'),
      socketOptions,
    });
    gate.attach(outer, { perAddress: false });
    return outer;
  };
  const tcp = new TcpIngress({
    registry,
    meters,
    bindHost: options.tcpBindHost ?? parseListenAddress(options.httpListen).host,
    logger,
    connectTimeoutMs: options.connectTimeoutMs,
    relayTimeouts,
    onRelayClosed: options.onRelayClosed,
    // Each TCP port (endpoints and edges alike) counts against the ingress's one gate, like the
    // HTTP and HTTPS ports, and behind a load balancer gets the PROXY header reader.
    front: (server, socketOptions) => {
      gate.attach(server);
      return front(server, socketOptions);
    },
  });
  const onRemoved = (tunnel: OnlineTunnel): void => {
    http.tunnelRemoved(tunnel);
    meters.tunnelRemoved(tunnel);
  };
  const onAdded = (tunnel: OnlineTunnel): void => meters.tunnelAdded(tunnel);

  const httpListener = front(http.server);
  const httpsListener = front(sni.server);
  let httpAddress: string;
  let httpsAddress: string;
  try {
    httpAddress = await listen(httpListener, options.httpListen);
    httpsAddress = await listen(httpsListener, options.httpsListen);
  } catch (err) {
    httpListener.close();
    httpsListener.close();
    throw err;
  }
  registry.on('tunnel-removed', onRemoved);
  registry.on('tunnel-added', onAdded);
  tcp.start();
  logger?.info({ http: httpAddress, https: httpsAddress }, 'ingress listening');

  let closed: Promise<void> | undefined;
  let drained: Promise<void> | undefined;
  const openConnections = (): number =>
    http.openConnections + sni.openConnections + tcp.openConnections;
  const stopAccepting = async (): Promise<void> => {
    if (httpListener.listening) httpListener.close();
    if (httpsListener.listening) httpsListener.close();
    await tcp.stopAccepting();
  };

  const close = (): Promise<void> => {
    closed ??= (async () => {
      registry.off('tunnel-removed', onRemoved);
      registry.off('tunnel-added', onAdded);
      await stopAccepting();
      sni.destroyAll();
      tcp.destroyAll();
      http.destroyAll();
      await new Promise((resolve) => setImmediate(resolve));
    })();
    return closed;
  };

  const drain = (graceMs: number): Promise<void> => {
    drained ??= (async () => {
      http.startDraining();
      await stopAccepting();
      const deadline = Date.now() + graceMs;
      while (openConnections() > 0 && Date.now() < deadline) {
        http.closeIdle();
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      const left = openConnections();
      if (left > 0) logger?.warn({ connections: left }, 'drain grace over; closing connections');
      await close();
    })();
    return drained;
  };

  return { httpAddress, httpsAddress, tcp, close, drain };
}
