/**
 * One public connection to a TCP or TLS edge: the ip_restriction module, the traffic policy's
 * on_tcp_connect, then the backend (a labeled tunnel, or a static address), relayed byte for byte.
 * A refused connection, or one with nowhere to go, is closed at once.
 */
import { domainCovers } from '../../core/hostname.js';
import { parseHostPort } from '../../core/host-port.js';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import { ipAllowed } from '../../core/cidr.js';
import type { Logger } from '../../core/logger.js';
import { compilePolicy, type PolicyRunner } from '../../policy/index.js';
import type { IpPolicyRule, PolicyEventSink } from '../../policy/events.js';
import type { SecretsLookup } from '../../policy/secrets.js';
import type { ConnInput, EndpointInput, TlsInput } from '../../policy/variables.js';
import type { CertificateStore } from '../certificates/certificate-store.js';
import { offeredTlsVersion, TLS_INTERNAL_ERROR_ALERT } from './client-hello.js';
import { BackendBalancer, openUpstream } from '../registry/edge-routing.js';
import type { EdgeSpec } from '../registry/edge-specs.js';
import { EdgeTlsTerminator, tlsInputOf } from './edge-tls.js';
import { EndpointMeter } from '../metrics/endpoint-meters.js';
import type { EdgeMetrics } from '../metrics/metrics.js';
import { connInputOf } from './policy-gate.js';
import {
  clientAddr,
  clientIp,
  DEFAULT_CONNECT_TIMEOUT_MS,
  serverAddr,
} from '../registry/connect-tunnel.js';
import { relay } from '../../core/relay.js';
import type { ProxyInfo, TunnelRegistry } from '../registry/tunnel-registry.js';

export interface EdgeTrafficOptions {
  registry: Pick<TunnelRegistry, 'matchingLabels'>;
  metrics?: EdgeMetrics | undefined;
  logger?: Logger | undefined;
  connectTimeoutMs?: number | undefined;
  /** For weighted backends; tests pin it. */
  random?: (() => number) | undefined;
}

/**
 * What every edge's connections share: the balancer (round-robin turns per backend), the open
 * connections (for drain), and one meter per hostport (`tcp://host:port`, `tls://name:port`).
 * @example const traffic = new EdgeTraffic({ registry, metrics, logger });
 */
export class EdgeTraffic {
  readonly balancer: BackendBalancer;
  readonly logger: Logger | undefined;
  readonly connectTimeoutMs: number;
  private readonly sockets = new Set<Duplex>();
  private readonly meters = new Map<string, EndpointMeter>();

  constructor(private readonly options: EdgeTrafficOptions) {
    this.balancer = new BackendBalancer(options.registry, options.random);
    this.logger = options.logger;
    this.connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
  }

  /** Public connections open now, relayed or still being admitted. */
  get openConnections(): number {
    return this.sockets.size;
  }

  /** Count `socket` as open until it closes. */
  track(socket: Duplex): void {
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
  }

  destroyAll(): void {
    for (const socket of this.sockets) socket.destroy();
  }

  /** The meter of a hostport; undefined without metrics. */
  meter(label: string): EndpointMeter | undefined {
    if (!this.options.metrics) return undefined;
    let meter = this.meters.get(label);
    if (!meter) {
      meter = new EndpointMeter(this.options.metrics, label);
      this.meters.set(label, meter);
    }
    return meter;
  }

  /** Drop the series of hostports no edge serves any more. */
  retainMeters(labels: ReadonlySet<string>): void {
    for (const [label, meter] of this.meters) {
      if (labels.has(label)) continue;
      this.meters.delete(label);
      meter.removeSeries();
    }
  }
}

/** What a live edge needs besides the shared traffic state. */
export interface LiveEdgeDeps {
  traffic: EdgeTraffic;
  certificates: Pick<CertificateStore, 'certificateFor'>;
  events?: PolicyEventSink | undefined;
  /** Rules of IP policies named by restrict-ips actions, looked up per connection. */
  ipPolicyRules: (ids: readonly string[]) => Promise<readonly IpPolicyRule[]>;
  /** What `secrets.get` reads. */
  secrets?: SecretsLookup | undefined;
}

/**
 * `label` of a hostport's meter.
 * @example meterLabel('tcp', 'tcp.burrow.test:20001') // 'tcp://tcp.burrow.test:20001'
 */
export function meterLabel(type: EdgeSpec['type'], hostport: string): string {
  return `${type}://${hostport}`;
}

/**
 * The host of an edge hostport as stored (an IPv6 host keeps its brackets); the text itself when
 * it does not parse.
 * @example hostportHost('*.tls.burrow.test:443') // '*.tls.burrow.test'
 */
export function hostportHost(hostport: string): string {
  return parseHostPort(hostport, { keepBrackets: true })?.host ?? hostport;
}

function endpointOf(spec: EdgeSpec, hostport: string): EndpointInput {
  const parsed = parseHostPort(hostport, { keepBrackets: true });
  return {
    id: spec.id,
    url: meterLabel(spec.type, hostport),
    host: parsed?.host ?? hostport,
    port: parsed?.port ?? 0,
    protocol: spec.type,
    addr: hostport,
  };
}

/**
 * A stored edge made live: its compiled policy runner (bound once, so rate-limit state and events
 * belong to the edge) and, when it terminates TLS, its TLS server. Replaced whole when the edge
 * changes; connections already open keep the object they started with.
 * @example new LiveEdge(spec, JSON.stringify(spec), deps).acceptTcp(socket, 'tcp.burrow.test:20001');
 */
export class LiveEdge {
  readonly runner: PolicyRunner | undefined;
  /** Why the stored policy cannot run; connections are then refused rather than let through. */
  readonly policyProblem: string | undefined;
  readonly terminator: EdgeTlsTerminator | undefined;
  /** Each hostport with its host, parsed once rather than on every connection. */
  private readonly hosts: ReadonlyArray<readonly [host: string, hostport: string]>;

  constructor(
    readonly spec: EdgeSpec,
    readonly signature: string,
    private readonly deps: LiveEdgeDeps,
  ) {
    this.hosts = spec.hostports.map((hostport) => [hostportHost(hostport), hostport] as const);
    if (spec.policy !== null) {
      try {
        this.runner = compilePolicy(spec.policy, {
          protocol: spec.type,
          field: 'traffic_policy.value',
        }).bind({
          ownerId: spec.id,
          events: deps.events,
          ipPolicyRules: deps.ipPolicyRules,
          secrets: deps.secrets,
        });
      } catch (err) {
        this.policyProblem = (err as Error).message;
        deps.traffic.logger?.error(
          { err, edge: spec.id },
          'stored traffic policy cannot run; refusing the edge its connections',
        );
      }
    }
    if (spec.termination) {
      this.terminator = new EdgeTlsTerminator(
        { minVersion: spec.termination.minVersion, caPems: spec.mutualTls?.caPems ?? null },
        deps.certificates,
        (socket) => void this.serveTerminated(socket),
        { logger: deps.traffic.logger },
      );
    }
  }

  /** The hostport `name` arrived on: exact first, then the wildcard that covers it. */
  hostportFor(name: string): string | undefined {
    const found =
      this.hosts.find(([host]) => host === name) ??
      this.hosts.find(([host]) => domainCovers(host, name));
    return found?.[1];
  }

  /** A connection to one of this TCP edge's hostports. */
  acceptTcp(socket: Socket, hostport: string): void {
    const { traffic } = this.deps;
    traffic.track(socket);
    socket.on('error', () => socket.destroy());
    socket.pause();
    void this.admitAndForward(socket, hostport, connInputOf(socket), {
      clientAddr: clientAddr(socket),
      serverAddr: serverAddr(socket),
      proto: 'tcp',
      edgeType: '1',
      passthroughTls: false,
    });
  }

  /** A connection to this TLS edge whose ClientHello (`hello`) named `serverName`. */
  acceptTls(socket: Socket, hello: Buffer, serverName: string): void {
    const { traffic } = this.deps;
    traffic.track(socket);
    socket.on('error', () => socket.destroy());
    if (!this.ipAllowed(socket)) {
      socket.destroy();
      return;
    }
    if (this.terminator) {
      this.terminator.accept(socket, hello);
      return;
    }
    // The handshake ends at the agent: the edge knows only what the client offered.
    const tls: TlsInput = { version: offeredTlsVersion(hello), sni: serverName };
    const hostport = this.hostportFor(serverName) ?? `${serverName}:0`;
    void this.admitAndForward(
      socket,
      hostport,
      connInputOf(socket, tls),
      {
        clientAddr: clientAddr(socket),
        serverAddr: serverAddr(socket),
        proto: 'tls',
        edgeType: '2',
        passthroughTls: true,
      },
      hello,
    );
  }

  private async serveTerminated(socket: TLSSocket): Promise<void> {
    socket.pause();
    const servername = typeof socket.servername === 'string' ? socket.servername : '';
    const hostport = this.hostportFor(servername) ?? `${servername}:0`;
    const tls = tlsInputOf(socket);
    // The raw socket is counted already; its TLS layer closes with it.
    socket.on('error', () => socket.destroy());
    await this.admitAndForward(socket, hostport, connInputOf(socket, tls), {
      clientAddr: clientAddr(socket),
      serverAddr: serverAddr(socket),
      proto: 'tls',
      edgeType: '2',
      passthroughTls: false,
    });
  }

  private ipAllowed(socket: Socket): boolean {
    const rules = this.spec.ipRules;
    if (rules === null || ipAllowed(rules, clientIp(socket))) return true;
    this.deps.traffic.logger?.debug(
      { edge: this.spec.id, client: clientAddr(socket) },
      'ip_restriction refused a connection',
    );
    return false;
  }

  private async policyAdmits(conn: ConnInput, hostport: string): Promise<boolean> {
    if (!this.runner) return true;
    const decision = await this.runner.onTcpConnect({
      conn,
      endpoint: endpointOf(this.spec, hostport),
    });
    return decision.kind === 'continue';
  }

  /** Everything after the handshake (if any): checks, backend, relay. Never rejects. */
  private async admitAndForward(
    socket: Socket,
    hostport: string,
    conn: ConnInput,
    info: ProxyInfo,
    firstBytes?: Buffer,
  ): Promise<void> {
    const { traffic } = this.deps;
    const refuse = (): void => {
      if (firstBytes && !socket.destroyed) socket.end(TLS_INTERNAL_ERROR_ALERT);
      else socket.destroy();
    };
    try {
      // TLS connections were checked before their handshake; TCP ones are checked here.
      const admitted =
        (info.proto !== 'tcp' || this.ipAllowed(socket)) &&
        this.policyProblem === undefined &&
        (await this.policyAdmits(conn, hostport));
      if (!admitted) {
        socket.destroy();
        return;
      }
      const plan = this.spec.backend;
      if (plan === null || socket.destroyed) {
        refuse();
        return;
      }
      const meter = traffic.meter(meterLabel(this.spec.type, hostport));
      const { stream } = await openUpstream(traffic.balancer.targets(plan), info, {
        plaintext: !info.passthroughTls,
        timeoutMs: traffic.connectTimeoutMs,
      });
      if (socket.destroyed) {
        stream.destroy();
        return;
      }
      if (firstBytes) stream.write(firstBytes);
      if (meter) {
        meter.connections.inc();
        meter.activeConnections.inc();
        if (firstBytes) meter.bytesIn.inc(firstBytes.length);
      }
      // Two pipelines, the relay, the TLS server and the drain tracking each watch 'close': more
      // than Node's leak-warning default of 10, and all released when the connection closes.
      socket.setMaxListeners(20);
      relay(socket, stream, {
        bytesIn: meter?.bytesIn,
        bytesOut: meter?.bytesOut,
        onClose: () => meter?.activeConnections.dec(),
      });
    } catch (err) {
      traffic.logger?.debug(
        { err, edge: this.spec.id, client: info.clientAddr },
        'edge connection not forwarded',
      );
      refuse();
    }
  }
}
