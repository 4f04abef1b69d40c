/**
 * TCP ports: one listener per tcp route's port (an agent's TCP endpoint, a cloud endpoint on a
 * TCP address, a TCP edge's hostport), opened when the registry announces the route and closed
 * when no route holds the port any more. Each accepted connection passes the connect gate and
 * becomes a raw relay through the route's connect().
 */
import { createServer, type Server, type ServerOpts, type Socket } from 'node:net';
import { DEFAULT_LIMITS } from '../../core/limits.js';
import type { Logger } from '../../core/logger.js';
import type { EndpointMeters } from '../metrics/endpoint-meters.js';
import { admitThrough, connInputOf } from './policy-gate.js';
import {
  INGRESS_SOCKET_OPTIONS,
  relayTimeoutsOf,
  TunnelRelays,
  type RawRelayTimeouts,
  type RelayClosedHook,
} from './proxy.js';
import type { OnlineTunnel, TunnelRegistry } from '../registry/tunnel-registry.js';

/** A TCP endpoint's on_tcp_connect forwards only to internal TCP endpoints. */
const TCP_HOPS = ['tcp'] as const;

export interface TcpIngressOptions {
  registry: TunnelRegistry;
  meters: EndpointMeters;
  /** Interface the TCP ports listen on, e.g. `127.0.0.1` or `0.0.0.0`. */
  bindHost: string;
  logger?: Logger | undefined;
  connectTimeoutMs?: number | undefined;
  /** When relays end for going quiet; default DEFAULT_LIMITS' (1 h idle, 30 s half-closed). */
  relayTimeouts?: RawRelayTimeouts | undefined;
  /** Told of each relayed connection as it ends (traffic events). */
  onRelayClosed?: RelayClosedHook | undefined;
  /**
   * What to listen on in place of each port's server, given its socket options: the PROXY
   * protocol front with `--ingress-proxy-protocol 1`. Default: the server itself.
   */
  front?: ((server: Server, socketOptions: ServerOpts) => Server) | undefined;
}

/** How long a TCP port whose listener failed waits before it is tried again. */
export const LISTEN_RETRY_MS = 2000;

function isTcpTunnel(tunnel: OnlineTunnel): tunnel is OnlineTunnel & { port: number } {
  return tunnel.proto === 'tcp' && tunnel.port !== undefined;
}

/**
 * @example
 * const tcp = new TcpIngress({ registry, meters, bindHost: '127.0.0.1' });
 * tcp.start(); // listens for every tcp tunnel, now and later
 */
export class TcpIngress {
  private readonly listeners = new Map<number, Server>();
  private readonly relays: TunnelRelays;
  /** Ports whose listener is starting, so `listening()` can wait for them. */
  private readonly starting = new Map<number, Promise<void>>();
  /** Ports whose listener is closing; a tunnel taking the port meanwhile waits for it. */
  private readonly closing = new Map<number, Promise<void>>();
  private accepting = true;
  /** Ports whose listener failed (EADDRINUSE), retried every LISTEN_RETRY_MS. */
  private readonly failing = new Set<number>();
  private readonly retries = new Set<NodeJS.Timeout>();

  constructor(private readonly options: TcpIngressOptions) {
    this.relays = new TunnelRelays(
      options.meters,
      options.connectTimeoutMs,
      options.relayTimeouts ?? relayTimeoutsOf(DEFAULT_LIMITS),
      options.onRelayClosed,
    );
  }

  /** Listen for every tcp tunnel online now and follow the registry from here on. */
  start(): void {
    this.options.registry.on('tunnel-added', this.onAdded);
    this.options.registry.on('tunnel-removed', this.onRemoved);
    for (const tunnel of this.options.registry.listTunnels()) this.onAdded(tunnel);
  }

  /** Ports listened on now. */
  get ports(): number[] {
    return [...this.listeners.keys()];
  }

  /** Resolves once the listener for `port` accepts connections (or failed to start). */
  async listening(port: number): Promise<void> {
    await this.starting.get(port);
  }

  get openConnections(): number {
    return this.relays.size;
  }

  /** Stop listening and following the registry; open relays go on. */
  async stopAccepting(): Promise<void> {
    this.accepting = false;
    for (const timer of this.retries) clearTimeout(timer);
    this.retries.clear();
    this.options.registry.off('tunnel-added', this.onAdded);
    this.options.registry.off('tunnel-removed', this.onRemoved);
    await Promise.all([...this.listeners.keys()].map((port) => this.closeListener(port)));
  }

  destroyAll(): void {
    this.relays.destroyAll();
  }

  private readonly onAdded = (tunnel: OnlineTunnel): void => {
    if (!this.accepting || !isTcpTunnel(tunnel) || this.listeners.has(tunnel.port)) return;
    const port = tunnel.port;
    const closing = this.closing.get(port);
    if (closing) {
      // The port's last listener is still closing: this one listens after it, and listening()
      // waits for that too.
      const reopened: Promise<void> = closing
        .then(() => {
          if (this.options.registry.byPort(port) !== tunnel) return;
          this.onAdded(tunnel);
          return this.starting.get(port);
        })
        .finally(() => {
          if (this.starting.get(port) === reopened) this.starting.delete(port);
        });
      this.starting.set(port, reopened);
      return;
    }
    const inner = createServer(INGRESS_SOCKET_OPTIONS, (socket) => this.onConnection(port, socket));
    const server = this.options.front?.(inner, INGRESS_SOCKET_OPTIONS) ?? inner;
    this.listeners.set(port, server);
    const started = new Promise<void>((resolve) => {
      server.once('listening', () => {
        const recovered = this.failing.delete(port);
        const log = this.options.logger;
        if (recovered) log?.info({ port, tunnel: tunnel.id }, 'tcp endpoint listening at last');
        else log?.debug({ port, tunnel: tunnel.id }, 'tcp endpoint listening');
        resolve();
      });
      server.once('error', (err) => {
        // Another process holds the port: the route stays registered, and the listener is tried
        // again while a route holds the port; said once, not at every try.
        if (!this.failing.has(port)) {
          this.failing.add(port);
          this.options.logger?.error(
            { err, port, tunnel: tunnel.id, retryMs: LISTEN_RETRY_MS },
            'tcp endpoint cannot listen; trying again while a route holds the port',
          );
        }
        if (this.listeners.get(port) === server) this.listeners.delete(port);
        this.retryLater(port);
        resolve();
      });
    }).finally(() => this.starting.delete(port));
    this.starting.set(port, started);
    server.listen(port, this.options.bindHost);
  };

  private retryLater(port: number): void {
    const timer = setTimeout(() => {
      this.retries.delete(timer);
      const route = this.options.registry.byPort(port);
      if (route) this.onAdded(route);
      else this.failing.delete(port);
    }, LISTEN_RETRY_MS);
    timer.unref();
    this.retries.add(timer);
  }

  private readonly onRemoved = (tunnel: OnlineTunnel): void => {
    if (!isTcpTunnel(tunnel)) return;
    const port = tunnel.port;
    // A reconnecting agent takes a port over by removing and re-adding it in one step: keep the
    // listener when someone holds the port again by the time this runs.
    setImmediate(() => {
      if (!this.options.registry.byPort(port)) void this.closeListener(port);
    });
  };

  private closeListener(port: number): Promise<void> {
    const server = this.listeners.get(port);
    if (!server) return this.closing.get(port) ?? Promise.resolve();
    this.listeners.delete(port);
    const closed = (async () => {
      await this.starting.get(port);
      if (!server.listening) return;
      // 'close' waits for open connections, which go on; the port itself is free at once.
      server.close();
      await new Promise((resolve) => setImmediate(resolve));
    })().finally(() => this.closing.delete(port));
    this.closing.set(port, closed);
    return closed;
  }

  private onConnection(port: number, socket: Socket): void {
    const tunnel = this.options.registry.byPort(port);
    if (!tunnel || !this.accepting) {
      socket.destroy();
      return;
    }
    socket.on('error', () => socket.destroy());
    socket.pause();
    this.admit(port, socket, this.options.registry.pick(tunnel), []);
  }

  /**
   * The endpoint's on_tcp_connect first (a connection it closes never reaches an agent); then
   * its agent, or the internal endpoint forward-internal chose (policy-gate.ts admitThrough).
   */
  private admit(port: number, socket: Socket, tunnel: OnlineTunnel, chain: string[]): void {
    admitThrough(this.options.registry, socket, tunnel, chain, {
      protos: TCP_HOPS,
      gate: () => ({ conn: () => connInputOf(socket) }),
      serve: (served) => this.relayToTunnel(port, socket, served),
      refuse: (refused, why) => {
        this.options.logger?.debug({ port, tunnel: refused.id, why }, 'connection refused');
        socket.destroy();
      },
    });
  }

  private relayToTunnel(port: number, socket: Socket, tunnel: OnlineTunnel): void {
    this.relays.start(socket, tunnel, {
      proto: 'tcp',
      onConnectFailed: (err) => {
        this.options.logger?.debug(
          { err, port, tunnel: tunnel.id },
          'tcp connect through tunnel failed',
        );
        socket.destroy();
      },
    });
  }
}
