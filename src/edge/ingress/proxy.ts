/**
 * Plumbing shared by the raw ingress listeners (TCP endpoints, TLS passthrough): their socket
 * options, and relaying raw bytes both ways between a public connection and a tunnel stream.
 */
import type { ServerOpts, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import {
  relay,
  type Relay,
  type RelayTimeoutReason,
  type RelayTimeouts,
} from '../../core/relay.js';
import { clientIp, connectTunnel, proxyInfoOf } from '../registry/connect-tunnel.js';
import type { OnlineTunnel } from '../registry/tunnel-registry.js';
import type { EndpointMeters } from '../metrics/endpoint-meters.js';

/**
 * Buffer per public socket and HTTP message before back-pressure applies. Node's 16 KiB default
 * is below a single 64 KiB socket read, so every chunk would pause and resume its source; 256 KiB
 * doubled HTTP bulk throughput in bench/ingress-throughput.ts and still bounds memory per
 * connection.
 */
const INGRESS_HIGH_WATER_MARK = 256 * 1024;

/**
 * Socket options of every public listener that relays: half-closes kept (one side's FIN is
 * passed on, the other direction goes on), no Nagle delay, the ingress buffer size.
 * @example createServer(INGRESS_SOCKET_OPTIONS, (socket) => accept(socket));
 */
export const INGRESS_SOCKET_OPTIONS: Readonly<ServerOpts> = Object.freeze({
  allowHalfOpen: true,
  noDelay: true,
  highWaterMark: INGRESS_HIGH_WATER_MARK,
});

/** One raw connection for {@link TunnelRelays.start}. */
export interface RawConnection {
  /** The public protocol: `tls` is a passed-through TLS connection, `tcp` plain bytes. */
  proto: 'tcp' | 'tls';
  /** False for a TLS connection the edge terminated (terminate-tls): the agent gets plaintext. */
  passthroughTls?: boolean | undefined;
  /** Bytes already read from the public side (a TLS ClientHello), sent to the tunnel first. */
  firstBytes?: Buffer | undefined;
  /** The tunnel could not be reached: answer and close the public side. */
  onConnectFailed(err: unknown): void;
}

/**
 * Told once of each raw connection when it ends (closed, or its tunnel unreachable): traffic
 * events' `tcp_connection_closed.v0`. The public socket's own byte counts are read then, so the
 * relay does no extra work per chunk.
 */
export type RelayClosedHook = (closed: {
  /** Read for its byte counts; its addresses are gone once it closed, hence `addresses`. */
  socket: Socket;
  addresses: Pick<Socket, 'remoteAddress' | 'remotePort' | 'localAddress' | 'localPort'>;
  tunnel: OnlineTunnel;
  proto: 'tcp' | 'tls';
  /** Epoch milliseconds when the relay started. */
  startedAt: number;
  /** Why the tunnel could not be reached; absent when bytes were relayed. */
  error?: unknown;
}) => void;

/** When raw relays end for going quiet (`--relay-idle-timeout-ms`, `--relay-half-closed-timeout-ms`). */
export interface RawRelayTimeouts {
  idleMs: number;
  halfClosedMs: number;
  /** Told of each relay closed for going quiet, with the public client's address. */
  onTimeout?: ((clientIp: string, reason: RelayTimeoutReason) => void) | undefined;
}

/**
 * The relay timeouts of `limits`, each closing counted under `relay_idle_timeout` or
 * `relay_half_closed_timeout` by `count` (a RefusalLog's `timedOut`).
 * @example relayTimeoutsOf(limits, (ip, limit) => refusals.timedOut(ip, limit))
 */
export function relayTimeoutsOf(
  limits: { relayIdleTimeoutMs: number; relayHalfClosedTimeoutMs: number },
  count?: (clientIp: string, limit: string) => void,
): RawRelayTimeouts {
  return {
    idleMs: limits.relayIdleTimeoutMs,
    halfClosedMs: limits.relayHalfClosedTimeoutMs,
    onTimeout: count && ((ip, reason) => count(ip, `relay_${reason}_timeout`)),
  };
}

/**
 * The relay's own timeouts for one public connection: closings told with its client's address.
 * @example relay(socket, stream, { timeouts: relayTimeoutsFor(timeouts, socket) });
 */
export function relayTimeoutsFor(timeouts: RawRelayTimeouts, socket: Duplex): RelayTimeouts {
  const { idleMs, halfClosedMs, onTimeout } = timeouts;
  const ip = clientIp(socket as Partial<Socket>);
  return { idleMs, halfClosedMs, onTimeout: onTimeout && ((reason) => onTimeout(ip, reason)) };
}

/**
 * A listener's open raw relays through tunnels, each counted as one open connection of its
 * tunnel's endpoint from the moment it starts until it closes or fails to connect, and closed
 * when it goes quiet for the `timeouts`.
 * @example
 * const relays = new TunnelRelays(meters, connectTimeoutMs, relayTimeoutsOf(DEFAULT_LIMITS));
 * relays.start(socket, tunnel, { proto: 'tcp', onConnectFailed: () => socket.destroy() });
 */
export class TunnelRelays {
  private readonly open = new Set<Relay>();

  constructor(
    private readonly meters: EndpointMeters,
    private readonly connectTimeoutMs: number | undefined,
    private readonly timeouts: RawRelayTimeouts,
    private readonly onClosed?: RelayClosedHook,
  ) {}

  /** Relays open now (connecting ones are not counted). */
  get size(): number {
    return this.open.size;
  }

  /** Close every open relay, both sides. */
  destroyAll(): void {
    for (const relayed of this.open) relayed.destroy();
  }

  /** Relay the public `socket` through `tunnel`. */
  start(socket: Socket, tunnel: OnlineTunnel, connection: RawConnection): void {
    const { proto, firstBytes } = connection;
    const meter = this.meters.of(tunnel);
    const closeConnection = this.meters.connectionOpened(meter);
    if (firstBytes) meter.bytesIn.inc(firstBytes.length);
    const info = proxyInfoOf(socket, proto, connection.passthroughTls ?? proto === 'tls');
    const startedAt = Date.now();
    const { remoteAddress, remotePort, localAddress, localPort } = socket;
    const addresses = { remoteAddress, remotePort, localAddress, localPort };
    const closed = (error?: unknown): void =>
      this.onClosed?.({ socket, addresses, tunnel, proto, startedAt, error });
    connectTunnel(tunnel, info, this.connectTimeoutMs).then(
      (stream) => {
        if (socket.destroyed) {
          stream.destroy();
          closeConnection();
          closed();
          return;
        }
        if (firstBytes) stream.write(firstBytes);
        const relayed = relay(socket, stream, {
          bytesIn: meter.bytesIn,
          bytesOut: meter.bytesOut,
          onClose: () => {
            this.open.delete(relayed);
            closeConnection();
            closed();
          },
          timeouts: relayTimeoutsFor(this.timeouts, socket),
        });
        this.open.add(relayed);
      },
      (err: unknown) => {
        closeConnection();
        closed(err);
        connection.onConnectFailed(err);
      },
    );
  }
}
