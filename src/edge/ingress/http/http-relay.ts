/**
 * The lean HTTP/1.1 relay of one ingress: its public connections, the tunnel streams they keep
 * idle between connections, and the limits they share. The ingress decides which requests it
 * carries (`route`) and takes back connections it hands over (`handOver`).
 */
import type { Duplex } from 'node:stream';
import type { EndpointMeters } from '../../metrics/endpoint-meters.js';
import type { PublicConnections } from './http-connections.js';
import type { OnlineTunnel } from '../../registry/tunnel-registry.js';
import type { ExchangeTap } from './exchange.js';
import { HttpConnection, type HttpRelayContext } from './http-connection.js';
import { StreamPool } from './stream-pool.js';

export interface HttpRelayOptions {
  meters: EndpointMeters;
  connections: PublicConnections;
  maxHeaderBytes: number;
  headersTimeoutMs: number;
  keepAliveTimeoutMs: number;
  connectTimeoutMs?: number | undefined;
  /** Idle tunnel streams are closed after this long. Default 15 s. */
  idleStreamMs?: number | undefined;
  tap?: ExchangeTap | undefined;
  route: HttpRelayContext['route'];
  handOver: HttpRelayContext['handOver'];
  onLimit: HttpRelayContext['onLimit'];
}

/**
 * @example
 * const relay = new HttpRelay({ meters, connections, route, handOver, onLimit, ...limits });
 * netServer.on('connection', (socket) => relay.accept(socket));
 */
export class HttpRelay {
  private readonly open = new Set<HttpConnection>();
  private readonly pool: StreamPool;
  private readonly context: HttpRelayContext;
  private drainingNow = false;

  constructor(options: HttpRelayOptions) {
    this.pool = new StreamPool({ idleMs: options.idleStreamMs });
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
      route: options.route,
      handOver: options.handOver,
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
