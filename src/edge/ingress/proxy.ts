/**
 * Plumbing shared by the ingress listeners: relaying raw bytes both ways between a public
 * connection and a tunnel stream.
 */
import type { Duplex } from 'node:stream';
import { relay, type Relay } from '../../core/relay.js';
import { connectTunnel } from '../registry/connect-tunnel.js';
import type { OnlineTunnel, ProxyInfo } from '../registry/tunnel-registry.js';
import type { EndpointMeters } from '../metrics/endpoint-meters.js';

/**
 * Buffer per public socket and HTTP message before back-pressure applies. Node's 16 KiB default
 * is below a single 64 KiB socket read, so every chunk would pause and resume its source; 256 KiB
 * doubled HTTP bulk throughput in bench/ingress-throughput.ts and still bounds memory per
 * connection.
 */
export const INGRESS_HIGH_WATER_MARK = 256 * 1024;

/** How {@link relayThroughTunnel} counts and keeps a raw connection. */
export interface TunnelRelayOptions {
  meters: EndpointMeters;
  /** The listener's open relays: the relay is in it while open, so a shutdown can end it. */
  relays: Set<Relay>;
  connectTimeoutMs?: number | undefined;
  /** Bytes already read from the public side (a TLS ClientHello), sent to the tunnel first. */
  firstBytes?: Buffer | undefined;
  /** The tunnel could not be reached: answer and close the public side. */
  onConnectFailed(err: unknown): void;
}

/**
 * Relay a raw public connection (TCP, TLS passthrough) through `tunnel`, counted as one open
 * connection of the tunnel's endpoint from now until it closes or fails to connect.
 * @example relayThroughTunnel(socket, tunnel, info, { meters, relays, onConnectFailed: () => socket.destroy() });
 */
export function relayThroughTunnel(
  socket: Duplex,
  tunnel: OnlineTunnel,
  info: ProxyInfo,
  options: TunnelRelayOptions,
): void {
  const { meters, relays, firstBytes } = options;
  const meter = meters.of(tunnel);
  const closeConnection = meters.connectionOpened(meter);
  if (firstBytes) meter.bytesIn.inc(firstBytes.length);
  connectTunnel(tunnel, info, options.connectTimeoutMs).then(
    (stream) => {
      if (socket.destroyed) {
        stream.destroy();
        closeConnection();
        return;
      }
      if (firstBytes) stream.write(firstBytes);
      const relayed = relay(socket, stream, {
        bytesIn: meter.bytesIn,
        bytesOut: meter.bytesOut,
        onClose: () => {
          relays.delete(relayed);
          closeConnection();
        },
      });
      relays.add(relayed);
    },
    (err: unknown) => {
      closeConnection();
      options.onConnectFailed(err);
    },
  );
}
