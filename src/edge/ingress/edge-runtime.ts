/**
 * TCP and TLS edges on live traffic. The runtime loads every edge from the store and keeps them in
 * sync: at once when this process's API writes an edge (EdgeRepository `changes`), and every
 * `syncIntervalMs` (2 s) for writes made elsewhere (another process over PostgreSQL) or to what
 * edges reference (backends, IP policy rules, certificate authorities). TCP edge hostports get a
 * listener each; TLS edge hostports are names the SNI router hands over (see `route`).
 */
import { coalesced } from '../../core/coalesced.js';
import { longestWildcard } from '../../core/hostname.js';
import { parseHostPort } from '../../core/host-port.js';
import { createServer, type Server, type ServerOpts, type Socket } from 'node:net';
import type { Logger } from '../../core/logger.js';
import type { PolicyEventLog } from '../../policy/events.js';
import type { SecretsLookup } from '../../policy/secrets.js';
import type { Repositories } from '../../store/index.js';
import type { CertificateStore } from '../certificates/certificate-store.js';
import { loadEdgeSpecs } from '../registry/edge-specs.js';
import { EdgeTraffic, hostportHost, LiveEdge, meterLabel } from './edge-traffic.js';
import type { EdgeMetrics } from '../metrics/metrics.js';
import { INGRESS_SOCKET_OPTIONS } from './proxy.js';
import type { TunnelRegistry } from '../registry/tunnel-registry.js';

/** How often edges are reloaded from the store when nothing told this process about a change. */
export const DEFAULT_EDGE_SYNC_INTERVAL_MS = 2000;

export interface EdgeRuntimeOptions {
  repos: Repositories;
  registry: Pick<TunnelRegistry, 'matchingLabels'>;
  certificates: Pick<CertificateStore, 'certificateFor'>;
  /** Interface TCP edge hostports listen on (the host of `--http-listen`). */
  bindHost: string;
  metrics?: EdgeMetrics | undefined;
  /** Where traffic policy events go; the API reads them from the same log. */
  policyEvents?: PolicyEventLog | undefined;
  /** What policies' `secrets.get` reads (the edge's SecretsResolver). */
  secrets?: SecretsLookup | undefined;
  logger?: Logger | undefined;
  syncIntervalMs?: number | undefined;
  connectTimeoutMs?: number | undefined;
  /**
   * What hostport listeners listen through (the ingress's `tcpFront`: connection caps and the
   * PROXY header behind a load balancer); default: the plain server.
   */
  front?: ((server: Server, socketOptions: ServerOpts) => Server) | undefined;
  random?: (() => number) | undefined;
}

/** Where a hostport's connections go now. */
interface Owner {
  edge: LiveEdge;
  hostport: string;
}

interface TcpListener {
  server: Server;
  /** Resolves once listening, or once listening failed (`failed` is then set). */
  ready: Promise<void>;
  failed: boolean;
}

function portOf(hostport: string): number {
  return parseHostPort(hostport)?.port ?? 0;
}

/**
 * @example
 * const runtime = new EdgeRuntime({ repos, registry, certificates, bindHost: '127.0.0.1' });
 * await runtime.start();                  // listeners for every TCP edge hostport
 * sniRouterOptions.tlsEdges = runtime;    // TLS edge names before tunnels
 */
export class EdgeRuntime {
  private readonly traffic: EdgeTraffic;
  private edges = new Map<string, LiveEdge>();
  private tcpOwners = new Map<number, Owner>();
  private tlsExact = new Map<string, Owner>();
  /** Wildcard hostports by suffix (`.x.example.com`). */
  private tlsWildcards = new Map<string, Owner>();
  private readonly listeners = new Map<number, TcpListener>();
  private readonly closing = new Map<number, Promise<void>>();
  /** Ports whose listener failed, so the failure is logged once until it recovers. */
  private readonly warnedPorts = new Set<number>();
  private accepting = true;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly options: EdgeRuntimeOptions) {
    this.traffic = new EdgeTraffic({
      registry: options.registry,
      metrics: options.metrics,
      logger: options.logger,
      connectTimeoutMs: options.connectTimeoutMs,
      random: options.random,
    });
  }

  /** Load every edge, open its listeners, and follow changes from here on. */
  async start(): Promise<void> {
    this.options.repos.edges.changes.on('change', this.onChange);
    await this.sync();
    const every = this.options.syncIntervalMs ?? DEFAULT_EDGE_SYNC_INTERVAL_MS;
    this.timer = setInterval(() => void this.sync(), every);
    this.timer.unref();
  }

  /**
   * Reload edges now. Calls made while a reload runs share one follow-up reload, so a burst of
   * writes costs two reloads at most; the promise resolves once a reload that started after the
   * call has finished.
   */
  readonly sync: () => Promise<void> = coalesced(() => this.reload(), {
    stop: () => !this.accepting,
  });

  /** Ports of TCP edge hostports listened on now. */
  get tcpPorts(): number[] {
    return [...this.listeners].filter(([, l]) => !l.failed).map(([port]) => port);
  }

  /** Resolves once the listener for `port` is up (or failed to start). */
  async listening(port: number): Promise<void> {
    await this.listeners.get(port)?.ready;
  }

  /** Whether `name` is a TLS edge's hostport name (exact or under a wildcard). */
  servesName(name: string): boolean {
    return this.tlsOwner(name) !== undefined;
  }

  /**
   * The SNI router's hook: take a TLS connection whose ClientHello named a TLS edge's hostport.
   * Returns false (the router goes on to tunnels) for names no TLS edge serves.
   */
  route(socket: Socket, hello: Buffer, serverName: string): boolean {
    const owner = this.accepting ? this.tlsOwner(serverName) : undefined;
    if (!owner) return false;
    owner.edge.acceptTls(socket, hello, serverName);
    return true;
  }

  get openConnections(): number {
    return this.traffic.openConnections;
  }

  /** Stop listening and following changes; open connections go on. */
  async stopAccepting(): Promise<void> {
    this.accepting = false;
    this.options.repos.edges.changes.off('change', this.onChange);
    clearInterval(this.timer);
    await this.sync(); // waits out a reload under way; a new one returns at once (not accepting)
    await Promise.all([...this.listeners.keys()].map((port) => this.closeListener(port)));
  }

  destroyAll(): void {
    this.traffic.destroyAll();
  }

  /** Stop accepting, give open connections up to `graceMs` to finish, then cut them. */
  async drain(graceMs: number): Promise<void> {
    await this.stopAccepting();
    const deadline = Date.now() + graceMs;
    while (this.openConnections > 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    this.destroyAll();
  }

  close(): Promise<void> {
    return this.drain(0);
  }

  private readonly onChange = (): void => {
    void this.sync();
  };

  private tlsOwner(name: string): Owner | undefined {
    return this.tlsExact.get(name) ?? longestWildcard(name, this.tlsWildcards);
  }

  /** One reload; failures are logged and the last good state kept, to be retried next time. */
  private async reload(): Promise<void> {
    if (!this.accepting) return;
    const { repos, logger } = this.options;
    let specs;
    try {
      specs = await loadEdgeSpecs(repos);
    } catch (err) {
      logger?.warn({ err }, 'could not reload edges; keeping the previous ones');
      return;
    }
    if (!this.accepting) return;
    const next = new Map<string, LiveEdge>();
    for (const spec of specs) {
      const signature = JSON.stringify(spec);
      const previous = this.edges.get(spec.id);
      next.set(
        spec.id,
        previous?.signature === signature
          ? previous
          : new LiveEdge(spec, signature, {
              traffic: this.traffic,
              certificates: this.options.certificates,
              events: this.options.policyEvents,
              ipPolicyRules: (ids) => repos.ipPolicies.rulesFor(ids),
              secrets: this.options.secrets,
            }),
      );
    }
    for (const id of this.edges.keys()) {
      if (!next.has(id)) this.options.policyEvents?.forget(id);
    }
    this.apply(next);
  }

  /** Swap in the new edges: ownership maps at once, then listeners to match. */
  private apply(edges: Map<string, LiveEdge>): void {
    const tcpOwners = new Map<number, Owner>();
    const tlsExact = new Map<string, Owner>();
    const tlsWildcards = new Map<string, Owner>();
    const labels = new Set<string>();
    for (const edge of edges.values()) {
      for (const hostport of edge.spec.hostports) {
        labels.add(meterLabel(edge.spec.type, hostport));
        const owner = { edge, hostport };
        if (edge.spec.type === 'tcp') {
          tcpOwners.set(portOf(hostport), owner);
        } else {
          const host = hostportHost(hostport);
          if (host.startsWith('*.')) tlsWildcards.set(host.slice(1), owner);
          else tlsExact.set(host, owner);
        }
      }
    }
    const changed = [...edges].filter(([id, e]) => this.edges.get(id) !== e).length;
    const removed = [...this.edges.keys()].filter((id) => !edges.has(id)).length;
    this.edges = edges;
    this.tcpOwners = tcpOwners;
    this.tlsExact = tlsExact;
    this.tlsWildcards = tlsWildcards;
    this.traffic.retainMeters(labels);
    if (changed + removed > 0) {
      this.options.logger?.debug({ edges: edges.size, changed, removed }, 'edges reloaded');
    }
    for (const [port, listener] of this.listeners) {
      if (!tcpOwners.has(port)) void this.closeListener(port);
      else if (listener.failed) this.listeners.delete(port);
    }
    for (const port of tcpOwners.keys()) {
      if (!this.listeners.has(port)) this.openListener(port);
    }
  }

  private openListener(port: number): void {
    const inner = createServer(INGRESS_SOCKET_OPTIONS, (socket) =>
      this.onTcpConnection(port, socket),
    );
    const server = this.options.front?.(inner, INGRESS_SOCKET_OPTIONS) ?? inner;
    const listener: TcpListener = { server, ready: Promise.resolve(), failed: false };
    // A hostport that comes back while its old listener is still closing waits for the port.
    const free = this.closing.get(port) ?? Promise.resolve();
    listener.ready = free.then(
      () =>
        new Promise<void>((resolve) => {
          if (this.listeners.get(port) !== listener) return resolve();
          server.once('listening', () => {
            this.warnedPorts.delete(port);
            const edge = this.tcpOwners.get(port)?.edge.spec.id;
            this.options.logger?.info({ port, edge }, 'tcp edge listening');
            resolve();
          });
          server.once('error', (err) => {
            listener.failed = true;
            // Usually an agent's own TCP endpoint still holds the port; the next reload retries.
            if (!this.warnedPorts.has(port)) {
              this.warnedPorts.add(port);
              const edge = this.tcpOwners.get(port)?.edge.spec.id;
              this.options.logger?.warn(
                { err, port, edge },
                'tcp edge hostport cannot listen yet; retrying on every reload',
              );
            }
            resolve();
          });
          server.listen(port, this.options.bindHost);
        }),
    );
    this.listeners.set(port, listener);
  }

  private closeListener(port: number): Promise<void> {
    const listener = this.listeners.get(port);
    if (!listener) return this.closing.get(port) ?? Promise.resolve();
    this.listeners.delete(port);
    const closed = (async () => {
      await listener.ready;
      if (!listener.server.listening) return;
      // 'close' waits for open connections, which go on; the port itself is free at once.
      listener.server.close();
      await new Promise((resolve) => setImmediate(resolve));
      this.options.logger?.info({ port }, 'tcp edge stopped listening');
    })().finally(() => {
      if (this.closing.get(port) === closed) this.closing.delete(port);
    });
    this.closing.set(port, closed);
    return closed;
  }

  private onTcpConnection(port: number, socket: Socket): void {
    const owner = this.accepting ? this.tcpOwners.get(port) : undefined;
    if (!owner) {
      socket.destroy();
      return;
    }
    owner.edge.acceptTcp(socket, owner.hostport);
  }
}
