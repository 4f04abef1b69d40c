/**
 * Plumbing shared by the ingress listeners: relaying raw bytes both ways between a public
 * connection and a tunnel stream.
 */
import { pipeline, type Duplex } from 'node:stream';
import { connectTunnel } from '../registry/connect-tunnel.js';
import type { OnlineTunnel, ProxyInfo } from '../registry/tunnel-registry.js';
import type { EndpointMeter, EndpointMeters } from '../metrics/endpoint-meters.js';

/**
 * Buffer per public socket and HTTP message before back-pressure applies. Node's 16 KiB default
 * is below a single 64 KiB socket read, so every chunk would pause and resume its source; 256 KiB
 * doubled HTTP bulk throughput in bench/ingress-throughput.ts and still bounds memory per
 * connection.
 */
export const INGRESS_HIGH_WATER_MARK = 256 * 1024;

/** An open relay between a public connection and a tunnel stream. */
export interface Relay {
  /** Close both sides now. */
  destroy(): void;
}

/**
 * Pipe `publicSide` and `tunnelSide` into each other until both directions ended, keeping
 * half-closes (one side's FIN becomes an end() on the other, the reverse direction goes on) and
 * back-pressure. An error or reset on either side closes both. Bytes are counted into `meter`
 * as they pass; `onClose` runs once, when both sides are closed.
 * @example relay(socket, stream, meter, () => open.delete(socket));
 */
export function relay(
  publicSide: Duplex,
  tunnelSide: Duplex,
  meter: EndpointMeter | undefined,
  onClose?: () => void,
): Relay {
  if (meter) {
    const bytesIn = meter.bytesIn;
    const bytesOut = meter.bytesOut;
    publicSide.on('data', (chunk: Buffer) => bytesIn.inc(chunk.length));
    tunnelSide.on('data', (chunk: Buffer) => bytesOut.inc(chunk.length));
  }
  let open = 2;
  const closed = (): void => {
    if (--open === 0) onClose?.();
  };
  // Errors are expected (clients and agents vanish); pipeline already destroyed both sides.
  pipeline(publicSide, tunnelSide, () => undefined);
  pipeline(tunnelSide, publicSide, () => undefined);
  publicSide.once('close', () => {
    // A public side closed before the tunnel finished sending means nobody will read the rest.
    if (!tunnelSide.readableEnded) tunnelSide.destroy();
    closed();
  });
  tunnelSide.once('close', () => {
    if (!publicSide.writableFinished && !publicSide.writableEnded) publicSide.destroy();
    closed();
  });
  return {
    destroy() {
      publicSide.destroy();
      tunnelSide.destroy();
    },
  };
}

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
      const relayed = relay(socket, stream, meter, () => {
        relays.delete(relayed);
        closeConnection();
      });
      relays.add(relayed);
    },
    (err: unknown) => {
      closeConnection();
      options.onConnectFailed(err);
    },
  );
}
