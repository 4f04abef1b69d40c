/**
 * Plumbing shared by the ingress listeners: the public client's address as the agent protocol
 * writes it, opening a tunnel stream with a deadline, and relaying raw bytes both ways.
 */
import { pipeline, type Duplex } from 'node:stream';
import { BurrowError, CODES } from '../../core/errors.js';
import { formatHostPort, parseHostPort } from '../../core/host-port.js';
import type { OnlineTunnel, ProxyInfo } from '../registry/tunnel-registry.js';
import type { EndpointMeter, EndpointMeters } from '../metrics/endpoint-meters.js';

/**
 * Buffer per public socket and HTTP message before back-pressure applies. Node's 16 KiB default
 * is below a single 64 KiB socket read, so every chunk would pause and resume its source; 256 KiB
 * doubled HTTP bulk throughput in bench/ingress-throughput.ts and still bounds memory per
 * connection.
 */
export const INGRESS_HIGH_WATER_MARK = 256 * 1024;

/** Default wait for `tunnel.connect()` before the public side is answered with an error. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

/**
 * The client's IP without the IPv4-mapped prefix Node gives dual-stack sockets.
 * @example clientIp({ remoteAddress: '::ffff:203.0.113.7' }) // '203.0.113.7'
 */
export function clientIp(socket: { remoteAddress?: string | undefined }): string {
  const ip = socket.remoteAddress ?? '';
  return ip.startsWith('::ffff:') && ip.includes('.') ? ip.slice(7) : ip;
}

/**
 * `ip:port` as the ProxyHeader's ClientAddr carries it (IPv6 in brackets).
 * @example clientAddr(socket) // '203.0.113.7:45678' or '[2001:db8::1]:45678'
 */
export function clientAddr(socket: {
  remoteAddress?: string | undefined;
  remotePort?: number | undefined;
}): string {
  return formatHostPort(clientIp(socket), socket.remotePort ?? 0);
}

/** Thrown when a tunnel did not hand over a stream in time. */
export class TunnelConnectTimeoutError extends BurrowError {
  constructor(ms: number) {
    super(
      CODES.tunnelConnectTimeout,
      502,
      `the agent did not accept the connection within ${ms} ms`,
    );
  }
}

/**
 * `tunnel.connect(info)`, failing after `timeoutMs`. A stream that arrives after the deadline is
 * destroyed, so the agent is not left holding a connection nobody reads.
 * @example const stream = await connectTunnel(tunnel, info, 10_000);
 */
export function connectTunnel(
  tunnel: OnlineTunnel,
  info: ProxyInfo,
  timeoutMs = DEFAULT_CONNECT_TIMEOUT_MS,
): Promise<Duplex> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const timer = setTimeout(() => {
      settled = true;
      reject(new TunnelConnectTimeoutError(timeoutMs));
    }, timeoutMs);
    let pending: Promise<Duplex>;
    try {
      pending = tunnel.connect(info);
    } catch (err) {
      pending = Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
    pending.then(
      (stream) => {
        clearTimeout(timer);
        if (settled) stream.destroy();
        else resolve(stream);
      },
      (err: unknown) => {
        clearTimeout(timer);
        if (!settled) reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}

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

/**
 * Parse a listen address `host:port` (IPv6 in brackets; port 0 picks a free one).
 * @example parseListenAddress('127.0.0.1:8080') // { host: '127.0.0.1', port: 8080 }
 */
export function parseListenAddress(value: string): { host: string; port: number } {
  const parsed = parseHostPort(value, { allowEmptyHost: true });
  if (!parsed) throw new TypeError(`"${value}" is not a host:port listen address`);
  return parsed;
}

/**
 * `host:port` of a listening server, for URLs and logs.
 * @example formatAddress({ address: '::1', port: 8080 }) // '[::1]:8080'
 */
export function formatAddress(address: { address: string; port: number }): string {
  return formatHostPort(address.address, address.port);
}
